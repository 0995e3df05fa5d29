/*
 * The FMA peak, measured (cpu_peak.h): every thread runs CHAINS independent
 * chains of vector FMAs, enough to cover the FMA latency on every pipe
 * (4 cycles x 2 pipes needs 8), so the loop is bound by FMA throughput
 * alone.  Peak = FLOPs done / wall time of the slowest thread.  The clock
 * the cores really run at (turbo, the lower AVX-512 clock) is in the
 * measurement, which is the point.
 */
#include "cpu_peak.h"

#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    CHAINS = 12,          /* independent accumulators per thread */
    ITERATIONS = 100000,  /* per run: 1.2 M FMA instructions, ~10 ms */
    RUNS = 3,             /* the best is kept: a busy machine only lowers a run */
};

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* Each returns its chains' sum, so the work cannot be optimized away. */
__attribute__((target("avx512f"))) static float fma_chains_512(void)
{
    __m512 acc[CHAINS];
    __m512 scale = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm512_set1_ps((float)c);
    for (int i = 0; i < ITERATIONS; i++) {
#pragma GCC unroll 12
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], scale, add);
    }
    float sum = 0.0f;
    for (int c = 0; c < CHAINS; c++)
        sum += _mm512_reduce_add_ps(acc[c]);
    return sum;
}

__attribute__((target("avx2,fma"))) static float fma_chains_256(void)
{
    __m256 acc[CHAINS];
    __m256 scale = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm256_set1_ps((float)c);
    for (int i = 0; i < ITERATIONS; i++) {
#pragma GCC unroll 12
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm256_fmadd_ps(acc[c], scale, add);
    }
    float lanes[8];
    __m256 total = acc[0];
    for (int c = 1; c < CHAINS; c++)
        total = _mm256_add_ps(total, acc[c]);
    _mm256_storeu_ps(lanes, total);
    return lanes[0];
}

/* A multiply and an add per lane per step: SSE has no FMA. */
static float mul_add_chains_128(void)
{
    __m128 acc[CHAINS];
    __m128 scale = _mm_set1_ps(0.999999f), add = _mm_set1_ps(1e-6f);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm_set1_ps((float)c);
    for (int i = 0; i < ITERATIONS; i++) {
#pragma GCC unroll 12
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], scale), add);
    }
    return _mm_cvtss_f32(acc[0]);
}

/* GFLOP/s of `threads` threads each running `chains` at once (lanes floats
 * per vector, 2 FLOPs per lane per step), the best of RUNS. */
static double measure(float (*chains)(void), int lanes, int threads)
{
    double best = 0.0;
    volatile float sink = 0.0f;
    for (int run = 0; run < RUNS; run++) {
        double start = seconds_now();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
        {
            float sum = chains();
#ifdef _OPENMP
#pragma omp atomic
#endif
            sink += sum;
        }
        double elapsed = seconds_now() - start;
        double flops = 2.0 * lanes * CHAINS * (double)ITERATIONS * threads;
        if (elapsed > 0 && flops / elapsed / 1e9 > best)
            best = flops / elapsed / 1e9;
    }
    (void)sink;
    return best;
}

void cpu_peak_measure(int threads, cpu_peak *out)
{
    memset(out, 0, sizeof *out);
#ifndef _OPENMP
    threads = 1; /* no threads to run the chains on */
#endif
    if (threads < 1)
        threads = 1;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        out->avx2_gflops = measure(fma_chains_256, 8, threads);
    /* A core with one 512-bit FMA pipe, or a lower AVX-512 clock, may do
     * no better with AVX-512 than with AVX2: the peak is the larger. */
    double wide = __builtin_cpu_supports("avx512f") ? measure(fma_chains_512, 16, threads) : 0.0;
    if (wide > out->avx2_gflops) {
        out->gflops = wide;
        out->isa = "AVX-512";
    } else if (out->avx2_gflops > 0) {
        out->gflops = out->avx2_gflops;
        out->isa = "AVX2";
    } else {
        out->gflops = measure(mul_add_chains_128, 4, threads);
        out->isa = "SSE";
    }
}

#else

void cpu_peak_measure(int threads, cpu_peak *out)
{
    (void)threads;
    memset(out, 0, sizeof *out);
}

#endif
