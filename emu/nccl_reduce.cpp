/*
 * The emulated NCCL's arithmetic (nccl_internal.h): the reduction of the
 * ranks' inputs, element by element, in rank order.
 *
 * out[i] = ((in_0[i] op in_1[i]) op in_2[i]) ... op in_{n-1}[i], each step
 * rounded to the type: the same computation on every rank, so every rank
 * gets the same bits, run after run.  (NCCL's order depends on its rings
 * and trees, so a GPU gets other last bits; it too gives every rank the
 * same result.)  __half and __nv_bfloat16 are float arithmetic rounded
 * once to the type, with the emulator's own conversions (emu/cuda_fp16.h,
 * cuda_bf16.h): what __hadd and __hmul give, correctly rounded.
 *
 * ncclAvg, as NCCL computes it: for floating types each input is first
 * multiplied by 1/n (1.0 / n rounded to float for float, half and bf16,
 * then to the type; double for double), and the products are added; for
 * integer types the sum (wrapping) is divided by n, truncating.
 */
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "nccl_internal.h" /* the standard headers before device.h's __noinline__ */
#include "cuda_bf16.h"

/* Each step rounds: a * b + c must not become one FMA (g++ contracts
 * across statements in C++ by default, and the build may pass -mfma). */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace emu {
namespace nccl {

namespace {

/* float and double: the arithmetic of the language. */
template <class T>
struct native {
    typedef T value;
    static const bool floating = true;
    static T add(T a, T b) { return a + b; }
    static T mul(T a, T b) { return a * b; }
    static T max(T a, T b) { return std::isnan(a) ? b : std::isnan(b) ? a : a > b ? a : b; }
    static T min(T a, T b) { return std::isnan(a) ? b : std::isnan(b) ? a : a < b ? a : b; }
    static T inverse(int n) { return (T)(1.0 / n); }
    static T divide(T a, int) { return a; }
};

/* __half and __nv_bfloat16 by their bits: float arithmetic rounded once. */
template <float (*WIDEN)(uint16_t), uint16_t (*NARROW)(float)>
struct narrow_float {
    typedef uint16_t value;
    static const bool floating = true;
    static uint16_t add(uint16_t a, uint16_t b) { return NARROW(WIDEN(a) + WIDEN(b)); }
    static uint16_t mul(uint16_t a, uint16_t b) { return NARROW(WIDEN(a) * WIDEN(b)); }
    static uint16_t max(uint16_t a, uint16_t b)
    {
        float x = WIDEN(a), y = WIDEN(b);
        return std::isnan(x) ? b : std::isnan(y) ? a : x > y ? a : b;
    }
    static uint16_t min(uint16_t a, uint16_t b)
    {
        float x = WIDEN(a), y = WIDEN(b);
        return std::isnan(x) ? b : std::isnan(y) ? a : x < y ? a : b;
    }
    static uint16_t inverse(int n) { return NARROW((float)(1.0 / n)); }
    static uint16_t divide(uint16_t a, int) { return a; }
};
typedef narrow_float<half_bits_to_float, float_to_half_bits> half_arith;
typedef narrow_float<bf16_bits_to_float, float_to_bf16_bits> bf16_arith;

/* Integers: sums and products wrap (computed unsigned, so no overflow is
 * undefined); the average truncates. */
template <class T, class U>
struct integer {
    typedef T value;
    static const bool floating = false;
    static T add(T a, T b) { return (T)(U)((U)a + (U)b); }
    static T mul(T a, T b) { return (T)(U)((U)a * (U)b); }
    static T max(T a, T b) { return a > b ? a : b; }
    static T min(T a, T b) { return a < b ? a : b; }
    static T inverse(int) { return 1; }
    static T divide(T a, int n) { return (T)(a / (T)n); }
};

enum { BLOCK = 1024 }; /* elements reduced at a time, so that `out` may be an input */

template <class A>
void reduce_as(ncclRedOp_t op, int n, const void *const *in, void *out, size_t count)
{
    typedef typename A::value T;
    T acc[BLOCK];
    const T scale = A::inverse(n);
    const bool premultiply = op == ncclAvg && A::floating;
    for (size_t start = 0; start < count; start += BLOCK) {
        size_t len = std::min((size_t)BLOCK, count - start);
        const T *first = (const T *)in[0] + start;
        for (size_t i = 0; i < len; i++)
            acc[i] = premultiply ? A::mul(first[i], scale) : first[i];
        for (int r = 1; r < n; r++) {
            const T *x = (const T *)in[r] + start;
            for (size_t i = 0; i < len; i++) {
                switch (op) {
                case ncclSum:
                    acc[i] = A::add(acc[i], x[i]);
                    break;
                case ncclProd:
                    acc[i] = A::mul(acc[i], x[i]);
                    break;
                case ncclMax:
                    acc[i] = A::max(acc[i], x[i]);
                    break;
                case ncclMin:
                    acc[i] = A::min(acc[i], x[i]);
                    break;
                default: { /* ncclAvg */
                    T term = premultiply ? A::mul(x[i], scale) : x[i];
                    acc[i] = A::add(acc[i], term);
                    break;
                }
                }
            }
        }
        if (op == ncclAvg && !A::floating)
            for (size_t i = 0; i < len; i++)
                acc[i] = A::divide(acc[i], n);
        memcpy((T *)out + start, acc, len * sizeof(T));
    }
}

} // namespace

size_t type_bytes(ncclDataType_t type)
{
    switch (type) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

const char *type_name(ncclDataType_t type)
{
    static const char *const names[] = {"ncclInt8",    "ncclUint8",      "ncclInt32",
                                        "ncclUint32",  "ncclInt64",      "ncclUint64",
                                        "ncclFloat16", "ncclFloat32",    "ncclFloat64",
                                        "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    if ((int)type >= 0 && (int)type < ncclNumTypes)
        return names[type];
    static thread_local char text[32];
    snprintf(text, sizeof text, "datatype %d", (int)type);
    return text;
}

bool valid_op(ncclRedOp_t op)
{
    return (int)op >= 0 && (int)op < ncclNumOps;
}

const char *op_name(ncclRedOp_t op)
{
    static const char *const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
    if (valid_op(op))
        return names[op];
    static thread_local char text[32];
    snprintf(text, sizeof text, "op %d", (int)op);
    return text;
}

void reduce(ncclDataType_t type, ncclRedOp_t op, int n, const void *const *in, void *out,
            size_t count)
{
    switch (type) {
    case ncclInt8:
        return reduce_as<integer<int8_t, uint8_t>>(op, n, in, out, count);
    case ncclUint8:
        return reduce_as<integer<uint8_t, uint8_t>>(op, n, in, out, count);
    case ncclInt32:
        return reduce_as<integer<int32_t, uint32_t>>(op, n, in, out, count);
    case ncclUint32:
        return reduce_as<integer<uint32_t, uint32_t>>(op, n, in, out, count);
    case ncclInt64:
        return reduce_as<integer<int64_t, uint64_t>>(op, n, in, out, count);
    case ncclUint64:
        return reduce_as<integer<uint64_t, uint64_t>>(op, n, in, out, count);
    case ncclFloat16:
        return reduce_as<half_arith>(op, n, in, out, count);
    case ncclFloat32:
        return reduce_as<native<float>>(op, n, in, out, count);
    case ncclFloat64:
        return reduce_as<native<double>>(op, n, in, out, count);
    case ncclBfloat16:
        return reduce_as<bf16_arith>(op, n, in, out, count);
    default:
        return; /* refused when the call was made */
    }
}

const char *kind_name(int32_t kind)
{
    return kind == ALL_REDUCE ? "ncclAllReduce" : kind == BROADCAST ? "ncclBroadcast"
                                                                    : "a collective";
}

std::string describe(const call_args &a)
{
    std::string text = std::string(kind_name(a.kind)) + "(count " + std::to_string(a.count) +
                       ", " + type_name((ncclDataType_t)a.type);
    if (a.kind == ALL_REDUCE)
        text += std::string(", ") + op_name((ncclRedOp_t)a.op);
    else
        text += ", root " + std::to_string(a.root);
    return text + ")";
}

} // namespace nccl
} // namespace emu
