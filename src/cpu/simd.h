/* Which vector kernels this CPU can run, decided at run time.
 *
 * The fast kernels (src/cpu/<family>_avx2.c) are compiled with
 * __attribute__((target("avx2,fma"))), so the library builds for any x86-64
 * and picks them only where the CPU has AVX2 and FMA.  The portable C
 * kernels stay the reference: tests run both (ct_cpu_simd_set) and compare. */
#ifndef CT_CPU_SIMD_H
#define CT_CPU_SIMD_H

#include <stdbool.h>

#if defined(__GNUC__) && defined(__x86_64__)
#define CT_CPU_HAVE_AVX2_KERNELS 1
#endif

/* True when the AVX2+FMA kernels are to be used: the CPU has them, the
 * environment does not say CT_CPU_SIMD=0, and ct_cpu_simd_set did not turn
 * them off. */
bool ct_cpu_simd_avx2(void);

/* True when, besides, the CPU has AVX-512F and AVX-512VL (the panel
 * convolution and the scatter on 16-float vectors; the direct
 * convolution's 32-register blocks on 8-float ones). */
bool ct_cpu_simd_avx512(void);
/* Tests: false makes ct_cpu_simd_avx512() say no, so the AVX2 kernels run
 * (and are checked) on a CPU that has AVX-512; true restores the probe. */
void ct_cpu_simd_set_avx512(bool allow);

/* Force the portable kernels (false) or allow the fast ones again (true),
 * for tests and A/B measurements.  Safe from any thread; a step already
 * running may see either setting (the plan's workspace fits both). */
void ct_cpu_simd_set(bool allow_fast);

#endif
