/*
 * Batch normalization over x: [n, c, inner] (inner = H*W for BatchNorm2d).
 * stats: [2, c] = (mean, invstd);  dparams: [2, c] = (dgamma, dbeta).
 *
 * Reductions run one channel per OpenMP iteration: each plane summed in
 * float lanes (cpu/lanes.h), the planes in double in image order, so
 * results do not depend on the thread count.
 * Elementwise passes run one (n, c) plane per iteration with a per-channel
 * scale and shift, the form PyTorch's CPU kernel uses.  Outputs are written
 * with =.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cpu/kernels.h"
#include "cpu/lanes.h"
#include "cpu/threads.h"

/* Below this many elements of x a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

/* sum_{n,i} x[n,ch,i] */
static double channel_sum(int n, int c, int inner, const float *x, int ch)
{
    return ct_lanes_sum_images(n, c, inner, x, ch);
}

/* sum_{n,i} (x[n,ch,i] - mean)^2: the second pass of a two-pass variance,
 * which keeps its accuracy when |mean| >> std. */
static double channel_sq_dev(int n, int c, int inner, const float *x, int ch, float mean)
{
    double sum = 0;
    for (int b = 0; b < n; b++)
        sum += ct_lanes_sq_dev(x + ((int64_t)b * c + ch) * inner, inner, mean);
    return sum;
}

/* training: stats = (mean, 1/sqrt(var_biased + eps)) of x, running stats updated;
 * eval: stats = (running_mean, 1/sqrt(running_var + eps)).  running_*: [c] */
void ct_cpu_batchnorm_stats(int n, int c, int inner, const float *x, bool training,
                            float momentum, float eps, float *running_mean, float *running_var,
                            float *stats)
{
    int64_t m = (int64_t)n * inner;
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int ch = 0; ch < c; ch++) {
        if (!training) {
            stats[ch] = running_mean[ch];
            stats[c + ch] = ct_bn_invstd(running_var[ch], eps);
            continue;
        }
        double mean = channel_sum(n, c, inner, x, ch) / (double)m;
        double sq_dev = channel_sq_dev(n, c, inner, x, ch, (float)mean);
        ct_bn_channel_stats(mean, sq_dev, m, eps, momentum, &stats[ch], &stats[c + ch],
                            &running_mean[ch], &running_var[ch]);
    }
}

/* y[n,c,i] = x[n,c,i]*scale[c] + shift[c],  scale = invstd*gamma, shift = beta - mean*scale */
void ct_cpu_batchnorm_apply(int n, int c, int inner, const float *x, const float *stats,
                            const float *gamma, const float *beta, bool relu, float *y)
{
    int64_t planes = (int64_t)n * c;
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int ch = (int)(p % c);
        float scale, shift;
        ct_bn_scale_shift(stats[ch], stats[c + ch], gamma[ch], beta[ch], &scale, &shift);
        const float *restrict xp = x + p * inner;
        float *restrict yp = y + p * inner;
        if (relu) /* the fused relu (graph/fuse.c) */
            for (int i = 0; i < inner; i++)
                yp[i] = ct_relu(xp[i] * scale + shift);
        else
            for (int i = 0; i < inner; i++)
                yp[i] = xp[i] * scale + shift;
    }
}

/* y = a + b (then max(y, 0)), a = xa*scale_a[c] + shift_a[c], b the same or
 * xb itself: a residual block's add with its batchnorms (graph/fuse.c).  One
 * pass where the apply and the add were two: the apply's output is neither
 * written nor read again.  The loops are ct_cpu_batchnorm_apply's
 * expression, then ct_cpu_add's (the same bits). */
void ct_cpu_batchnorm_add(int n, int c, int inner, ct_bn_input a, ct_bn_input b, bool relu,
                          float *y)
{
    int64_t planes = (int64_t)n * c;
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int ch = (int)(p % c);
        float scale_a, shift_a, scale_b = 1.0f, shift_b = 0.0f;
        ct_bn_scale_shift(a.stats[ch], a.stats[c + ch], a.gamma[ch], a.beta[ch], &scale_a,
                          &shift_a);
        if (b.stats)
            ct_bn_scale_shift(b.stats[ch], b.stats[c + ch], b.gamma[ch], b.beta[ch], &scale_b,
                              &shift_b);
        const float *restrict xa = (const float *)a.x + p * inner;
        const float *restrict xb = (const float *)b.x + p * inner;
        float *restrict yp = y + p * inner;
        if (b.stats)
            for (int i = 0; i < inner; i++) {
                float v = (xa[i] * scale_a + shift_a) + (xb[i] * scale_b + shift_b);
                yp[i] = relu ? ct_relu(v) : v;
            }
        else
            for (int i = 0; i < inner; i++) {
                float v = (xa[i] * scale_a + shift_a) + xb[i];
                yp[i] = relu ? ct_relu(v) : v;
            }
    }
}

/* dgamma[c] = invstd[c] * sum_{n,i} dy*(x - mean[c]),  dbeta[c] = sum_{n,i} dy */
void ct_cpu_batchnorm_backward_params(int n, int c, int inner, const float *x,
                                      const float *dy, const float *stats, float *dparams)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double dot = 0, sum = 0;
        for (int b = 0; b < n; b++) {
            int64_t offset = ((int64_t)b * c + ch) * inner;
            ct_lanes_dot_sum(dy + offset, x + offset, inner, stats[ch], &dot, &sum);
        }
        dparams[ch] = (float)(dot * stats[c + ch]);
        dparams[c + ch] = (float)sum;
    }
}

/* dx = (dy - dbeta/M - (x - mean) * invstd*dgamma/M) * invstd*gamma over M values */
static void backward_data(int n, int c, int inner, const float *x, const float *dy,
                          const float *stats, const float *gamma, const float *dparams, double m,
                          float *dx)
{
    int64_t planes = (int64_t)n * c;
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int ch = (int)(p % c);
        ct_bn_grad g = ct_bn_grad_of(stats[ch], stats[c + ch], gamma[ch], dparams[ch],
                                     dparams[c + ch], m);
        const float *restrict xp = x + p * inner;
        const float *restrict dyp = dy + p * inner;
        float *restrict dxp = dx + p * inner;
        for (int i = 0; i < inner; i++)
            dxp[i] = ct_bn_dx(&g, xp[i], dyp[i]);
    }
}

/* M = n*inner */
void ct_cpu_batchnorm_backward_data(int n, int c, int inner, const float *x, const float *dy,
                                    const float *stats, const float *gamma,
                                    const float *dparams, float *dx)
{
    backward_data(n, c, inner, x, dy, stats, gamma, dparams, (double)n * inner, dx);
}

/* ---- synchronized over ranks (ct_plan_set_sync_bn) ------------------------------------ */

size_t ct_cpu_batchnorm_sync_workspace(int c)
{
    return sizeof(double) * (2 * (size_t)c + 1) + sizeof(float) * 2 * (size_t)c;
}

/* The statistics of the union of every rank's batch, as one process with all
 * of them would compute them: the channel sums and the count summed over the
 * ranks give the mean, then the squared deviations from that mean summed
 * over the ranks give the variance (two passes, as above). */
int ct_cpu_batchnorm_stats_synced(int n, int c, int inner, const float *x, float momentum,
                                  float eps, float *running_mean, float *running_var,
                                  float *stats, const ct_rank_sum *ranks, void *workspace)
{
    int status;
    double *sums = workspace;
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int ch = 0; ch < c; ch++)
        sums[ch] = channel_sum(n, c, inner, x, ch);
    sums[c] = (double)n * inner;
    if ((status = ranks->sum(ranks->ctx, sums, c + 1)) != 0)
        return status;
    int64_t m = (int64_t)sums[c];
    for (int ch = 0; ch < c; ch++)
        stats[ch] = (float)(sums[ch] / (double)m); /* the mean, as the float pass 2 uses */
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c * inner >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int ch = 0; ch < c; ch++)
        sums[c + ch] = channel_sq_dev(n, c, inner, x, ch, stats[ch]);
    if ((status = ranks->sum(ranks->ctx, sums + c, c)) != 0)
        return status;
    for (int ch = 0; ch < c; ch++)
        ct_bn_channel_stats(sums[ch] / (double)m, sums[c + ch], m, eps, momentum, &stats[ch],
                            &stats[c + ch], &running_mean[ch], &running_var[ch]);
    return 0;
}

/* dx from the parameter gradients summed over the ranks (each rank's dparams
 * stay its own: they are its parameter gradients, averaged as the others). */
int ct_cpu_batchnorm_backward_data_synced(int n, int c, int inner, const float *x,
                                          const float *dy, const float *stats, const float *gamma,
                                          const float *dparams, float *dx,
                                          const ct_rank_sum *ranks, void *workspace)
{
    double *sums = workspace;
    float *global = (float *)(sums + 2 * (size_t)c + 1);
    for (int i = 0; i < 2 * c; i++)
        sums[i] = dparams[i];
    sums[2 * c] = (double)n * inner;
    int status = ranks->sum(ranks->ctx, sums, 2 * c + 1);
    if (status != 0)
        return status;
    for (int i = 0; i < 2 * c; i++)
        global[i] = (float)sums[i];
    backward_data(n, c, inner, x, dy, stats, gamma, global, sums[2 * c], dx);
    return 0;
}
