/* Sums over a row of floats in LANE_COUNT interleaved float partial sums, a
 * loop the compiler vectorizes without reassociating (no -ffast-math), the
 * lanes then added in double.  The order is fixed by the row alone, so the
 * reductions built from these (conv bias gradient, batchnorm) give the same
 * bits for any thread count.  Each lane adds count/8 values in float: for
 * rows up to a 224x224 plane that is about 1e-7 * sqrt(6272) relative, below
 * what the double sums across rows and images lose nothing to. */
#ifndef CT_CPU_LANES_H
#define CT_CPU_LANES_H

#include <stddef.h>
#include <string.h>

enum { LANE_COUNT = 8 };

/* The lanes as two vectors of 4 (GCC's and clang's vector extension; 16
 * bytes, the baseline's SSE registers, which a vector of 8 would not be
 * without AVX): each operation is the lanes' own float operation, so the
 * bits are those of the scalar loops these replaced.  Written as loops
 * over an array of 8 lanes, GCC vectorized them across iterations instead,
 * de-interleaving with shuffles and spilling (batchnorm's parameter
 * gradient read 19 GB/s where its data gradient, a plain loop, read 44:
 * docs/perf.md).  lo holds lanes 0-3, hi lanes 4-7. */
typedef float ct_lanes4 __attribute__((vector_size(4 * sizeof(float))));

typedef struct ct_lanes {
    ct_lanes4 lo, hi;
} ct_lanes;

static inline ct_lanes4 ct_lanes4_load(const float *p)
{
    ct_lanes4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline ct_lanes4 ct_lanes4_splat(float value)
{
    ct_lanes4 v = {value, value, value, value};
    return v;
}

/* lanes 0, 1, ..., 7 added in double, in lane order, to total */
static inline double ct_lanes_total(const ct_lanes *lanes, double total)
{
    for (int lane = 0; lane < 4; lane++)
        total += lanes->lo[lane];
    for (int lane = 0; lane < 4; lane++)
        total += lanes->hi[lane];
    return total;
}

static inline void ct_lanes_add(ct_lanes *lanes, const float *v)
{
    lanes->lo += ct_lanes4_load(v);
    lanes->hi += ct_lanes4_load(v + 4);
}

/* sum of v[i] */
static inline double ct_lanes_sum(const float *v, int count)
{
    ct_lanes lanes = {ct_lanes4_splat(0.0f), ct_lanes4_splat(0.0f)};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT)
        ct_lanes_add(&lanes, v + i);
    double total = ct_lanes_total(&lanes, 0.0);
    for (; i < count; i++)
        total += v[i];
    return total;
}

/* sums[r] = ct_lanes_sum(v + r * stride, count) for r < 4, the same bits.
 * A row's sum is one chain of dependent adds (a vector add's latency per
 * 8 floats); four rows' chains side by side take about the time of one
 * (conv1's bias gradient in SimpleCNN: 6 planes of 576 an image). */
static inline void ct_lanes_sum4(const float *v, size_t stride, int count, double sums[4])
{
    ct_lanes lanes[4];
    for (int r = 0; r < 4; r++)
        lanes[r].lo = lanes[r].hi = ct_lanes4_splat(0.0f);
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT)
        for (int r = 0; r < 4; r++)
            ct_lanes_add(&lanes[r], v + r * stride + i);
    for (int r = 0; r < 4; r++) {
        double total = ct_lanes_total(&lanes[r], 0.0);
        for (int k = i; k < count; k++)
            total += v[r * stride + k];
        sums[r] = total;
    }
}

/* out[r] = ct_lanes_sum(v + r * stride, count) for r < rows, four at a time. */
static inline void ct_lanes_sum_rows(const float *v, size_t stride, int rows, int count,
                                     double *out)
{
    int r = 0;
    for (; r + 4 <= rows; r += 4)
        ct_lanes_sum4(v + r * stride, stride, count, out + r);
    for (; r < rows; r++)
        out[r] = ct_lanes_sum(v + r * stride, count);
}

/* sum over images b < n of ct_lanes_sum(x[b, ch, :]) of x [n, c, inner],
 * added in image order; the planes' sums four at a time. */
static inline double ct_lanes_sum_images(int n, int c, int inner, const float *x, int ch)
{
    size_t stride = (size_t)c * inner;
    const float *plane = x + (size_t)ch * inner;
    double total = 0.0, sums[4];
    int b = 0;
    for (; b + 4 <= n; b += 4) {
        ct_lanes_sum4(plane + b * stride, stride, inner, sums);
        total += sums[0];
        total += sums[1];
        total += sums[2];
        total += sums[3];
    }
    for (; b < n; b++)
        total += ct_lanes_sum(plane + b * stride, inner);
    return total;
}

/* sum of (v[i] - center)^2 */
static inline double ct_lanes_sq_dev(const float *v, int count, float center)
{
    ct_lanes4 centers = ct_lanes4_splat(center);
    ct_lanes lanes = {ct_lanes4_splat(0.0f), ct_lanes4_splat(0.0f)};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT) {
        ct_lanes4 d_lo = ct_lanes4_load(v + i) - centers;
        ct_lanes4 d_hi = ct_lanes4_load(v + i + 4) - centers;
        lanes.lo += d_lo * d_lo;
        lanes.hi += d_hi * d_hi;
    }
    double total = ct_lanes_total(&lanes, 0.0);
    for (; i < count; i++) {
        double d = (double)v[i] - center;
        total += d * d;
    }
    return total;
}

/* sum of w[i] * (v[i] - center) into *dot and of w[i] into *sum */
static inline void ct_lanes_dot_sum(const float *w, const float *v, int count, float center,
                                    double *dot, double *sum)
{
    ct_lanes4 zero = ct_lanes4_splat(0.0f), centers = ct_lanes4_splat(center);
    ct_lanes dots = {zero, zero}, sums = {zero, zero};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT) {
        ct_lanes4 w_lo = ct_lanes4_load(w + i), w_hi = ct_lanes4_load(w + i + 4);
        dots.lo += w_lo * (ct_lanes4_load(v + i) - centers);
        dots.hi += w_hi * (ct_lanes4_load(v + i + 4) - centers);
        sums.lo += w_lo;
        sums.hi += w_hi;
    }
    double d = ct_lanes_total(&dots, 0.0), s = ct_lanes_total(&sums, 0.0);
    for (; i < count; i++)
        d += (double)w[i] * ((double)v[i] - center), s += w[i];
    *dot += d;
    *sum += s;
}

#endif
