/*
 * The INT8 GEMM's AVX-512 VNNI path: tiles of MR x NR = 8 x 32 outputs.
 *
 * vpdpbusd adds four uint8 x int8 products to each int32 lane without
 * saturating, so the packed operands stay bytes: the weights as
 * [k/4][8 rows][4 k], the activations as [k/4][32 columns][4 k].  Per four k:
 *   acc[r][0:32] += sum_{j<4} w[r, k+j] * b[k+j, n]
 * two loads of 16 columns' four bytes, eight broadcasts of a row's four
 * weights, 16 vpdpbusd: 1024 multiply-adds.  The sum is exact and wraps
 * like the reference's (depth <= CT_INT8_MAX_DEPTH keeps it in range).
 *
 * The epilogue runs in 16-lane vectors with the scalar rule's operations in
 * its order (int8_paths.h), partial tiles through masked stores: the same
 * bits as the reference.
 */
#include "quant/int8_paths.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define VNNI_INLINE \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline

enum { MR = 8, NR = 32, KG = 4, LANES = 16 };

/* The lanes [0, count) of a vector (count may be <= 0 or > 16). */
static __mmask16 lanes_mask(int count)
{
    return count >= LANES ? (__mmask16)0xFFFF : count <= 0 ? 0 : (__mmask16)((1u << count) - 1);
}

/* Panel [k/4][32][4] bytes: four rows of 16 columns interleaved at a time;
 * the columns from cols on read as zeros (masked loads touch no byte past
 * them). */
VNNI static void pack_b_panel(const ct_int8_gemm_args *g, int depth, int n0, int cols,
                              void *panel)
{
    uint8_t *dst = panel;
    ptrdiff_t stride = g->b.row_stride;
    __mmask16 masks[NR / LANES] = {lanes_mask(cols), lanes_mask(cols - LANES)};
    for (int k = 0; k + KG <= depth; k += KG) {
        for (int half = 0; half < NR; half += LANES, dst += LANES * KG) {
            const uint8_t *b = (const uint8_t *)g->b.data + k * stride + n0 + half;
            __mmask16 mask = masks[half / LANES];
            __m128i r0 = _mm_maskz_loadu_epi8(mask, b);
            __m128i r1 = _mm_maskz_loadu_epi8(mask, b + stride);
            __m128i r2 = _mm_maskz_loadu_epi8(mask, b + 2 * stride);
            __m128i r3 = _mm_maskz_loadu_epi8(mask, b + 3 * stride);
            __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
            __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
            _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(lo01, lo23));
            _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(lo01, lo23));
            _mm_storeu_si128((__m128i *)(dst + 32), _mm_unpacklo_epi16(hi01, hi23));
            _mm_storeu_si128((__m128i *)(dst + 48), _mm_unpackhi_epi16(hi01, hi23));
        }
    }
}

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

/* The same panel read from padded images (ct_int8_image), without an
 * im2col matrix: each row k of the panel is 32 bytes picked from a 128-byte
 * window of the image by one two-source byte permute (vpermt2b), with a
 * second window where the panel's columns run into the next image; four
 * rows then interleave into the [32][4] layout by two more permutes.
 * False where a column lies 128 bytes or more past its window's start
 * (rows wider than about 96 pixels) or the panel spans three images: the
 * shared code packs those panels. */
VBMI static bool pack_image_panel(const ct_int8_gemm_args *g, int depth, int n0, int cols,
                                  void *panel)
{
    enum { WINDOW = 128 };
    const ct_int8_image *im = g->image;
    uint8_t rel[2][64] = {{0}};
    ptrdiff_t base[2] = {ct_int8_image_column(im, n0), 0};
    int first_image = n0 / im->image_columns;
    uint64_t second = 0; /* columns from the second image */
    for (int c = 0; c < cols; c++) {
        int n = n0 + c, image = n / im->image_columns - first_image;
        ptrdiff_t at = ct_int8_image_column(im, n);
        if (image > 1)
            return false;
        if (image == 1 && !second)
            base[1] = at; /* its first column: the lowest place */
        second |= (uint64_t)image << c;
        if (at - base[image] >= WINDOW)
            return false;
        rel[image][c] = (uint8_t)(at - base[image]);
    }
    /* out[4c + j] = row j's byte c: rows 0, 1 in the first table, 2, 3 in
     * the second, 32 bytes each */
    uint8_t interleave[2][64];
    for (int half = 0; half < 2; half++)
        for (int c = 0; c < LANES; c++)
            for (int j = 0; j < KG; j++)
                interleave[half][KG * c + j] = (uint8_t)(32 * j + LANES * half + c);
    __m512i index[2] = {_mm512_loadu_si512(rel[0]), _mm512_loadu_si512(rel[1])};
    __m512i order_lo = _mm512_loadu_si512(interleave[0]);
    __m512i order_hi = _mm512_loadu_si512(interleave[1]);
    uint8_t *dst = panel;
    for (int k = 0; k + KG <= depth; k += KG, dst += NR * KG) {
        __m256i rows[KG];
        for (int j = 0; j < KG; j++) {
            const uint8_t *at = im->xp + im->row_offset[k + j] + base[0];
            __m512i v = _mm512_permutex2var_epi8(_mm512_loadu_si512(at), index[0],
                                                 _mm512_loadu_si512(at + 64));
            if (second) {
                at = im->xp + im->row_offset[k + j] + base[1];
                __m512i w = _mm512_permutex2var_epi8(_mm512_loadu_si512(at), index[1],
                                                     _mm512_loadu_si512(at + 64));
                v = _mm512_mask_blend_epi8(second, v, w);
            }
            rows[j] = _mm512_castsi512_si256(v);
        }
        __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(rows[0]), rows[1], 1);
        __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(rows[2]), rows[3], 1);
        _mm512_storeu_si512(dst, _mm512_permutex2var_epi8(a, order_lo, b));
        _mm512_storeu_si512(dst + 64, _mm512_permutex2var_epi8(a, order_hi, b));
    }
    return true;
}

/* v = (float)(acc - correction) * scale + bias, then relu: the scalar rule. */
VNNI_INLINE __m512 epilogue16(__m512i acc, ct_int8_row row, bool relu)
{
    __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_set1_epi32(row.correction)));
    v = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(row.scale)), _mm512_set1_ps(row.bias));
    /* maxps returns its second operand when either is NaN: v < 0 ? 0 : v */
    return relu ? _mm512_max_ps(_mm512_setzero_ps(), v) : v;
}

/* ct_int8_requantize on 16 lanes, as int32 in [0, 255]. */
VNNI_INLINE __m512i requantize16(__m512 v, float inv_scale, int32_t zero_point)
{
    __m512 t = _mm512_mul_ps(v, _mm512_set1_ps(inv_scale));
    t = _mm512_max_ps(t, _mm512_set1_ps(-CT_INT8_QUANT_CLAMP)); /* NaN -> low end */
    t = _mm512_min_ps(t, _mm512_set1_ps(CT_INT8_QUANT_CLAMP));
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(t), _mm512_set1_epi32(zero_point));
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), _mm512_set1_epi32(255));
}

/* One row of a tile: 32 sums to out[m, n0 .. n0+cols). */
VNNI_INLINE void store_row(const ct_int8_gemm_args *g, const int32_t *sums, int m, int n0,
                           int cols)
{
    ct_int8_row row = ct_int8_row_of(g, m);
    bool direct = g->out.col_stride == 1;
    ptrdiff_t at = m * g->out.row_stride + n0;
    uint8_t staged_u8[NR];
    float staged_f32[NR];
    for (int half = 0; half < NR; half += LANES) {
        __m512 v = epilogue16(_mm512_loadu_si512(sums + half), row, g->e->relu);
        __mmask16 mask = direct ? lanes_mask(cols - half) : 0xFFFF;
        if (g->e->out_u8)
            _mm512_mask_cvtepi32_storeu_epi8(
                (direct ? (uint8_t *)g->out.data + at : staged_u8) + half, mask,
                requantize16(v, g->out_inv_scale, g->e->out_q.zero_point));
        else
            _mm512_mask_storeu_ps((direct ? (float *)g->out.data + at : staged_f32) + half, mask,
                                  v);
    }
    if (!direct)
        ct_int8_store_row(g, m, n0, cols, g->e->out_u8 ? (void *)staged_u8 : staged_f32);
}

VNNI static void tile(const ct_int8_gemm_args *g, int k_groups, const void *a_panel,
                      const void *b_panel, int m0, int rows, int n0, int cols)
{
    const int8_t *a = a_panel;
    const uint8_t *b = b_panel;
    __m512i acc[MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    for (int p = 0; p < k_groups; p++, a += MR * KG, b += NR * KG) {
        __m512i b0 = _mm512_loadu_si512(b);
        __m512i b1 = _mm512_loadu_si512(b + LANES * KG);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            int32_t quad;
            memcpy(&quad, a + r * KG, sizeof quad);
            __m512i w = _mm512_set1_epi32(quad);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], b0, w);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], b1, w);
        }
    }
    /* the registers to memory with constant indices only, so that acc
     * stays in registers through the loop */
    int32_t sums[MR][NR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        _mm512_storeu_si512(sums[r], acc[r][0]);
        _mm512_storeu_si512(sums[r] + LANES, acc[r][1]);
    }
    for (int r = 0; r < rows; r++)
        store_row(g, sums[r], m0 + r, n0, cols);
}

VNNI static void quantize(int64_t count, const float *x, float inv_scale, int32_t zero_point,
                          uint8_t *q)
{
    for (int64_t i = 0; i < count; i += LANES) {
        __mmask16 mask = lanes_mask(count - i < LANES ? (int)(count - i) : LANES);
        __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
        _mm512_mask_cvtepi32_storeu_epi8(q + i, mask, requantize16(v, inv_scale, zero_point));
    }
}

const ct_int8_path_i ct_int8_vnni_path = {MR, NR, KG, 1, true, pack_b_panel, pack_image_panel,
                                           tile, quantize};

#endif
