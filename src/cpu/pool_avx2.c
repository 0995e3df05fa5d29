/*
 * Max pooling 2x2/2, forward and backward, with SSE/AVX compares and blends,
 * four windows at a time: the branch-free form of pool.c's maxpool_2x2_plane
 * and maxpool_2x2_backward_plane (a branchy argmax mispredicts on every
 * other window of real activations).
 * Same rule as pool.c: NaN wins, otherwise a strictly larger value, so the
 * first maximum in row-major window order takes the gradient.
 */
#include "cpu/simd.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include "cpu/pool_avx2.h"

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

AVX2 int ct_cpu_maxpool2x2_backward_avx2(int in_w, int out_h, int out_w, const float *x,
                                         const float *dy, bool relu, float *dx)
{
    int vec_w = out_w / WINDOWS * WINDOWS;
    __m128 ones = _mm_castsi128_ps(_mm_set1_epi32(-1)), zero = _mm_setzero_ps();
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (long)2 * oh * in_w, *row1 = row0 + in_w;
        float *dx0 = dx + (long)2 * oh * in_w, *dx1 = dx0 + in_w;
        for (int ow = 0; ow < vec_w; ow += WINDOWS) {
            windows4 win = load_windows(row0 + 2 * ow, row1 + 2 * ow);
            __m128 top_right = win.top_right, bottom_left = win.bottom_left;
            __m128 bottom_right = win.bottom_right;
            /* pick[k]: window element k is the argmax so far */
            __m128 m = win.top_left, pick0 = ones;
            __m128 pick1 = replaces(top_right, m);
            m = _mm_blendv_ps(m, top_right, pick1);
            pick0 = _mm_andnot_ps(pick1, pick0);
            __m128 pick2 = replaces(bottom_left, m);
            m = _mm_blendv_ps(m, bottom_left, pick2);
            pick0 = _mm_andnot_ps(pick2, pick0);
            pick1 = _mm_andnot_ps(pick2, pick1);
            __m128 pick3 = replaces(bottom_right, m);
            m = _mm_blendv_ps(m, bottom_right, pick3);
            pick0 = _mm_andnot_ps(pick3, pick0);
            pick1 = _mm_andnot_ps(pick3, pick1);
            pick2 = _mm_andnot_ps(pick3, pick2);
            __m128 g = _mm_loadu_ps(dy + (long)oh * out_w + ow);
            if (relu) /* ct_relu_grad(max, g): 0 where max <= 0, NaN passes */
                g = _mm_and_ps(g, _mm_cmp_ps(m, zero, _CMP_NLE_UQ));
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

#endif
