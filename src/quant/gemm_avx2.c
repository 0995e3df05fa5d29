/*
 * The INT8 GEMM's AVX2 path: tiles of MR x NR = 6 x 16 outputs.
 *
 * vpmaddubsw (uint8 x int8 -> int16 pair sums) would saturate: two products
 * of 255 and 127 sum to 64770 > 32767.  So both operands are widened to
 * int16 when packed (weights once at load, sign-extended; activations per
 * call, zero-extended) and multiplied with vpmaddwd, whose int16 x int16
 * pair sums go to int32: |255 * 127 * 2| is far from overflow, and the int32
 * accumulation is exact (depth <= CT_INT8_MAX_DEPTH).  Per pair of k:
 *   acc[r][0:16] += (w[r, k], w[r, k+1]) . (b[k, n], b[k+1, n])  for n in the panel
 * one broadcast pair of weights, two vectors of 8 columns' pairs, 12
 * vpmaddwd + 12 vpaddd: 192 multiply-adds.  Per vpmaddwd that is the
 * throughput of vpmaddubsw + vpmaddwd (32 multiply-adds in two multiplies).
 *
 * The epilogue runs in vectors with the scalar rule's operations in its
 * order (int8_paths.h): the same bits.
 */
#include "quant/int8_paths.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2")))
#define AVX2_INLINE __attribute__((target("avx2"), always_inline)) static inline

enum { MR = 6, NR = 16, KG = 2, LANES = 8 };

/* Panel [k/2][16][2] int16 from two rows of 16 bytes at a time. */
AVX2 static void pack_b_panel(const ct_int8_gemm_args *g, int depth, int n0, int cols,
                              void *panel)
{
    (void)cols; /* always NR: packs_partial is false */
    const uint8_t *b = (const uint8_t *)g->b.data + n0;
    int16_t *dst = panel;
    for (int k = 0; k + KG <= depth; k += KG, dst += NR * KG) {
        __m128i r0 = _mm_loadu_si128((const __m128i *)(b + k * g->b.row_stride));
        __m128i r1 = _mm_loadu_si128((const __m128i *)(b + (k + 1) * g->b.row_stride));
        _mm256_storeu_si256((__m256i *)dst, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(r0, r1)));
        _mm256_storeu_si256((__m256i *)(dst + NR), _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(r0, r1)));
    }
}

/* v = (float)(acc - correction) * scale + bias, then relu: the scalar rule. */
AVX2_INLINE __m256 epilogue8(__m256i acc, ct_int8_row row, bool relu)
{
    __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc, _mm256_set1_epi32(row.correction)));
    v = _mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(row.scale)), _mm256_set1_ps(row.bias));
    /* maxps returns its second operand when either is NaN: v < 0 ? 0 : v */
    return relu ? _mm256_max_ps(_mm256_setzero_ps(), v) : v;
}

/* ct_int8_requantize on 8 lanes, as int32 in [0, 255]. */
AVX2_INLINE __m256i requantize8(__m256 v, float inv_scale, int32_t zero_point)
{
    __m256 t = _mm256_mul_ps(v, _mm256_set1_ps(inv_scale));
    t = _mm256_max_ps(t, _mm256_set1_ps(-CT_INT8_QUANT_CLAMP)); /* NaN -> low end */
    t = _mm256_min_ps(t, _mm256_set1_ps(CT_INT8_QUANT_CLAMP));
    __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(t), _mm256_set1_epi32(zero_point));
    return _mm256_min_epi32(_mm256_max_epi32(q, _mm256_setzero_si256()), _mm256_set1_epi32(255));
}

/* 16 bytes from two vectors of int32 in [0, 255]: lo's 8, then hi's. */
AVX2_INLINE __m128i narrow16(__m256i lo, __m256i hi)
{
    /* per 128-bit lane: lo[0..3] hi[0..3] | lo[4..7] hi[4..7] as bytes, repeated */
    __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(lo, hi), _mm256_setzero_si256());
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    return _mm256_castsi256_si128(bytes);
}

/* One row of a tile: 16 sums to out[m, n0 .. n0+cols). */
AVX2_INLINE void store_row(const ct_int8_gemm_args *g, const int32_t *sums, int m, int n0,
                           int cols)
{
    ct_int8_row row = ct_int8_row_of(g, m);
    __m256 v0 = epilogue8(_mm256_loadu_si256((const __m256i *)sums), row, g->e->relu);
    __m256 v1 = epilogue8(_mm256_loadu_si256((const __m256i *)(sums + LANES)), row, g->e->relu);
    bool direct = cols == NR && g->out.col_stride == 1;
    ptrdiff_t at = m * g->out.row_stride + n0;
    if (g->e->out_u8) {
        int32_t zero_point = g->e->out_q.zero_point;
        __m128i q = narrow16(requantize8(v0, g->out_inv_scale, zero_point),
                             requantize8(v1, g->out_inv_scale, zero_point));
        uint8_t staged[NR];
        _mm_storeu_si128((__m128i *)(direct ? (uint8_t *)g->out.data + at : staged), q);
        if (!direct)
            ct_int8_store_row(g, m, n0, cols, staged);
    } else {
        float staged[NR];
        float *dst = direct ? (float *)g->out.data + at : staged;
        _mm256_storeu_ps(dst, v0);
        _mm256_storeu_ps(dst + LANES, v1);
        if (!direct)
            ct_int8_store_row(g, m, n0, cols, staged);
    }
}

AVX2 static void tile(const ct_int8_gemm_args *g, int k_groups, const void *a_panel,
                      const void *b_panel, int m0, int rows, int n0, int cols)
{
    const int16_t *a = a_panel, *b = b_panel;
    __m256i acc[MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int p = 0; p < k_groups; p++, a += MR * KG, b += NR * KG) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + NR));
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            int32_t pair;
            memcpy(&pair, a + r * KG, sizeof pair);
            __m256i w = _mm256_set1_epi32(pair);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(w, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(w, b1));
        }
    }
    /* the registers to memory with constant indices only, so that acc
     * stays in registers through the loop */
    int32_t sums[MR][NR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_si256((__m256i *)sums[r], acc[r][0]);
        _mm256_storeu_si256((__m256i *)(sums[r] + LANES), acc[r][1]);
    }
    for (int r = 0; r < rows; r++)
        store_row(g, sums[r], m0 + r, n0, cols);
}

AVX2 static void quantize(int64_t count, const float *x, float inv_scale, int32_t zero_point,
                          uint8_t *q)
{
    int64_t i = 0;
    for (; i + 2 * LANES <= count; i += 2 * LANES)
        _mm_storeu_si128((__m128i *)(q + i),
                         narrow16(requantize8(_mm256_loadu_ps(x + i), inv_scale, zero_point),
                                  requantize8(_mm256_loadu_ps(x + i + LANES), inv_scale,
                                              zero_point)));
    if (i < count) {
        float staged[2 * LANES] = {0};
        uint8_t out[2 * LANES];
        memcpy(staged, x + i, sizeof(float) * (count - i));
        _mm_storeu_si128((__m128i *)out,
                         narrow16(requantize8(_mm256_loadu_ps(staged), inv_scale, zero_point),
                                  requantize8(_mm256_loadu_ps(staged + LANES), inv_scale,
                                              zero_point)));
        memcpy(q + i, out, count - i);
    }
}

const ct_int8_path_i ct_int8_avx2_path = {MR, NR, KG, 2, false, pack_b_panel, NULL, tile,
                                           quantize};

#endif
