/*
 * The AVX2 transforms of the Winograd convolution F(4x4, 3x3)
 * (conv_winograd.c has the algorithm): input tiles B^T x B, gradient tiles
 * A dy A^T, output tiles A^T M A (+ bias, relu), and the weights' G w G^T
 * and its adjoint, eight tiles or kernels per vector.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "cpu/winograd_transforms.h"
#include "cpu/threads.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

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

AVX2 void ct_wino_transform_block(transform_kind kind, const wino_pass *p, const float *src,
                                 const tile_at *at, int count, int width, const float *bias,
                                 bool relu, float *dst)
{
    int channels = kind == INPUT_TILES ? p->in_c : p->out_c;
    int groups = width / LANES, items = channels * groups;
    ct_cpu_openmp_region();
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
AVX2 void ct_wino_weight_transform(const float *w, int out_c, int in_c, bool flip, float *u)
{
    /* the pass's U[xi] is [rows, cols]: [K, C], or [C, K] flipped */
    int rows = flip ? in_c : out_c, cols = flip ? out_c : in_c, count = out_c * in_c;
    bool packed = packed_rows(rows);
    int groups = ceil_div(count, LANES);
    ct_cpu_openmp_region();
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
AVX2 void ct_wino_weight_grad_transform(const float *du, int count, float *dw)
{
    int groups = ceil_div(count, LANES);
    ct_cpu_openmp_region();
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

#endif
