/*
 * The window arithmetic of convolution and pooling, shared by the shape
 * rules (src/ops/), the CPU kernels and the CUDA kernels, so an output size,
 * a window's bounds and the inputs it reads are computed one way everywhere.
 * Plain C that nvcc compiles for the device too (CT_HD).  Separate from
 * core/math_shared.h because the shape rules include the public API, whose
 * graph builders (ct_relu, ct_sigmoid) share names with that file's math.
 */
#ifndef CT_CORE_WINDOW_MATH_H
#define CT_CORE_WINDOW_MATH_H

#include <stdbool.h>

#include "core/hd.h"
#include "core/shapes.h"

/* Along one spatial axis, output o's window starts at input o*stride - pad and
 * its tap t reads input o*stride - pad + t*dilation (pooling: dilation 1);
 * inputs outside [0, in) are padding. */

/* Outputs along an axis, PyTorch's floor mode:
 * (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1, or 0 when the
 * dilated kernel is larger than the padded input. */
static inline CT_HD int ct_window_count(int in, int kernel, int stride, int pad, int dilation)
{
    int last_start = in + 2 * pad - dilation * (kernel - 1) - 1;
    return last_start < 0 ? 0 : last_start / stride + 1;
}

/* The input that tap `tap` of output `out`'s window reads (maybe padding). */
static inline CT_HD int ct_window_input(int out, int tap, int stride, int pad, int dilation)
{
    return out * stride - pad + tap * dilation;
}

/* The outputs [*lo, *hi) whose input out*stride + offset lies in [0, n_in)
 * (of n_out outputs): the unpadded part of an im2col row. */
static inline CT_HD void ct_window_valid_range(int offset, int stride, int n_in, int n_out,
                                               int *lo, int *hi)
{
    int first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int end = n_in - offset > 0 ? (n_in - offset + stride - 1) / stride : 0;
    *lo = first < n_out ? first : n_out;
    *hi = end < n_out ? end : n_out;
    if (*hi < *lo)
        *hi = *lo;
}

/* The output whose tap `tap` reads input `in`, the inverse of
 * ct_window_input; -1 when no output's window puts that tap there. */
static inline CT_HD int ct_window_output(int in, int tap, int stride, int pad, int dilation,
                                         int n_out)
{
    int offset = in + pad - tap * dilation;
    if (offset < 0 || offset % stride != 0 || offset / stride >= n_out)
        return -1;
    return offset / stride;
}

/* The outputs [*first, *last] whose windows (dilation 1) hold input `in`:
 * out*stride - pad <= in < out*stride - pad + kernel. */
static inline CT_HD void ct_windows_holding(int in, int kernel, int stride, int pad, int n_out,
                                            int *first, int *last)
{
    int lowest = in + pad - kernel + 1;
    int highest = (in + pad) / stride;
    *first = lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
    *last = highest < n_out - 1 ? highest : n_out - 1;
}

/* A pooling window clipped to the input plane: rows [h0, h1), columns [w0, w1). */
typedef struct ct_pool_window {
    int h0, h1, w0, w1;
} ct_pool_window;

static inline CT_HD ct_pool_window ct_pool_window_at(const ct_pool2d_shape *s, int oh, int ow)
{
    int h0 = ct_window_input(oh, 0, s->stride_h, s->pad_h, 1);
    int w0 = ct_window_input(ow, 0, s->stride_w, s->pad_w, 1);
    ct_pool_window win;
    win.h0 = h0 > 0 ? h0 : 0;
    win.h1 = h0 + s->kernel_h < s->in_h ? h0 + s->kernel_h : s->in_h;
    win.w0 = w0 > 0 ? w0 : 0;
    win.w1 = w0 + s->kernel_w < s->in_w ? w0 + s->kernel_w : s->in_w;
    return win;
}

static inline CT_HD bool ct_pool_window_empty(ct_pool_window win)
{
    return win.h0 >= win.h1 || win.w0 >= win.w1;
}

/* The size of a window clipped to the padded input [-pad, in + pad). */
static inline CT_HD int ct_window_padded_size(int out, int kernel, int stride, int pad, int in)
{
    int start = ct_window_input(out, 0, stride, pad, 1), end = start + kernel;
    return (end < in + pad ? end : in + pad) - start;
}

/* Average pooling's divisor for output (oh, ow), PyTorch's rule: the window
 * clipped to the padded input, or to the input itself when padding is
 * excluded (count_include_pad=False). */
static inline CT_HD int ct_pool_avg_divisor(const ct_pool2d_shape *s, int oh, int ow,
                                            ct_pool_window win)
{
    if (s->exclude_pad)
        return (win.h1 - win.h0) * (win.w1 - win.w0);
    return ct_window_padded_size(oh, s->kernel_h, s->stride_h, s->pad_h, s->in_h) *
           ct_window_padded_size(ow, s->kernel_w, s->stride_w, s->pad_w, s->in_w);
}

#endif
