/*
 * Backward data of the direct convolution (stride 1, undilated, one group)
 * as a scatter of dy through the kernel, on AVX-512:
 *
 *   full[c, y, x] = sum_{o,i,j} w[o,c,i,j] * dy[o, y-i, x-j]
 *   dx[c, y, x]   = full[c, y + pad_h, x + pad_w]
 *
 * The forward-shaped kernel (conv_avx2.c) computes dx as a convolution of
 * dy padded by k-1: on SimpleCNN's 6 -> 16 layer (dy 8x8, dx 12x12) more
 * than half of its products meet that padding, and a 12-wide row fills one
 * and a half vectors of 8.  Here every product is one of the sum's:
 *
 *   acc[b][j] += dy[o, y0-i : y0-i+R, :] * w[o, c0+b, i, j]
 *
 * for one block of full's rows [y0, y0+R) and channels c0..c0+CB-1: a
 * vector of 16 lanes holds R rows of dy (R = 2 where dy's rows are at most
 * 8 wide, each padded to 8; else one row, or a 16-wide piece of one), so
 * acc[b][j] holds row y0+r, columns j.. of full, shifted by the kernel
 * column j.  The dy rows are read from a copy with one zero row above and
 * below and zeros past each row's end, so a block's two rows need no
 * bounds.  CB x KW accumulators (at most 24 of the 32 registers), one dy
 * load and CB x KW broadcast weights (folded into the FMAs) per CB x KW
 * FMAs.  When o and i are done, the KW shifted vectors are added (j in
 * increasing order; with two rows a vector, first to each other in
 * registers) into a zeroed copy of full; every full value sums its
 * products over o, then i, in increasing order.  Threads take whole
 * images: the bits do not depend on their number.
 */
#include "cpu/conv_scatter.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "cpu/threads.h"

#define AVX512 __attribute__((target("avx512f")))
#define AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

enum {
    LANES = 16,
    MAX_KW = 7,
    MAX_ACC = 24,     /* CB x KW accumulators */
    SLACK = LANES,    /* floats after full's rows: a block's last add may pass them */
    ALIGN_FLOATS = 16,
};

/* Where the rows go: dy's copy [out_c][h + 2][pitch], full [in_c][rows][full_w]. */
typedef struct scatter_geom {
    int out_c, in_c, h, w, kh, kw;
    int pitch;       /* floats per dy row in the copy: 8 (two rows a vector) or a multiple of 16 */
    int rows_per;    /* R: dy rows in a vector */
    int full_h, full_w, full_rows; /* full's rows (h + kh - 1), its row width, rows allocated */
    int cb;          /* channels per register block */
} scatter_geom;

static size_t round_floats(size_t count)
{
    return (count + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

static scatter_geom geom_of(const ct_conv2d_shape *s)
{
    scatter_geom g = {.out_c = s->out_channels, .in_c = s->in_channels, .h = s->out_h,
                      .w = s->out_w, .kh = s->kernel_h, .kw = s->kernel_w};
    g.pitch = g.w <= LANES / 2 ? LANES / 2 : (g.w + LANES - 1) / LANES * LANES;
    g.rows_per = g.pitch == LANES / 2 ? 2 : 1;
    g.full_h = g.h + g.kh - 1;
    g.full_w = g.pitch + g.kw - 1;
    g.full_rows = (g.full_h + g.rows_per - 1) / g.rows_per * g.rows_per;
    g.cb = MAX_ACC / g.kw < 4 ? MAX_ACC / g.kw : 4;
    return g;
}

/* Where dy's rows fill at least 3/4 of the lanes they take: with 10-wide
 * rows (6 of 16 lanes idle) the scatter measured 10% slower than the
 * forward-shaped kernel, with 8 and 32 it was 1.5x and 1.3x faster
 * (docs/perf.md). */
bool ct_cpu_conv2d_scatter_fits(const ct_conv2d_shape *s)
{
    if (!(ct_cpu_simd_avx512() && s->groups == 1 && s->stride_h == 1 && s->stride_w == 1 &&
          s->dilation_h == 1 && s->dilation_w == 1 && s->pad_h < s->kernel_h &&
          s->pad_w < s->kernel_w && s->kernel_w <= MAX_KW && s->out_w > 0))
        return false;
    scatter_geom g = geom_of(s);
    return 4 * g.w >= 3 * g.pitch;
}

static size_t dy_floats(const scatter_geom *g)
{
    return round_floats((size_t)g->out_c * (g->h + 2) * g->pitch);
}

static size_t full_floats(const scatter_geom *g)
{
    return round_floats((size_t)g->in_c * g->full_rows * g->full_w + SLACK);
}

size_t ct_cpu_conv2d_scatter_thread_floats(const ct_conv2d_shape *s)
{
    scatter_geom g = geom_of(s);
    return dy_floats(&g) + full_floats(&g);
}

/* Two 8-wide rows (lanes 0-7 and 8-15 of acc[j]) shifted right by j and
 * added in registers, j in increasing order, then into full's two rows
 * (full_w <= 16 floats each): full[r, x] += sum_j acc[j][8r + x - j].
 * Adding each shifted vector into full in memory instead made every load
 * wait for the store before it, which it overlaps by 7 of 8 floats (store
 * forwarding fails on a partial overlap): a third of this kernel's time. */
AVX512_INLINE void add_two_rows(const __m512 *acc, float *f, int full_w, const int KW)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 top = _mm512_setzero_ps(), bottom = _mm512_setzero_ps();
    #pragma GCC unroll 7
    for (int j = 0; j < KW; j++) {
        __mmask16 lanes = (__mmask16)(0xffu << j);
        __m512i from = _mm512_sub_epi32(iota, _mm512_set1_epi32(j));
        __m512 t = _mm512_maskz_permutexvar_ps(lanes, from, acc[j]);
        __m512 u = _mm512_maskz_permutexvar_ps(
            lanes, _mm512_add_epi32(from, _mm512_set1_epi32(LANES / 2)), acc[j]);
        top = j == 0 ? t : _mm512_add_ps(top, t);
        bottom = j == 0 ? u : _mm512_add_ps(bottom, u);
    }
    __mmask16 row = (__mmask16)((1u << full_w) - 1);
    _mm512_mask_storeu_ps(f, row, _mm512_add_ps(_mm512_maskz_loadu_ps(row, f), top));
    _mm512_mask_storeu_ps(f + full_w, row,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(row, f + full_w), bottom));
}

/* One block: full[c0+b, y0.., col0 + j + lane] += the products of every o, i. */
AVX512_INLINE void scatter_block(const scatter_geom *g, const float *dy_pad, const float *w,
                                 float *full, int c0, int y0, int col0, const int CB,
                                 const int KW)
{
    __m512 acc[4][MAX_KW];
    #pragma GCC unroll 4
    for (int b = 0; b < CB; b++)
        #pragma GCC unroll 7
        for (int j = 0; j < KW; j++)
            acc[b][j] = _mm512_setzero_ps();
    int i_lo = y0 - g->h + 1 > 0 ? y0 - g->h + 1 : 0;
    int i_hi = y0 + g->rows_per - 1 < g->kh - 1 ? y0 + g->rows_per - 1 : g->kh - 1;
    size_t area = (size_t)g->kh * KW, plane = (size_t)(g->h + 2) * g->pitch;
    for (int o = 0; o < g->out_c; o++) {
        const float *w_o = w + ((size_t)o * g->in_c + c0) * area;
        const float *dy_o = dy_pad + o * plane + col0;
        for (int i = i_lo; i <= i_hi; i++) {
            /* rows y0-i.., stored one down (the zero row above) */
            __m512 dv = _mm512_loadu_ps(dy_o + (size_t)(y0 - i + 1) * g->pitch);
            const float *w_i = w_o + (size_t)i * KW;
            #pragma GCC unroll 4
            for (int b = 0; b < CB; b++)
                #pragma GCC unroll 7
                for (int j = 0; j < KW; j++)
                    acc[b][j] = _mm512_fmadd_ps(dv, _mm512_set1_ps(w_i[b * area + j]),
                                                acc[b][j]);
        }
    }
    #pragma GCC unroll 4
    for (int b = 0; b < CB; b++) {
        float *f = full + ((size_t)(c0 + b) * g->full_rows + y0) * g->full_w + col0;
        if (g->rows_per == 2) {
            add_two_rows(acc[b], f, g->full_w, KW);
            continue;
        }
        #pragma GCC unroll 7
        for (int j = 0; j < KW; j++)
            _mm512_storeu_ps(f + j, _mm512_add_ps(_mm512_loadu_ps(f + j), acc[b][j]));
    }
}

typedef void (*scatter_block_fn)(const scatter_geom *g, const float *dy_pad, const float *w,
                                 float *full, int c0, int y0, int col0);

#define SCATTER_BLOCK(CB, KW)                                                               \
    static AVX512 void scatter_block_##CB##_##KW(const scatter_geom *g, const float *dy_pad, \
                                                 const float *w, float *full, int c0, int y0, \
                                                 int col0)                                  \
    {                                                                                       \
        scatter_block(g, dy_pad, w, full, c0, y0, col0, CB, KW);                            \
    }
#define SCATTER_BLOCKS(KW) SCATTER_BLOCK(1, KW) SCATTER_BLOCK(2, KW) SCATTER_BLOCK(3, KW) \
    SCATTER_BLOCK(4, KW)
SCATTER_BLOCKS(1)
SCATTER_BLOCKS(2)
SCATTER_BLOCKS(3)
SCATTER_BLOCKS(4)
SCATTER_BLOCKS(5)
SCATTER_BLOCKS(6)
SCATTER_BLOCKS(7)

#define SCATTER_ROW(KW) {scatter_block_1_##KW, scatter_block_2_##KW, scatter_block_3_##KW, \
                         scatter_block_4_##KW}
static const scatter_block_fn scatter_blocks[MAX_KW][4] = {
    SCATTER_ROW(1), SCATTER_ROW(2), SCATTER_ROW(3), SCATTER_ROW(4),
    SCATTER_ROW(5), SCATTER_ROW(6), SCATTER_ROW(7),
};

/* dst[r * dst_pitch + k] = src[r * src_pitch + k] for r < rows, k < width:
 * one copy where both are contiguous, else masked vector stores a row
 * (a call to memcpy per 8- or 12-float row was an eighth of this
 * kernel's time on SimpleCNN's conv2). */
static AVX512 void copy_rows(float *dst, size_t dst_pitch, const float *src, size_t src_pitch,
                             int rows, int width)
{
    if (dst_pitch == (size_t)width && src_pitch == (size_t)width) {
        memcpy(dst, src, sizeof(float) * (size_t)rows * (size_t)width);
        return;
    }
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < width; k += LANES) {
            int left = width - k;
            __mmask16 lanes = left >= LANES ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            _mm512_mask_storeu_ps(dst + r * dst_pitch + k, lanes,
                                  _mm512_maskz_loadu_ps(lanes, src + r * src_pitch + k));
        }
}

/* dx of one image from its dy, through the thread's dy copy and full. */
static void scatter_image(const scatter_geom *g, const ct_conv2d_shape *s, const float *dy,
                          const float *w, float *dx, float *dy_pad, float *full)
{
    memset(dy_pad, 0, sizeof(float) * dy_floats(g));
    for (int o = 0; o < g->out_c; o++)
        copy_rows(dy_pad + ((size_t)o * (g->h + 2) + 1) * g->pitch, (size_t)g->pitch,
                  dy + (size_t)o * g->h * g->w, (size_t)g->w, g->h, g->w);
    memset(full, 0, sizeof(float) * full_floats(g));
    int n_blocks = (g->in_c + g->cb - 1) / g->cb;
    for (int block = 0; block < n_blocks; block++) {
        int c0 = block * g->in_c / n_blocks, c1 = (block + 1) * g->in_c / n_blocks;
        for (int y0 = 0; y0 < g->full_h; y0 += g->rows_per)
            for (int col0 = 0; col0 < g->pitch; col0 += LANES / g->rows_per)
                scatter_blocks[g->kw - 1][c1 - c0 - 1](g, dy_pad, w, full, c0, y0, col0);
    }
    for (int c = 0; c < g->in_c; c++)
        copy_rows(dx + (size_t)c * s->in_h * s->in_w, (size_t)s->in_w,
                  full + ((size_t)c * g->full_rows + s->pad_h) * g->full_w + s->pad_w,
                  (size_t)g->full_w, s->in_h, s->in_w);
}

typedef struct scatter_job {
    const ct_conv2d_shape *s;
    const float *dy, *w;
    float *dx, *workspace;
    size_t per_thread;
} scatter_job;

/* One thread's images of ct_cpu_conv2d_scatter_backward_data. */
static void scatter_part(void *arg)
{
    const scatter_job *j = arg;
    const ct_conv2d_shape *s = j->s;
    scatter_geom g = geom_of(s);
    size_t dy_image = (size_t)s->out_channels * s->out_h * s->out_w;
    size_t dx_image = (size_t)s->in_channels * s->in_h * s->in_w;
    float *dy_pad = j->workspace + (size_t)ct_cpu_thread_num() * j->per_thread;
    float *full = dy_pad + dy_floats(&g);
    int64_t first, last;
    ct_cpu_split(s->n_batch, &first, &last);
    for (int64_t n = first; n < last; n++)
        scatter_image(&g, s, j->dy + n * dy_image, j->w, j->dx + n * dx_image, dy_pad, full);
}

void ct_cpu_conv2d_scatter_backward_data(const ct_conv2d_shape *s, const float *dy,
                                         const float *w, float *dx, float *workspace,
                                         size_t per_thread)
{
    scatter_job job = {s, dy, w, dx, workspace, per_thread};
    ct_cpu_parallel(ct_cpu_max_threads(), scatter_part, &job);
}

#endif
