/*
 * IEEE binary16 for the emulated device: what a .cu file that includes
 * <cuda_fp16.h> uses, written from the CUDA Math API documentation.
 *
 * __half is its 16 bits (1 sign, 5 exponent, 10 mantissa), __half2 two of
 * them, the layout CUDA has, so buffers of them copy and shuffle as they do
 * on a GPU.  Conversions are bit manipulation, round to nearest even: NaN
 * stays NaN (0x7fff, and 0x7fffffff in float, the canonical NaNs the
 * toolkit's host conversions give), values from 65520 up become infinity,
 * subnormals are kept, -0 stays -0.  Arithmetic is float, rounded once to
 * half: correctly rounded for + - * / (float has more than twice half's
 * bits), and __hfma rounds the exact a * b + c once, as HFMA does.  Each
 * operation counts as half-precision work for the kernel counters
 * (emu/half_common.h); conversions and comparisons count nothing, as on a
 * GPU.  docs/emulator.md: "Half precision and tensor cores".
 */
#ifndef CT_EMU_CUDA_FP16_H
#define CT_EMU_CUDA_FP16_H

#include "device.h"
#include "half_common.h"

namespace emu {

enum : uint16_t { HALF_NAN = 0x7fff, HALF_INF = 0x7c00 };

/* float -> binary16, round to nearest even, on the bit pattern. */
inline uint16_t float_to_half_bits(float value)
{
    uint32_t bits = float_bits(value), magnitude = bits & 0x7fffffffu;
    uint16_t sign = (uint16_t)(bits >> 16 & 0x8000u);
    if (magnitude > 0x7f800000u)
        return HALF_NAN;
    if (magnitude >= 0x477ff000u) /* 65520 = 65504 + half its ulp: a tie, to even (inf) */
        return sign | HALF_INF;
    if (magnitude >= 0x38800000u) { /* normal: 2^-14 and up; rebias 127 -> 15 */
        uint32_t rebiased = magnitude - 0x38000000u;
        rebiased += 0xfffu + (rebiased >> 13 & 1u); /* a carry may raise the exponent */
        return sign | (uint16_t)(rebiased >> 13);
    }
    if (magnitude <= 0x33000000u) /* up to 2^-25, half the least subnormal: a tie to 0 */
        return sign;
    /* subnormal: the 24-bit significand, shifted to units of 2^-24 */
    uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    unsigned shift = 126u - (magnitude >> 23); /* 14 for 2^-15 .. 24 for 2^-25 */
    uint32_t result = significand >> shift, rest = significand & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1u)))
        result++; /* 0x400 is the least normal, as it should be */
    return sign | (uint16_t)result;
}

/* binary16 -> float, exact. */
inline float half_bits_to_float(uint16_t half)
{
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = half >> 10 & 0x1fu, mantissa = half & 0x3ffu;
    if (exponent == 0x1fu)
        return bits_float(mantissa ? 0x7fffffffu : sign | 0x7f800000u);
    if (exponent == 0) {
        if (mantissa == 0)
            return bits_float(sign);
        /* subnormal m x 2^-24: normalize so the leading 1 is bit 10 */
        int shift = __builtin_clz(mantissa) - 21;
        mantissa = (mantissa << shift) & 0x3ffu;
        exponent = (uint32_t)(1 - shift);
    }
    return bits_float(sign | (exponent + 112u) << 23 | mantissa << 13);
}

} // namespace emu

struct __half_raw {
    unsigned short x;
};
struct __half2_raw {
    unsigned short x, y;
};

struct __half;
__half __float2half(float value);
float __half2float(__half value);
__half __double2half(double value);

struct alignas(2) __half {
    __half() = default;
    __half(const __half_raw &raw) : bits(raw.x) {}
    __half &operator=(const __half_raw &raw)
    {
        bits = raw.x;
        return *this;
    }
    operator __half_raw() const { return __half_raw{bits}; }
#ifndef __CUDA_NO_HALF_CONVERSIONS__
    __half(float value) : bits(emu::float_to_half_bits(value)) {}
    __half(double value) : __half(__double2half(value)) {}
    /* integers: exact in double, and any beyond 65520 is infinity anyway */
    __half(int value) : __half((double)value) {}
    __half(unsigned value) : __half((double)value) {}
    __half(long long value) : __half((double)value) {}
    __half(unsigned long long value) : __half((double)value) {}
    operator float() const { return emu::half_bits_to_float(bits); }
#endif

  private:
    unsigned short bits;
};

struct alignas(4) __half2 {
    __half x, y;
    __half2() = default;
    __half2(const __half &vx, const __half &vy) : x(vx), y(vy) {}
    __half2(const __half2_raw &raw) : x(__half_raw{raw.x}), y(__half_raw{raw.y}) {}
    operator __half2_raw() const
    {
        return __half2_raw{__half_raw(x).x, __half_raw(y).x};
    }
};

static_assert(sizeof(__half) == 2 && sizeof(__half2) == 4, "CUDA's layouts");

/* ---- conversions ---------------------------------------------------------------- */

inline __half __float2half(float value)
{
    return __half_raw{emu::float_to_half_bits(value)};
}
inline __half __float2half_rn(float value)
{
    return __float2half(value);
}
inline float __half2float(__half value)
{
    return emu::half_bits_to_float(__half_raw(value).x);
}
inline __half __double2half(double value)
{
    return __float2half(emu::round_to_odd_float(value, 0.0));
}
inline unsigned short __half_as_ushort(__half value)
{
    return __half_raw(value).x;
}
inline __half __ushort_as_half(unsigned short bits)
{
    return __half_raw{bits};
}
inline short __half_as_short(__half value)
{
    return (short)__half_raw(value).x;
}
inline __half __short_as_half(short bits)
{
    return __half_raw{(unsigned short)bits};
}
inline __half2 make_half2(__half x, __half y)
{
    return __half2(x, y);
}
inline __half2 __halves2half2(__half low, __half high)
{
    return __half2(low, high);
}
inline __half2 __half2half2(__half value)
{
    return __half2(value, value);
}
inline __half2 __floats2half2_rn(float low, float high)
{
    return __half2(__float2half(low), __float2half(high));
}
inline __half2 __float2half2_rn(float value)
{
    return __half2half2(__float2half(value));
}
inline __half2 __float22half2_rn(float2 value)
{
    return __floats2half2_rn(value.x, value.y);
}
inline float2 __half22float2(__half2 value)
{
    return make_float2(__half2float(value.x), __half2float(value.y));
}
inline __half __low2half(__half2 value)
{
    return value.x;
}
inline __half __high2half(__half2 value)
{
    return value.y;
}
inline float __low2float(__half2 value)
{
    return __half2float(value.x);
}
inline float __high2float(__half2 value)
{
    return __half2float(value.y);
}

/* ---- classification, sign, comparisons (no FLOPs) --------------------------------- */

inline bool __hisnan(__half value)
{
    return (__half_as_ushort(value) & 0x7fffu) > emu::HALF_INF;
}
/* -1 for -infinity, 1 for +infinity, else 0 */
inline int __hisinf(__half value)
{
    unsigned short bits = __half_as_ushort(value);
    return (bits & 0x7fffu) != emu::HALF_INF ? 0 : bits >> 15 ? -1 : 1;
}
inline __half __habs(__half value)
{
    return __ushort_as_half(__half_as_ushort(value) & 0x7fffu);
}
inline __half __hneg(__half value)
{
    return __ushort_as_half(__half_as_ushort(value) ^ 0x8000u);
}

/* ---- arithmetic and comparisons, the same for __half and __nv_bfloat16 ---------------- */

/* One definition for both 16-bit types (`T`, its pair `T2`, converted
 * with `to_float` and `from_float`); emu/cuda_bf16.h uses it too. */
#define CT_EMU_HALF_ARITHMETIC(T, T2, to_float, from_float)                                  \
    inline T __hadd(T a, T b)                                                                 \
    {                                                                                         \
        emu::count_half_ops<1>();                                                             \
        return from_float(to_float(a) + to_float(b));                                         \
    }                                                                                         \
    inline T __hsub(T a, T b)                                                                 \
    {                                                                                         \
        emu::count_half_ops<1>();                                                             \
        return from_float(to_float(a) - to_float(b));                                         \
    }                                                                                         \
    inline T __hmul(T a, T b)                                                                 \
    {                                                                                         \
        emu::count_half_ops<1>();                                                             \
        return from_float(to_float(a) * to_float(b));                                         \
    }                                                                                         \
    inline T __hdiv(T a, T b)                                                                 \
    {                                                                                         \
        emu::count_half_ops<1>();                                                             \
        return from_float(to_float(a) / to_float(b));                                         \
    }                                                                                         \
    inline T __hfma(T a, T b, T c)                                                            \
    {                                                                                         \
        emu::count_half_fmas<1>();                                                            \
        return from_float(emu::fma_to_odd_float(to_float(a), to_float(b), to_float(c)));     \
    }                                                                                         \
    inline T2 __hadd2(T2 a, T2 b) { return T2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }         \
    inline T2 __hsub2(T2 a, T2 b) { return T2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }         \
    inline T2 __hmul2(T2 a, T2 b) { return T2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }         \
    inline T2 __h2div(T2 a, T2 b) { return T2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }         \
    inline T2 __hfma2(T2 a, T2 b, T2 c)                                                       \
    {                                                                                         \
        return T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));                              \
    }                                                                                         \
    /* ordered comparisons: false when either is NaN; __hneu is unordered */                 \
    inline bool __heq(T a, T b) { return to_float(a) == to_float(b); }                        \
    inline bool __hne(T a, T b) { return to_float(a) < to_float(b) || to_float(a) > to_float(b); } \
    inline bool __hneu(T a, T b) { return !(to_float(a) == to_float(b)); }                    \
    inline bool __hlt(T a, T b) { return to_float(a) < to_float(b); }                         \
    inline bool __hle(T a, T b) { return to_float(a) <= to_float(b); }                        \
    inline bool __hgt(T a, T b) { return to_float(a) > to_float(b); }                         \
    inline bool __hge(T a, T b) { return to_float(a) >= to_float(b); }                        \
    /* the larger (smaller): a NaN loses to a number, two give NaN; +0 > -0 */               \
    inline T __hmax(T a, T b)                                                                 \
    {                                                                                         \
        if (__hisnan(a) || __hisnan(b))                                                       \
            return __hisnan(a) ? (__hisnan(b) ? from_float(NAN) : b) : a;                     \
        return __hgt(a, b) || (__heq(a, b) && !signbit(to_float(a))) ? a : b;                 \
    }                                                                                         \
    inline T __hmin(T a, T b)                                                                 \
    {                                                                                         \
        if (__hisnan(a) || __hisnan(b))                                                       \
            return __hisnan(a) ? (__hisnan(b) ? from_float(NAN) : b) : a;                     \
        return __hlt(a, b) || (__heq(a, b) && signbit(to_float(a))) ? a : b;                  \
    }                                                                                         \
    inline T operator+(const T &a, const T &b) { return __hadd(a, b); }                       \
    inline T operator-(const T &a, const T &b) { return __hsub(a, b); }                       \
    inline T operator*(const T &a, const T &b) { return __hmul(a, b); }                       \
    inline T operator/(const T &a, const T &b) { return __hdiv(a, b); }                       \
    inline T &operator+=(T &a, const T &b) { return a = __hadd(a, b); }                       \
    inline T &operator-=(T &a, const T &b) { return a = __hsub(a, b); }                       \
    inline T &operator*=(T &a, const T &b) { return a = __hmul(a, b); }                       \
    inline T &operator/=(T &a, const T &b) { return a = __hdiv(a, b); }                       \
    inline T operator+(const T &a) { return a; }                                              \
    inline T operator-(const T &a) { return __hneg(a); }                                      \
    inline bool operator==(const T &a, const T &b) { return __heq(a, b); }                    \
    inline bool operator!=(const T &a, const T &b) { return __hneu(a, b); }                   \
    inline bool operator<(const T &a, const T &b) { return __hlt(a, b); }                     \
    inline bool operator<=(const T &a, const T &b) { return __hle(a, b); }                    \
    inline bool operator>(const T &a, const T &b) { return __hgt(a, b); }                     \
    inline bool operator>=(const T &a, const T &b) { return __hge(a, b); }                    \
    inline T2 operator+(const T2 &a, const T2 &b) { return __hadd2(a, b); }                   \
    inline T2 operator-(const T2 &a, const T2 &b) { return __hsub2(a, b); }                   \
    inline T2 operator*(const T2 &a, const T2 &b) { return __hmul2(a, b); }                   \
    inline T2 operator/(const T2 &a, const T2 &b) { return __h2div(a, b); }                   \
    inline T2 &operator+=(T2 &a, const T2 &b) { return a = __hadd2(a, b); }                   \
    inline T2 &operator-=(T2 &a, const T2 &b) { return a = __hsub2(a, b); }                   \
    inline T2 &operator*=(T2 &a, const T2 &b) { return a = __hmul2(a, b); }                   \
    inline T2 &operator/=(T2 &a, const T2 &b) { return a = __h2div(a, b); }

CT_EMU_HALF_ARITHMETIC(__half, __half2, __half2float, __float2half)

#endif
