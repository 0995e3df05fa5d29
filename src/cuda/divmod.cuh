/*
 * Integer division by a divisor fixed for a whole launch, without the
 * GPU's division routine.  A GPU has no integer divider: nvcc turns x / d
 * for a run-time d into a routine of some 20 instructions (a reciprocal
 * estimate and its corrections), and x % d beside it into a multiply and
 * a subtract more.  A convolution's index map divides per element (pixel
 * by plane and row width, tap by kernel width, column by taps), which made
 * those routines most of the instructions of SimpleCNN's convolution GEMMs
 * (docs/perf.md, "the latency term").  With the divisor known on the host,
 * the quotient is a multiply-high, an add and a shift (Granlund and
 * Montgomery, "Division by invariant integers using multiplication", 1994):
 *
 *   l = ceil(log2 d),  m = floor(2^32 (2^l - d) / d) + 1,
 *   x / d = (mulhi(x, m) + x) >> l        for 0 <= x < 2^31,
 *
 * exact (tests/test_cuda_divmod.cu checks it against / for divisors up to
 * 2^31 - 1 and dividends up to 2^31 - 1, on the host and in a kernel).
 * mulhi(x, m) < x, so the sum fits 32 bits below 2^31.  The 64-bit product
 * compiles to one IMAD.HI under nvcc.
 */
#ifndef CT_CUDA_DIVMOD_CUH
#define CT_CUDA_DIVMOD_CUH

#include <stdint.h>

struct ct_divmod {
    uint32_t divisor, multiplier, shift;
};

/* The constants for dividing by d >= 1 (d < 1 is taken as 1). */
static inline __host__ __device__ ct_divmod ct_divmod_of(int d)
{
    uint32_t divisor = d < 1 ? 1u : (uint32_t)d, shift = 0;
    while (shift < 31 && (1u << shift) < divisor)
        shift++;
    uint64_t excess = ((uint64_t)1 << shift) - divisor; /* 2^l - d, below d */
    ct_divmod f;
    f.divisor = divisor;
    f.multiplier = (uint32_t)((excess << 32) / divisor + 1);
    f.shift = shift;
    return f;
}

/* x / f.divisor for 0 <= x < 2^31. */
static inline __host__ __device__ int ct_div(const ct_divmod &f, int x)
{
    uint32_t high = (uint32_t)(((uint64_t)(uint32_t)x * f.multiplier) >> 32);
    return (int)((high + (uint32_t)x) >> f.shift);
}

/* x % f.divisor for 0 <= x < 2^31. */
static inline __host__ __device__ int ct_mod(const ct_divmod &f, int x)
{
    return x - ct_div(f, x) * (int)f.divisor;
}

#endif
