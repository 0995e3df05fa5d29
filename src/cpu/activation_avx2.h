/* The vector parts of the activations (src/cpu/activation_avx2.c). */
#ifndef CT_CPU_ACTIVATION_AVX2_H
#define CT_CPU_ACTIVATION_AVX2_H

#include <stdint.h>

#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* y = tanh(x) for count floats, count a multiple of 8; within 2 ulp of the
 * exact value (1.7e-7 relative), NaN kept, tanh(-0) = -0. */
void ct_cpu_tanh_avx2(int64_t count, const float *x, float *y);
#endif

#endif
