/*
 * The direct convolution on 16-float vectors: the forward pass and the
 * weight gradient of the shapes conv_direct.h takes, on AVX-512.
 *
 * The 8-float kernels (conv_avx2.c, conv_weight_avx2.c) take one vector per
 * 8 outputs of a row.  A 16-float vector there would leave lanes idle on
 * SimpleCNN's rows of 24 and 8; here a vector holds 16 consecutive outputs
 * of the flat output plane [out_h * out_w], across row ends, so every lane
 * is an output (a plane of 576 or 64 outputs is 36 or 4 vectors).  What
 * makes that one load: per input channel c and kernel column j, a copy of
 * the padded input shifted left by j and cut to the output's width,
 *
 *   shifted[c, j, r * out_w + ow] = xp[c, r, ow + j]      (r < out_h + kh - 1)
 *
 * so that the inputs of outputs p.. for kernel row i are shifted[c, j,
 * p + i * out_w ..]: one unaligned load.  The copies are kw times the
 * input (SimpleCNN: 3,360 floats an image), built per image.
 *
 *   forward:  y[o, p:p+16] = b[o] + sum_{c,i,j} w[o,c,i,j] * shifted[c, j, p + i*out_w :+16]
 *             register blocks of up to 6 channels x 4 vectors or 8 x 3:
 *             R loads + OB broadcasts per OB*R FMAs.  Each output adds the
 *             bias, then its products in (c, i, j) order, one FMA each, as
 *             the 8-float kernels do: the same bits.
 *   forward, relu and 2x2/2 max pool (rows of 16-32 outputs: SimpleCNN's
 *             conv1): a block is whole pairs of output rows, pooled from the
 *             accumulators (pool_avx512.h's windows), so that the outputs
 *             are never stored unless the pool's backward needs them.
 *   weights:  lanes[o,c,i,j, :] += dy[o, p:p+16] * shifted[c, j, p + i*out_w :+16]
 *             16-lane sums per weight (the 8-float kernels keep 8: their
 *             sums are grouped differently, so dw differs from theirs in
 *             the last bits); blocks of 4 channels x 5 kernel columns.
 *             conv_weight_avx2.c keeps the chunking that makes the bits
 *             the same for any thread count, and adds the lanes.
 */
#include "cpu/conv_flat.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "cpu/conv_direct.h"
#include "cpu/kernels.h"
#include "cpu/pool_avx512.h"
#include "cpu/threads.h"

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512vl")))
#define AVX512_INLINE __attribute__((target("avx2,fma,avx512f,avx512vl"), always_inline)) \
    static inline

enum {
    VEC = 16,          /* floats per vector */
    MAX_OB = 8,        /* forward: output channels in a register block */
    MAX_R = 4,         /* forward: vectors in a register block */
    MAX_ACC = 24,      /* accumulators in a block (of 32 registers) */
    WEIGHT_OB = 4,     /* weights: output channels in a block */
    WEIGHT_J = 5,      /* weights: kernel columns in a block */
    ALIGN = 16,
    L1_FLOATS = 6144,  /* 24 KiB: half of a 48 KiB L1 */
    /* Beyond this an image's copies outgrow the caches that make them cheap. */
    MAX_IMAGE_FLOATS = 1 << 16,
};

typedef struct flat_geom {
    int in_c, in_h, in_w, top, left;   /* the input and its padding */
    int rows;                          /* padded rows: out_h + kh - 1 */
    int out_c, out_h, out_w, area;     /* area = out_h * out_w */
    int n_vec;                         /* vectors of the flat output plane */
    int kh, kw;
    size_t copy;                       /* floats of one shifted copy, with slack */
} flat_geom;

/* The first `lanes` lanes (all from 16 on). */
static inline __mmask16 vector_mask_of(int lanes)
{
    return lanes >= VEC ? (__mmask16)0xffff : (__mmask16)((1u << lanes) - 1);
}

static size_t round_up(size_t count)
{
    return (count + ALIGN - 1) / ALIGN * ALIGN;
}

static flat_geom geom_of(const ct_conv2d_shape *s)
{
    flat_geom g = {s->in_channels, s->in_h, s->in_w, s->pad_h, s->pad_w,
                   s->out_h + s->kernel_h - 1, s->out_channels, s->out_h, s->out_w,
                   s->out_h * s->out_w, 0, s->kernel_h, s->kernel_w, 0};
    g.n_vec = (g.area + VEC - 1) / VEC;
    /* the last vector's lanes past the plane read up to VEC - 1 floats on */
    g.copy = round_up((size_t)g.rows * g.out_w + VEC);
    return g;
}

size_t ct_cpu_conv2d_flat_image_floats(const ct_conv2d_shape *s)
{
    flat_geom g = geom_of(s);
    return (size_t)g.in_c * g.kw * g.copy;
}

bool ct_cpu_conv2d_flat_shape_fits(const ct_conv2d_shape *s)
{
    return ct_cpu_conv2d_direct_fits(s) && s->out_h > 0 &&
           ct_cpu_conv2d_flat_image_floats(s) <= MAX_IMAGE_FLOATS;
}

bool ct_cpu_conv2d_flat_fits(const ct_conv2d_shape *s)
{
    return ct_cpu_simd_avx512() && ct_cpu_conv2d_flat_shape_fits(s);
}

size_t ct_cpu_conv2d_flat_thread_floats(const ct_conv2d_shape *s)
{
    size_t weights = (size_t)s->out_channels * s->in_channels * s->kernel_h * s->kernel_w;
    size_t image = ct_cpu_conv2d_flat_image_floats(s);
    size_t weight_pass = CT_CONV_FLAT_GROUP * image + round_up(weights * VEC);
    size_t pooled_forward = image + round_up((size_t)s->out_channels * s->out_h * s->out_w);
    return weight_pass > pooled_forward ? weight_pass : pooled_forward;
}

/* shifted[c, j, r*out_w + ow] = xp[c, r, ow + j] of one image x [in_c, in_h, in_w]:
 * the data where the padded column ow + j - left and row r - top fall
 * inside x, zeros elsewhere.  16 columns a load (masked: padding columns
 * read as zeros, and nothing past a row of x is touched) and a whole
 * vector a store: a row's last store runs into the next row, whose own
 * stores then overwrite it, and the last row's into the slack, which no
 * output reads (the forward does not store those lanes; the weight
 * gradient loads its last vector masked).  A call to memcpy per row cost
 * more than the convolution on SimpleCNN's 24-float rows, masked stores a
 * fifth of the weight gradient. */
/* Lanes of x's row (from column col0 on, 16 of them) that lie inside it. */
AVX512_INLINE __mmask16 row_lanes(int col0, int in_w)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i col = _mm512_add_epi32(iota, _mm512_set1_epi32(col0));
    return _mm512_cmpge_epi32_mask(col, _mm512_setzero_si512()) &
           _mm512_cmplt_epi32_mask(col, _mm512_set1_epi32(in_w));
}

static AVX512 void shift_image(const flat_geom *g, const float *x, float *shifted)
{
    /* locals: the vector stores may alias anything, and gcc reloaded every
     * field of g after each one (12 cycles a row) */
    const int kw = g->kw, rows = g->rows, out_w = g->out_w, in_w = g->in_w;
    const int top = g->top, left = g->left, data_end = g->top + g->in_h;
    const size_t copy_floats = g->copy, in_plane = (size_t)g->in_h * g->in_w;
    for (int c = 0; c < g->in_c; c++)
        for (int j = 0; j < kw; j++) {
            float *copy = shifted + ((size_t)c * kw + j) * copy_floats;
            const float *x_cj = x + c * in_plane + j - left - (ptrdiff_t)top * in_w;
            if (out_w <= VEC) { /* a vector a row (SimpleCNN's 6 -> 16 layer) */
                __mmask16 load = row_lanes(j - left, in_w);
                for (int r = 0; r < rows; r++) {
                    bool data = r >= top && r < data_end;
                    __m512 v = data ? _mm512_maskz_loadu_ps(load, x_cj + (ptrdiff_t)r * in_w)
                                    : _mm512_setzero_ps();
                    _mm512_storeu_ps(copy + (size_t)r * out_w, v);
                }
                continue;
            }
            /* a column of vectors at a time, its mask made once (per row
             * and vector, the mask's two compares on port 5 made this loop
             * a fifth of SimpleCNN's 1 -> 6 forward).  The last column
             * first: its vectors run into the next row's first floats,
             * which the first column's then overwrite. */
            for (int ow = (out_w - 1) / VEC * VEC; ow >= 0; ow -= VEC) {
                __mmask16 load = row_lanes(ow + j - left, in_w);
                for (int r = 0; r < rows; r++) {
                    bool data = r >= top && r < data_end;
                    __m512 v = data ? _mm512_maskz_loadu_ps(load, x_cj + (ptrdiff_t)r * in_w + ow)
                                    : _mm512_setzero_ps();
                    _mm512_storeu_ps(copy + (size_t)r * out_w + ow, v);
                }
            }
        }
}

/* Lanes of vector v that are outputs. */
static inline __mmask16 vector_mask(const flat_geom *g, int v)
{
    return vector_mask_of(g->area - v * VEC);
}

/* Keeps a loaded vector in a register: without this gcc repeats the load
 * as a memory operand of each FMA that uses it. */
AVX512_INLINE void in_register(__m512 *v)
{
    __asm__("" : "+v"(*v));
}

/* One product of an output's sum: where its input vector starts in the
 * shifted copies (from the block's first vector) and its weight in the
 * output channel's weights. */
typedef struct flat_tap {
    int src, w;
} flat_tap;

/* Outputs of channels o0..o0+OB-1 at vectors v0..v0+R-1 of one image, the
 * products taps[0..n_taps) in (c, i, j) order.  OB and R are constants at
 * every call site (the loops unroll, acc stays in registers: every loop
 * over b and r carries `#pragma GCC unroll`, as in conv_avx2.c).  One loop
 * over the taps instead of three over c, i and j: SimpleCNN's 5-wide j
 * loop left once per 120 FMAs, a branch mispredicted each time. */
AVX512_INLINE void accumulate_block(const flat_geom *g, const flat_tap *taps, int n_taps,
                                    const float *shifted, const float *w, const float *bias,
                                    int o0, int v0, __m512 acc[MAX_OB][MAX_R], const int OB,
                                    const int R)
{
    #pragma GCC unroll 8
    for (int b = 0; b < OB; b++) {
        __m512 init = bias ? _mm512_set1_ps(bias[o0 + b]) : _mm512_setzero_ps();
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            acc[b][r] = init;
    }
    size_t w_stride = (size_t)g->in_c * g->kh * g->kw;
    const float *w_block = w + (size_t)o0 * w_stride, *src = shifted + (size_t)v0 * VEC;
    for (int t = 0; t < n_taps; t++) {
        __m512 xv[MAX_R];
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            xv[r] = _mm512_loadu_ps(src + taps[t].src + r * VEC);
        const float *w_tap = w_block + taps[t].w;
        #pragma GCC unroll 8
        for (int b = 0; b < OB; b++) {
            __m512 wv = _mm512_set1_ps(w_tap[b * w_stride]);
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[b][r] = _mm512_fmadd_ps(wv, xv[r], acc[b][r]);
        }
    }
}

/* max(0, v), NaN kept (maxps returns its second operand when one is NaN). */
AVX512_INLINE __m512 relu16(__m512 v)
{
    return _mm512_max_ps(_mm512_setzero_ps(), v);
}

AVX512_INLINE void forward_block(const flat_geom *g, const flat_tap *taps, int n_taps,
                                 const float *shifted, const float *w, const float *bias,
                                 bool relu, int o0, int v0, float *y, const int OB, const int R)
{
    __m512 acc[MAX_OB][MAX_R];
    accumulate_block(g, taps, n_taps, shifted, w, bias, o0, v0, acc, OB, R);
    #pragma GCC unroll 8
    for (int b = 0; b < OB; b++) {
        float *y_plane = y + (size_t)(o0 + b) * g->area + (size_t)v0 * VEC;
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512 v = relu ? relu16(acc[b][r]) : acc[b][r];
            _mm512_mask_storeu_ps(y_plane + r * VEC, vector_mask(g, v0 + r), v);
        }
    }
}

typedef void (*forward_block_fn)(const flat_geom *g, const flat_tap *taps, int n_taps,
                                 const float *shifted, const float *w, const float *bias,
                                 bool relu, int o0, int v0, float *y);

#define FORWARD_BLOCK(OB, R)                                                                  \
    static AVX512 void forward_##OB##_##R(const flat_geom *g, const flat_tap *taps,            \
                                          int n_taps, const float *shifted, const float *w,    \
                                          const float *bias, bool relu, int o0, int v0,        \
                                          float *y)                                            \
    {                                                                                         \
        forward_block(g, taps, n_taps, shifted, w, bias, relu, o0, v0, y, OB, R);             \
    }
#define FORWARD_BLOCKS_3(OB) FORWARD_BLOCK(OB, 1) FORWARD_BLOCK(OB, 2) FORWARD_BLOCK(OB, 3)
#define FORWARD_BLOCKS(OB) FORWARD_BLOCKS_3(OB) FORWARD_BLOCK(OB, 4)
FORWARD_BLOCKS(1)
FORWARD_BLOCKS(2)
FORWARD_BLOCKS(3)
FORWARD_BLOCKS(4)
FORWARD_BLOCKS(5)
FORWARD_BLOCKS(6)
FORWARD_BLOCKS_3(7)
FORWARD_BLOCKS_3(8)

static const forward_block_fn forward_blocks[MAX_OB][MAX_R] = {
    {forward_1_1, forward_1_2, forward_1_3, forward_1_4},
    {forward_2_1, forward_2_2, forward_2_3, forward_2_4},
    {forward_3_1, forward_3_2, forward_3_3, forward_3_4},
    {forward_4_1, forward_4_2, forward_4_3, forward_4_4},
    {forward_5_1, forward_5_2, forward_5_3, forward_5_4},
    {forward_6_1, forward_6_2, forward_6_3, forward_6_4},
    {forward_7_1, forward_7_2, forward_7_3, NULL},
    {forward_8_1, forward_8_2, forward_8_3, NULL},
};

/* The 2x2/2 windows of output rows 2q and 2q+1 from the R = out_w / 8
 * vectors that hold them (a block's first vector starts row 2q): window k's
 * top inputs are the two rows' floats 2k, 2k+1, its bottom ones 8R + 2k,
 * 8R + 2k + 1, in acc[R / 2] on (8 floats in where R is odd). */
AVX512_INLINE windows16 row_pair_windows(const __m512 acc[MAX_R], const int R)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i bottom = _mm512_set1_epi32(R % 2 ? VEC / 2 : 0);
    __m512 top0 = acc[0], top1 = acc[R > 1 ? 1 : 0];
    __m512 bottom0 = acc[R / 2], bottom1 = acc[R / 2 + 1 < R ? R / 2 + 1 : R - 1];
    windows16 win = {.lanes = vector_mask_of(4 * R)};
    win.top_left = _mm512_permutex2var_ps(top0, even, top1);
    win.top_right = _mm512_permutex2var_ps(top0, odd, top1);
    win.bottom_left = _mm512_permutex2var_ps(bottom0, _mm512_add_epi32(even, bottom), bottom1);
    win.bottom_right = _mm512_permutex2var_ps(bottom0, _mm512_add_epi32(odd, bottom), bottom1);
    return win;
}

/* The relu and 2x2/2 max pool of output rows 2q0 .. 2(q0 + P) - 1, P pairs
 * of rows of RP = out_w / 8 vectors each (vectors q0 RP ..), of channels
 * o0..o0+OB-1, taken from the accumulators: pooled[o, q0 .. q0+P, :] and,
 * where codes is not NULL, each window's code (kernels.h) laid out as
 * pooled, as ct_cpu_maxpool2x2_planes_codes makes them from the stored
 * outputs (the same windows16 functions: the same bits); where y is not
 * NULL, the relu's outputs too (the pool's backward reads them). */
AVX512_INLINE void pooled_block(const flat_geom *g, const flat_tap *taps, int n_taps,
                                const float *shifted, const float *w, const float *bias, int o0,
                                int q0, float *y, float *pooled, uint8_t *codes, const int OB,
                                const int P, const int RP)
{
    __m512 acc[MAX_OB][MAX_R];
    accumulate_block(g, taps, n_taps, shifted, w, bias, o0, q0 * RP, acc, OB, P * RP);
    size_t pooled_w = (size_t)g->out_w / 2, plane = pooled_w * (size_t)(g->out_h / 2);
    #pragma GCC unroll 8
    for (int b = 0; b < OB; b++) {
        #pragma GCC unroll 4
        for (int r = 0; r < P * RP; r++) {
            acc[b][r] = relu16(acc[b][r]);
            if (y)
                _mm512_storeu_ps(y + (size_t)(o0 + b) * g->area + (size_t)(q0 * RP + r) * VEC,
                                 acc[b][r]);
        }
        #pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            windows16 win = row_pair_windows(acc[b] + p * RP, RP);
            __mmask16 pick[4];
            __m512 m = window_picks16(win, pick);
            size_t at = (size_t)(o0 + b) * plane + (size_t)(q0 + p) * pooled_w;
            _mm512_mask_storeu_ps(pooled + at, win.lanes, m);
            if (codes)
                _mm512_mask_cvtepi32_storeu_epi8(codes + at, win.lanes, window_codes16(pick, m));
        }
    }
}

typedef void (*pooled_block_fn)(const flat_geom *g, const flat_tap *taps, int n_taps,
                                const float *shifted, const float *w, const float *bias, int o0,
                                int q0, float *y, float *pooled, uint8_t *codes);

#define POOLED_BLOCK(OB, P, RP)                                                               \
    static AVX512 void pooled_##OB##_##P##_##RP(                                              \
        const flat_geom *g, const flat_tap *taps, int n_taps, const float *shifted,           \
        const float *w, const float *bias, int o0, int q0, float *y, float *pooled,           \
        uint8_t *codes)                                                                       \
    {                                                                                         \
        pooled_block(g, taps, n_taps, shifted, w, bias, o0, q0, y, pooled, codes, OB, P, RP); \
    }
/* pools_in_registers' shapes: rows of 16 (RP 2) one or two pairs a block,
 * of 24 or 32 one; at 1..8 channels, 6 at 4 vectors */
#define POOLED_SHAPES(OB) POOLED_BLOCK(OB, 1, 2) POOLED_BLOCK(OB, 1, 3) POOLED_BLOCK(OB, 1, 4) \
    POOLED_BLOCK(OB, 2, 2)
#define POOLED_SHAPES_3(OB) POOLED_BLOCK(OB, 1, 2) POOLED_BLOCK(OB, 1, 3)
POOLED_SHAPES(1)
POOLED_SHAPES(2)
POOLED_SHAPES(3)
POOLED_SHAPES(4)
POOLED_SHAPES(5)
POOLED_SHAPES(6)
POOLED_SHAPES_3(7)
POOLED_SHAPES_3(8)

enum { MIN_RP = 2, MAX_P = MAX_R / MIN_RP };

/* [RP - MIN_RP][OB - 1][P - 1] */
#define POOLED_ROWS_OF_16(OB, P2) {pooled_##OB##_1_2, P2}
#define POOLED_ONE(OB, RP) {pooled_##OB##_1_##RP, NULL}
static const pooled_block_fn pooled_blocks[MAX_R - MIN_RP + 1][MAX_OB][MAX_P] = {
    {POOLED_ROWS_OF_16(1, pooled_1_2_2), POOLED_ROWS_OF_16(2, pooled_2_2_2),
     POOLED_ROWS_OF_16(3, pooled_3_2_2), POOLED_ROWS_OF_16(4, pooled_4_2_2),
     POOLED_ROWS_OF_16(5, pooled_5_2_2), POOLED_ROWS_OF_16(6, pooled_6_2_2),
     POOLED_ROWS_OF_16(7, NULL), POOLED_ROWS_OF_16(8, NULL)},
    {POOLED_ONE(1, 3), POOLED_ONE(2, 3), POOLED_ONE(3, 3), POOLED_ONE(4, 3), POOLED_ONE(5, 3),
     POOLED_ONE(6, 3), POOLED_ONE(7, 3), POOLED_ONE(8, 3)},
    {POOLED_ONE(1, 4), POOLED_ONE(2, 4), POOLED_ONE(3, 4), POOLED_ONE(4, 4), POOLED_ONE(5, 4),
     POOLED_ONE(6, 4), {NULL}, {NULL}},
};

/* The products of kernel rows i_lo..i_hi-1, in (c, i, j) order. */
static int forward_taps(const flat_geom *g, int i_lo, int i_hi, flat_tap *taps)
{
    int n = 0;
    for (int c = 0; c < g->in_c; c++)
        for (int i = i_lo; i < i_hi; i++)
            for (int j = 0; j < g->kw; j++)
                taps[n++] = (flat_tap){(int)(((size_t)c * g->kw + j) * g->copy) + i * g->out_w,
                                       (c * g->kh + i) * g->kw + j};
    return n;
}

/* The products a block of vectors v0..v0+r-1 takes: the kernel rows that
 * reach a data row for some output of it, as the 8-float kernels do; made
 * again only where those rows change (at the padding). */
typedef struct block_taps {
    flat_tap taps[CT_CONV_DIRECT_MAX_DEPTH];
    int n, lo, hi;
} block_taps;

static int taps_of_block(const flat_geom *g, int v0, int r, block_taps *t)
{
    int last = (v0 + r) * VEC < g->area ? (v0 + r) * VEC : g->area;
    int oh_first = v0 * VEC / g->out_w, oh_last = (last - 1) / g->out_w;
    int i_lo = g->top - oh_last > 0 ? g->top - oh_last : 0;
    int i_hi = g->top + g->in_h - oh_first < g->kh ? g->top + g->in_h - oh_first : g->kh;
    if (i_lo != t->lo || i_hi != t->hi) {
        t->n = forward_taps(g, i_lo, i_hi, t->taps);
        t->lo = i_lo;
        t->hi = i_hi;
    }
    return t->n;
}

/* Output channels a block takes at r vectors, MAX_ACC allowing (6 x 4,
 * 8 x 3), and the number of blocks that splits out_c evenly into. */
static int channel_blocks(const flat_geom *g, int r)
{
    int ob_max = MAX_ACC / r < MAX_OB ? MAX_ACC / r : MAX_OB;
    return (g->out_c + ob_max - 1) / ob_max;
}

/* y [out_c, out_h, out_w] of one image from its shifted copies: blocks of
 * R = min(4, n_vec) vectors and as many channels as MAX_ACC allows, the
 * channels split evenly (SimpleCNN's 16: 6 + 5 + 5 at 4 vectors, every
 * block FMA-bound: 9 or 10 loads per 20 or 24 FMAs). */
static void forward_image(const flat_geom *g, const float *shifted, const float *w,
                          const float *bias, bool relu, float *y)
{
    block_taps taps = {.lo = -1, .hi = -1};
    int r_full = g->n_vec < MAX_R ? g->n_vec : MAX_R;
    int n_blocks = channel_blocks(g, r_full);
    for (int block = 0; block < n_blocks; block++) {
        int o0 = block * g->out_c / n_blocks, o1 = (block + 1) * g->out_c / n_blocks;
        for (int v0 = 0; v0 < g->n_vec; v0 += r_full) {
            int r = g->n_vec - v0 < r_full ? g->n_vec - v0 : r_full;
            int n_taps = taps_of_block(g, v0, r, &taps);
            forward_blocks[o1 - o0 - 1][r - 1](g, taps.taps, n_taps, shifted, w, bias, relu, o0,
                                               v0, y);
        }
    }
}

/* Whether pooled_image takes the shape: rows of 16, 24 or 32 outputs, so
 * that two rows are 2 to 4 whole vectors; where it must store the outputs
 * too (keep_y), an even number of rows, as it computes only rows that
 * windows read.  Not rows of 8 (SimpleCNN's conv2, 8x8): there a pair of
 * rows is one vector, and pooling 4 windows at a time from the registers
 * (or 16 from 4 registers, as pool_avx2.c's packed rows do) measured
 * 62.5 -> 66-72 us (its relu+maxpool forward, B64, 2 threads) where
 * ct_cpu_maxpool2x2_planes takes the stored plane in one pass. */
static bool pools_in_registers(const flat_geom *g, bool keep_y)
{
    return g->out_w % (VEC / 2) == 0 && g->out_w / (VEC / 2) >= MIN_RP &&
           g->out_w / (VEC / 2) <= MAX_R && g->out_h >= 2 && (!keep_y || g->out_h % 2 == 0);
}

/* relu, then 2x2/2 max pool, of one image's outputs, pooled in registers
 * (pooled_block): pooled [out_c, out_h/2, out_w/2], where codes is not NULL
 * the windows' codes laid out as pooled, where y is not NULL the relu's
 * outputs [out_c, out_h, out_w].  A block is P pairs of output rows of RP
 * = out_w / 8 vectors each, P as many as MAX_R vectors hold (rows of 16:
 * 2; SimpleCNN's conv1, 24 wide: 1); a row past the last pair (odd out_h)
 * is not computed, as no window reads it. */
static void pooled_image(const flat_geom *g, const float *shifted, const float *w,
                         const float *bias, float *y, float *pooled, uint8_t *codes)
{
    block_taps taps = {.lo = -1, .hi = -1};
    int rp = g->out_w / (VEC / 2), pairs = g->out_h / 2;
    int p_full = MAX_R / rp < pairs ? MAX_R / rp : pairs;
    int n_blocks = channel_blocks(g, p_full * rp);
    for (int block = 0; block < n_blocks; block++) {
        int o0 = block * g->out_c / n_blocks, o1 = (block + 1) * g->out_c / n_blocks;
        for (int q0 = 0; q0 < pairs; q0 += p_full) {
            int p = pairs - q0 < p_full ? pairs - q0 : p_full;
            int n_taps = taps_of_block(g, q0 * rp, p * rp, &taps);
            pooled_blocks[rp - MIN_RP][o1 - o0 - 1][p - 1](g, taps.taps, n_taps, shifted, w,
                                                            bias, o0, q0, y, pooled, codes);
        }
    }
}

typedef struct forward_job {
    const ct_conv2d_shape *s;
    const float *x, *w, *bias;
    bool relu, pool, codes;
    float *y, *out, *workspace;
    size_t per_thread;
} forward_job;

/* One thread's images of forward_batch (below). */
static void forward_part(void *arg)
{
    const forward_job *j = arg;
    const ct_conv2d_shape *s = j->s;
    flat_geom g = geom_of(s);
    size_t in_image = (size_t)g.in_c * g.in_h * g.in_w;
    size_t y_image = (size_t)g.out_c * g.area;
    size_t out_image = j->pool ? (size_t)g.out_c * (g.out_h / 2) * (g.out_w / 2) : y_image;
    float *shifted = j->workspace + (size_t)ct_cpu_thread_num() * j->per_thread;
    float *scratch = shifted + ct_cpu_conv2d_flat_image_floats(s);
    int64_t first, last;
    ct_cpu_split(s->n_batch, &first, &last);
    for (int n = (int)first; n < last; n++) {
        shift_image(&g, j->x + n * in_image, shifted);
        if (!j->pool) {
            forward_image(&g, shifted, j->w, j->bias, j->relu, j->out + n * out_image);
            continue;
        }
        bool keep_y = j->y && !j->codes;
        if (pools_in_registers(&g, keep_y)) {
            pooled_image(&g, shifted, j->w, j->bias, keep_y ? j->y + n * y_image : NULL,
                         j->out + n * out_image,
                         j->codes ? (uint8_t *)j->y + n * out_image : NULL);
            continue;
        }
        float *computed = keep_y ? j->y + n * y_image : scratch;
        forward_image(&g, shifted, j->w, j->bias, j->relu, computed);
        if (j->codes)
            ct_cpu_maxpool2x2_planes_codes(g.out_c, g.out_h, g.out_w, computed,
                                           j->out + n * out_image, (uint8_t *)j->y + n * out_image);
        else
            ct_cpu_maxpool2x2_planes(g.out_c, g.out_h, g.out_w, computed, j->out + n * out_image);
    }
}

/* Per image: the shifted copies, then the outputs straight into `out`;
 * or (pool) the outputs into y where y is not NULL and not codes
 * (training: the pool's backward reads y), else into the thread's part of
 * the workspace, and their 2x2/2 max pool into `out` while they are in
 * cache; with codes, each window's argmax code into y's first bytes. */
static void forward_batch(const ct_conv2d_shape *s, const float *x, const float *w,
                          const float *bias, bool relu, bool pool, float *y, bool codes,
                          float *out, float *workspace, size_t per_thread)
{
    forward_job job = {s, x, w, bias, relu, pool, codes, y, out, workspace, per_thread};
    ct_cpu_parallel(ct_cpu_max_threads(), forward_part, &job);
}

void ct_cpu_conv2d_flat_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                const float *bias, bool relu, float *y, float *workspace,
                                size_t per_thread)
{
    forward_batch(s, x, w, bias, relu, false, NULL, false, y, workspace, per_thread);
}

void ct_cpu_conv2d_flat_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                             const float *w, const float *bias, float *y,
                                             bool codes, float *pooled, float *workspace,
                                             size_t per_thread)
{
    forward_batch(s, x, w, bias, true, true, y, codes, pooled, workspace, per_thread);
}

/* lanes[b][jj] += dy[o0+b, p:p+16] * shifted[c, j0+jj, p + i*out_w :+16] over
 * the n_images images' copies (image_floats apart) and dy (dy_stride apart):
 * OB + J loads per OB*J FMAs, the sums loaded and stored once.  `copies`
 * points at shifted[c, j0] + i*out_w of the first image, dy_block at
 * dy[o0]; the lanes of output channel o0+b lie b*o_stride on. */
AVX512_INLINE void weight_block(const flat_geom *g, const float *copies, const float *dy_block,
                                int n_images, size_t image_floats, size_t dy_stride,
                                bool fresh, float *lanes, size_t o_stride, const int OB,
                                const int J)
{
    __m512 acc[WEIGHT_OB][WEIGHT_J];
    #pragma GCC unroll 4
    for (int b = 0; b < OB; b++)
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            acc[b][jj] = fresh ? _mm512_setzero_ps()
                               : _mm512_loadu_ps(lanes + b * o_stride + jj * VEC);
    /* The full vectors of every image in one loop (SimpleCNN's 6 -> 16
     * layer has 4 an image: a loop per image left, mispredicted, every 80
     * FMAs), then each image's partial vector. */
    int full = g->area / VEC, total = n_images * full, v = 0;
    const float *src = copies, *d = dy_block;
    for (int t = 0; t < total; t++) {
        /* dy in registers, each input loaded once for OB FMAs (gcc folds a
         * load into every FMA that uses it unless told not to: OB loads
         * each, and the kernel was load-bound) */
        __m512 dv[WEIGHT_OB];
        #pragma GCC unroll 4
        for (int b = 0; b < OB; b++)
            dv[b] = _mm512_loadu_ps(d + (size_t)b * g->area + v * VEC);
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++) {
            __m512 xv = _mm512_loadu_ps(src + jj * g->copy + v * VEC);
            in_register(&xv);
            #pragma GCC unroll 4
            for (int b = 0; b < OB; b++)
                acc[b][jj] = _mm512_fmadd_ps(dv[b], xv, acc[b][jj]);
        }
        if (++v == full) {
            v = 0;
            src += image_floats;
            d += dy_stride;
        }
    }
    __mmask16 tail = vector_mask(g, full);
    for (int image = 0; full < g->n_vec && image < n_images; image++) {
        /* both operands zero past the plane: +0 products */
        const float *src_tail = copies + image * image_floats + full * VEC;
        const float *d_tail = dy_block + image * dy_stride + full * VEC;
        __m512 xv[WEIGHT_J];
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            xv[jj] = _mm512_maskz_loadu_ps(tail, src_tail + jj * g->copy);
        #pragma GCC unroll 4
        for (int b = 0; b < OB; b++) {
            __m512 dv = _mm512_maskz_loadu_ps(tail, d_tail + (size_t)b * g->area);
            #pragma GCC unroll 5
            for (int jj = 0; jj < J; jj++)
                acc[b][jj] = _mm512_fmadd_ps(dv, xv[jj], acc[b][jj]);
        }
    }
    #pragma GCC unroll 4
    for (int b = 0; b < OB; b++)
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            _mm512_storeu_ps(lanes + b * o_stride + jj * VEC, acc[b][jj]);
}

typedef void (*weight_block_fn)(const flat_geom *g, const float *copies, const float *dy_block,
                                int n_images, size_t image_floats, size_t dy_stride, bool fresh,
                                float *lanes, size_t o_stride);

#define WEIGHT_BLOCK(OB, J)                                                                   \
    static AVX512 void weight_##OB##_##J(const flat_geom *g, const float *copies,              \
                                         const float *dy_block, int n_images,                  \
                                         size_t image_floats, size_t dy_stride, bool fresh,    \
                                         float *lanes, size_t o_stride)                        \
    {                                                                                         \
        weight_block(g, copies, dy_block, n_images, image_floats, dy_stride, fresh, lanes,    \
                     o_stride, OB, J);                                                        \
    }
#define WEIGHT_BLOCKS(OB) WEIGHT_BLOCK(OB, 1) WEIGHT_BLOCK(OB, 2) WEIGHT_BLOCK(OB, 3) \
    WEIGHT_BLOCK(OB, 4) WEIGHT_BLOCK(OB, 5)
WEIGHT_BLOCKS(1)
WEIGHT_BLOCKS(2)
WEIGHT_BLOCKS(3)
WEIGHT_BLOCKS(4)

#define WEIGHT_ROW(OB) {weight_##OB##_1, weight_##OB##_2, weight_##OB##_3, weight_##OB##_4, \
                        weight_##OB##_5}
static const weight_block_fn weight_blocks[WEIGHT_OB][WEIGHT_J] = {
    WEIGHT_ROW(1), WEIGHT_ROW(2), WEIGHT_ROW(3), WEIGHT_ROW(4),
};

void ct_cpu_conv2d_flat_weight_group(const ct_conv2d_shape *s, int n_images, const float *x,
                                     const float *dy, bool fresh, float *shifted, float *lanes)
{
    flat_geom g = geom_of(s);
    size_t in_image = (size_t)g.in_c * g.in_h * g.in_w, out_image = (size_t)g.out_c * g.area;
    size_t image_floats = ct_cpu_conv2d_flat_image_floats(s);
    for (int k = 0; k < n_images; k++)
        shift_image(&g, x + k * in_image, shifted + k * image_floats);
    /* A block reads WEIGHT_J copies and WEIGHT_OB dy planes of each image:
     * as many images a pass as keep that in L1 (SimpleCNN's 6 -> 16 layer:
     * all 8; its 1 -> 6 layer's planes of 576: one, where 8 took 1.7x as
     * long, streaming from L2). */
    size_t block_floats = (size_t)(WEIGHT_J + WEIGHT_OB) * g.area;
    int pass = (int)(L1_FLOATS / block_floats);
    pass = pass < 1 ? 1 : pass;
    int area = g.kh * g.kw, n_blocks = (g.out_c + WEIGHT_OB - 1) / WEIGHT_OB;
    size_t o_stride = (size_t)g.in_c * area * VEC;
    for (int k0 = 0; k0 < n_images; k0 += pass) {
        int images = n_images - k0 < pass ? n_images - k0 : pass;
        const float *dy_pass = dy + k0 * out_image;
        const float *shifted_pass = shifted + k0 * image_floats;
        for (int block = 0; block < n_blocks; block++) {
            int o0 = block * g.out_c / n_blocks, o1 = (block + 1) * g.out_c / n_blocks;
            for (int c = 0; c < g.in_c; c++)
                for (int i = 0; i < g.kh; i++)
                    for (int j0 = 0; j0 < g.kw; j0 += WEIGHT_J) {
                        int jn = g.kw - j0 < WEIGHT_J ? g.kw - j0 : WEIGHT_J;
                        const float *copies = shifted_pass + ((size_t)c * g.kw + j0) * g.copy +
                                              (size_t)i * g.out_w;
                        float *at = lanes + (size_t)o0 * o_stride +
                                    ((size_t)c * area + i * g.kw + j0) * VEC;
                        weight_blocks[o1 - o0 - 1][jn - 1](
                            &g, copies, dy_pass + (size_t)o0 * g.area, images, image_floats,
                            out_image, fresh && k0 == 0, at, o_stride);
                    }
        }
    }
}

#endif
