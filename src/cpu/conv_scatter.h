/*
 * The direct convolution's backward data on AVX-512 (src/cpu/conv_scatter.c):
 * dy scattered through the kernel, every product one of the sum's.
 * ct_cpu_conv2d_direct_backward_data (conv_avx2.c) calls it where it fits,
 * in the same workspace.
 */
#ifndef CT_CPU_CONV_SCATTER_H
#define CT_CPU_CONV_SCATTER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/shapes.h"
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* The shape rule and this CPU's AVX-512F. */
bool ct_cpu_conv2d_scatter_fits(const ct_conv2d_shape *s);
/* Floats of a thread's part of the workspace. */
size_t ct_cpu_conv2d_scatter_thread_floats(const ct_conv2d_shape *s);
/* dx from dy and w; thread t works in workspace + t * per_thread floats
 * (per_thread >= ct_cpu_conv2d_scatter_thread_floats). */
void ct_cpu_conv2d_scatter_backward_data(const ct_conv2d_shape *s, const float *dy,
                                         const float *w, float *dx, float *workspace,
                                         size_t per_thread);
#endif

#endif
