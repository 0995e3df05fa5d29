/*
 * Winograd convolution F(4x4, 3x3) with AVX2 + FMA (Lavin and Gray, 2016).
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
 *   2. the 36 GEMMs in parallel over xi, each on one thread (ct_cpu_gemm
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

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

enum {
    LANES = 8,     /* tiles per vector */
    ALPHA = 6,     /* input tile side: TILE + 3 - 1 */
    POINTS = 36,   /* ALPHA * ALPHA: GEMMs per block */
    TILE = 4,      /* output tile side */
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

/* One pass as the transforms see it: the tiles of `out` computed from `in`. */
typedef struct wino_pass {
    int in_c, in_h, in_w;    /* x (forward, backward weight) or dy (backward data) */
    int out_c, out_h, out_w; /* y, or dx */
    int pad_h, pad_w;        /* zeros before the input's first row and column */
    int tiles_h, tiles_w;
    int64_t tiles;           /* over the whole batch */
    int block;               /* tiles per block, a multiple of LANES */
} wino_pass;

/* Where a tile is: its image and the first output row and column.  A
 * block's tiles are located once (locate_block), not per channel. */
typedef struct tile_at {
    int64_t image;
    int oh, ow;
} tile_at;

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

static int channels_max(const ct_conv2d_shape *s)
{
    return s->in_channels > s->out_channels ? s->in_channels : s->out_channels;
}

/* Whether U[xi] (rows x C) is stored in blocks of 8 rows packed along C,
 * U[xi][row / 8][c][row % 8], for the AVX-512 products (multiply_points):
 * then the tile reads one sequential stream, which the prefetchers keep up
 * with when U comes from memory (inference keeps U between runs: a 14x14
 * layer's 9.4 MB of it, read as eight 1 KB rows at a time, ran at half the
 * speed of the same layer with U in the cache). */
_Static_assert(LANES == CT_TILE_ROWS, "a packed block of U is one transform group's lanes");

static bool packed_rows(int rows)
{
    return rows % CT_TILE_ROWS == 0 && ct_cpu_simd_avx512();
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

/* ---- vector helpers ---------------------------------------------------- */

/* r[j] becomes column j of the 8x8 matrix whose rows were r[0..7]. */
AVX2_INLINE void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* 4 vectors of 8 lanes -> 8 rows of 4 (lane l's row: out[l]), and back. */
AVX2_INLINE void lanes_to_rows4(const __m256 v[4], __m128 out[8])
{
    for (int half = 0; half < 2; half++) {
        __m128 a = half ? _mm256_extractf128_ps(v[0], 1) : _mm256_castps256_ps128(v[0]);
        __m128 b = half ? _mm256_extractf128_ps(v[1], 1) : _mm256_castps256_ps128(v[1]);
        __m128 c = half ? _mm256_extractf128_ps(v[2], 1) : _mm256_castps256_ps128(v[2]);
        __m128 d = half ? _mm256_extractf128_ps(v[3], 1) : _mm256_castps256_ps128(v[3]);
        _MM_TRANSPOSE4_PS(a, b, c, d);
        out[4 * half] = a, out[4 * half + 1] = b, out[4 * half + 2] = c, out[4 * half + 3] = d;
    }
}

AVX2_INLINE void rows4_to_lanes(const __m128 rows[8], __m256 v[4])
{
    __m128 a = rows[0], b = rows[1], c = rows[2], d = rows[3];
    __m128 e = rows[4], f = rows[5], g = rows[6], h = rows[7];
    _MM_TRANSPOSE4_PS(a, b, c, d);
    _MM_TRANSPOSE4_PS(e, f, g, h);
    v[0] = _mm256_set_m128(e, a), v[1] = _mm256_set_m128(f, b);
    v[2] = _mm256_set_m128(g, c), v[3] = _mm256_set_m128(h, d);
}

/* The 1-D transforms, on values `stride` vectors apart. */
AVX2_INLINE void apply_bt(const __m256 *d, int ds, __m256 *o, int os)
{
    __m256 four = _mm256_set1_ps(4.0f), two = _mm256_set1_ps(2.0f), five = _mm256_set1_ps(5.0f);
    __m256 d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    o[0] = _mm256_fmadd_ps(four, d0, _mm256_fnmadd_ps(five, d2, d4));
    o[os] = _mm256_fnmadd_ps(four, _mm256_add_ps(d1, d2), _mm256_add_ps(d3, d4));
    o[2 * os] = _mm256_fmadd_ps(four, _mm256_sub_ps(d1, d2), _mm256_sub_ps(d4, d3));
    o[3 * os] = _mm256_fmadd_ps(two, _mm256_sub_ps(d3, d1), _mm256_sub_ps(d4, d2));
    o[4 * os] = _mm256_fnmadd_ps(two, _mm256_sub_ps(d3, d1), _mm256_sub_ps(d4, d2));
    o[5 * os] = _mm256_fmadd_ps(four, d1, _mm256_fnmadd_ps(five, d3, d5));
}

AVX2_INLINE void apply_at(const __m256 *m, int ms, __m256 *o, int os)
{
    __m256 p12 = _mm256_add_ps(m[ms], m[2 * ms]), m12 = _mm256_sub_ps(m[ms], m[2 * ms]);
    __m256 p34 = _mm256_add_ps(m[3 * ms], m[4 * ms]), m34 = _mm256_sub_ps(m[3 * ms], m[4 * ms]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], p12), p34);
    o[os] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), m34, m12);
    o[2 * os] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), p34, p12);
    o[3 * os] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), m34, m12), m[5 * ms]);
}

/* A (6x4): the transpose of A^T, for the output gradient. */
AVX2_INLINE void apply_a(const __m256 *g, int gs, __m256 *o, int os)
{
    __m256 g0 = g[0], g1 = g[gs], g2 = g[2 * gs], g3 = g[3 * gs];
    __m256 p02 = _mm256_add_ps(g0, g2), p13 = _mm256_add_ps(g1, g3);
    __m256 q02 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), g2, g0);
    __m256 q13 = _mm256_fmadd_ps(_mm256_set1_ps(8.0f), g3, _mm256_add_ps(g1, g1));
    o[0] = g0;
    o[os] = _mm256_add_ps(p02, p13);
    o[2 * os] = _mm256_sub_ps(p02, p13);
    o[3 * os] = _mm256_add_ps(q02, q13);
    o[4 * os] = _mm256_sub_ps(q02, q13);
    o[5 * os] = g3;
}

/* G (6x3), for the weights. */
AVX2_INLINE void apply_g(const __m256 *g, int gs, __m256 *o, int os)
{
    __m256 g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    __m256 sixth = _mm256_set1_ps(1.0f / 6.0f);
    __m256 a = _mm256_mul_ps(_mm256_add_ps(g0, g2), sixth), b = _mm256_mul_ps(g1, sixth);
    __m256 c = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 24.0f), g0, _mm256_mul_ps(g2, sixth));
    __m256 e = _mm256_mul_ps(g1, _mm256_set1_ps(1.0f / 12.0f));
    o[0] = _mm256_mul_ps(g0, _mm256_set1_ps(0.25f));
    o[os] = _mm256_sub_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), b);
    o[2 * os] = _mm256_sub_ps(b, a);
    o[3 * os] = _mm256_add_ps(c, e);
    o[4 * os] = _mm256_sub_ps(c, e);
    o[5 * os] = g2;
}

/* G^T (3x6), for the weight gradient. */
AVX2_INLINE void apply_gt(const __m256 *v, int vs, __m256 *o, int os)
{
    __m256 v0 = v[0], v1 = v[vs], v2 = v[2 * vs], v3 = v[3 * vs], v4 = v[4 * vs], v5 = v[5 * vs];
    __m256 sixth = _mm256_set1_ps(1.0f / 6.0f);
    __m256 p12 = _mm256_add_ps(v1, v2), m21 = _mm256_sub_ps(v2, v1);
    __m256 p34 = _mm256_add_ps(v3, v4), m34 = _mm256_sub_ps(v3, v4);
    o[0] = _mm256_fmadd_ps(_mm256_set1_ps(0.25f), v0,
                           _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 24.0f), p34,
                                           _mm256_mul_ps(p12, _mm256_set1_ps(-1.0f / 6.0f))));
    o[os] = _mm256_fmadd_ps(m21, sixth, _mm256_mul_ps(m34, _mm256_set1_ps(1.0f / 12.0f)));
    o[2 * os] = _mm256_fmadd_ps(_mm256_sub_ps(p34, p12), sixth, v5);
}

/* ---- transforms ---------------------------------------------------------- */

/* Lane j keeps its value where j < n (n in [0, 8]), the others are 0. */
AVX2_INLINE __m256i first_lanes(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Row h of a 6x6 input window whose first column is w0 (8 floats, the last 2
 * unused): zeros outside the plane.  Inside, one load; at an edge a masked
 * load of the columns that exist, shifted into place at the left edge. */
AVX2_INLINE __m256 window_row(const wino_pass *p, const float *plane, int h, int w0)
{
    if (h < 0 || h >= p->in_h)
        return _mm256_setzero_ps();
    const float *row = plane + (size_t)h * p->in_w;
    if (w0 >= 0 && w0 + LANES <= p->in_w)
        return _mm256_loadu_ps(row + w0);
    int first = w0 > 0 ? w0 : 0, skip = first - w0; /* skip: columns left of the plane */
    int avail = p->in_w - first;                     /* columns from `first` on */
    __m256 v = _mm256_maskload_ps(row + first, first_lanes(avail < LANES ? avail : LANES));
    if (skip == 0)
        return v;
    __m256i index = _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                     _mm256_set1_epi32(skip));
    v = _mm256_permutevar8x32_ps(v, index); /* lane j <- column w0 + j */
    __m256i keep = _mm256_xor_si256(first_lanes(skip), _mm256_set1_epi32(-1));
    return _mm256_and_ps(v, _mm256_castsi256_ps(keep));
}

/* V[xi, c, col0 + l] = (B^T x_tile B)[xi] for the `lanes` tiles at[l] of
 * channel c (the other lanes get zeros). */
AVX2_INLINE void input_tiles(const wino_pass *p, const float *x, int c, const tile_at *at,
                             int lanes, float *v, size_t ld, int col0)
{
    __m256 d[ALPHA][LANES]; /* d[i][j] after the transposes */
    size_t plane_size = (size_t)p->in_h * p->in_w;
    for (int l = 0; l < LANES; l++) {
        if (l >= lanes) {
            for (int i = 0; i < ALPHA; i++)
                d[i][l] = _mm256_setzero_ps();
            continue;
        }
        const float *plane = x + ((size_t)at[l].image * p->in_c + c) * plane_size;
        int h0 = at[l].oh - p->pad_h, w0 = at[l].ow - p->pad_w;
        for (int i = 0; i < ALPHA; i++)
            d[i][l] = window_row(p, plane, h0 + i, w0);
    }
    for (int i = 0; i < ALPHA; i++)
        transpose8(d[i]);
    __m256 t[ALPHA][ALPHA], o[ALPHA][ALPHA];
    for (int j = 0; j < ALPHA; j++)
        apply_bt(&d[0][j], LANES, &t[0][j], ALPHA); /* columns: B^T d */
    for (int a = 0; a < ALPHA; a++)
        apply_bt(t[a], 1, o[a], 1);                 /* rows: (B^T d) B */
    for (int xi = 0; xi < POINTS; xi++)
        _mm256_storeu_ps(v + ((size_t)xi * p->in_c + c) * ld + col0, o[xi / ALPHA][xi % ALPHA]);
}


/* dM[xi, k, col0 + l] = (A dy_tile A^T)[xi] for the `lanes` tiles at[l] of
 * dy's channel k (p: the forward pass, whose outputs dy matches). */
AVX2_INLINE void grad_tiles(const wino_pass *p, const float *dy, int k, const tile_at *at,
                            int lanes, float *dm, size_t ld, int col0)
{
    __m128 rows[TILE][LANES];
    size_t plane_size = (size_t)p->out_h * p->out_w;
    for (int l = 0; l < LANES; l++) {
        const float *plane = l < lanes ? dy + ((size_t)at[l].image * p->out_c + k) * plane_size
                                       : NULL;
        int cols = plane ? p->out_w - at[l].ow : 0;
        __m128i mask = _mm256_castsi256_si128(first_lanes(cols < TILE ? cols : TILE));
        for (int r = 0; r < TILE; r++) {
            int h = plane ? at[l].oh + r : p->out_h;
            rows[r][l] = h >= p->out_h ? _mm_setzero_ps()
                         : cols >= TILE ? _mm_loadu_ps(plane + (size_t)h * p->out_w + at[l].ow)
                         : _mm_maskload_ps(plane + (size_t)h * p->out_w + at[l].ow, mask);
        }
    }
    __m256 g[TILE][TILE], u[ALPHA][TILE], o[ALPHA][ALPHA];
    for (int r = 0; r < TILE; r++)
        rows4_to_lanes(rows[r], g[r]);
    for (int q = 0; q < TILE; q++)
        apply_a(&g[0][q], TILE, &u[0][q], TILE);
    for (int a = 0; a < ALPHA; a++)
        apply_a(u[a], 1, o[a], 1);
    for (int xi = 0; xi < POINTS; xi++)
        _mm256_storeu_ps(dm + ((size_t)xi * p->out_c + k) * ld + col0, o[xi / ALPHA][xi % ALPHA]);
}


/* The `lanes` tiles at[l] of output channel k from M[., k, col0 + l]:
 * A^T M A, + bias, relu. */
AVX2_INLINE void output_tiles(const wino_pass *p, const float *m, int k, const tile_at *at,
                              int lanes, size_t ld, int col0, float bias, bool relu, float *y)
{
    __m256 mv[ALPHA][ALPHA], s[TILE][ALPHA], o[TILE][TILE];
    for (int xi = 0; xi < POINTS; xi++)
        mv[xi / ALPHA][xi % ALPHA] = _mm256_loadu_ps(m + ((size_t)xi * p->out_c + k) * ld + col0);
    for (int j = 0; j < ALPHA; j++)
        apply_at(&mv[0][j], ALPHA, &s[0][j], ALPHA);
    __m256 b = _mm256_set1_ps(bias), zero = _mm256_setzero_ps();
    for (int r = 0; r < TILE; r++) {
        apply_at(s[r], 1, o[r], 1);
        for (int q = 0; q < TILE; q++) {
            o[r][q] = _mm256_add_ps(o[r][q], b);
            if (relu)
                o[r][q] = _mm256_max_ps(zero, o[r][q]); /* NaN stays NaN */
        }
    }
    __m128 rows[TILE][LANES];
    for (int r = 0; r < TILE; r++)
        lanes_to_rows4(o[r], rows[r]);
    size_t plane_size = (size_t)p->out_h * p->out_w;
    for (int l = 0; l < lanes; l++) {
        float *plane = y + ((size_t)at[l].image * p->out_c + k) * plane_size;
        int cols = p->out_w - at[l].ow, n_rows = p->out_h - at[l].oh;
        __m128i mask = _mm256_castsi256_si128(first_lanes(cols < TILE ? cols : TILE));
        for (int r = 0; r < TILE && r < n_rows; r++) {
            float *dst = plane + (size_t)(at[l].oh + r) * p->out_w + at[l].ow;
            if (cols >= TILE)
                _mm_storeu_ps(dst, rows[r][l]);
            else
                _mm_maskstore_ps(dst, mask, rows[r][l]);
        }
    }
}


/* One transform over a block: channel by channel, 8 tiles at a time, in
 * parallel over (channel, 8 tiles). */
typedef enum transform_kind {
    INPUT_TILES,  /* src x or dy (the pass's input) -> dst V */
    GRAD_TILES,   /* src dy (the forward pass's output) -> dst dM */
    OUTPUT_TILES, /* src M -> dst y or dx, + bias, relu */
} transform_kind;

AVX2 static void transform_block(transform_kind kind, const wino_pass *p, const float *src,
                                 const tile_at *at, int count, int width, const float *bias,
                                 bool relu, float *dst)
{
    int channels = kind == INPUT_TILES ? p->in_c : p->out_c;
    int groups = width / LANES, items = channels * groups;
#pragma omp parallel for schedule(static)
    for (int item = 0; item < items; item++) {
        int ch = item / groups, first = item % groups * LANES;
        int lanes = count - first < LANES ? count - first : LANES;
        if (kind == INPUT_TILES)
            input_tiles(p, src, ch, at + first, lanes, dst, (size_t)width, first);
        else if (kind == GRAD_TILES)
            grad_tiles(p, src, ch, at + first, lanes, dst, (size_t)width, first);
        else
            output_tiles(p, src, ch, at + first, lanes, (size_t)width, first,
                         bias ? bias[ch] : 0.0f, relu, dst);
    }
}

/* U[xi, p] = (G w_p G^T)[xi] for the count = K*C kernels p = k*C + c; with
 * flip, p = c*K + k and w_p = w[k, c] turned by 180 degrees (backward data). */
AVX2 static void weight_transform(const float *w, int out_c, int in_c, bool flip, float *u)
{
    /* the pass's U[xi] is [rows, cols]: [K, C], or [C, K] flipped */
    int rows = flip ? in_c : out_c, cols = flip ? out_c : in_c, count = out_c * in_c;
    bool packed = packed_rows(rows);
    int groups = ceil_div(count, LANES);
#pragma omp parallel for schedule(static)
    for (int g = 0; g < groups; g++) {
        /* the group's lanes: 8 elements along a row of U, or packed, down a
         * column (one block of 8 rows, stored together) */
        int p0 = g * LANES, lanes = count - p0 < LANES ? count - p0 : LANES;
        float gathered[9][LANES] = {{0}};
        for (int l = 0; l < lanes; l++) {
            int r = packed ? g / cols * LANES + l : (p0 + l) / cols;
            int q = packed ? g % cols : (p0 + l) % cols;
            const float *kernel = w + ((size_t)(flip ? q : r) * in_c + (flip ? r : q)) * 9;
            for (int e = 0; e < 9; e++)
                gathered[e][l] = kernel[flip ? 8 - e : e];
        }
        __m256 kv[3][3], t[ALPHA][3], o[ALPHA][ALPHA];
        for (int e = 0; e < 9; e++)
            kv[e / 3][e % 3] = _mm256_loadu_ps(gathered[e]);
        for (int j = 0; j < 3; j++)
            apply_g(&kv[0][j], 3, &t[0][j], 3);
        for (int a = 0; a < ALPHA; a++)
            apply_g(t[a], 1, o[a], 1);
        /* packed: block g / cols, column g % cols, at ((g / cols) * cols +
         * g % cols) * 8 = g * 8, the same place as the plain layout's */
        for (int xi = 0; xi < POINTS; xi++) {
            float *dst = u + (size_t)xi * count + p0;
            if (lanes == LANES) {
                _mm256_storeu_ps(dst, o[xi / ALPHA][xi % ALPHA]);
            } else {
                float tmp[LANES];
                _mm256_storeu_ps(tmp, o[xi / ALPHA][xi % ALPHA]);
                memcpy(dst, tmp, sizeof(float) * (size_t)lanes);
            }
        }
    }
}

/* dw[p] = G^T dU[., p] G for the count = K*C kernels p = k*C + c. */
AVX2 static void weight_grad_transform(const float *du, int count, float *dw)
{
    int groups = ceil_div(count, LANES);
#pragma omp parallel for schedule(static)
    for (int g = 0; g < groups; g++) {
        int p0 = g * LANES, lanes = count - p0 < LANES ? count - p0 : LANES;
        __m256 dv[ALPHA][ALPHA], s[3][ALPHA], o[3][3];
        for (int xi = 0; xi < POINTS; xi++) {
            float tmp[LANES] = {0};
            memcpy(tmp, du + (size_t)xi * count + p0, sizeof(float) * (size_t)lanes);
            dv[xi / ALPHA][xi % ALPHA] = _mm256_loadu_ps(tmp);
        }
        for (int b = 0; b < ALPHA; b++)
            apply_gt(&dv[0][b], ALPHA, &s[0][b], ALPHA);
        for (int i = 0; i < 3; i++)
            apply_gt(s[i], 1, o[i], 1);
        float out[9][LANES];
        for (int e = 0; e < 9; e++)
            _mm256_storeu_ps(out[e], o[e / 3][e % 3]);
        for (int l = 0; l < lanes; l++)
            for (int e = 0; e < 9; e++)
                dw[(size_t)(p0 + l) * 9 + e] = out[e][l];
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

/* multiply_points on the tile: threads take (point, 8 rows of K) units.
 * width is a multiple of 8, not 16: a row's last vector may read 8 floats
 * past it (into the next row, or past V's last into M, all workspace);
 * those lanes of the sums are never stored. */
__attribute__((target("avx512f"))) static void multiply_points_tiled(const wino_pass *p,
                                                                     const float *u,
                                                                     const float *v, float *m,
                                                                     int width)
{
    int k = p->out_c, c = p->in_c, row_blocks = k / CT_TILE_ROWS;
#pragma omp parallel for schedule(static)
    for (int unit = 0; unit < POINTS * row_blocks; unit++) {
        int xi = unit / row_blocks, r = unit % row_blocks * CT_TILE_ROWS;
        const float *a = u + ((size_t)xi * k + r) * c, *b = v + (size_t)xi * c * width;
        /* a: rows r..r+7, packed: (i, c) at a[c * 8 + i] */
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
                    ct_panel_tile(3, last, depth, ak, 1, CT_TILE_ROWS, bk, width, ck, width,
                                  c0 > 0, false, NULL, false);
                else if (vectors == 2)
                    ct_panel_tile(2, last, depth, ak, 1, CT_TILE_ROWS, bk, width, ck, width,
                                  c0 > 0, false, NULL, false);
                else
                    ct_panel_tile(1, last, depth, ak, 1, CT_TILE_ROWS, bk, width, ck, width,
                                  c0 > 0, false, NULL, false);
            }
        }
    }
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
        transform_block(INPUT_TILES, p, in, ws.at, count, width, NULL, false, ws.v);
        multiply_points(p, u, ws.v, ws.m, width);
        transform_block(OUTPUT_TILES, p, ws.m, ws.at, count, width, bias, relu, out);
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
    weight_transform(w, s->out_channels, s->in_channels, false, u);
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
    weight_transform(w, s->out_channels, s->in_channels, true, ws.u);
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
        transform_block(INPUT_TILES, &p, x, ws.at, count, width, NULL, false, ws.v);
        transform_block(GRAD_TILES, &p, dy, ws.at, count, width, NULL, false, ws.m);
#pragma omp parallel for schedule(static)
        for (int xi = 0; xi < POINTS; xi++)
            ct_cpu_gemm(false, true, k, c, width, 1.0f, ws.m + (size_t)xi * k * width, width,
                        ws.v + (size_t)xi * c * width, width, t0 == 0 ? 0.0f : 1.0f,
                        ws.u + (size_t)xi * k * c, c);
    }
    weight_grad_transform(ws.u, k * c, dw);
}

#endif
