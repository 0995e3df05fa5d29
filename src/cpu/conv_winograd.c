/*
 * Winograd convolution F(4x4, 3x3) with AVX2 + FMA (Lavin and Gray, 2016);
 * the transforms are in winograd_transforms.c.
 *
 * A 3x3 convolution computes each 4x4 tile of outputs from a 6x6 tile of
 * inputs.  In the transformed domain that is one multiply per point:
 *   y_tile = A^T [ sum_c (G w[k,c] G^T) (.) (B^T x_tile[c] B) ] A
 * with the interpolation points 0, 1, -1, 2, -2 and infinity:
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6;
 *          1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * The sum over channels at each of the 36 points xi is a GEMM:
 *   M[xi] [K, T] = U[xi] [K, C] . V[xi] [C, T]   (T tiles)
 * 36 * K * C * T multiplies where im2col + GEMM does 144 * K * C * T: four
 * times fewer on whole tiles.  The transforms are additions, a few percent
 * of the work once the layer has 64 channels or more.
 *
 * The three passes:
 *   forward:         U = G w G^T, V = B^T x B, M = U V, y = A^T M A (+ bias, relu)
 *   backward data:   the forward pass of dy padded by 2 - pad with the kernel
 *                    flipped and transposed, wt[c,k,i,j] = w[k,c,2-i,2-j]
 *   backward weight: the adjoint of the forward in w: dM = A dy A^T (dy's
 *                    4x4 tile, zeros past the edge), dU[xi] [K, C] = sum over
 *                    tiles dM[xi] [K, T] . V[xi]^T [T, C], dw = G^T dU G.
 *
 * Tiles are numbered across the batch, t = (image * tiles_h + th) * tiles_w
 * + tw, and run in blocks of up to `block` tiles so that one block's V and
 * M stay in the cache.  Per block:
 *   1. transforms in parallel over (channel, 8 tiles): the 8 tiles are the
 *      8 lanes of a vector, their 6x6 windows loaded as rows and transposed;
 *   2. the 36 GEMMs (multiply_points): with AVX-512 and K a multiple of 8,
 *      on the panel tile in parallel over (xi, 8 rows of K), U packed by 8
 *      rows; else in parallel over xi, each on one thread (ct_cpu_gemm
 *      inside a parallel region: OpenBLAS's OpenMP build runs it on the
 *      calling thread, the native GEMM's nested region has one thread);
 *   3. the output transform in parallel over (output channel, 8 tiles).
 * Every result element is computed by one thread in an order that does not
 * depend on the thread count (backward weight adds the blocks in order), so
 * the results are the same bits for any number of threads.
 *
 * Workspace: U (or dU) [36, K, C], then V and M, each [36, max(C, K), block],
 * then where the block's tiles are.
 * Accumulation: all outputs are written with =.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "cpu/conv_winograd.h"
#include "cpu/kernels.h"
#include "cpu/panel_tile.h"
#include "cpu/threads.h"
#include "cpu/winograd_transforms.h"

enum {
    MIN_CHANNELS = 16,           /* fewer: the transforms cost more than they save */
    /* Fewer tiles over the whole batch and each of the 36 GEMMs [K,C] x [C,T]
     * is a thin product that streams its 4x larger U from memory: ResNet-18's
     * 512-channel 7x7 layers at batch 1 (4 tiles) took 6 ms against im2col's
     * 2 ms.  Its 14x14 ones (16 tiles) pay now that inference keeps U between
     * runs and multiplies it on the AVX-512 tile (docs/perf.md). */
    MIN_TILES = 16,
    MIN_BLOCK = 64, MAX_BLOCK = 2048,
};
/* V and M of one block together (bytes); U adds 144 * K * C bytes. */
static const size_t BLOCK_BYTES = (size_t)8 << 20;
/* Larger transformed weights than this (1024 x 1024 channels and up) stay
 * with im2col, whose workspace does not grow with K * C. */
static const size_t MAX_U_BYTES = (size_t)64 << 20;

static int channels_max(const ct_conv2d_shape *s)
{
    return s->in_channels > s->out_channels ? s->in_channels : s->out_channels;
}

static int block_tiles(const ct_conv2d_shape *s)
{
    size_t per_tile = sizeof(float) * POINTS * 2 * (size_t)channels_max(s);
    size_t block = BLOCK_BYTES / per_tile;
    block = block < MIN_BLOCK ? MIN_BLOCK : block > MAX_BLOCK ? MAX_BLOCK : block;
    return (int)(block / LANES * LANES);
}

/* Whole tiles cost 36 multiplies per 16 outputs: worth it when that is at
 * most half of the 9 per output of a direct method (not on 2x2 or 5x5). */
static bool tiles_pay(int h, int w)
{
    return h > 0 && w > 0 &&
           2 * POINTS * (int64_t)ceil_div(h, TILE) * ceil_div(w, TILE) <= 9 * (int64_t)h * w;
}

bool ct_cpu_conv2d_winograd_fits(const ct_conv2d_shape *s)
{
    return s->kernel_h == 3 && s->kernel_w == 3 && s->stride_h == 1 && s->stride_w == 1 &&
           s->dilation_h == 1 && s->dilation_w == 1 && s->groups == 1 && s->pad_h <= 2 &&
           s->pad_w <= 2 && s->in_channels >= MIN_CHANNELS &&
           s->out_channels >= MIN_CHANNELS &&
           sizeof(float) * POINTS * (size_t)s->in_channels * s->out_channels <= MAX_U_BYTES &&
           (int64_t)s->n_batch * ceil_div(s->out_h, TILE) * ceil_div(s->out_w, TILE) >=
               MIN_TILES &&
           tiles_pay(s->out_h, s->out_w) && tiles_pay(s->in_h, s->in_w);
}

size_t ct_cpu_conv2d_winograd_workspace(const ct_conv2d_shape *s)
{
    size_t u = (size_t)POINTS * s->in_channels * s->out_channels;
    size_t vm = (size_t)POINTS * channels_max(s) * block_tiles(s);
    return sizeof(float) * (u + 2 * vm) + sizeof(tile_at) * (size_t)block_tiles(s);
}

static wino_pass make_pass(const ct_conv2d_shape *s, int in_c, int in_h, int in_w, int out_c,
                           int out_h, int out_w, int pad_h, int pad_w)
{
    wino_pass p = {in_c, in_h, in_w, out_c, out_h, out_w, pad_h, pad_w,
                   ceil_div(out_h, TILE), ceil_div(out_w, TILE), 0, block_tiles(s)};
    p.tiles = (int64_t)s->n_batch * p.tiles_h * p.tiles_w;
    return p;
}

/* at[i] for the tiles t0 + i, i < count (count <= block). */
static void locate_block(const wino_pass *p, int64_t t0, int count, tile_at *at)
{
    int64_t per_image = (int64_t)p->tiles_h * p->tiles_w;
    int64_t image = t0 / per_image;
    int r = (int)(t0 % per_image);
    for (int i = 0; i < count; i++) {
        at[i].image = image, at[i].oh = r / p->tiles_w * TILE, at[i].ow = r % p->tiles_w * TILE;
        if (++r == per_image)
            r = 0, image++;
    }
}

/* ---- the passes ---------------------------------------------------------- */

typedef struct wino_space {
    float *u, *v, *m;
    tile_at *at; /* [block] */
} wino_space;

static wino_space carve(const ct_conv2d_shape *s, void *workspace)
{
    size_t u = (size_t)POINTS * s->in_channels * s->out_channels;
    size_t vm = (size_t)POINTS * channels_max(s) * block_tiles(s);
    float *base = workspace;
    wino_space w = {base, base + u, base + u + vm, (tile_at *)(void *)(base + u + 2 * vm)};
    return w;
}

/* The tiles of the block at t0, and its width in V and M (whole vectors). */
static int block_count(const wino_pass *p, int64_t t0)
{
    int64_t left = p->tiles - t0;
    return left < p->block ? (int)left : p->block;
}

static int block_width(int count)
{
    return (count + LANES - 1) / LANES * LANES;
}

enum { TILE_COLUMNS = 48, TILE_DEPTH = 256 }; /* three vectors; c per block of the sum */

/* One unit of multiply_points on the tile: point xi, rows r..r+7 of K.
 * width is a multiple of 8, not 16: a row's last vector may read 8 floats
 * past it (into the next row, or past V's last into M, all workspace);
 * those lanes of the sums are never stored. */
__attribute__((target("avx512f"))) static void multiply_unit(const wino_pass *p, const float *u,
                                                             const float *v, float *m,
                                                             int width, int xi, int r)
{
    int k = p->out_c, c = p->in_c;
    /* rows r..r+7 of U[xi], packed: (i, c) at a[c * 8 + i] */
    const float *a = u + ((size_t)xi * k + r) * c, *b = v + (size_t)xi * c * width;
    float *out = m + ((size_t)xi * k + r) * width;
    for (int t0 = 0; t0 < width; t0 += TILE_COLUMNS) {
        int columns = width - t0 < TILE_COLUMNS ? width - t0 : TILE_COLUMNS;
        int vectors = (columns + 15) / 16, tail = columns - 16 * (vectors - 1);
        __mmask16 last = (__mmask16)((1u << tail) - 1u);
        for (int c0 = 0; c0 < c; c0 += TILE_DEPTH) {
            int depth = c - c0 < TILE_DEPTH ? c - c0 : TILE_DEPTH;
            const float *ak = a + (size_t)c0 * CT_TILE_ROWS, *bk = b + (size_t)c0 * width + t0;
            float *ck = out + t0;
            if (vectors == 3)
                ct_panel_tile(3, last, depth, ak, 1, CT_TILE_ROWS, bk, width, ck, width, c0 > 0,
                              false, NULL, false);
            else if (vectors == 2)
                ct_panel_tile(2, last, depth, ak, 1, CT_TILE_ROWS, bk, width, ck, width, c0 > 0,
                              false, NULL, false);
            else
                ct_panel_tile(1, last, depth, ak, 1, CT_TILE_ROWS, bk, width, ck, width, c0 > 0,
                              false, NULL, false);
        }
    }
}

/* multiply_points on the tile: threads take (point, 8 rows of K) units.
 * (The parallel loop stays outside the AVX-512 function: clang outlines a
 * loop's body without its function's target.) */
static void multiply_points_tiled(const wino_pass *p, const float *u, const float *v, float *m,
                                  int width)
{
    int row_blocks = p->out_c / CT_TILE_ROWS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static)
    for (int unit = 0; unit < POINTS * row_blocks; unit++)
        multiply_unit(p, u, v, m, width, unit / row_blocks, unit % row_blocks * CT_TILE_ROWS);
}

/* M[xi] = U[xi] . V[xi] for the 36 points: [K, width] = [K, C] . [C, width].
 * With AVX-512 and K a multiple of 8, on the panel convolution's register
 * tile from U packed as it was transformed (packed_rows): a GEMM library
 * packs all of U[xi] on every call, which costs as much as the product when
 * the block has few tiles (one image's 14x14 layer: 16).  Else one
 * ct_cpu_gemm per point.  Either way each element is summed in c order by
 * one thread, whatever the thread count. */
static void multiply_points(const wino_pass *p, const float *u, const float *v, float *m,
                            int width)
{
    if (packed_rows(p->out_c)) {
        multiply_points_tiled(p, u, v, m, width);
        return;
    }
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static)
    for (int xi = 0; xi < POINTS; xi++)
        ct_cpu_gemm(false, false, p->out_c, width, p->in_c, 1.0f,
                    u + (size_t)xi * p->out_c * p->in_c, p->in_c,
                    v + (size_t)xi * p->in_c * width, width, 0.0f,
                    m + (size_t)xi * p->out_c * width, width);
}

/* y = conv(in, U) over the pass's tiles (forward, or backward data). */
static void run_pass(const wino_pass *p, const float *in, const float *u, const float *bias,
                     bool relu, float *out, wino_space ws)
{
    for (int64_t t0 = 0; t0 < p->tiles; t0 += p->block) {
        int count = block_count(p, t0), width = block_width(count);
        locate_block(p, t0, count, ws.at);
        ct_wino_transform_block(INPUT_TILES, p, in, ws.at, count, width, NULL, false, ws.v);
        multiply_points(p, u, ws.v, ws.m, width);
        ct_wino_transform_block(OUTPUT_TILES, p, ws.m, ws.at, count, width, bias, relu, out);
    }
}

static wino_pass forward_pass(const ct_conv2d_shape *s)
{
    return make_pass(s, s->in_channels, s->in_h, s->in_w, s->out_channels, s->out_h, s->out_w,
                     s->pad_h, s->pad_w);
}

size_t ct_cpu_conv2d_winograd_weights_bytes(const ct_conv2d_shape *s)
{
    return sizeof(float) * POINTS * (size_t)s->in_channels * s->out_channels;
}

void ct_cpu_conv2d_winograd_transform_weights(const ct_conv2d_shape *s, const float *w,
                                              float *u)
{
    CT_ASSERT(ct_cpu_conv2d_winograd_fits(s));
    ct_wino_weight_transform(w, s->out_channels, s->in_channels, false, u);
}

void ct_cpu_conv2d_winograd_forward_transformed(const ct_conv2d_shape *s, const float *x,
                                                const float *u, const float *bias, bool relu,
                                                float *y, void *workspace)
{
    CT_ASSERT(ct_cpu_conv2d_winograd_fits(s));
    wino_pass p = forward_pass(s);
    run_pass(&p, x, u, bias, relu, y, carve(s, workspace));
}

void ct_cpu_conv2d_winograd_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                    const float *bias, bool relu, float *y, void *workspace)
{
    wino_space ws = carve(s, workspace);
    ct_cpu_conv2d_winograd_transform_weights(s, w, ws.u);
    ct_cpu_conv2d_winograd_forward_transformed(s, x, ws.u, bias, relu, y, workspace);
}

void ct_cpu_conv2d_winograd_backward_data(const ct_conv2d_shape *s, const float *dy,
                                          const float *w, float *dx, void *workspace)
{
    CT_ASSERT(ct_cpu_conv2d_winograd_fits(s));
    wino_space ws = carve(s, workspace);
    wino_pass p = make_pass(s, s->out_channels, s->out_h, s->out_w, s->in_channels, s->in_h,
                            s->in_w, 2 - s->pad_h, 2 - s->pad_w);
    ct_wino_weight_transform(w, s->out_channels, s->in_channels, true, ws.u);
    run_pass(&p, dy, ws.u, NULL, false, dx, ws);
}

void ct_cpu_conv2d_winograd_backward_weight(const ct_conv2d_shape *s, const float *x,
                                            const float *dy, float *dw, void *workspace)
{
    CT_ASSERT(ct_cpu_conv2d_winograd_fits(s));
    wino_space ws = carve(s, workspace);
    wino_pass p = forward_pass(s);
    int k = s->out_channels, c = s->in_channels;
    if (p.tiles == 0) {
        memset(dw, 0, sizeof(float) * 9 * (size_t)k * c);
        return;
    }
    for (int64_t t0 = 0; t0 < p.tiles; t0 += p.block) {
        int count = block_count(&p, t0), width = block_width(count);
        locate_block(&p, t0, count, ws.at);
        ct_wino_transform_block(INPUT_TILES, &p, x, ws.at, count, width, NULL, false, ws.v);
        ct_wino_transform_block(GRAD_TILES, &p, dy, ws.at, count, width, NULL, false, ws.m);
        ct_cpu_openmp_region();
#pragma omp parallel for schedule(static)
        for (int xi = 0; xi < POINTS; xi++)
            ct_cpu_gemm(false, true, k, c, width, 1.0f, ws.m + (size_t)xi * k * width, width,
                        ws.v + (size_t)xi * c * width, width, t0 == 0 ? 0.0f : 1.0f,
                        ws.u + (size_t)xi * k * c, c);
    }
    ct_wino_weight_grad_transform(ws.u, k * c, dw);
}

#endif
