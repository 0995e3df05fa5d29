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
 *                    one register block: up to 4 output channels x up to 4 vectors of 8 outputs
 *   backward data:   the forward of dy padded by (k-1-p), with the kernel
 *                    flipped and transposed: wt[c,o,i,j] = w[o,c,KH-1-i,KW-1-j]
 *   backward weight: dw[o,c,i,j] = sum_{n,oh,ow} dy[n,o,oh,ow] * xp[n,c,oh+i,ow+j]
 *                    8-lane partial sums per chunk of images, then the chunks'
 *                    sums added in chunk order; with the bias gradient (fused,
 *                    graph/fuse.c) db[o] = sum_{n,oh,ow} dy[n,o,oh,ow] the same
 *                    way, each group's dy summed while the products left it in cache.
 * The batch is cut into WEIGHT_CHUNKS fixed chunks whatever the thread count,
 * so every result is the same bits for any number of threads.
 * Accumulation: all outputs are written with =.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "core/error.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_scatter.h"
#include "cpu/lanes.h"
#include "cpu/threads.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

enum {
    LANES = 8,          /* floats per AVX register */
    MAX_OB = 4,         /* output channels in a register block */
    MAX_R = 4,          /* vectors of outputs in a register block */
    WEIGHT_J = 3,       /* kernel columns in a backward-weight register block */
    WIDE_J = 5,         /* the same with AVX-512VL's 32 vector registers */
    SLACK = 2 * LANES,  /* zeros after a padded image: a tail vector may read past it */
    WEIGHT_CHUNKS = 8,  /* backward weight: fixed chunks of the batch */
    WEIGHT_GROUP = 4,   /* backward weight: images per pass over the lane sums */
    ALIGN_FLOATS = 16,  /* per-thread regions start on 64-byte boundaries */
};

/* The padded input of one image as the kernels see it, and the output. */
typedef struct plane_geom {
    int in_c, hp, wp;         /* padded input: [in_c, hp, wp] */
    int top, rows;            /* its rows [top, top+rows) hold data, the others zeros */
    int out_c, out_h, out_w;  /* output: [out_c, out_h, out_w] */
    int kh, kw;
    bool relu;                /* forward: store max(y, 0) */
    bool pool;                /* forward: store the 2x2/2 max pool of y instead */
} plane_geom;

/* A vector of up to 8 outputs: where its inputs start in the padded plane,
 * where it goes in the output plane, and how many of its lanes are real. */
typedef struct out_vector {
    int in_off, out_off, lanes;
} out_vector;

static size_t round_floats(size_t count)
{
    return (count + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

bool ct_cpu_conv2d_direct_fits(const ct_conv2d_shape *s)
{
    int depth = s->in_channels * s->kernel_h * s->kernel_w;
    return s->groups == 1 && s->kernel_h * s->kernel_w > 1 && s->stride_h == 1 && s->stride_w == 1 &&
           s->dilation_h == 1 && s->dilation_w == 1 && s->pad_h < s->kernel_h &&
           s->pad_w < s->kernel_w && depth <= CT_CONV_DIRECT_MAX_DEPTH &&
           s->out_channels * depth <= CT_CONV_DIRECT_MAX_WEIGHTS && s->out_w >= LANES / 2;
}

/* Floats of one padded image with its slack. */
static size_t padded_floats(int channels, int hp, int wp)
{
    return round_floats((size_t)channels * hp * wp + SLACK);
}

static plane_geom forward_geom(const ct_conv2d_shape *s)
{
    plane_geom g = {s->in_channels, s->in_h + 2 * s->pad_h, s->in_w + 2 * s->pad_w,
                    s->pad_h, s->in_h, s->out_channels, s->out_h, s->out_w, s->kernel_h, s->kernel_w, false, false};
    return g;
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

static size_t weight_count(const ct_conv2d_shape *s)
{
    return (size_t)s->out_channels * s->in_channels * s->kernel_h * s->kernel_w;
}

/* Per thread: a padded image (forward), a padded dy image (backward data),
 * or WEIGHT_GROUP padded images and the 8-lane weight sums (backward
 * weight).  Shared, after the threads: the flipped kernel, or the chunks'
 * sums. */
static size_t thread_floats(const ct_conv2d_shape *s)
{
    plane_geom f = forward_geom(s), b = backward_data_geom(s);
    size_t image = padded_floats(f.in_c, f.hp, f.wp), dy_image = padded_floats(b.in_c, b.hp, b.wp);
    size_t weight = WEIGHT_GROUP * image + round_floats(weight_count(s) * LANES);
    size_t most = image > dy_image ? image : dy_image;
    size_t scatter = ct_cpu_conv2d_scatter_fits(s) ? ct_cpu_conv2d_scatter_thread_floats(s) : 0;
    most = most > scatter ? most : scatter;
    return most > weight ? most : weight;
}

/* The chunks' bias sums (doubles) after their weight sums. */
static size_t bias_sum_floats(const ct_conv2d_shape *s)
{
    return round_floats((size_t)s->out_channels * WEIGHT_CHUNKS * 2);
}

size_t ct_cpu_conv2d_direct_workspace(const ct_conv2d_shape *s, int n_threads)
{
    size_t shared = round_floats(weight_count(s) * WEIGHT_CHUNKS) + bias_sum_floats(s);
    return sizeof(float) * (thread_floats(s) * (size_t)(n_threads > 0 ? n_threads : 1) + shared);
}

/* xp[c, top+h, left+w] = x[c, h, w], zeros around and SLACK zeros after. */
static void pad_image(int channels, int h, int w, int top, int left, int hp, int wp,
                      const float *x, float *xp)
{
    memset(xp, 0, sizeof(float) * ((size_t)channels * hp * wp + SLACK));
    for (int c = 0; c < channels; c++)
        for (int row = 0; row < h; row++)
            memcpy(xp + ((size_t)c * hp + top + row) * wp + left, x + ((size_t)c * h + row) * w,
                   sizeof(float) * (size_t)w);
}

AVX2_INLINE __m256i lane_mask(int lanes)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
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
AVX2_INLINE void pooled_store(const plane_geom *g, __m256 acc[MAX_OB][MAX_R], int o0,
                              const out_vector *vectors, float *pooled, const int OB,
                              const int R)
{
    size_t pool_plane = (size_t)(g->out_h / 2) * (g->out_w / 2);
    const __m256i even_lanes = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    #pragma GCC unroll 4
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
 * lives in registers (OB*R <= 12 accumulators, R loads + OB broadcasts per
 * OB*R FMAs).  Every loop over b, r (and jj below) carries
 * `#pragma GCC unroll`: one such loop left rolled and gcc keeps acc in
 * memory, which made these kernels 2-3x slower (docs/perf.md). */
AVX2_INLINE void forward_block(const plane_geom *g, const float *xp, const float *w,
                               const float *bias, int o0, int i_lo, int i_hi,
                               const out_vector *vectors, float *y, const int OB, const int R)
{
    __m256 acc[MAX_OB][MAX_R];
    int in_off[MAX_R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        in_off[r] = vectors[r].in_off;
    #pragma GCC unroll 4
    for (int b = 0; b < OB; b++) {
        __m256 init = bias ? _mm256_set1_ps(bias[o0 + b]) : _mm256_setzero_ps();
        #pragma GCC unroll 4
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
                 * OB*R accumulators + min(OB, R) + 1 fits in 16 registers. */
                if (OB < R) {
                    __m256 wv[MAX_OB];
                    #pragma GCC unroll 4
                    for (int b = 0; b < OB; b++)
                        wv[b] = _mm256_broadcast_ss(w_row + b * w_stride + j);
                    #pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        __m256 xv = _mm256_loadu_ps(row + in_off[r] + j);
                        #pragma GCC unroll 4
                        for (int b = 0; b < OB; b++)
                            acc[b][r] = _mm256_fmadd_ps(wv[b], xv, acc[b][r]);
                    }
                } else {
                    __m256 xv[MAX_R];
                    #pragma GCC unroll 4
                    for (int r = 0; r < R; r++)
                        xv[r] = _mm256_loadu_ps(row + in_off[r] + j);
                    #pragma GCC unroll 4
                    for (int b = 0; b < OB; b++) {
                        __m256 wv = _mm256_broadcast_ss(w_row + b * w_stride + j);
                        #pragma GCC unroll 4
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
        #pragma GCC unroll 4
        for (int b = 0; b < OB; b++)
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[b][r] = _mm256_max_ps(_mm256_setzero_ps(), acc[b][r]);
    }
    if (g->pool) {
        pooled_store(g, acc, o0, vectors, y, OB, R);
        return;
    }
    #pragma GCC unroll 4
    for (int b = 0; b < OB; b++) {
        float *y_plane = y + (size_t)(o0 + b) * out_plane;
        #pragma GCC unroll 4
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

/* Output channels o0..o1 of block `block`: the channels split as evenly as
 * blocks of at most max_ob allow (max_ob 4: 6 -> 3+3, 10 -> 3+3+4). */
static int channel_blocks(int channels, int max_ob)
{
    return (channels + max_ob - 1) / max_ob;
}

static void channel_block(int channels, int max_ob, int block, int *o0, int *o1)
{
    int n_blocks = channel_blocks(channels, max_ob);
    *o0 = block * channels / n_blocks;
    *o1 = (block + 1) * channels / n_blocks;
}

/* y[o, :, :] for one image from its padded input xp. */
static void forward_image(const plane_geom *g, const float *xp, const float *w,
                          const float *bias, float *y)
{
    int n_vec = (g->out_w + LANES - 1) / LANES, n_vectors = g->out_h * n_vec;
    int n_blocks = channel_blocks(g->out_c, MAX_OB);
    for (int block = 0; block < n_blocks; block++) {
        int o0, o1;
        channel_block(g->out_c, MAX_OB, block, &o0, &o1);
        int ob = o1 - o0, r_full = ob == MAX_OB ? 3 : MAX_R;
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
            forward_blocks[ob - 1][r - 1](g, xp, w, bias, o0, i_lo, i_hi, vectors, y);
        }
    }
}

/* The 2x2/2 max pool of relu(y) for one image, pooled in registers (a
 * pooling pass over the conv output, even one image of it in L1, measured
 * slower: docs/perf.md).  A pool unit is 8 conv outputs in rows 2q and 2q+1
 * (two vectors, 4 pooled outputs).  A register block takes one unit and 4
 * output channels when the channels come in fours (8 accumulators, fewer
 * passes over x: SimpleCNN conv2 2.04 ms vs 2.23 per 1000 images), else two
 * consecutive units and at most 3 channels (12 accumulators: conv1's 6
 * channels, 1.40 ms vs 1.75).  pooled: [out_c, out_h/2, out_w/2] */
static void forward_image_pooled(const plane_geom *g, const float *xp, const float *w,
                                 const float *bias, float *pooled)
{
    bool fours = g->out_c % MAX_OB == 0;
    int pool_ob = fours ? MAX_OB : MAX_OB - 1, units_max = fours ? 1 : MAX_R / 2;
    int n_vec = (g->out_w + LANES - 1) / LANES, pooled_w = g->out_w / 2;
    int n_units = g->out_h / 2 * n_vec, n_blocks = channel_blocks(g->out_c, pool_ob);
    for (int block = 0; block < n_blocks; block++) {
        int o0, o1;
        channel_block(g->out_c, pool_ob, block, &o0, &o1);
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
            forward_blocks[o1 - o0 - 1][2 * units - 1](g, xp, w, bias, o0, i_lo, i_hi, vectors,
                                                       pooled);
        }
    }
}

/* The images [first, last) of n split evenly over `parts`. */
static void split_range(int n, int part, int parts, int *first, int *last)
{
    *first = (int)((long long)n * part / parts);
    *last = (int)((long long)n * (part + 1) / parts);
}

/* out[n] = forward over padded in[n] for every image; `in` is [N, g.in_c, h, w]
 * before padding by (top, left). */
static void forward_batch(const plane_geom *g, int n_batch, int h, int w, int top, int left,
                          const float *in, const float *weights, const float *bias, float *out,
                          float *workspace, size_t per_thread)
{
    size_t in_image = (size_t)g->in_c * h * w;
    size_t out_image = g->pool ? (size_t)g->out_c * (g->out_h / 2) * (g->out_w / 2)
                               : (size_t)g->out_c * g->out_h * g->out_w;
#pragma omp parallel
    {
        int thread = ct_cpu_thread_num(), first, last;
        split_range(n_batch, thread, ct_cpu_team_size(), &first, &last);
        float *xp = workspace + (size_t)thread * per_thread;
        for (int n = first; n < last; n++) {
            pad_image(g->in_c, h, w, top, left, g->hp, g->wp, in + n * in_image, xp);
            (g->pool ? forward_image_pooled : forward_image)(g, xp, weights, bias,
                                                             out + n * out_image);
        }
    }
}

void ct_cpu_conv2d_direct_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                  const float *bias, bool relu, float *y, void *workspace)
{
    plane_geom g = forward_geom(s);
    g.relu = relu;
    forward_batch(&g, s->n_batch, s->in_h, s->in_w, s->pad_h, s->pad_w, x, w, bias, y,
                  workspace, thread_floats(s));
}

void ct_cpu_conv2d_direct_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                               const float *w, const float *bias, float *pooled,
                                               void *workspace)
{
    plane_geom g = forward_geom(s);
    g.relu = g.pool = true;
    forward_batch(&g, s->n_batch, s->in_h, s->in_w, s->pad_h, s->pad_w, x, w, bias, pooled,
                  workspace, thread_floats(s));
}

void ct_cpu_conv2d_direct_backward_data(const ct_conv2d_shape *s, const float *dy,
                                        const float *w, float *dx, void *workspace)
{
    size_t per_thread = thread_floats(s);
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
                  s->kernel_w - 1 - s->pad_w, dy, flipped, NULL, dx, workspace, per_thread);
}

/* lanes[b][jj] += dy[o0+b, oh, ow:ow+8] * xp[c, oh+i, ow+j0+jj : +8] over
 * n_images images (x_stride and dy_stride floats apart), for one (c, i) and
 * kernel columns j0..j0+J-1: OB + J loads per OB*J FMAs, the sums loaded
 * and stored once per group of images.  x_row points at xp[c, i, j0];
 * dy_block at dy[o0]; lanes at the 8-lane sums of (o0, c, i, j0), whose
 * output channels lie o_stride apart. */
AVX2_INLINE void weight_block(const plane_geom *g, const float *x_row, const float *dy_block,
                              int n_images, size_t x_stride, size_t dy_stride, float *lanes,
                              size_t o_stride, const int OB, const int J)
{
    __m256 acc[MAX_OB][WIDE_J];
    #pragma GCC unroll 4
    for (int b = 0; b < OB; b++)
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            acc[b][jj] = _mm256_loadu_ps(lanes + b * o_stride + jj * LANES);
    size_t out_plane = (size_t)g->out_h * g->out_w;
    int full = g->out_w / LANES * LANES, tail = g->out_w - full;
    __m256i tail_mask = lane_mask(tail);
    for (int image = 0; image < n_images; image++)
    for (int oh = 0; oh < g->out_h; oh++) {
        const float *x_line = x_row + image * x_stride + (size_t)oh * g->wp;
        const float *dy_line = dy_block + image * dy_stride + (size_t)oh * g->out_w;
        for (int ow = 0; ow < full; ow += LANES) {
            __m256 xv[WIDE_J];
            #pragma GCC unroll 5
            for (int jj = 0; jj < J; jj++)
                xv[jj] = _mm256_loadu_ps(x_line + ow + jj);
            #pragma GCC unroll 4
            for (int b = 0; b < OB; b++) {
                __m256 dv = _mm256_loadu_ps(dy_line + b * out_plane + ow);
                #pragma GCC unroll 5
                for (int jj = 0; jj < J; jj++)
                    acc[b][jj] = _mm256_fmadd_ps(dv, xv[jj], acc[b][jj]);
            }
        }
        if (tail) {
            __m256 xv[WIDE_J];
            #pragma GCC unroll 5
            for (int jj = 0; jj < J; jj++)
                xv[jj] = _mm256_maskload_ps(x_line + full + jj, tail_mask);
            #pragma GCC unroll 4
            for (int b = 0; b < OB; b++) {
                __m256 dv = _mm256_maskload_ps(dy_line + b * out_plane + full, tail_mask);
                #pragma GCC unroll 5
                for (int jj = 0; jj < J; jj++)
                    acc[b][jj] = _mm256_fmadd_ps(dv, xv[jj], acc[b][jj]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int b = 0; b < OB; b++)
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            _mm256_storeu_ps(lanes + b * o_stride + jj * LANES, acc[b][jj]);
}

typedef void (*weight_block_fn)(const plane_geom *g, const float *x_row, const float *dy_block,
                                int n_images, size_t x_stride, size_t dy_stride, float *lanes,
                                size_t o_stride);

#define WEIGHT_BLOCK(OB, J)                                                                    \
    static AVX2 void weight_block_##OB##_##J(const plane_geom *g, const float *x_row,          \
                                             const float *dy_block, int n_images,              \
                                             size_t x_stride, size_t dy_stride, float *lanes,  \
                                             size_t o_stride)                                  \
    {                                                                                          \
        weight_block(g, x_row, dy_block, n_images, x_stride, dy_stride, lanes, o_stride, OB,   \
                     J);                                                                       \
    }
#define WEIGHT_BLOCKS(OB) WEIGHT_BLOCK(OB, 1) WEIGHT_BLOCK(OB, 2) WEIGHT_BLOCK(OB, 3)
WEIGHT_BLOCKS(1)
WEIGHT_BLOCKS(2)
WEIGHT_BLOCKS(3)
WEIGHT_BLOCKS(4)

static const weight_block_fn weight_blocks[MAX_OB][WEIGHT_J] = {
    {weight_block_1_1, weight_block_1_2, weight_block_1_3},
    {weight_block_2_1, weight_block_2_2, weight_block_2_3},
    {weight_block_3_1, weight_block_3_2, weight_block_3_3},
    {weight_block_4_1, weight_block_4_2, weight_block_4_3},
};

/* The same kernel compiled for AVX-512VL: still 8-float vectors (the same
 * products and sums, so the same bits), but 32 registers hold OB x 5
 * sums, 5 inputs and dy, so a 5-wide kernel row takes one block: 9 loads
 * per 20 FMAs instead of 7 per 12 and 5 per 8 (1.6x fewer loads per FMA),
 * and half the calls.  Only where the rows fit (ct_cpu_simd_avx512). */
#define AVX512VL __attribute__((target("avx2,fma,avx512f,avx512vl")))
#define WIDE_BLOCK(OB, J)                                                                      \
    static AVX512VL void wide_block_##OB##_##J(const plane_geom *g, const float *x_row,        \
                                               const float *dy_block, int n_images,            \
                                               size_t x_stride, size_t dy_stride,              \
                                               float *lanes, size_t o_stride)                  \
    {                                                                                          \
        weight_block(g, x_row, dy_block, n_images, x_stride, dy_stride, lanes, o_stride, OB,   \
                     J);                                                                       \
    }
#define WIDE_BLOCKS(OB) WIDE_BLOCK(OB, 4) WIDE_BLOCK(OB, 5)
WIDE_BLOCKS(1)
WIDE_BLOCKS(2)
WIDE_BLOCKS(3)
WIDE_BLOCKS(4)

static const weight_block_fn wide_blocks[MAX_OB][WIDE_J - WEIGHT_J] = {
    {wide_block_1_4, wide_block_1_5},
    {wide_block_2_4, wide_block_2_5},
    {wide_block_3_4, wide_block_3_5},
    {wide_block_4_4, wide_block_4_5},
};

/* The block for OB output channels and J kernel columns (J <= j_max). */
static weight_block_fn weight_block_for(int OB, int J)
{
    return J <= WEIGHT_J ? weight_blocks[OB - 1][J - 1] : wide_blocks[OB - 1][J - WEIGHT_J - 1];
}

/* lanes[o, c, i, j, :] += the products of n_images images: padded x at
 * xp, x_stride floats apart, and their dy, consecutive. */
static void weight_images(const plane_geom *g, int n_images, const float *xp, size_t x_stride,
                          const float *dy, float *lanes)
{
    int area = g->kh * g->kw, n_blocks = channel_blocks(g->out_c, MAX_OB);
    size_t plane = (size_t)g->hp * g->wp, out_plane = (size_t)g->out_h * g->out_w;
    size_t o_stride = (size_t)g->in_c * area * LANES;
    int j_max = ct_cpu_simd_avx512() ? WIDE_J : WEIGHT_J;
    for (int block = 0; block < n_blocks; block++) {
        int o0, o1;
        channel_block(g->out_c, MAX_OB, block, &o0, &o1);
        for (int c = 0; c < g->in_c; c++)
            for (int i = 0; i < g->kh; i++)
                for (int j0 = 0; j0 < g->kw; j0 += j_max) {
                    int jn = g->kw - j0 < j_max ? g->kw - j0 : j_max;
                    float *at = lanes + (size_t)o0 * o_stride +
                                ((size_t)c * area + i * g->kw + j0) * LANES;
                    weight_block_for(o1 - o0, jn)(
                        g, xp + c * plane + (size_t)i * g->wp + j0, dy + o0 * out_plane,
                        n_images, x_stride, (size_t)g->out_c * out_plane, at, o_stride);
                }
    }
}

/* sums[k] = sum of the 8 lanes of lanes[k], in a fixed order. */
static AVX2 void reduce_lanes(size_t count, const float *lanes, float *sums)
{
    for (size_t k = 0; k < count; k++) {
        __m256 v = _mm256_loadu_ps(lanes + k * LANES);
        __m128 quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        quad = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        quad = _mm_add_ss(quad, _mm_movehdup_ps(quad));
        sums[k] = _mm_cvtss_f32(quad);
    }
}

/* sums[o] += dy[n, o, :] of n_images consecutive images. */
static void add_bias_sums(int n_images, int out_c, size_t out_plane, const float *dy,
                          double *sums)
{
    for (int n = 0; n < n_images; n++)
        for (int o = 0; o < out_c; o++)
            sums[o] += ct_lanes_sum(dy + ((size_t)n * out_c + o) * out_plane, (int)out_plane);
}

void ct_cpu_conv2d_direct_backward_weight(const ct_conv2d_shape *s, const float *x,
                                          const float *dy, float *dw, float *db, void *workspace)
{
    plane_geom g = forward_geom(s);
    size_t per_thread = thread_floats(s), n_weights = weight_count(s);
    size_t image = padded_floats(g.in_c, g.hp, g.wp);
    size_t in_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t out_image = (size_t)s->out_channels * s->out_h * s->out_w;
    size_t out_plane = (size_t)s->out_h * s->out_w;
    float *chunk_sums = (float *)workspace + per_thread * (size_t)ct_cpu_max_threads();
    double *bias_sums = (double *)(chunk_sums + round_floats(n_weights * WEIGHT_CHUNKS));
    int n_chunks = s->n_batch < WEIGHT_CHUNKS ? s->n_batch : WEIGHT_CHUNKS;
    if (n_chunks == 0) {
        memset(dw, 0, sizeof(float) * n_weights);
        if (db)
            memset(db, 0, sizeof(float) * (size_t)s->out_channels);
        return;
    }
#pragma omp parallel
    {
        int thread = ct_cpu_thread_num(), team = ct_cpu_team_size();
        float *xp = (float *)workspace + (size_t)thread * per_thread;
        float *lanes = xp + WEIGHT_GROUP * image;
        for (int chunk = thread; chunk < n_chunks; chunk += team) {
            int first, last;
            split_range(s->n_batch, chunk, n_chunks, &first, &last);
            memset(lanes, 0, sizeof(float) * n_weights * LANES);
            double *chunk_bias = bias_sums + (size_t)chunk * s->out_channels;
            if (db)
                memset(chunk_bias, 0, sizeof(double) * (size_t)s->out_channels);
            for (int n0 = first; n0 < last; n0 += WEIGHT_GROUP) {
                int group = last - n0 < WEIGHT_GROUP ? last - n0 : WEIGHT_GROUP;
                for (int k = 0; k < group; k++)
                    pad_image(g.in_c, s->in_h, s->in_w, s->pad_h, s->pad_w, g.hp, g.wp,
                              x + (n0 + k) * in_image, xp + k * image);
                weight_images(&g, group, xp, image, dy + n0 * out_image, lanes);
                if (db)
                    add_bias_sums(group, s->out_channels, out_plane, dy + n0 * out_image,
                                  chunk_bias);
            }
            reduce_lanes(n_weights, lanes, chunk_sums + (size_t)chunk * n_weights);
        }
#pragma omp barrier
#pragma omp for schedule(static) nowait
        for (size_t k = 0; k < n_weights; k++) {
            float total = 0.0f;
            for (int chunk = 0; chunk < n_chunks; chunk++)
                total += chunk_sums[(size_t)chunk * n_weights + k];
            dw[k] = total;
        }
        if (db) {
#pragma omp for schedule(static)
            for (int o = 0; o < s->out_channels; o++) {
                double total = 0.0;
                for (int chunk = 0; chunk < n_chunks; chunk++)
                    total += bias_sums[(size_t)chunk * s->out_channels + o];
                db[o] = (float)total;
            }
        }
    }
}

#endif
