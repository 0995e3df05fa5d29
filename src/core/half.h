/*
 * 16-bit floats: IEEE binary16 ("f16", fp16) and bfloat16 ("bf16"), held as
 * their bits (uint16_t).  Float to 16 bits rounds to nearest, ties to even,
 * as the GPU's conversions (__float2half_rn, __float2bfloat16_rn) and
 * PyTorch's .half() and .bfloat16() do; NaN stays a quiet NaN, f16
 * overflows to infinity from 65520 up and keeps its subnormals.  16 bits to
 * float is exact.
 *
 * The CPU's reduced-precision reference (cpu/backend.c) rounds through these
 * wherever a GPU stores a 16-bit value; tests/test_half.c checks them
 * against an independent nearest-value search.  Plain C for both compilers
 * (CT_HD), like core/math_shared.h.
 */
#ifndef CT_CORE_HALF_H
#define CT_CORE_HALF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/hd.h"

static inline CT_HD uint32_t ct_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline CT_HD float ct_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- bfloat16: the top half of a float ---------------------------------------------- */

static inline CT_HD uint16_t ct_bf16_from_f32(float x)
{
    uint32_t u = ct_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x0040u); /* NaN: quiet, sign and top payload kept */
    /* adding 0x7fff plus the kept part's lowest bit rounds to nearest, ties to
     * even; a carry into the exponent is right (up to infinity included) */
    u += 0x7fffu + (u >> 16 & 1u);
    return (uint16_t)(u >> 16);
}

static inline CT_HD float ct_bf16_to_f32(uint16_t h)
{
    return ct_f32_from_bits((uint32_t)h << 16);
}

/* ---- binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits ----------------------- */

static inline CT_HD uint16_t ct_f16_from_f32(float x)
{
    uint32_t u = ct_f32_bits(x);
    uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x1ffu)); /* NaN, quiet */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and infinity): infinity */
    if (a >= 0x38800000u) {
        /* normal in f16 (>= 2^-14): rebias the exponent, round 13 bits away */
        uint32_t r = a - 0x38000000u;
        r += 0xfffu + (r >> 13 & 1u);
        return (uint16_t)(sign | r >> 13);
    }
    if (a < 0x33000000u)
        return sign; /* below half the smallest subnormal (2^-25): zero */
    /* subnormal in f16: the significand with its hidden bit, shifted so that
     * its unit is 2^-24, rounded to nearest even; 2^-25 exactly is a tie
     * that rounds to 0, just above it to the smallest subnormal */
    uint32_t exponent = a >> 23;
    uint32_t significand = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent; /* 14..24: 2^(e-127) * m / 2^23 in units of 2^-24 */
    uint32_t kept = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return (uint16_t)(sign | kept);
}

static inline CT_HD float ct_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = h >> 10 & 0x1fu;
    uint32_t fraction = h & 0x3ffu;
    if (exponent == 0x1fu)
        return ct_f32_from_bits(sign | 0x7f800000u | fraction << 13);
    if (exponent != 0)
        return ct_f32_from_bits(sign | (exponent + 112u) << 23 | fraction << 13);
    /* zero or subnormal: fraction x 2^-24, exact in float */
    float magnitude = (float)fraction * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
}

/* n values of 16 bits (bf16 when `bf16`, else f16) to floats, from the last
 * to the first, so that out may begin where bits do (widening in place). */
static inline void ct_widen_16(bool bf16, const uint16_t *bits, float *out, int64_t n)
{
    for (int64_t i = n - 1; i >= 0; i--)
        out[i] = bf16 ? ct_bf16_to_f32(bits[i]) : ct_f16_to_f32(bits[i]);
}

#endif
