/*
 * The direct convolution's weight gradient on vectors of 16 output channels
 * (src/cpu/conv_channels.c), for the shapes of conv_flat.h whose output
 * channels come in sixteens, on AVX-512.  conv_weight_avx2.c calls it where
 * ct_cpu_conv2d_channels_fits says so, in the direct convolution's
 * workspace, and keeps the chunking that makes the bits the same for any
 * thread count.
 */
#ifndef CT_CPU_CONV_CHANNELS_H
#define CT_CPU_CONV_CHANNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/shapes.h"
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* The shape rule alone (for sizing the workspace), and with this CPU's
 * AVX-512 (ct_cpu_simd_avx512). */
bool ct_cpu_conv2d_channels_shape_fits(const ct_conv2d_shape *s);
bool ct_cpu_conv2d_channels_fits(const ct_conv2d_shape *s);
/* Floats of a thread's scratch for a group of CT_CONV_FLAT_GROUP images
 * (their dy transposed, their padded inputs), and of its whole part of the
 * workspace (the scratch, then the sums). */
size_t ct_cpu_conv2d_channels_group_floats(const ct_conv2d_shape *s);
size_t ct_cpu_conv2d_channels_thread_floats(const ct_conv2d_shape *s);
/* sums[c, i, j, o] += the products of n_images consecutive images of x and
 * dy (fresh: = instead of +=), in the order of images, then outputs. */
void ct_cpu_conv2d_channels_weight_group(const ct_conv2d_shape *s, int n_images, const float *x,
                                         const float *dy, bool fresh, float *scratch,
                                         float *sums);
/* dw[o, c, i, j] = sums[c, i, j, o]. */
void ct_cpu_conv2d_channels_weight_order(const ct_conv2d_shape *s, const float *sums,
                                         float *dw);
#endif

#endif
