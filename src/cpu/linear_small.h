/*
 * Small linear layers on AVX-512 (src/cpu/linear_avx512.c): the functions
 * of ct_cpu_linear_forward/_backward_data/_backward_weight (kernels.h)
 * without BLAS, for the shapes ct_cpu_linear_small_fits takes.
 */
#ifndef CT_CPU_LINEAR_SMALL_H
#define CT_CPU_LINEAR_SMALL_H

#include <stdbool.h>

#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* This CPU has AVX-512 (and the fast kernels are on) and the layer is
 * small: 0 < n * in * out <= 16 Mi multiply-adds (parallel from 64 Ki). */
bool ct_cpu_linear_small_fits(int n, int in, int out);
/* y = relu?(x . w^T + bias); bias may be NULL; relu keeps NaN. */
void ct_cpu_linear_small_forward(int n, int in, int out, const float *x, const float *w,
                                 const float *bias, bool relu, float *y);
/* relu_y: NULL, or the output of a relu whose backward is done here (dx =
 * ct_relu_grad(relu_y, dy . w)). */
void ct_cpu_linear_small_backward_data(int n, int in, int out, const float *dy, const float *w,
                                       const float *relu_y, float *dx);
void ct_cpu_linear_small_backward_weight(int n, int in, int out, const float *x,
                                         const float *dy, float *dw);
#endif

#endif
