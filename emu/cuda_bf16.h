/*
 * bfloat16 for the emulated device: what a .cu file that includes
 * <cuda_bf16.h> uses, written from the CUDA Math API documentation.
 *
 * __nv_bfloat16 is the top 16 bits of a float (1 sign, 8 exponent, 7
 * mantissa), __nv_bfloat162 two of them, as in CUDA.  float -> bfloat16
 * rounds to nearest even on the bit pattern (NaN becomes 0x7fff, the
 * toolkit's canonical NaN; large finite values round up to infinity;
 * subnormals and -0 are kept); bfloat16 -> float appends 16 zero bits.
 * Arithmetic is float rounded once to bfloat16, which is what sm_80 and
 * later give (an FMA rounds the exact a * b + c once), counted as
 * half-precision work like __half's (emu/cuda_fp16.h).
 */
#ifndef CT_EMU_CUDA_BF16_H
#define CT_EMU_CUDA_BF16_H

#include "cuda_fp16.h"

namespace emu {

enum : uint16_t { BF16_NAN = 0x7fff, BF16_INF = 0x7f80 };

/* float -> bfloat16, round to nearest even: add just under half of the
 * dropped 16 bits' range, plus one when the kept part is odd. */
inline uint16_t float_to_bf16_bits(float value)
{
    uint32_t bits = float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return BF16_NAN;
    bits += 0x7fffu + (bits >> 16 & 1u);
    return (uint16_t)(bits >> 16);
}

inline float bf16_bits_to_float(uint16_t bf16)
{
    return bits_float((uint32_t)bf16 << 16);
}

/* A 16-bit float's bits (bfloat16 when bf16, else half) as a float, and a
 * float rounded to nearest even into them: the vendor shims' 16-bit data. */
inline float bits16_to_float(bool bf16, uint16_t bits)
{
    return bf16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits);
}
inline uint16_t float_to_bits16(bool bf16, float value)
{
    return bf16 ? float_to_bf16_bits(value) : float_to_half_bits(value);
}
} // namespace emu

struct __nv_bfloat16_raw {
    unsigned short x;
};
struct __nv_bfloat162_raw {
    unsigned short x, y;
};

struct __nv_bfloat16;
__nv_bfloat16 __double2bfloat16(double value);

struct alignas(2) __nv_bfloat16 {
    __nv_bfloat16() = default;
    __nv_bfloat16(const __nv_bfloat16_raw &raw) : bits(raw.x) {}
    __nv_bfloat16 &operator=(const __nv_bfloat16_raw &raw)
    {
        bits = raw.x;
        return *this;
    }
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{bits}; }
#ifndef __CUDA_NO_BFLOAT16_CONVERSIONS__
    __nv_bfloat16(float value) : bits(emu::float_to_bf16_bits(value)) {}
    __nv_bfloat16(double value) : __nv_bfloat16(__double2bfloat16(value)) {}
    /* integers: through double (exact up to 2^53), rounded to odd, then to bfloat16 */
    __nv_bfloat16(int value) : __nv_bfloat16((double)value) {}
    __nv_bfloat16(unsigned value) : __nv_bfloat16((double)value) {}
    __nv_bfloat16(long long value) : __nv_bfloat16((double)value) {}
    __nv_bfloat16(unsigned long long value) : __nv_bfloat16((double)value) {}
    operator float() const { return emu::bf16_bits_to_float(bits); }
#endif

  private:
    unsigned short bits;
};

struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    __nv_bfloat162(const __nv_bfloat16 &vx, const __nv_bfloat16 &vy) : x(vx), y(vy) {}
    __nv_bfloat162(const __nv_bfloat162_raw &raw)
        : x(__nv_bfloat16_raw{raw.x}), y(__nv_bfloat16_raw{raw.y})
    {
    }
    operator __nv_bfloat162_raw() const
    {
        return __nv_bfloat162_raw{__nv_bfloat16_raw(x).x, __nv_bfloat16_raw(y).x};
    }
};

static_assert(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4, "CUDA's layouts");

/* ---- conversions ---------------------------------------------------------------- */

inline __nv_bfloat16 __float2bfloat16(float value)
{
    return __nv_bfloat16_raw{emu::float_to_bf16_bits(value)};
}
inline __nv_bfloat16 __float2bfloat16_rn(float value)
{
    return __float2bfloat16(value);
}
inline float __bfloat162float(__nv_bfloat16 value)
{
    return emu::bf16_bits_to_float(__nv_bfloat16_raw(value).x);
}
inline __nv_bfloat16 __double2bfloat16(double value)
{
    return __float2bfloat16(emu::round_to_odd_float(value, 0.0));
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 value)
{
    return __nv_bfloat16_raw(value).x;
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits)
{
    return __nv_bfloat16_raw{bits};
}
inline short __bfloat16_as_short(__nv_bfloat16 value)
{
    return (short)__nv_bfloat16_raw(value).x;
}
inline __nv_bfloat16 __short_as_bfloat16(short bits)
{
    return __nv_bfloat16_raw{(unsigned short)bits};
}
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y)
{
    return __nv_bfloat162(x, y);
}
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 low, __nv_bfloat16 high)
{
    return __nv_bfloat162(low, high);
}
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 value)
{
    return __nv_bfloat162(value, value);
}
inline __nv_bfloat162 __floats2bfloat162_rn(float low, float high)
{
    return __nv_bfloat162(__float2bfloat16(low), __float2bfloat16(high));
}
inline __nv_bfloat162 __float2bfloat162_rn(float value)
{
    return __bfloat162bfloat162(__float2bfloat16(value));
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 value)
{
    return __floats2bfloat162_rn(value.x, value.y);
}
inline float2 __bfloat1622float2(__nv_bfloat162 value)
{
    return make_float2(__bfloat162float(value.x), __bfloat162float(value.y));
}
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 value)
{
    return value.x;
}
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 value)
{
    return value.y;
}
inline float __low2float(__nv_bfloat162 value)
{
    return __bfloat162float(value.x);
}
inline float __high2float(__nv_bfloat162 value)
{
    return __bfloat162float(value.y);
}

/* ---- classification, sign (no FLOPs) -------------------------------------------------- */

inline bool __hisnan(__nv_bfloat16 value)
{
    return (__bfloat16_as_ushort(value) & 0x7fffu) > emu::BF16_INF;
}
/* -1 for -infinity, 1 for +infinity, else 0 */
inline int __hisinf(__nv_bfloat16 value)
{
    unsigned short bits = __bfloat16_as_ushort(value);
    return (bits & 0x7fffu) != emu::BF16_INF ? 0 : bits >> 15 ? -1 : 1;
}
inline __nv_bfloat16 __habs(__nv_bfloat16 value)
{
    return __ushort_as_bfloat16(__bfloat16_as_ushort(value) & 0x7fffu);
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 value)
{
    return __ushort_as_bfloat16(__bfloat16_as_ushort(value) ^ 0x8000u);
}

CT_EMU_HALF_ARITHMETIC(__nv_bfloat16, __nv_bfloat162, __bfloat162float, __float2bfloat16)

#endif
