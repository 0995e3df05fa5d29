/* The vector parts of max pooling 2x2/2 (src/cpu/pool_avx2.c). */
#ifndef CT_CPU_POOL_AVX2_H
#define CT_CPU_POOL_AVX2_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* y of the windows in columns [0, returned) of every output row of one
 * plane (a multiple of 4); the caller does the remaining columns. */
int ct_cpu_maxpool2x2_forward_avx2(int in_w, int out_h, int out_w, const float *x, float *y);
/* dx of the windows in columns [0, returned) of every output row of one
 * plane (a multiple of 4); the caller does the remaining columns.
 * x, dx: [2*out_h.., in_w], dy: [out_h, out_w].  relu: x is a relu's
 * output and dx that relu's input gradient too (ct_relu_grad of each
 * window's max). */
int ct_cpu_maxpool2x2_backward_avx2(int in_w, int out_h, int out_w, const float *x,
                                    const float *dy, bool relu, float *dx);
/* Each window's argmax and gradient, for the windows in columns [0,
 * returned) of every output row (a multiple of 4): at[oh*out_w + ow] is
 * the argmax's row times at_w plus its column (its index in x where at_w
 * is in_w; conv_pooled.c gives the width of the convolution's input, so
 * that at is where the argmax's patch starts there), g[...] its gradient,
 * dy or (relu) ct_relu_grad(max, dy). */
int ct_cpu_maxpool2x2_argmax_avx2(int in_w, int out_h, int out_w, const float *x,
                                  const float *dy, bool relu, int at_w, int *at, float *g);
/* y and each window's code (ct_cpu_maxpool2x2_planes_codes, kernels.h) of
 * the windows in columns [0, returned) of every output row (a multiple of
 * 4); codes may be x's bytes. */
int ct_cpu_maxpool2x2_codes_avx2(int in_w, int out_h, int out_w, const float *x, float *y,
                                 uint8_t *codes);
/* ct_cpu_maxpool2x2_argmax_avx2's at and g from the windows' codes instead
 * of x, for windows [0, returned) of a plane (a multiple of 8, the rest
 * the caller's): at[k] = base[k] (the window's top left, 2 oh at_w + 2 ow)
 * + the code's place; g[k] = dy[k], or (relu) 0 where the code has no
 * CT_POOL_CODE_PASS.  The windows are a flat list: no row ends. */
int ct_cpu_pool_codes_argmax_avx2(int windows, const int *base, const uint8_t *codes,
                                  const float *dy, bool relu, int at_w, int *at, float *g);
/* The same on AVX-512 (16 windows a vector, every column): for rows of at
 * least CT_POOL_AVX512_MIN_WINDOWS windows on a CPU where
 * ct_cpu_simd_avx512(); the forward also for rows of 4 windows from rows of
 * 8 inputs (16 windows from 4 pairs of rows: SimpleCNN's 8x8 planes). */
enum { CT_POOL_AVX512_MIN_WINDOWS = 8, CT_POOL_PACKED_IN_W = 8, CT_POOL_PACKED_OUT_W = 4 };
static inline bool ct_cpu_maxpool2x2_forward_avx512_fits(int in_w, int out_w)
{
    return out_w >= CT_POOL_AVX512_MIN_WINDOWS ||
           (in_w == CT_POOL_PACKED_IN_W && out_w == CT_POOL_PACKED_OUT_W);
}
int ct_cpu_maxpool2x2_forward_avx512(int in_w, int out_h, int out_w, const float *x, float *y);
int ct_cpu_maxpool2x2_backward_avx512(int in_w, int out_h, int out_w, const float *x,
                                      const float *dy, bool relu, float *dx);
int ct_cpu_maxpool2x2_argmax_avx512(int in_w, int out_h, int out_w, const float *x,
                                    const float *dy, bool relu, int at_w, int *at, float *g);
int ct_cpu_maxpool2x2_codes_avx512(int in_w, int out_h, int out_w, const float *x, float *y,
                                   uint8_t *codes);
int ct_cpu_pool_codes_argmax_avx512(int windows, const int *base, const uint8_t *codes,
                                    const float *dy, bool relu, int at_w, int *at, float *g);
#endif

#endif
