/*
 * The direct convolution on 16-float vectors (src/cpu/conv_flat.c): the
 * forward pass and the weight gradient for the shapes of conv_direct.h, on
 * a CPU with AVX-512F and AVX-512VL.  conv_avx2.c and conv_weight_avx2.c
 * call them where ct_cpu_conv2d_flat_fits says so, in the direct
 * convolution's workspace.
 */
#ifndef CT_CPU_CONV_FLAT_H
#define CT_CPU_CONV_FLAT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/shapes.h"
#include "cpu/simd.h"

/* Images whose weight-gradient products one pass over the lane sums takes. */
enum { CT_CONV_FLAT_GROUP = 8 };

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* The shape rule alone (for sizing the workspace whatever the CPU says). */
bool ct_cpu_conv2d_flat_shape_fits(const ct_conv2d_shape *s);
/* The shape rule and this CPU's AVX-512 (ct_cpu_simd_avx512). */
bool ct_cpu_conv2d_flat_fits(const ct_conv2d_shape *s);
/* Floats of one image's shifted copies; a thread's part of the workspace
 * holds CT_CONV_FLAT_GROUP of them, then the 16-lane weight sums. */
size_t ct_cpu_conv2d_flat_image_floats(const ct_conv2d_shape *s);
size_t ct_cpu_conv2d_flat_thread_floats(const ct_conv2d_shape *s);
/* ct_cpu_conv2d_direct_forward's function; thread t works in
 * workspace + t * per_thread floats. */
void ct_cpu_conv2d_flat_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                const float *bias, bool relu, float *y, float *workspace,
                                size_t per_thread);
/* ct_cpu_conv2d_direct_forward_relu_maxpool's function: each image's
 * outputs in y (NULL, or codes: in the thread's part of the workspace),
 * then pooled from there. */
void ct_cpu_conv2d_flat_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                             const float *w, const float *bias, float *y,
                                             bool codes, float *pooled, float *workspace,
                                             size_t per_thread);
/* lanes[o, c, i, j, 0:16] += the products of n_images consecutive images of
 * x and dy (fresh: = instead of +=); `shifted` holds CT_CONV_FLAT_GROUP
 * images' copies. */
void ct_cpu_conv2d_flat_weight_group(const ct_conv2d_shape *s, int n_images, const float *x,
                                     const float *dy, bool fresh, float *shifted, float *lanes);
#endif

#endif
