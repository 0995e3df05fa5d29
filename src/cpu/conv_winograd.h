/*
 * Winograd convolution F(4x4, 3x3) (src/cpu/conv_winograd.c): AVX2+FMA
 * transforms around per-point GEMMs, for stride-1, undilated, ungrouped
 * 3x3 convolutions with enough channels (the VGG and ResNet 3x3 layers).
 * conv.c calls it when ct_cpu_conv2d_winograd_fits says so and the CPU has
 * AVX2; it computes the same functions as ct_cpu_conv2d_forward,
 * _backward_data and _backward_weight (kernels.h) to within fp32 rounding
 * of a different but exact algorithm (docs/perf.md gives the error).
 */
#ifndef CT_CPU_CONV_WINOGRAD_H
#define CT_CPU_CONV_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu/simd.h"
#include "core/shapes.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* The shape rule only; the caller also asks ct_cpu_simd_avx2(). */
bool ct_cpu_conv2d_winograd_fits(const ct_conv2d_shape *s);
/* For all three passes, whatever the thread count. */
size_t ct_cpu_conv2d_winograd_workspace(const ct_conv2d_shape *s);
/* relu: store max(y, 0) (NaN kept), as ct_cpu_conv2d_forward_relu. */
void ct_cpu_conv2d_winograd_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                    const float *bias, bool relu, float *y, void *workspace);
/* The forward in two halves: the weights' transform U (weights_bytes of
 * it; a plan keeps it between inference runs, graph/prepared.h), and the
 * forward on U, which leaves the workspace's own U unused. */
size_t ct_cpu_conv2d_winograd_weights_bytes(const ct_conv2d_shape *s);
void ct_cpu_conv2d_winograd_transform_weights(const ct_conv2d_shape *s, const float *w,
                                              float *u);
void ct_cpu_conv2d_winograd_forward_transformed(const ct_conv2d_shape *s, const float *x,
                                                const float *u, const float *bias, bool relu,
                                                float *y, void *workspace);
void ct_cpu_conv2d_winograd_backward_data(const ct_conv2d_shape *s, const float *dy,
                                          const float *w, float *dx, void *workspace);
void ct_cpu_conv2d_winograd_backward_weight(const ct_conv2d_shape *s, const float *x,
                                            const float *dy, float *dw, void *workspace);
#endif

#endif
