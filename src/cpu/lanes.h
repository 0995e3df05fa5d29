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

enum { LANE_COUNT = 8 };

/* sum of v[i] */
static inline double ct_lanes_sum(const float *v, int count)
{
    float lanes[LANE_COUNT] = {0};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT)
        for (int lane = 0; lane < LANE_COUNT; lane++)
            lanes[lane] += v[i + lane];
    double total = 0.0;
    for (int lane = 0; lane < LANE_COUNT; lane++)
        total += lanes[lane];
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
    float lanes[4][LANE_COUNT] = {{0}};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT)
        for (int r = 0; r < 4; r++)
            for (int lane = 0; lane < LANE_COUNT; lane++)
                lanes[r][lane] += v[r * stride + i + lane];
    for (int r = 0; r < 4; r++) {
        double total = 0.0;
        for (int lane = 0; lane < LANE_COUNT; lane++)
            total += lanes[r][lane];
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
    float lanes[LANE_COUNT] = {0};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT)
        for (int lane = 0; lane < LANE_COUNT; lane++) {
            float d = v[i + lane] - center;
            lanes[lane] += d * d;
        }
    double total = 0.0;
    for (int lane = 0; lane < LANE_COUNT; lane++)
        total += lanes[lane];
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
    float dots[LANE_COUNT] = {0}, sums[LANE_COUNT] = {0};
    int i = 0;
    for (; i + LANE_COUNT <= count; i += LANE_COUNT)
        for (int lane = 0; lane < LANE_COUNT; lane++) {
            dots[lane] += w[i + lane] * (v[i + lane] - center);
            sums[lane] += w[i + lane];
        }
    double d = 0.0, s = 0.0;
    for (int lane = 0; lane < LANE_COUNT; lane++)
        d += dots[lane], s += sums[lane];
    for (; i < count; i++)
        d += (double)w[i] * ((double)v[i] - center), s += w[i];
    *dot += d;
    *sum += s;
}

#endif
