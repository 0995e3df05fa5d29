/*
 * What emu/cuda_fp16.h and emu/cuda_bf16.h share: rounding a double to
 * float "to odd" (so that a second rounding to a narrower format is
 * correct), and counting a kernel's half-precision arithmetic.
 *
 * Why round to odd: a value rounded to nearest twice (to float, then to
 * half) can land on the wrong neighbour when the first rounding makes a
 * tie.  Rounded to odd first (the exact value's neighbour whose last bit
 * is 1, unless the value is exact), it cannot, as long as the first format
 * has at least two more bits than the second (float: 24; half 11, bfloat16
 * 8).  Sums, products and quotients of two halves rounded to float are
 * already safe (24 >= 2 x 11 + 2), so only the fused multiply-add and the
 * conversions from double need this.
 */
#ifndef CT_EMU_HALF_COMMON_H
#define CT_EMU_HALF_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "count_hooks.h"

#ifdef CT_EMU_COUNT_PASS
/* emu/counters.cpp: adds one thread's table of fp work (count_hooks.h). */
extern "C" void __cuda_emu_count_fp(const uint32_t *counts);
#endif

namespace emu {

inline uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

inline float bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* hi + lo (|lo| at most half an ulp of hi, as TwoSum leaves it) rounded to
 * float, to odd: exact values stay, others go to the neighbour whose last
 * bit is 1.  NaN and infinity stay (a finite value past float's range
 * becomes infinity, which rounds to infinity in every narrower format). */
inline float round_to_odd_float(double hi, double lo)
{
    float rounded = (float)hi;
    if (!isfinite(rounded))
        return rounded;
    double below = hi - (double)rounded; /* exact: the bits float dropped */
    double rest = below != 0.0 ? below : lo;
    uint32_t bits = float_bits(rounded);
    if (rest == 0.0 || (bits & 1u))
        return rounded;
    /* the other neighbour: away from zero when the exact value is larger
     * in magnitude (a zero has the exact value's sign) */
    bool away = (rest > 0.0) == !(bits >> 31);
    return bits_float(away ? bits + 1u : bits - 1u);
}

/* a * b + c with one rounding to float, to odd, for a, b, c that are
 * halves or bfloat16s: their product is exact in double, and TwoSum makes
 * the sum exact as hi + lo. */
inline float fma_to_odd_float(float a, float b, float c)
{
    double product = (double)a * (double)b;
    double hi = product + (double)c;
    if (!isfinite(hi))
        return (float)hi;
    double b_virtual = hi - product;
    double lo = (product - (hi - b_virtual)) + ((double)c - b_virtual);
    return round_to_odd_float(hi, lo);
}

/* One thread's half-precision work for the kernel counters: `ops` fp16 or
 * bf16 operations (an FMA once), `flops` FLOPs (an FMA twice).  The
 * arithmetic itself is float code in these headers, which
 * emu/count_pass.cpp does not count (it is the emulator's); on a GPU it is
 * one HADD, HMUL or HFMA (or its .BF16 form) per element. */
struct fp_table {
    uint32_t counts[CUDA_EMU_FP_FIELDS];
    constexpr fp_table(unsigned fp16_ops, unsigned mma_ops, unsigned flops) : counts{}
    {
        counts[CUDA_EMU_FP16_OPS] = fp16_ops;
        counts[CUDA_EMU_MMA_OPS] = mma_ops;
        counts[CUDA_EMU_FLOPS] = flops;
    }
};
template <unsigned FP16_OPS, unsigned MMA_OPS, unsigned FLOPS>
inline constexpr fp_table fp_work{FP16_OPS, MMA_OPS, FLOPS};

template <unsigned FP16_OPS, unsigned MMA_OPS, unsigned FLOPS>
inline void count_fp_work()
{
#ifdef CT_EMU_COUNT_PASS
    __cuda_emu_count_fp(fp_work<FP16_OPS, MMA_OPS, FLOPS>.counts);
#endif
}

template <unsigned ELEMENTS>
inline void count_half_ops()
{
    count_fp_work<ELEMENTS, 0, ELEMENTS>();
}
template <unsigned ELEMENTS>
inline void count_half_fmas()
{
    count_fp_work<ELEMENTS, 0, 2 * ELEMENTS>();
}

} // namespace emu

#endif
