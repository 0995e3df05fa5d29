/*
 * The direct convolution's weight gradient with AVX2 + FMA (AVX-512VL's 32
 * registers where the CPU has them); the forward and the backward data are
 * in conv_avx2.c, the shared geometry in conv_direct_impl.h.
 *
 *   dw[o,c,i,j] = sum_{n,oh,ow} dy[n,o,oh,ow] * xp[n,c,oh+i,ow+j]
 *   8-lane partial sums per chunk of images, then the chunks' sums added in
 *   chunk order; with the bias gradient (fused, graph/fuse.c)
 *   db[o] = sum_{n,oh,ow} dy[n,o,oh,ow] the same way, each group's dy summed
 *   while the products left it in cache.
 * The batch is cut into WEIGHT_CHUNKS fixed chunks whatever the thread count,
 * so every result is the same bits for any number of threads.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "cpu/conv_direct.h"
#include "cpu/conv_channels.h"
#include "cpu/conv_direct_impl.h"
#include "cpu/conv_flat.h"
#include "cpu/lanes.h"
#include "cpu/threads.h"

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

/* The 8 lanes of v, added in a fixed order. */
AVX2_INLINE float lane_total(__m256 v)
{
    __m128 quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    quad = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
    quad = _mm_add_ss(quad, _mm_movehdup_ps(quad));
    return _mm_cvtss_f32(quad);
}

/* sums[k] = sum of the `width` (8 or 16) lanes of lanes[k], in a fixed
 * order.  16 lanes: the halves added, then eight weights at a time
 * through horizontal adds (9 instructions for 8 sums instead of 40, a
 * tenth of the 16-float weight gradient's time on SimpleCNN's 2,400
 * weights x 8 chunks). */
static AVX2 void reduce_lanes(size_t count, int width, const float *lanes, float *sums)
{
    size_t k = 0;
    if (width == 2 * LANES)
        for (; k + LANES <= count; k += LANES) {
            __m256 r[LANES];
            for (int q = 0; q < LANES; q++) {
                const float *at = lanes + (k + q) * (size_t)width;
                r[q] = _mm256_add_ps(_mm256_loadu_ps(at), _mm256_loadu_ps(at + LANES));
            }
            /* pairs, then quads: t0 = [q0..q3 of lanes 0-3 | q0..q3 of lanes 4-7] */
            __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(r[0], r[1]), _mm256_hadd_ps(r[2], r[3]));
            __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(r[4], r[5]), _mm256_hadd_ps(r[6], r[7]));
            __m256 low = _mm256_permute2f128_ps(t0, t1, 0x20);
            __m256 high = _mm256_permute2f128_ps(t0, t1, 0x31);
            _mm256_storeu_ps(sums + k, _mm256_add_ps(low, high));
        }
    for (; k < count; k++) {
        const float *at = lanes + k * (size_t)width;
        __m256 v = _mm256_loadu_ps(at);
        if (width == 2 * LANES)
            v = _mm256_add_ps(v, _mm256_loadu_ps(at + LANES));
        sums[k] = lane_total(v);
    }
}

/* sums[o] += dy[n, o, :] of n_images consecutive images, in image order:
 * the planes' sums first, four at a time (ct_lanes_sum4). */
static void add_bias_sums(int n_images, int out_c, size_t out_plane, const float *dy,
                          double *sums)
{
    enum { PLANES = 64 };
    double plane_sums[PLANES];
    int planes = n_images * out_c;
    for (int q0 = 0; q0 < planes; q0 += PLANES) {
        int count = planes - q0 < PLANES ? planes - q0 : PLANES;
        ct_lanes_sum_rows(dy + (size_t)q0 * out_plane, out_plane, count, (int)out_plane,
                          plane_sums);
        for (int q = 0; q < count; q++)
            sums[(q0 + q) % out_c] += plane_sums[q];
    }
}

/* What every thread of ct_cpu_conv2d_direct_backward_weight (below) reads. */
typedef struct weight_job {
    const ct_conv2d_shape *s;
    const float *x, *dy;
    float *dw, *db, *workspace, *chunk_sums;
    double *bias_sums;
    plane_geom g;
    size_t per_thread, n_weights, image, in_image, out_image, out_plane, group_floats;
    bool channels, flat;
    int width, group_max, n_chunks;
} weight_job;

/* One thread's chunks of images, then its share of the chunks' sums. */
static void weight_part(void *arg)
{
    const weight_job *j = arg;
    const ct_conv2d_shape *s = j->s;
    const float *x = j->x, *dy = j->dy;
    float *dw = j->dw, *db = j->db, *chunk_sums = j->chunk_sums;
    double *bias_sums = j->bias_sums;
    plane_geom g = j->g;
    size_t per_thread = j->per_thread, n_weights = j->n_weights, image = j->image;
    size_t in_image = j->in_image, out_image = j->out_image, out_plane = j->out_plane;
    size_t group_floats = j->group_floats;
    bool channels = j->channels, flat = j->flat;
    int width = j->width, group_max = j->group_max, n_chunks = j->n_chunks;
    void *workspace = j->workspace;
    int thread = ct_cpu_thread_num(), team = ct_cpu_team_size();
    float *xp = (float *)workspace + (size_t)thread * per_thread;
    float *lanes = xp + group_floats;
    /* contiguous chunks, as the forward and the pools split the batch:
     * a thread's images are mostly in its own cache */
    int chunk_first, chunk_last;
    split_range(n_chunks, thread, team, &chunk_first, &chunk_last);
    for (int chunk = chunk_first; chunk < chunk_last; chunk++) {
        int first, last;
        split_range(s->n_batch, chunk, n_chunks, &first, &last);
        if (!flat && !channels) /* the 16-float kernels store their first products */
            memset(lanes, 0, sizeof(float) * n_weights * (size_t)width);
        double *chunk_bias = bias_sums + (size_t)chunk * s->out_channels;
        if (db)
            memset(chunk_bias, 0, sizeof(double) * (size_t)s->out_channels);
        for (int n0 = first; n0 < last; n0 += group_max) {
            int group = last - n0 < group_max ? last - n0 : group_max;
            const float *images = x + n0 * in_image, *dy_group = dy + n0 * out_image;
            if (channels) {
                ct_cpu_conv2d_channels_weight_group(s, group, images, dy_group, n0 == first,
                                                    xp, lanes);
            } else if (flat) {
                ct_cpu_conv2d_flat_weight_group(s, group, images, dy_group, n0 == first, xp,
                                                lanes);
            } else {
                size_t stride = in_image;
                if (!image_in_place(&g, s->in_h, s->in_w, n0 + group - 1, s->n_batch)) {
                    for (int k = 0; k < group; k++)
                        ct_cpu_conv_direct_pad_image(g.in_c, s->in_h, s->in_w, s->pad_h,
                                                     s->pad_w, g.hp, g.wp,
                                                     x + (n0 + k) * in_image, xp + k * image);
                    images = xp;
                    stride = image;
                }
                weight_images(&g, group, images, stride, dy_group, lanes);
            }
            if (db)
                add_bias_sums(group, s->out_channels, out_plane, dy + n0 * out_image,
                              chunk_bias);
        }
        float *sums = chunk_sums + (size_t)chunk * n_weights;
        if (channels)
            ct_cpu_conv2d_channels_weight_order(s, lanes, sums);
        else
            reduce_lanes(n_weights, width, lanes, sums);
    }
    ct_cpu_barrier();
    int64_t k_first, k_last;
    ct_cpu_split((int64_t)n_weights, &k_first, &k_last);
    for (int64_t k = k_first; k < k_last; k++) {
        float total = 0.0f;
        for (int chunk = 0; chunk < n_chunks; chunk++)
            total += chunk_sums[(size_t)chunk * n_weights + k];
        dw[k] = total;
    }
    if (db) {
        ct_cpu_split(s->out_channels, &k_first, &k_last);
        for (int64_t o = k_first; o < k_last; o++) {
            double total = 0.0;
            for (int chunk = 0; chunk < n_chunks; chunk++)
                total += bias_sums[(size_t)chunk * s->out_channels + o];
            db[o] = (float)total;
        }
    }
}

void ct_cpu_conv2d_direct_backward_weight(const ct_conv2d_shape *s, const float *x,
                                          const float *dy, float *dw, float *db, void *workspace)
{
    plane_geom g = forward_geom(s);
    size_t per_thread = ct_cpu_conv_direct_thread_floats(s), n_weights = weight_count(s);
    size_t image = padded_floats(g.in_c, g.hp, g.wp);
    size_t in_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t out_image = (size_t)s->out_channels * s->out_h * s->out_w;
    size_t out_plane = (size_t)s->out_h * s->out_w;
    /* On AVX-512: whole sums on vectors of 16 output channels where they
     * come in sixteens (conv_channels.c), else 16-lane sums over groups of
     * shifted copies (conv_flat.c); else 8-lane ones over padded images. */
    bool channels = ct_cpu_conv2d_channels_fits(s);
    bool flat = !channels && ct_cpu_conv2d_flat_fits(s);
    int width = channels ? 1 : flat ? 2 * LANES : LANES;
    int group_max = channels || flat ? CT_CONV_FLAT_GROUP : WEIGHT_GROUP;
    size_t group_floats = channels ? ct_cpu_conv2d_channels_group_floats(s)
                          : flat   ? CT_CONV_FLAT_GROUP * ct_cpu_conv2d_flat_image_floats(s)
                                   : WEIGHT_GROUP * image;
    float *chunk_sums = (float *)workspace + per_thread * (size_t)ct_cpu_max_threads();
    double *bias_sums = (double *)(chunk_sums + round_floats(n_weights * WEIGHT_CHUNKS));
    int n_chunks = s->n_batch < WEIGHT_CHUNKS ? s->n_batch : WEIGHT_CHUNKS;
    if (n_chunks == 0) {
        memset(dw, 0, sizeof(float) * n_weights);
        if (db)
            memset(db, 0, sizeof(float) * (size_t)s->out_channels);
        return;
    }
    weight_job job = {s, x, dy, dw, db, workspace, chunk_sums, bias_sums, g, per_thread,
                      n_weights, image, in_image, out_image, out_plane, group_floats, channels,
                      flat, width, group_max, n_chunks};
    ct_cpu_parallel(ct_cpu_max_threads(), weight_part, &job);
}

#endif
