/*
 * The emulated cuDNN's reference computations (emu/cudnn_internal.h): NCHW
 * float convolution forward, backward data and backward filter, each two
 * ways (direct loops, or a column matrix in the caller's workspace), and
 * pooling forward.
 *
 * Written from NVIDIA's public cuDNN documentation to test cuttle's glue,
 * not NVIDIA's library.  Sums accumulate in double in a fixed order and are
 * rounded to float once, at the store (so the result is the exact sum,
 * rounded, up to double's rounding); with tensor-core math each input is
 * rounded to TF32 first.  Outputs are y = alpha * result + beta * y, and y
 * is not read when beta is 0.
 */
#include "cudnn_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace emu_dnn {

namespace {

/* out = alpha * value + beta * out, rounded once; out is not read when beta is 0. */
void store(float *out, double value, float alpha, float beta)
{
    double result = (double)alpha * value;
    if (beta != 0.0f)
        result += (double)beta * *out;
    *out = (float)result;
}

/* col[t, p] = x[b, g*Cg + ch, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 in the padding),
 * t = (ch, i, j), p = (oh, ow);  col [taps, out_h*out_w] */
void im2col(const conv_shape &s, const float *x, int b, int g, float *col)
{
    size_t t = 0;
    for (int ch = 0; ch < s.group_in(); ch++)
        for (int i = 0; i < s.r; i++)
            for (int j = 0; j < s.s; j++, t++)
                for (int oh = 0; oh < s.out_h; oh++)
                    for (int ow = 0; ow < s.out_w; ow++) {
                        int ih = oh * s.stride_h - s.pad_h + i * s.dilation_h;
                        int iw = ow * s.stride_w - s.pad_w + j * s.dilation_w;
                        bool inside = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
                        col[t * s.plane_out() + (size_t)oh * s.out_w + ow] =
                            inside ? s.load(x[s.x_at(b, g * s.group_in() + ch, ih, iw)]) : 0.0f;
                    }
}

} // namespace

/* y[b,kk,oh,ow] = alpha sum_{ch,i,j} x[b, g*Cg+ch, oh*sh-ph+i*dh, ow*sw-pw+j*dw]
 *                 w[kk,ch,i,j] + beta y,  g = kk / Kg;  x [n,c,h,w], w [k,Cg,r,s], y [n,k,oh,ow] */
void forward_direct(const conv_shape &s, const conv_data &d)
{
    for (int b = 0; b < s.n; b++)
        for (int kk = 0; kk < s.k; kk++) {
            int c0 = kk / s.group_out() * s.group_in();
            for (int oh = 0; oh < s.out_h; oh++)
                for (int ow = 0; ow < s.out_w; ow++) {
                    double sum = 0.0;
                    for (int ch = 0; ch < s.group_in(); ch++)
                        for (int i = 0; i < s.r; i++) {
                            int ih = oh * s.stride_h - s.pad_h + i * s.dilation_h;
                            for (int j = 0; ih >= 0 && ih < s.h && j < s.s; j++) {
                                int iw = ow * s.stride_w - s.pad_w + j * s.dilation_w;
                                if (iw >= 0 && iw < s.w)
                                    sum += (double)s.load(d.x[s.x_at(b, c0 + ch, ih, iw)]) *
                                           s.load(d.w[s.w_at(kk, ch, i, j)]);
                            }
                        }
                    store(&d.out[s.y_at(b, kk) + (size_t)oh * s.out_w + ow], sum, d.alpha,
                          d.beta);
                }
        }
}

/* The same y, as y[b, g-block, :] = w[g-block, :] . col(x[b], g):  col [taps, plane] */
void forward_column(const conv_shape &s, const conv_data &d)
{
    size_t plane = s.plane_out();
    std::vector<double> sum(plane);
    for (int b = 0; b < s.n; b++)
        for (int g = 0; g < s.groups; g++) {
            im2col(s, d.x, b, g, d.workspace);
            for (int kk = g * s.group_out(); kk < (g + 1) * s.group_out(); kk++) {
                std::fill(sum.begin(), sum.end(), 0.0);
                size_t t = 0;
                for (int ch = 0; ch < s.group_in(); ch++)
                    for (int i = 0; i < s.r; i++)
                        for (int j = 0; j < s.s; j++, t++) {
                            double weight = s.load(d.w[s.w_at(kk, ch, i, j)]);
                            const float *row = d.workspace + t * plane;
                            for (size_t p = 0; p < plane; p++)
                                sum[p] += weight * row[p];
                        }
                for (size_t p = 0; p < plane; p++)
                    store(&d.out[s.y_at(b, kk) + p], sum[p], d.alpha, d.beta);
            }
        }
}

/* dx[b,c,ih,iw] = alpha sum_{kk in c's group, i, j} dy[b,kk,oh,ow] w[kk,c-c0,i,j] + beta dx
 * over ih = oh*sh - ph + i*dh, iw = ow*sw - pw + j*dw;  dy [n,k,oh,ow], dx [n,c,h,w] */
void backward_data_direct(const conv_shape &s, const conv_data &d)
{
    for (int b = 0; b < s.n; b++)
        for (int c = 0; c < s.c; c++) {
            int g = c / s.group_in(), ch = c % s.group_in();
            for (int ih = 0; ih < s.h; ih++)
                for (int iw = 0; iw < s.w; iw++) {
                    double sum = 0.0;
                    for (int kk = g * s.group_out(); kk < (g + 1) * s.group_out(); kk++)
                        for (int i = 0; i < s.r; i++) {
                            int th = ih + s.pad_h - i * s.dilation_h, oh = th / s.stride_h;
                            if (th < 0 || th % s.stride_h != 0 || oh >= s.out_h)
                                continue;
                            for (int j = 0; j < s.s; j++) {
                                int tw = iw + s.pad_w - j * s.dilation_w, ow = tw / s.stride_w;
                                if (tw < 0 || tw % s.stride_w != 0 || ow >= s.out_w)
                                    continue;
                                sum += (double)s.load(d.dy[s.y_at(b, kk) +
                                                           (size_t)oh * s.out_w + ow]) *
                                       s.load(d.w[s.w_at(kk, ch, i, j)]);
                            }
                        }
                    store(&d.out[s.x_at(b, c, ih, iw)], sum, d.alpha, d.beta);
                }
        }
}

/* The same dx, as col = w[g-block]^T . dy[b, g-block] (in the workspace), then
 * scattered back to the input positions (col2im):  col [taps, plane] */
void backward_data_column(const conv_shape &s, const conv_data &d)
{
    size_t plane = s.plane_out(), group_plane = (size_t)s.group_in() * s.h * s.w;
    std::vector<double> row_sum(plane), dx_sum(group_plane);
    for (int b = 0; b < s.n; b++)
        for (int g = 0; g < s.groups; g++) {
            size_t t = 0;
            for (int ch = 0; ch < s.group_in(); ch++)
                for (int i = 0; i < s.r; i++)
                    for (int j = 0; j < s.s; j++, t++) {
                        std::fill(row_sum.begin(), row_sum.end(), 0.0);
                        for (int kk = g * s.group_out(); kk < (g + 1) * s.group_out(); kk++) {
                            double weight = s.load(d.w[s.w_at(kk, ch, i, j)]);
                            const float *dy = d.dy + s.y_at(b, kk);
                            for (size_t p = 0; p < plane; p++)
                                row_sum[p] += weight * s.load(dy[p]);
                        }
                        for (size_t p = 0; p < plane; p++)
                            d.workspace[t * plane + p] = (float)row_sum[p];
                    }
            std::fill(dx_sum.begin(), dx_sum.end(), 0.0);
            t = 0;
            for (int ch = 0; ch < s.group_in(); ch++)
                for (int i = 0; i < s.r; i++)
                    for (int j = 0; j < s.s; j++, t++)
                        for (int oh = 0; oh < s.out_h; oh++)
                            for (int ow = 0; ow < s.out_w; ow++) {
                                int ih = oh * s.stride_h - s.pad_h + i * s.dilation_h;
                                int iw = ow * s.stride_w - s.pad_w + j * s.dilation_w;
                                if (ih >= 0 && ih < s.h && iw >= 0 && iw < s.w)
                                    dx_sum[((size_t)ch * s.h + ih) * s.w + iw] +=
                                        d.workspace[t * plane + (size_t)oh * s.out_w + ow];
                            }
            float *dx = d.out + s.x_at(b, g * s.group_in(), 0, 0);
            for (size_t e = 0; e < group_plane; e++)
                store(&dx[e], dx_sum[e], d.alpha, d.beta);
        }
}

/* dw[kk,ch,i,j] = alpha sum_{b,oh,ow} dy[b,kk,oh,ow] x[b, g*Cg+ch, oh*sh-ph+i*dh,
 *                 ow*sw-pw+j*dw] + beta dw;  x [n,c,h,w], dy [n,k,oh,ow], dw [k,Cg,r,s] */
void backward_filter_direct(const conv_shape &s, const conv_data &d)
{
    for (int kk = 0; kk < s.k; kk++) {
        int c0 = kk / s.group_out() * s.group_in();
        for (int ch = 0; ch < s.group_in(); ch++)
            for (int i = 0; i < s.r; i++)
                for (int j = 0; j < s.s; j++) {
                    double sum = 0.0;
                    for (int b = 0; b < s.n; b++)
                        for (int oh = 0; oh < s.out_h; oh++) {
                            int ih = oh * s.stride_h - s.pad_h + i * s.dilation_h;
                            for (int ow = 0; ih >= 0 && ih < s.h && ow < s.out_w; ow++) {
                                int iw = ow * s.stride_w - s.pad_w + j * s.dilation_w;
                                if (iw >= 0 && iw < s.w)
                                    sum += (double)s.load(d.dy[s.y_at(b, kk) +
                                                               (size_t)oh * s.out_w + ow]) *
                                           s.load(d.x[s.x_at(b, c0 + ch, ih, iw)]);
                            }
                        }
                    store(&d.out[s.w_at(kk, ch, i, j)], sum, d.alpha, d.beta);
                }
    }
}

/* The same dw, as dw[g-block] = sum_b dy[b, g-block] . col(x[b], g)^T:  col [taps, plane] */
void backward_filter_column(const conv_shape &s, const conv_data &d)
{
    size_t plane = s.plane_out(), taps = s.taps();
    std::vector<double> sum((size_t)s.group_out() * taps);
    for (int g = 0; g < s.groups; g++) {
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int b = 0; b < s.n; b++) {
            im2col(s, d.x, b, g, d.workspace);
            for (int kl = 0; kl < s.group_out(); kl++) {
                const float *dy = d.dy + s.y_at(b, g * s.group_out() + kl);
                for (size_t t = 0; t < taps; t++) {
                    double dot = 0.0;
                    for (size_t p = 0; p < plane; p++)
                        dot += (double)s.load(dy[p]) * d.workspace[t * plane + p];
                    sum[kl * taps + t] += dot;
                }
            }
        }
        for (int kl = 0; kl < s.group_out(); kl++) {
            size_t t = 0;
            for (int ch = 0; ch < s.group_in(); ch++)
                for (int i = 0; i < s.r; i++)
                    for (int j = 0; j < s.s; j++, t++)
                        store(&d.out[s.w_at(g * s.group_out() + kl, ch, i, j)],
                              sum[kl * taps + t], d.alpha, d.beta);
        }
    }
}

/* max: y = the window's maximum, the window clipped to x (NaN wins when
 * propagate_nan; -inf for a window wholly in the padding);  average:
 * y = sum / divisor, the divisor window_h * window_w when include_padding,
 * else the clipped window's size (0 for an empty window);  then
 * y = alpha y + beta y_old.  x [planes,h,w], y [planes,out_h,out_w] */
void pooling_forward(const pool_shape &s, const float *x, float *y, float alpha, float beta)
{
    for (int plane = 0; plane < s.planes; plane++)
        for (int oh = 0; oh < s.out_h; oh++)
            for (int ow = 0; ow < s.out_w; ow++) {
                int h0 = oh * s.stride_h - s.pad_h, w0 = ow * s.stride_w - s.pad_w;
                int h1 = std::min(h0 + s.window_h, s.h), w1 = std::min(w0 + s.window_w, s.w);
                h0 = std::max(h0, 0);
                w0 = std::max(w0, 0);
                float best = -INFINITY;
                double sum = 0.0;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++) {
                        float v = x[((size_t)plane * s.h + ih) * s.w + iw];
                        if (v > best || (s.propagate_nan && std::isnan(v)))
                            best = v;
                        sum += v;
                    }
                int count = std::max(h1 - h0, 0) * std::max(w1 - w0, 0);
                int divisor = s.include_padding ? s.window_h * s.window_w : count;
                double value = s.is_max ? best : divisor > 0 ? sum / divisor : 0.0;
                store(&y[((size_t)plane * s.out_h + oh) * s.out_w + ow], value, alpha, beta);
            }
}

} // namespace emu_dnn
