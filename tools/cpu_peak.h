/*
 * The CPU's floating-point peak, measured: what `cuttle bench` compares a
 * step's achieved GFLOP/s with.  A peak computed from the nominal clock and
 * an assumed FLOPs per cycle was wrong by 2x on the machines this project
 * runs on (a turbo clock above /proc/cpuinfo's, AVX-512 beside AVX2), so
 * each run measures it instead (docs/bench.md).
 */
#ifndef CT_TOOLS_CPU_PEAK_H
#define CT_TOOLS_CPU_PEAK_H

typedef struct cpu_peak {
    double gflops;      /* fp32 FMA, the widest vectors the CPU has, all threads */
    const char *isa;    /* those vectors: "AVX-512", "AVX2", "SSE"; NULL: not measured */
    double avx2_gflops; /* the same with 256-bit vectors (cuttle's fast kernels); 0 if none */
} cpu_peak;

/* Measures the peak of `threads` threads running fp32 FMAs at once (the
 * best of a few runs of about 10 ms each).  x86-64 only; elsewhere *out is
 * zeros and isa NULL. */
void cpu_peak_measure(int threads, cpu_peak *out);

#endif
