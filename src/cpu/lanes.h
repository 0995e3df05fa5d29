/* Sums over a row of floats in LANE_COUNT interleaved float partial sums, a
 * loop the compiler vectorizes without reassociating (no -ffast-math), the
 * lanes then added in double.  The order is fixed by the row alone, so the
 * reductions built from these (conv bias gradient, batchnorm) give the same
 * bits for any thread count.  Each lane adds count/8 values in float: for
 * rows up to a 224x224 plane that is about 1e-7 * sqrt(6272) relative, below
 * what the double sums across rows and images lose nothing to. */
#ifndef CT_CPU_LANES_H
#define CT_CPU_LANES_H

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
