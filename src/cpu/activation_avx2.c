/*
 * tanh with AVX2 + FMA, 8 floats at a time.  libm's tanhf is a scalar call
 * of tens of nanoseconds, and LeNet-5 spent half its training step in it.
 *
 *   |x| < 0.5:  the odd Taylor series, x (1 - x^2/3 + 2x^4/15 - ...), eight
 *               terms (the next is below 1e-8 relative there);
 *   |x| >= 0.5: 1 - 2 / (1 + e^(2|x|)), no cancellation worth a bit there,
 *               with e^z = 2^n e^r, n = round(z / ln 2), |r| <= ln 2 / 2,
 *               e^r by its Taylor polynomial to r^7 (error ~5e-9) and 2^n
 *               built in the exponent bits; |x| is clamped at 10, where the
 *               result is 1 in float;
 * then the sign of x.  Checked in double against a dense grid of floats
 * from 1e-30 to 12: at most 1.7e-7 relative, under 2 ulp
 * (tests/test_cpu_fast.c compares with tanhf).  NaN passes through.
 */
#include "cpu/activation_avx2.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* e^z for 0 <= z <= 20. */
AVX2_INLINE __m256 exp_small_range(__m256 z)
{
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693145751953125f);
    const __m256 ln2_lo = _mm256_set1_ps(1.428606765330187045e-06f);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(z, log2e), _MM_FROUND_TO_NEAREST_INT |
                                                          _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_lo, _mm256_fnmadd_ps(n, ln2_hi, z));
    static const float taylor[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24,
                                   1.0f / 6,    0.5f,       1.0f,       1.0f};
    __m256 p = _mm256_set1_ps(taylor[0]);
    for (int k = 1; k < 8; k++)
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(taylor[k]));
    __m256i exponent = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

AVX2_INLINE __m256 tanh8(__m256 x)
{
    const __m256 sign_bit = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 ax = _mm256_andnot_ps(sign_bit, x);
    /* tanh x = x (1 + c1 x^2 + c2 x^4 + ...), the series' coefficients */
    static const float series[] = {-929569.0f / 638512875.0f, 21844.0f / 6081075.0f,
                                   -1382.0f / 155925,     62.0f / 2835,
                                   -17.0f / 315,          2.0f / 15,
                                   -1.0f / 3,             1.0f};
    __m256 x2 = _mm256_mul_ps(ax, ax), p = _mm256_set1_ps(series[0]);
    for (int k = 1; k < 8; k++)
        p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(series[k]));
    __m256 small = _mm256_mul_ps(ax, p);
    __m256 z = _mm256_mul_ps(_mm256_min_ps(ax, _mm256_set1_ps(10.0f)), _mm256_set1_ps(2.0f));
    __m256 e = exp_small_range(z);
    __m256 large = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(one, e)));
    __m256 t = _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
    t = _mm256_or_ps(t, _mm256_and_ps(x, sign_bit));
    return _mm256_blendv_ps(t, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN stays */
}

AVX2 void ct_cpu_tanh_avx2(int64_t count, const float *x, float *y)
{
    for (int64_t i = 0; i + 8 <= count; i += 8)
        _mm256_storeu_ps(y + i, tanh8(_mm256_loadu_ps(x + i)));
}

#endif
