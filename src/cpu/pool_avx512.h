/*
 * The 16-window AVX-512 core of max pooling 2x2/2, for the kernels that
 * pool 16 windows a vector: pool_avx2.c, from memory, and the flat
 * convolution (conv_flat.c), from its accumulators.  Each function is
 * inlined; the lanes of a windows16 are windows, its four vectors the
 * windows' four inputs.  The rule is pool.c's: NaN wins, otherwise a
 * strictly larger value, so the first maximum in row-major window order is
 * the argmax.
 */
#ifndef CT_CPU_POOL_AVX512_H
#define CT_CPU_POOL_AVX512_H

#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include "cpu/kernels.h"

#define CT_POOL_AVX512 __attribute__((target("avx2,fma,avx512f")))
#define CT_POOL_AVX512_INLINE \
    __attribute__((target("avx2,fma,avx512f"), always_inline)) static inline
#define AVX512_INLINE CT_POOL_AVX512_INLINE

/* candidate > current, or candidate is NaN. */
AVX512_INLINE __mmask16 replaces16(__m512 candidate, __m512 current)
{
    return _mm512_cmp_ps_mask(candidate, current, _CMP_GT_OQ) |
           _mm512_cmp_ps_mask(candidate, candidate, _CMP_UNORD_Q);
}

/* Up to 16 windows of one output row from 2 input rows: windows lanes. */
typedef struct windows16 {
    __m512 top_left, top_right, bottom_left, bottom_right;
    __mmask16 lanes, lo, hi; /* the windows; the 32 inputs a row: low and high 16 */
} windows16;

/* The windows' max: NaN wins, else the first strictly larger input. */
AVX512_INLINE __m512 window_max16(windows16 win)
{
    __m512 m = win.top_left;
    m = _mm512_mask_mov_ps(m, replaces16(win.top_right, m), win.top_right);
    m = _mm512_mask_mov_ps(m, replaces16(win.bottom_left, m), win.bottom_left);
    return _mm512_mask_mov_ps(m, replaces16(win.bottom_right, m), win.bottom_right);
}

/* The windows' max (window_max16's rule) and pick[k]: window element k
 * replaced the max so far (the last one to replace it is the argmax). */
AVX512_INLINE __m512 window_picks16(windows16 win, __mmask16 pick[4])
{
    __m512 m = win.top_left;
    pick[1] = replaces16(win.top_right, m);
    m = _mm512_mask_mov_ps(m, pick[1], win.top_right);
    pick[2] = replaces16(win.bottom_left, m);
    m = _mm512_mask_mov_ps(m, pick[2], win.bottom_left);
    pick[3] = replaces16(win.bottom_right, m);
    return _mm512_mask_mov_ps(m, pick[3], win.bottom_right);
}

/* The windows' codes (kernels.h) from window_picks16's picks and max. */
AVX512_INLINE __m512i window_codes16(const __mmask16 pick[4], __m512 m)
{
    __m512i code = _mm512_maskz_mov_epi32((__mmask16)((pick[1] & ~pick[2]) | pick[3]),
                                          _mm512_set1_epi32(CT_POOL_CODE_RIGHT));
    code = _mm512_mask_or_epi32(code, (__mmask16)(pick[2] | pick[3]), code,
                                _mm512_set1_epi32(CT_POOL_CODE_DOWN));
    return _mm512_mask_or_epi32(code, _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_NLE_UQ),
                                code, _mm512_set1_epi32(CT_POOL_CODE_PASS));
}

#undef AVX512_INLINE

#endif
#endif
