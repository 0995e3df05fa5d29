/*
 * Which of OpenBLAS's kernel sets runs (src/cpu/gemm.c).  Debian's OpenBLAS
 * picks one per CPU model when it loads; a model it does not know (virtual
 * machines that report a generic "Intel Xeon Processor") gets its Prescott
 * kernels, SSE3 only: VGG-11's training step ran 1.6x and ResNet-18's 1.75x
 * slower than on its AVX-512 kernels (docs/perf.md, 2026-11-28 late).  The
 * choice is made before any of cuttle's code runs, so the remedy is
 * OPENBLAS_CORETYPE in the environment of the process: the cuttle command
 * sets it and runs itself again (tools/cuttle.c); a program that links
 * libcuttle is told once, on stderr, when its CPU backend is made.
 */
#ifndef CT_CPU_BLAS_CORE_H
#define CT_CPU_BLAS_CORE_H

/* The OPENBLAS_CORETYPE that gives this CPU OpenBLAS's vector kernels
 * ("SkylakeX" with AVX-512, "Haswell" with AVX2 and FMA) where OpenBLAS
 * chose a set without AVX2 and OPENBLAS_CORETYPE is not set; NULL where
 * its choice is fine, was forced, or cuttle is built without OpenBLAS. */
const char *ct_cpu_blas_better_core(void);

/* OpenBLAS's kernel set ("Prescott", "SkylakeX", ...), or NULL without it. */
const char *ct_cpu_blas_core(void);

#endif
