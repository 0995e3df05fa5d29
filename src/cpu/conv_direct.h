/*
 * The direct convolution (src/cpu/conv_avx2.c): AVX2+FMA kernels for
 * stride-1, undilated, ungrouped convolutions with few input channels.
 * conv.c calls them when ct_cpu_conv2d_direct_fits says so; they compute the
 * same functions as ct_cpu_conv2d_forward/_backward_data/_backward_weight
 * (kernels.h) with their own workspace size.
 */
#ifndef CT_CPU_CONV_DIRECT_H
#define CT_CPU_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu/simd.h"
#include "core/shapes.h"

/* Beyond these sizes im2col + GEMM wins (the GEMM blocks for the cache) and
 * the per-thread 8-lane weight-gradient sums would grow too large:
 * depth = in_channels*KH*KW, weights = out_channels*depth. */
enum { CT_CONV_DIRECT_MAX_DEPTH = 400, CT_CONV_DIRECT_MAX_WEIGHTS = 16384 };

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* The shape rule only; the caller also asks ct_cpu_simd_avx2(). */
bool ct_cpu_conv2d_direct_fits(const ct_conv2d_shape *s);
size_t ct_cpu_conv2d_direct_workspace(const ct_conv2d_shape *s, int n_threads);
/* relu: store max(y, 0) (NaN kept), the fused relu of ct_cpu_conv2d_forward_relu. */
void ct_cpu_conv2d_direct_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                  const float *bias, bool relu, float *y, void *workspace);
/* pooled = maxpool 2x2/2 of relu(conv): [N, O, out_h/2, out_w/2]; y =
 * relu(conv) too where y is not NULL (training: the pool's backward reads
 * it), each image pooled while it is in cache.  Without y, y is never
 * written.  With codes, y's bytes get each window's argmax code
 * (ct_cpu_maxpool2x2_planes_codes) instead of its values: all the pool's
 * backward needs of them (ct_exec_pool_codes). */
void ct_cpu_conv2d_direct_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                               const float *w, const float *bias, float *y,
                                               bool codes, float *pooled, void *workspace);
void ct_cpu_conv2d_direct_backward_data(const ct_conv2d_shape *s, const float *dy,
                                        const float *w, float *dx, void *workspace);
/* db (or NULL): the bias gradient too, sum of dy over each output channel. */
void ct_cpu_conv2d_direct_backward_weight(const ct_conv2d_shape *s, const float *x,
                                          const float *dy, float *dw, float *db, void *workspace);
#endif

#endif
