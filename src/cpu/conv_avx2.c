/*
 * Direct 2-D convolution with AVX2 + FMA: the fast path for stride-1,
 * undilated, ungrouped convolutions with few input channels (SimpleCNN's
 * 1->6 and 6->16 5x5 layers), where im2col + GEMM spends its time copying
 * columns and in GEMMs too small for BLAS.  conv.c decides when it applies
 * (ct_cpu_conv2d_direct_fits) and keeps im2col + GEMM as the reference.
 *
 * Threads split the batch: each takes whole images and copies one at a time
 * into a zero-padded buffer of its own (its slice of the workspace), so the
 * inner loops read 8 outputs' inputs with one unaligned load, no bounds checks:
 *   forward:         y[o, oh, ow:ow+8] = b[o] + sum_{c,i,j} w[o,c,i,j] * xp[c, oh+i, ow+j:ow+j+8]
 *                    one register block: up to 4 output channels x up to 4 vectors of 8
 *                    outputs (AVX2), 8 x 3 or 6 x 4 (AVX-512VL's 32 registers)
 *   backward data:   the forward of dy padded by (k-1-p), with the kernel
 *                    flipped and transposed: wt[c,o,i,j] = w[o,c,KH-1-i,KW-1-j]
 *   backward weight: conv_weight_avx2.c
 * Accumulation: all outputs are written with =.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "core/error.h"
#include "cpu/conv_channels.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_direct_impl.h"
#include "cpu/conv_flat.h"
#include "cpu/conv_scatter.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"

/* The forward's register blocks with AVX-512VL's 32 registers: up to 8
 * output channels and WIDE_ACC accumulators (conv1's 6 channels x 4 vectors:
 * 10 loads per 24 FMAs instead of 7 per 12). */
enum { WIDE_OB = 8, WIDE_ACC = 24 };

/* A vector of up to 8 outputs: where its inputs start in the padded plane,
 * where it goes in the output plane, and how many of its lanes are real. */
typedef struct out_vector {
    int in_off, out_off, lanes;
} out_vector;

bool ct_cpu_conv2d_direct_fits(const ct_conv2d_shape *s)
{
    int depth = s->in_channels * s->kernel_h * s->kernel_w;
    return s->groups == 1 && s->kernel_h * s->kernel_w > 1 && s->stride_h == 1 && s->stride_w == 1 &&
           s->dilation_h == 1 && s->dilation_w == 1 && s->pad_h < s->kernel_h &&
           s->pad_w < s->kernel_w && depth <= CT_CONV_DIRECT_MAX_DEPTH &&
           s->out_channels * depth <= CT_CONV_DIRECT_MAX_WEIGHTS && s->out_w >= LANES / 2;
}

/* Backward data as a forward pass over dy padded by (k-1-p). */
static plane_geom backward_data_geom(const ct_conv2d_shape *s)
{
    plane_geom g = {s->out_channels, s->out_h + 2 * (s->kernel_h - 1 - s->pad_h),
                    s->out_w + 2 * (s->kernel_w - 1 - s->pad_w), s->kernel_h - 1 - s->pad_h,
                    s->out_h, s->in_channels, s->in_h,
                    s->in_w, s->kernel_h, s->kernel_w, false, false};
    return g;
}

/* Per thread: a padded image (forward), a padded dy image (backward data),
 * or WEIGHT_GROUP padded images and the 8-lane weight sums (backward
 * weight).  Shared, after the threads: the flipped kernel, or the chunks'
 * sums. */
size_t ct_cpu_conv_direct_thread_floats(const ct_conv2d_shape *s)
{
    plane_geom f = forward_geom(s), b = backward_data_geom(s);
    size_t image = padded_floats(f.in_c, f.hp, f.wp), dy_image = padded_floats(b.in_c, b.hp, b.wp);
    size_t weight = WEIGHT_GROUP * image + round_floats(weight_count(s) * LANES);
    size_t most = image > dy_image ? image : dy_image;
    size_t scatter = ct_cpu_conv2d_scatter_fits(s) ? ct_cpu_conv2d_scatter_thread_floats(s) : 0;
    most = most > scatter ? most : scatter;
    /* sized whether or not this CPU takes the 16-float kernels now */
    size_t flat = ct_cpu_conv2d_flat_shape_fits(s) ? ct_cpu_conv2d_flat_thread_floats(s) : 0;
    most = most > flat ? most : flat;
    size_t channels =
        ct_cpu_conv2d_channels_shape_fits(s) ? ct_cpu_conv2d_channels_thread_floats(s) : 0;
    most = most > channels ? most : channels;
    return most > weight ? most : weight;
}

size_t ct_cpu_conv2d_direct_workspace(const ct_conv2d_shape *s, int n_threads)
{
    size_t shared = round_floats(weight_count(s) * WEIGHT_CHUNKS) + bias_sum_floats(s);
    size_t per_thread = ct_cpu_conv_direct_thread_floats(s);
    return sizeof(float) * (per_thread * (size_t)(n_threads > 0 ? n_threads : 1) + shared);
}

/* xp[c, top+h, left+w] = x[c, h, w], zeros around and SLACK zeros after. */
void ct_cpu_conv_direct_pad_image(int channels, int h, int w, int top, int left, int hp, int wp,
                      const float *x, float *xp)
{
    memset(xp, 0, sizeof(float) * ((size_t)channels * hp * wp + SLACK));
    for (int c = 0; c < channels; c++)
        for (int row = 0; row < h; row++)
            memcpy(xp + ((size_t)c * hp + top + row) * wp + left, x + ((size_t)c * h + row) * w,
                   sizeof(float) * (size_t)w);
}

/* PyTorch's max step on vectors: cand replaces cur where it is larger or NaN. */
AVX2_INLINE __m256 max_step(__m256 cur, __m256 cand)
{
    __m256 take = _mm256_or_ps(_mm256_cmp_ps(cand, cur, _CMP_GT_OQ),
                               _mm256_cmp_ps(cand, cand, _CMP_UNORD_Q));
    return _mm256_blendv_ps(cur, cand, take);
}

/* pooled[o0+b, q, p] = max over rows 2q, 2q+1 and columns 2p, 2p+1 of the
 * block's outputs, in window order (left before right, top before bottom),
 * so ties and NaNs come out as in pool.c. */
AVX2_INLINE void pooled_store(const plane_geom *g, __m256 acc[WIDE_OB][MAX_R], int o0,
                              const out_vector *vectors, float *pooled, const int OB,
                              const int R)
{
    size_t pool_plane = (size_t)(g->out_h / 2) * (g->out_w / 2);
    const __m256i even_lanes = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    #pragma GCC unroll 8
    for (int b = 0; b < OB; b++) {
        #pragma GCC unroll 2
        for (int k = 0; k < R / 2; k++) {
            __m256 top = acc[b][2 * k], bottom = acc[b][2 * k + 1];
            /* even lanes: max_step(left, right) of each column pair */
            top = max_step(top, _mm256_shuffle_ps(top, top, _MM_SHUFFLE(2, 3, 0, 1)));
            bottom = max_step(bottom, _mm256_shuffle_ps(bottom, bottom, _MM_SHUFFLE(2, 3, 0, 1)));
            __m128 out = _mm256_castps256_ps128(
                _mm256_permutevar8x32_ps(max_step(top, bottom), even_lanes));
            float *dst = pooled + (size_t)(o0 + b) * pool_plane + vectors[2 * k].out_off;
            if (vectors[2 * k].lanes == LANES / 2)
                _mm_storeu_ps(dst, out);
            else
                _mm_maskstore_ps(dst, _mm256_castsi256_si128(lane_mask(vectors[2 * k].lanes)), out);
        }
    }
}

/* One register block of the forward pass: outputs o0..o0+OB-1 at R vectors.
 * OB and R are constants at every call site, so the loops unroll and acc
 * lives in registers (OB*R <= 12 accumulators, 24 with AVX-512VL; R loads +
 * OB broadcasts per OB*R FMAs).  Every loop over b, r (and jj below) carries
 * `#pragma GCC unroll`: one such loop left rolled and gcc keeps acc in
 * memory, which made these kernels 2-3x slower (docs/perf.md). */
AVX2_INLINE void forward_block(const plane_geom *g, const float *xp, const float *w,
                               const float *bias, int o0, int i_lo, int i_hi,
                               const out_vector *vectors, float *y, const int OB, const int R)
{
    __m256 acc[WIDE_OB][MAX_R];
    int in_off[MAX_R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        in_off[r] = vectors[r].in_off;
    #pragma GCC unroll 8
    for (int b = 0; b < OB; b++) {
        __m256 init = bias ? _mm256_set1_ps(bias[o0 + b]) : _mm256_setzero_ps();
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            acc[b][r] = init;
    }
    int area = g->kh * g->kw;
    size_t w_stride = (size_t)g->in_c * area, plane = (size_t)g->hp * g->wp;
    const float *w_block = w + (size_t)o0 * w_stride;
    for (int c = 0; c < g->in_c; c++) {
        for (int i = i_lo; i < i_hi; i++) {
            const float *row = xp + c * plane + (size_t)i * g->wp;
            const float *w_row = w_block + (size_t)c * area + i * g->kw;
            for (int j = 0; j < g->kw; j++) {
                /* Keep the smaller of the two operand sets in registers:
                 * OB*R accumulators + min(OB, R) + 1 fits in 16 registers
                 * (32 with AVX-512VL). */
                if (OB < R) {
                    __m256 wv[WIDE_OB];
                    #pragma GCC unroll 8
                    for (int b = 0; b < OB; b++)
                        wv[b] = _mm256_broadcast_ss(w_row + b * w_stride + j);
                    #pragma GCC unroll 8
                    for (int r = 0; r < R; r++) {
                        __m256 xv = _mm256_loadu_ps(row + in_off[r] + j);
                        #pragma GCC unroll 8
                        for (int b = 0; b < OB; b++)
                            acc[b][r] = _mm256_fmadd_ps(wv[b], xv, acc[b][r]);
                    }
                } else {
                    __m256 xv[MAX_R];
                    #pragma GCC unroll 8
                    for (int r = 0; r < R; r++)
                        xv[r] = _mm256_loadu_ps(row + in_off[r] + j);
                    #pragma GCC unroll 8
                    for (int b = 0; b < OB; b++) {
                        __m256 wv = _mm256_broadcast_ss(w_row + b * w_stride + j);
                        #pragma GCC unroll 8
                        for (int r = 0; r < R; r++)
                            acc[b][r] = _mm256_fmadd_ps(wv, xv[r], acc[b][r]);
                    }
                }
            }
        }
    }
    size_t out_plane = (size_t)g->out_h * g->out_w;
    if (g->relu) {
        /* max(0, v) is v when v is NaN (maxps returns its second operand) */
        #pragma GCC unroll 8
        for (int b = 0; b < OB; b++)
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                acc[b][r] = _mm256_max_ps(_mm256_setzero_ps(), acc[b][r]);
    }
    if (g->pool) {
        pooled_store(g, acc, o0, vectors, y, OB, R);
        return;
    }
    #pragma GCC unroll 8
    for (int b = 0; b < OB; b++) {
        float *y_plane = y + (size_t)(o0 + b) * out_plane;
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (vectors[r].lanes == LANES)
                _mm256_storeu_ps(y_plane + vectors[r].out_off, acc[b][r]);
            else
                _mm256_maskstore_ps(y_plane + vectors[r].out_off, lane_mask(vectors[r].lanes),
                                    acc[b][r]);
        }
    }
}

typedef void (*forward_block_fn)(const plane_geom *g, const float *xp, const float *w,
                                 const float *bias, int o0, int i_lo, int i_hi,
                                 const out_vector *vectors, float *y);

#define FORWARD_BLOCK(OB, R)                                                                   \
    static AVX2 void forward_block_##OB##_##R(const plane_geom *g, const float *xp,            \
                                              const float *w, const float *bias, int o0,       \
                                              int i_lo, int i_hi, const out_vector *vectors,   \
                                              float *y)                                        \
    {                                                                                          \
        forward_block(g, xp, w, bias, o0, i_lo, i_hi, vectors, y, OB, R);                      \
    }
#define FORWARD_BLOCKS(OB) FORWARD_BLOCK(OB, 1) FORWARD_BLOCK(OB, 2) FORWARD_BLOCK(OB, 3) \
    FORWARD_BLOCK(OB, 4)
FORWARD_BLOCKS(1)
FORWARD_BLOCKS(2)
FORWARD_BLOCKS(3)
FORWARD_BLOCKS(4)

static const forward_block_fn forward_blocks[MAX_OB][MAX_R] = {
    {forward_block_1_1, forward_block_1_2, forward_block_1_3, forward_block_1_4},
    {forward_block_2_1, forward_block_2_2, forward_block_2_3, forward_block_2_4},
    {forward_block_3_1, forward_block_3_2, forward_block_3_3, forward_block_3_4},
    {forward_block_4_1, forward_block_4_2, forward_block_4_3, forward_block_4_4},
};

/* The same blocks compiled for AVX-512VL: the same 8-float products and
 * sums in the same order (the same bits), with 32 registers for up to
 * WIDE_ACC accumulators. */
#define WIDE_FORWARD(OB, R)                                                                    \
    static AVX512VL void wide_forward_##OB##_##R(const plane_geom *g, const float *xp,         \
                                                 const float *w, const float *bias, int o0,    \
                                                 int i_lo, int i_hi,                           \
                                                 const out_vector *vectors, float *y)          \
    {                                                                                          \
        forward_block(g, xp, w, bias, o0, i_lo, i_hi, vectors, y, OB, R);                      \
    }
#define WIDE_FORWARDS_3(OB) WIDE_FORWARD(OB, 1) WIDE_FORWARD(OB, 2) WIDE_FORWARD(OB, 3)
#define WIDE_FORWARDS(OB) WIDE_FORWARDS_3(OB) WIDE_FORWARD(OB, 4)
WIDE_FORWARDS(1)
WIDE_FORWARDS(2)
WIDE_FORWARDS(3)
WIDE_FORWARDS(4)
WIDE_FORWARDS(5)
WIDE_FORWARDS(6)
WIDE_FORWARDS_3(7)
WIDE_FORWARDS_3(8)

static const forward_block_fn wide_forward_blocks[WIDE_OB][MAX_R] = {
    {wide_forward_1_1, wide_forward_1_2, wide_forward_1_3, wide_forward_1_4},
    {wide_forward_2_1, wide_forward_2_2, wide_forward_2_3, wide_forward_2_4},
    {wide_forward_3_1, wide_forward_3_2, wide_forward_3_3, wide_forward_3_4},
    {wide_forward_4_1, wide_forward_4_2, wide_forward_4_3, wide_forward_4_4},
    {wide_forward_5_1, wide_forward_5_2, wide_forward_5_3, wide_forward_5_4},
    {wide_forward_6_1, wide_forward_6_2, wide_forward_6_3, wide_forward_6_4},
    {wide_forward_7_1, wide_forward_7_2, wide_forward_7_3, NULL},
    {wide_forward_8_1, wide_forward_8_2, wide_forward_8_3, NULL},
};

/* How an image's outputs are cut into register blocks: at most ob_max
 * output channels a block (split evenly), r_full(ob) vectors of 8 outputs. */
typedef struct block_tiling {
    bool wide;
    int ob_max;
} block_tiling;

static block_tiling tiling_for(void)
{
    bool wide = ct_cpu_simd_avx512();
    return (block_tiling){wide, wide ? WIDE_OB : MAX_OB};
}

/* Vectors a block of ob channels takes: within 12 accumulators (4 x 3)
 * on AVX2, WIDE_ACC with AVX-512VL (6 x 4, 8 x 3). */
static int tiling_vectors(block_tiling t, int ob)
{
    if (t.wide)
        return WIDE_ACC / ob < MAX_R ? WIDE_ACC / ob : MAX_R;
    return ob == MAX_OB ? 3 : MAX_R;
}

static forward_block_fn tiling_block(block_tiling t, int ob, int r)
{
    return t.wide ? wide_forward_blocks[ob - 1][r - 1] : forward_blocks[ob - 1][r - 1];
}

/* y[o, :, :] for one image from its padded input xp. */
static void forward_image(const plane_geom *g, const float *xp, const float *w,
                          const float *bias, float *y)
{
    block_tiling tiling = tiling_for();
    int n_vec = (g->out_w + LANES - 1) / LANES, n_vectors = g->out_h * n_vec;
    int n_blocks = channel_blocks(g->out_c, tiling.ob_max);
    for (int block = 0; block < n_blocks; block++) {
        int o0, o1;
        channel_block(g->out_c, tiling.ob_max, block, &o0, &o1);
        int ob = o1 - o0, r_full = tiling_vectors(tiling, ob);
        for (int v0 = 0; v0 < n_vectors; v0 += r_full) {
            int r = n_vectors - v0 < r_full ? n_vectors - v0 : r_full;
            out_vector vectors[MAX_R];
            for (int k = 0; k < r; k++) {
                int oh = (v0 + k) / n_vec, ow = (v0 + k) % n_vec * LANES;
                vectors[k] = (out_vector){oh * g->wp + ow, oh * g->out_w + ow,
                                          g->out_w - ow < LANES ? g->out_w - ow : LANES};
            }
            /* Kernel rows i that reach a data row for some output row of
             * the block; the others only meet padding zeros (backward data
             * pads dy by k-1-p: a third of its products are skipped). */
            int oh_first = v0 / n_vec, oh_last = (v0 + r - 1) / n_vec;
            int i_lo = g->top - oh_last > 0 ? g->top - oh_last : 0;
            int i_hi = g->top + g->rows - oh_first < g->kh ? g->top + g->rows - oh_first : g->kh;
            tiling_block(tiling, ob, r)(g, xp, w, bias, o0, i_lo, i_hi, vectors, y);
        }
    }
}

/* The 2x2/2 max pool of relu(y) for one image, pooled in registers (a
 * pooling pass over the conv output, even one image of it in L1, measured
 * slower: docs/perf.md).  A pool unit is 8 conv outputs in rows 2q and 2q+1
 * (two vectors, 4 pooled outputs).  On AVX2 a register block takes one unit
 * and 4 output channels when the channels come in fours (8 accumulators,
 * fewer passes over x: SimpleCNN conv2 2.04 ms vs 2.23 per 1000 images),
 * else two consecutive units and at most 3 channels (12 accumulators:
 * conv1's 6 channels, 1.40 ms vs 1.75); with AVX-512VL, up to 6 channels x
 * 2 units (24 accumulators; conv2 in blocks of 8 x 1 took 216 us a batch
 * of 64 on one thread, in 6 x 2 190, as its plain forward).
 * pooled: [out_c, out_h/2, out_w/2] */
static void forward_image_pooled(const plane_geom *g, const float *xp, const float *w,
                                 const float *bias, float *pooled)
{
    block_tiling tiling = tiling_for();
    bool fours = g->out_c % MAX_OB == 0;
    int pool_ob = tiling.wide ? WIDE_ACC / MAX_R : fours ? MAX_OB : MAX_OB - 1;
    int n_vec = (g->out_w + LANES - 1) / LANES, pooled_w = g->out_w / 2;
    int n_units = g->out_h / 2 * n_vec, n_blocks = channel_blocks(g->out_c, pool_ob);
    for (int block = 0; block < n_blocks; block++) {
        int o0, o1;
        channel_block(g->out_c, pool_ob, block, &o0, &o1);
        int units_max = tiling.wide ? tiling_vectors(tiling, o1 - o0) / 2
                                    : fours ? 1 : MAX_R / 2;
        for (int u0 = 0; u0 < n_units; u0 += units_max) {
            int units = n_units - u0 < units_max ? n_units - u0 : units_max;
            out_vector vectors[MAX_R];
            for (int k = 0; k < units; k++) {
                int q = (u0 + k) / n_vec, ow = (u0 + k) % n_vec * LANES;
                int real = g->out_w - ow < LANES ? g->out_w - ow : LANES;
                for (int row = 0; row < 2; row++)
                    vectors[2 * k + row] = (out_vector){(2 * q + row) * g->wp + ow,
                                                        q * pooled_w + ow / 2, real / 2};
            }
            int oh_first = 2 * (u0 / n_vec), oh_last = 2 * ((u0 + units - 1) / n_vec) + 1;
            int i_lo = g->top - oh_last > 0 ? g->top - oh_last : 0;
            int i_hi = g->top + g->rows - oh_first < g->kh ? g->top + g->rows - oh_first : g->kh;
            tiling_block(tiling, o1 - o0, 2 * units)(g, xp, w, bias, o0, i_lo, i_hi, vectors,
                                                     pooled);
        }
    }
}

/* out[n] = forward over padded in[n] for every image; `in` is [N, g.in_c, h, w]
 * before padding by (top, left).  With g->pool and y, y[n] is written too
 * and out[n] (where out is not NULL) pooled from it while it is in cache. */
static void forward_batch(const plane_geom *g, int n_batch, int h, int w, int top, int left,
                          const float *in, const float *weights, const float *bias, float *y,
                          float *out, float *workspace, size_t per_thread)
{
    size_t in_image = (size_t)g->in_c * h * w, y_image = (size_t)g->out_c * g->out_h * g->out_w;
    size_t out_image = g->pool ? (size_t)g->out_c * (g->out_h / 2) * (g->out_w / 2) : y_image;
    plane_geom unpooled = *g;
    unpooled.pool = false;
    ct_cpu_openmp_region();
#pragma omp parallel
    {
        int thread = ct_cpu_thread_num(), first, last;
        split_range(n_batch, thread, ct_cpu_team_size(), &first, &last);
        float *padded = workspace + (size_t)thread * per_thread;
        for (int n = first; n < last; n++) {
            const float *xp = in + n * in_image;
            if (!image_in_place(g, h, w, n, n_batch)) {
                ct_cpu_conv_direct_pad_image(g->in_c, h, w, top, left, g->hp, g->wp, xp, padded);
                xp = padded;
            }
            if (g->pool && y) {
                forward_image(&unpooled, xp, weights, bias, y + n * y_image);
                if (out)
                    ct_cpu_maxpool2x2_planes(g->out_c, g->out_h, g->out_w, y + n * y_image,
                                             out + n * out_image);
            } else {
                (g->pool ? forward_image_pooled : forward_image)(g, xp, weights, bias,
                                                                 out + n * out_image);
            }
        }
    }
}

void ct_cpu_conv2d_direct_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                  const float *bias, bool relu, float *y, void *workspace)
{
    if (ct_cpu_conv2d_flat_fits(s)) { /* every lane of a 16-float vector an output */
        ct_cpu_conv2d_flat_forward(s, x, w, bias, relu, y, workspace,
                                   ct_cpu_conv_direct_thread_floats(s));
        return;
    }
    plane_geom g = forward_geom(s);
    g.relu = relu;
    forward_batch(&g, s->n_batch, s->in_h, s->in_w, s->pad_h, s->pad_w, x, w, bias, NULL, y,
                  workspace, ct_cpu_conv_direct_thread_floats(s));
}

void ct_cpu_conv2d_direct_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                               const float *w, const float *bias, float *y,
                                               bool codes, float *pooled, void *workspace)
{
    if (ct_cpu_conv2d_flat_fits(s)) {
        ct_cpu_conv2d_flat_forward_relu_maxpool(s, x, w, bias, y, codes, pooled, workspace,
                                                ct_cpu_conv_direct_thread_floats(s));
        return;
    }
    plane_geom g = forward_geom(s);
    g.relu = g.pool = true;
    forward_batch(&g, s->n_batch, s->in_h, s->in_w, s->pad_h, s->pad_w, x, w, bias, y,
                  codes ? NULL : pooled, workspace, ct_cpu_conv_direct_thread_floats(s));
    /* codes: y's values first (no pool above), then the codes over them,
     * on one thread (an image's codes land on an earlier image's values) */
    if (codes)
        ct_cpu_maxpool2x2_planes_codes(s->n_batch * s->out_channels, s->out_h, s->out_w, y,
                                       pooled, (uint8_t *)y);
}

void ct_cpu_conv2d_direct_backward_data(const ct_conv2d_shape *s, const float *dy,
                                        const float *w, float *dx, void *workspace)
{
    size_t per_thread = ct_cpu_conv_direct_thread_floats(s);
    if (ct_cpu_conv2d_scatter_fits(s)) { /* every product a real one (conv_scatter.c) */
        ct_cpu_conv2d_scatter_backward_data(s, dy, w, dx, workspace, per_thread);
        return;
    }
    plane_geom g = backward_data_geom(s);
    int area = s->kernel_h * s->kernel_w, in_c = s->in_channels;
    /* wt[c, o, i, j] = w[o, c, KH-1-i, KW-1-j], after the threads' regions. */
    float *flipped = (float *)workspace + per_thread * (size_t)ct_cpu_max_threads();
    for (int o = 0; o < s->out_channels; o++)
        for (int c = 0; c < in_c; c++)
            for (int k = 0; k < area; k++)
                flipped[((size_t)c * s->out_channels + o) * area + (area - 1 - k)] =
                    w[((size_t)o * in_c + c) * area + k];
    forward_batch(&g, s->n_batch, s->out_h, s->out_w, s->kernel_h - 1 - s->pad_h,
                  s->kernel_w - 1 - s->pad_w, dy, flipped, NULL, NULL, dx, workspace,
                  per_thread);
}

#endif
