/*
 * The reference for tests/test_emu_half.cu: rounding to binary16 and
 * bfloat16 computed differently from emu/cuda_fp16.h and emu/cuda_bf16.h
 * (no bit tricks): a table of every finite non-negative value of the
 * format, built with ldexp, sorted by its bits, searched in double for the
 * nearest value, ties to the even pattern; and the floats worth
 * converting.
 */
#ifndef CT_TESTS_HALF_REFERENCE_H
#define CT_TESTS_HALF_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PATTERNS = 1 << 16, RANDOM_FLOATS = 3 << 20 };

struct format {
    const char *name;
    int mantissa_bits, bias;
    unsigned infinity; /* its bits; the table's last entry, as the next power of two */
    double *values;    /* values[bits] for bits 0 .. infinity */
};

/* The value of non-negative `bits`, by arithmetic (not by the bit tricks
 * under test). */
static double value_of(const format &f, unsigned bits)
{
    unsigned mantissa = bits & ((1u << f.mantissa_bits) - 1u);
    int exponent = (int)(bits >> f.mantissa_bits);
    if (exponent == 0)
        return ldexp((double)mantissa, 1 - f.bias - f.mantissa_bits);
    return ldexp((double)(mantissa + (1u << f.mantissa_bits)), exponent - f.bias - f.mantissa_bits);
}

static void make_table(format *f)
{
    f->values = (double *)malloc(sizeof(double) * (f->infinity + 1));
    for (unsigned bits = 0; bits <= f->infinity; bits++)
        f->values[bits] = value_of(*f, bits); /* at infinity: the next binade's first value */
}

/* The bits nearest to x, ties to the even pattern: a binary search. */
static unsigned nearest(const format &f, double x)
{
    unsigned sign = signbit(x) ? 1u << 15 : 0u;
    double magnitude = fabs(x);
    if (magnitude >= f.values[f.infinity])
        return sign | f.infinity;
    unsigned lo = 0, hi = f.infinity; /* values[lo] <= magnitude < values[hi] */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        (f.values[mid] <= magnitude ? lo : hi) = mid;
    }
    double below = magnitude - f.values[lo], above = f.values[hi] - magnitude;
    unsigned bits = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | bits;
}

static format half_format = {"half", 10, 15, 0x7c00, NULL};
static format bf16_format = {"bfloat16", 7, 127, 0x7f80, NULL};

static uint64_t next_bits(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float float_of(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* The floats to convert: every midpoint between neighbouring values of
 * both formats with the floats either side of it, and their negatives;
 * special values; random bit patterns; random floats in half's range. */
static float *test_floats(int *count)
{
    int n = 0, capacity = 12 * PATTERNS + RANDOM_FLOATS + 64;
    float *x = (float *)malloc(sizeof(float) * (size_t)capacity);
    const format *formats[] = {&half_format, &bf16_format};
    for (const format *f : formats)
        for (unsigned bits = 0; bits < f->infinity; bits++) {
            float mid = (float)((f->values[bits] + f->values[bits + 1]) / 2); /* exact */
            float around[] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
            for (float v : around) {
                x[n++] = v;
                x[n++] = -v;
            }
        }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN,
                              65504.0f, 65519.998f, 65520.0f, 65536.0f, 3.0e38f, 3.4028235e38f,
                              0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1p-149f, 0x1p-126f, 0x1p-14f,
                              0x1.ff8p-15f, float_of(0x7f800001u), float_of(0xffc00000u)};
    for (float v : specials)
        x[n++] = v;
    uint64_t state = 7;
    for (int i = 0; i < RANDOM_FLOATS; i++) {
        uint32_t bits = (uint32_t)next_bits(&state);
        if (i % 2) /* exponents 2^-27 .. 2^17: half's range and its edges */
            bits = (bits & 0x807fffffu) | (uint32_t)(100 + (bits >> 8) % 45) << 23;
        x[n++] = float_of(bits);
    }
    *count = n;
    return x;
}

/* `got` is the conversion of x that the reference expects. */
static bool rounds_right(const format &f, float x, unsigned got)
{
    bool got_nan = (got & 0x7fffu) > f.infinity;
    return isnan(x) ? got_nan : got == nearest(f, x);
}

/* `widened` is pattern `bits` of f as a float and `back` its conversion back. */
static bool round_trips(const format &f, unsigned bits, float widened, unsigned back)
{
    unsigned magnitude = bits & 0x7fffu;
    if (magnitude > f.infinity)
        return isnan(widened) && (back & 0x7fffu) > f.infinity;
    double value = magnitude == f.infinity ? INFINITY : f.values[magnitude];
    return back == bits && (double)fabsf(widened) == value &&
           (bool)signbit(widened) == (bool)(bits >> 15);
}

#endif
