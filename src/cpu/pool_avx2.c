/*
 * Max pooling 2x2/2, forward and backward, with SSE/AVX compares and blends,
 * four windows at a time: the branch-free form of pool.c's maxpool_2x2_plane
 * and maxpool_2x2_backward_plane (a branchy argmax mispredicts on every
 * other window of real activations); on AVX-512, 16 windows at a time with
 * mask-register compares where a row has at least 8 windows (SimpleCNN's
 * 24-wide conv1 outputs: forward 26 -> 15 us, backward 55 -> 35 us a batch
 * of 64, docs/perf.md), and for the forward of rows of 4 windows (its 8x8
 * conv2 outputs: 7.1 -> 3.8 us; the same for the backward measured 16 ->
 * 21 us inside the step, though faster alone, so it stays on SSE there).
 * Same rule as pool.c: NaN wins, otherwise a strictly larger value, so the
 * first maximum in row-major window order takes the gradient.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/pool_avx2.h"
#include "cpu/pool_avx512.h"

#define AVX2 __attribute__((target("avx2,fma")))

enum { WINDOWS = 4 }; /* windows per 128-bit vector */

/* candidate > current, or candidate is NaN: all-ones lanes where it replaces. */
static inline AVX2 __m128 replaces(__m128 candidate, __m128 current)
{
    return _mm_or_ps(_mm_cmpgt_ps(candidate, current), _mm_cmpunord_ps(candidate, candidate));
}

/* The four windows' top-left, top-right, bottom-left, bottom-right inputs. */
typedef struct windows4 {
    __m128 top_left, top_right, bottom_left, bottom_right;
} windows4;

static inline AVX2 windows4 load_windows(const float *row0, const float *row1)
{
    __m128 lo = _mm_loadu_ps(row0), hi = _mm_loadu_ps(row0 + 4);
    windows4 win;
    win.top_left = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    win.top_right = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    lo = _mm_loadu_ps(row1);
    hi = _mm_loadu_ps(row1 + 4);
    win.bottom_left = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    win.bottom_right = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    return win;
}

/* The windows' max (the forward's rule) and pick[k]: all-ones lanes where
 * window element k replaced the max so far (the last one to replace it is
 * the argmax). */
static inline AVX2 __m128 window_picks(windows4 win, __m128 pick[4])
{
    __m128 m = win.top_left;
    pick[1] = replaces(win.top_right, m);
    m = _mm_blendv_ps(m, win.top_right, pick[1]);
    pick[2] = replaces(win.bottom_left, m);
    m = _mm_blendv_ps(m, win.bottom_left, pick[2]);
    pick[3] = replaces(win.bottom_right, m);
    return _mm_blendv_ps(m, win.bottom_right, pick[3]);
}

/* ct_relu_grad(max, g): 0 where max <= 0, NaN passes. */
static inline AVX2 __m128 relu_grad4(__m128 max, __m128 g)
{
    return _mm_and_ps(g, _mm_cmp_ps(max, _mm_setzero_ps(), _CMP_NLE_UQ));
}

AVX2 int ct_cpu_maxpool2x2_forward_avx2(int in_w, int out_h, int out_w, const float *x,
                                        float *y)
{
    int vec_w = out_w / WINDOWS * WINDOWS;
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        for (int ow = 0; ow < vec_w; ow += WINDOWS) {
            windows4 win = load_windows(row0 + 2 * ow, row1 + 2 * ow);
            __m128 m = win.top_left;
            m = _mm_blendv_ps(m, win.top_right, replaces(win.top_right, m));
            m = _mm_blendv_ps(m, win.bottom_left, replaces(win.bottom_left, m));
            m = _mm_blendv_ps(m, win.bottom_right, replaces(win.bottom_right, m));
            _mm_storeu_ps(y + (long)oh * out_w + ow, m);
        }
    }
    return vec_w;
}

AVX2 int ct_cpu_maxpool2x2_argmax_avx2(int in_w, int out_h, int out_w, const float *x,
                                       const float *dy, bool relu, int at_w, int *at, float *g)
{
    int vec_w = out_w / WINDOWS * WINDOWS;
    const __m128i right = _mm_set1_epi32(1), down = _mm_set1_epi32(at_w);
    const __m128i lanes = _mm_setr_epi32(0, 2, 4, 6);
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        for (int ow = 0; ow < vec_w; ow += WINDOWS) {
            windows4 win = load_windows(row0 + 2 * ow, row1 + 2 * ow);
            __m128 pick[4];
            __m128 m = window_picks(win, pick);
            __m128i column =
                _mm_castps_si128(_mm_or_ps(_mm_andnot_ps(pick[2], pick[1]), pick[3]));
            __m128i row = _mm_castps_si128(_mm_or_ps(pick[2], pick[3]));
            __m128i where = _mm_add_epi32(_mm_set1_epi32(2 * oh * at_w + 2 * ow), lanes);
            where = _mm_add_epi32(where, _mm_and_si128(column, right));
            where = _mm_add_epi32(where, _mm_and_si128(row, down));
            _mm_storeu_si128((__m128i *)(at + (long)oh * out_w + ow), where);
            __m128 grad = _mm_loadu_ps(dy + (long)oh * out_w + ow);
            if (relu)
                grad = relu_grad4(m, grad);
            _mm_storeu_ps(g + (long)oh * out_w + ow, grad);
        }
    }
    return vec_w;
}

/* The windows' codes (kernels.h) from window_picks' picks and max. */
static inline AVX2 __m128i window_codes4(const __m128 pick[4], __m128 m)
{
    __m128 right = _mm_or_ps(_mm_andnot_ps(pick[2], pick[1]), pick[3]);
    __m128 down = _mm_or_ps(pick[2], pick[3]);
    __m128 pass = _mm_cmp_ps(m, _mm_setzero_ps(), _CMP_NLE_UQ);
    __m128i code = _mm_and_si128(_mm_castps_si128(right), _mm_set1_epi32(CT_POOL_CODE_RIGHT));
    code = _mm_or_si128(code, _mm_and_si128(_mm_castps_si128(down),
                                            _mm_set1_epi32(CT_POOL_CODE_DOWN)));
    return _mm_or_si128(code, _mm_and_si128(_mm_castps_si128(pass),
                                            _mm_set1_epi32(CT_POOL_CODE_PASS)));
}

AVX2 int ct_cpu_maxpool2x2_codes_avx2(int in_w, int out_h, int out_w, const float *x, float *y,
                                      uint8_t *codes)
{
    int vec_w = out_w / WINDOWS * WINDOWS;
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        for (int ow = 0; ow < vec_w; ow += WINDOWS) {
            windows4 win = load_windows(row0 + 2 * ow, row1 + 2 * ow);
            __m128 pick[4];
            __m128 m = window_picks(win, pick);
            __m128i code = window_codes4(pick, m);
            code = _mm_packus_epi16(_mm_packus_epi32(code, code), code);
            int bytes = _mm_cvtsi128_si32(code);
            _mm_storeu_ps(y + (long)oh * out_w + ow, m);
            memcpy(codes + (long)oh * out_w + ow, &bytes, sizeof bytes);
        }
    }
    return vec_w;
}

AVX2 int ct_cpu_pool_codes_argmax_avx2(int windows, const int *base, const uint8_t *codes,
                                       const float *dy, bool relu, int at_w, int *at, float *g)
{
    enum { EIGHT = 8 };
    const __m256i right = _mm256_set1_epi32(CT_POOL_CODE_RIGHT);
    const __m256i down = _mm256_set1_epi32(CT_POOL_CODE_DOWN);
    const __m256i pass = _mm256_set1_epi32(CT_POOL_CODE_PASS), rows = _mm256_set1_epi32(at_w);
    int k = 0;
    for (; k + EIGHT <= windows; k += EIGHT) {
        __m256i code = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(codes + k)));
        __m256i where = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(base + k)),
                                         _mm256_and_si256(code, right));
        where = _mm256_add_epi32(
            where,
            _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_and_si256(code, down), down), rows));
        _mm256_storeu_si256((__m256i *)(at + k), where);
        __m256 grad = _mm256_loadu_ps(dy + k);
        if (relu)
            grad = _mm256_and_ps(grad, _mm256_castsi256_ps(_mm256_cmpeq_epi32(
                                           _mm256_and_si256(code, pass), pass)));
        _mm256_storeu_ps(g + k, grad);
    }
    return k;
}

AVX2 int ct_cpu_maxpool2x2_backward_avx2(int in_w, int out_h, int out_w, const float *x,
                                         const float *dy, bool relu, float *dx)
{
    int vec_w = out_w / WINDOWS * WINDOWS;
    __m128 ones = _mm_castsi128_ps(_mm_set1_epi32(-1));
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        float *dx0 = dx + (long)2 * oh * in_w, *dx1 = dx0 + in_w;
        for (int ow = 0; ow < vec_w; ow += WINDOWS) {
            windows4 win = load_windows(row0 + 2 * ow, row1 + 2 * ow);
            __m128 pick[4];
            __m128 m = window_picks(win, pick);
            /* pick k: window element k is the argmax */
            __m128 pick3 = pick[3], pick2 = _mm_andnot_ps(pick3, pick[2]);
            __m128 pick1 = _mm_andnot_ps(_mm_or_ps(pick2, pick3), pick[1]);
            __m128 pick0 = _mm_andnot_ps(_mm_or_ps(pick1, _mm_or_ps(pick2, pick3)), ones);
            __m128 g = _mm_loadu_ps(dy + (long)oh * out_w + ow);
            if (relu)
                g = relu_grad4(m, g);
            __m128 g0 = _mm_and_ps(g, pick0), g1 = _mm_and_ps(g, pick1);
            __m128 g2 = _mm_and_ps(g, pick2), g3 = _mm_and_ps(g, pick3);
            _mm_storeu_ps(dx0 + 2 * ow, _mm_unpacklo_ps(g0, g1));
            _mm_storeu_ps(dx0 + 2 * ow + 4, _mm_unpackhi_ps(g0, g1));
            _mm_storeu_ps(dx1 + 2 * ow, _mm_unpacklo_ps(g2, g3));
            _mm_storeu_ps(dx1 + 2 * ow + 4, _mm_unpackhi_ps(g2, g3));
        }
    }
    return vec_w;
}

/* ---- AVX-512: 16 windows a vector, for rows of at least 8 windows ---------- */

#define AVX512 CT_POOL_AVX512
#define AVX512_INLINE CT_POOL_AVX512_INLINE

/* The first n (<= 32) of 32 lanes: the mask of the low 16 and the high 16. */
AVX512_INLINE __mmask16 low_lanes(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

AVX512_INLINE __mmask16 high_lanes(int n)
{
    return n <= 16 ? (__mmask16)0 : low_lanes(n - 16);
}

AVX512_INLINE windows16 load_windows16(const float *row0, const float *row1, int n)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    windows16 win = {.lanes = low_lanes(n), .lo = low_lanes(2 * n), .hi = high_lanes(2 * n)};
    __m512 a = _mm512_maskz_loadu_ps(win.lo, row0), b = _mm512_maskz_loadu_ps(win.hi, row0 + 16);
    win.top_left = _mm512_permutex2var_ps(a, even, b);
    win.top_right = _mm512_permutex2var_ps(a, odd, b);
    a = _mm512_maskz_loadu_ps(win.lo, row1);
    b = _mm512_maskz_loadu_ps(win.hi, row1 + 16);
    win.bottom_left = _mm512_permutex2var_ps(a, even, b);
    win.bottom_right = _mm512_permutex2var_ps(a, odd, b);
    return win;
}

/* Rows of 4 windows (in_w 8) follow each other as pairs of 16 floats (a
 * plane's, and a stack of planes', pool.c): 16 windows are 4 pairs, x[16 i
 * + 2 k (+1)] the top row's and x[16 i + 8 + 2 k (+1)] the bottom row's
 * inputs of window 4 i + k.  The first n (a multiple of 4, <= 16) windows
 * from the 64 floats at x, by 8 permutes (the lefts and rights of two
 * pairs, then of all four). */
AVX512_INLINE windows16 load_packed_windows16(const float *x, int n)
{
    /* [a or c of pair 0 (4), of pair 1 (4), b or d of pair 0, of pair 1] */
    const __m512i tops = _mm512_setr_epi32(0, 2, 4, 6, 16, 18, 20, 22, 1, 3, 5, 7, 17, 19, 21,
                                           23);
    const __m512i bottoms = _mm512_add_epi32(tops, _mm512_set1_epi32(8));
    const __m512i lows = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22,
                                           23);
    const __m512i highs = _mm512_add_epi32(lows, _mm512_set1_epi32(8));
    __m512 v[4];
    for (int i = 0; i < 4; i++) {
        __mmask16 pair = n > CT_POOL_PACKED_OUT_W * i ? (__mmask16)0xffff : 0;
        v[i] = _mm512_maskz_loadu_ps(pair, x + 16 * i);
    }
    __m512 top01 = _mm512_permutex2var_ps(v[0], tops, v[1]);
    __m512 top23 = _mm512_permutex2var_ps(v[2], tops, v[3]);
    __m512 bottom01 = _mm512_permutex2var_ps(v[0], bottoms, v[1]);
    __m512 bottom23 = _mm512_permutex2var_ps(v[2], bottoms, v[3]);
    windows16 win = {.lanes = low_lanes(n)};
    win.top_left = _mm512_permutex2var_ps(top01, lows, top23);
    win.top_right = _mm512_permutex2var_ps(top01, highs, top23);
    win.bottom_left = _mm512_permutex2var_ps(bottom01, lows, bottom23);
    win.bottom_right = _mm512_permutex2var_ps(bottom01, highs, bottom23);
    return win;
}

AVX512 int ct_cpu_maxpool2x2_forward_avx512(int in_w, int out_h, int out_w, const float *x,
                                            float *y)
{
    if (in_w == CT_POOL_PACKED_IN_W && out_w == CT_POOL_PACKED_OUT_W) {
        for (int w = 0, windows = out_h * out_w; w < windows; w += 16) {
            int n = windows - w < 16 ? windows - w : 16;
            _mm512_mask_storeu_ps(y + w, low_lanes(n),
                                  window_max16(load_packed_windows16(x + 4 * w, n)));
        }
        return out_w;
    }
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        for (int ow = 0; ow < out_w; ow += 16) {
            windows16 win = load_windows16(row0 + 2 * ow, row1 + 2 * ow, out_w - ow);
            _mm512_mask_storeu_ps(y + (long)oh * out_w + ow, win.lanes, window_max16(win));
        }
    }
    return out_w;
}

/* ct_relu_grad(max, g): 0 where max <= 0, NaN passes. */
AVX512_INLINE __m512 relu_grad16(__m512 max, __m512 g)
{
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(max, _mm512_setzero_ps(), _CMP_NLE_UQ), g);
}

/* dst[2k] = even[k], dst[2k+1] = odd[k] for the first 2n floats. */
AVX512_INLINE void store_interleaved(float *dst, __m512 even, __m512 odd, __mmask16 lo,
                                     __mmask16 hi)
{
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                            7, 23);
    const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
    _mm512_mask_storeu_ps(dst, lo, _mm512_permutex2var_ps(even, first, odd));
    _mm512_mask_storeu_ps(dst + 16, hi, _mm512_permutex2var_ps(even, second, odd));
}

AVX512 int ct_cpu_maxpool2x2_backward_avx512(int in_w, int out_h, int out_w, const float *x,
                                             const float *dy, bool relu, float *dx)
{
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        float *dx0 = dx + (long)2 * oh * in_w, *dx1 = dx0 + in_w;
        for (int ow = 0; ow < out_w; ow += 16) {
            windows16 win = load_windows16(row0 + 2 * ow, row1 + 2 * ow, out_w - ow);
            __mmask16 pick[4];
            __m512 m = window_picks16(win, pick);
            /* pick k: window element k is the argmax */
            __mmask16 pick3 = pick[3], pick2 = pick[2] & (__mmask16)~pick3;
            __mmask16 pick1 = pick[1] & (__mmask16)~(pick2 | pick3);
            __mmask16 pick0 = (__mmask16)~(pick1 | pick2 | pick3);
            __m512 g = _mm512_maskz_loadu_ps(win.lanes, dy + (long)oh * out_w + ow);
            if (relu)
                g = relu_grad16(m, g);
            store_interleaved(dx0 + 2 * ow, _mm512_maskz_mov_ps(pick0, g),
                              _mm512_maskz_mov_ps(pick1, g), win.lo, win.hi);
            store_interleaved(dx1 + 2 * ow, _mm512_maskz_mov_ps(pick2, g),
                              _mm512_maskz_mov_ps(pick3, g), win.lo, win.hi);
        }
    }
    return out_w;
}

AVX512 int ct_cpu_maxpool2x2_argmax_avx512(int in_w, int out_h, int out_w, const float *x,
                                           const float *dy, bool relu, int at_w, int *at,
                                           float *g)
{
    const __m512i lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                            28, 30);
    const __m512i right = _mm512_set1_epi32(1), down = _mm512_set1_epi32(at_w);
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        for (int ow = 0; ow < out_w; ow += 16) {
            windows16 win = load_windows16(row0 + 2 * ow, row1 + 2 * ow, out_w - ow);
            __mmask16 pick[4];
            __m512 m = window_picks16(win, pick);
            __m512i where = _mm512_add_epi32(_mm512_set1_epi32(2 * oh * at_w + 2 * ow), lanes);
            where = _mm512_mask_add_epi32(where, (__mmask16)((pick[1] & ~pick[2]) | pick[3]),
                                          where, right);
            where = _mm512_mask_add_epi32(where, (__mmask16)(pick[2] | pick[3]), where, down);
            long k = (long)oh * out_w + ow;
            _mm512_mask_storeu_epi32(at + k, win.lanes, where);
            __m512 grad = _mm512_maskz_loadu_ps(win.lanes, dy + k);
            if (relu)
                grad = relu_grad16(m, grad);
            _mm512_mask_storeu_ps(g + k, win.lanes, grad);
        }
    }
    return out_w;
}

AVX512 int ct_cpu_maxpool2x2_codes_avx512(int in_w, int out_h, int out_w, const float *x,
                                          float *y, uint8_t *codes)
{
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        for (int ow = 0; ow < out_w; ow += 16) {
            windows16 win = load_windows16(row0 + 2 * ow, row1 + 2 * ow, out_w - ow);
            __mmask16 pick[4];
            __m512 m = window_picks16(win, pick);
            long k = (long)oh * out_w + ow;
            _mm512_mask_storeu_ps(y + k, win.lanes, m);
            _mm512_mask_cvtepi32_storeu_epi8(codes + k, win.lanes, window_codes16(pick, m));
        }
    }
    return out_w;
}

AVX512 int ct_cpu_pool_codes_argmax_avx512(int windows, const int *base, const uint8_t *codes,
                                           const float *dy, bool relu, int at_w, int *at,
                                           float *g)
{
    const __m512i right = _mm512_set1_epi32(CT_POOL_CODE_RIGHT);
    const __m512i down = _mm512_set1_epi32(CT_POOL_CODE_DOWN), rows = _mm512_set1_epi32(at_w);
    const __m512i pass = _mm512_set1_epi32(CT_POOL_CODE_PASS);
    int k = 0;
    for (; k + 16 <= windows; k += 16) {
        __m512i code = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(codes + k)));
        __m512i where = _mm512_add_epi32(_mm512_loadu_si512(base + k),
                                         _mm512_and_si512(code, right));
        where = _mm512_mask_add_epi32(where, _mm512_test_epi32_mask(code, down), where, rows);
        _mm512_storeu_si512(at + k, where);
        __m512 grad = _mm512_loadu_ps(dy + k);
        if (relu)
            grad = _mm512_maskz_mov_ps(_mm512_test_epi32_mask(code, pass), grad);
        _mm512_storeu_ps(g + k, grad);
    }
    return k;
}

#endif
