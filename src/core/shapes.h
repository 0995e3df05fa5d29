/*
 * Shapes of the kernels, shared by every backend.  The graph fills them from
 * a node's tensors and attributes; kernels take them with plain pointers, so
 * a kernel never needs to know about graphs.
 */
#ifndef CT_CORE_SHAPES_H
#define CT_CORE_SHAPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tensor's shape as text, "[64,3,7,7]" (core/shapes.c). */
void ct_shape_text(int ndim, const int64_t *shape, char *buf, size_t capacity);

/* x: [n_batch, in_channels, in_h, in_w]
 * w: [out_channels, in_channels/groups, kernel_h, kernel_w]
 * y: [n_batch, out_channels, out_h, out_w]
 * out_h = (in_h + 2*pad_h - dilation_h*(kernel_h-1) - 1)/stride_h + 1, as
 * ct_window_count (core/window_math.h) computes it, and out_w alike */
typedef struct ct_conv2d_shape {
    int n_batch, in_channels, in_h, in_w;
    int out_channels, out_h, out_w;
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int dilation_h, dilation_w;
    int groups;
} ct_conv2d_shape;

/* x: [n_batch, channels, in_h, in_w]  y: [n_batch, channels, out_h, out_w]
 * Padding counts as -inf for max pooling.  For average pooling it counts as
 * zeros in the divisor unless exclude_pad (PyTorch count_include_pad=False). */
typedef struct ct_pool2d_shape {
    int n_batch, channels, in_h, in_w;
    int out_h, out_w;
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    bool exclude_pad;
} ct_pool2d_shape;

#endif
