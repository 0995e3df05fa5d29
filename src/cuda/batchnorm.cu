/*
 * Batch normalization on the GPU over x: [n, c, inner], the op split and
 * the math of src/cpu/batchnorm.c.  stats: [2, c] = (mean, invstd);
 * dparams: [2, c] = (dgamma, dbeta).
 *
 * Reductions run one block per channel and sum in double (as the CPU does)
 * with a fixed tree, so the result is deterministic; the variance is
 * two-pass.  Elementwise passes use a per-channel scale and shift.  Outputs
 * are written with =.
 */
#include <math.h>

#include "cuda/common.cuh"

__device__ inline float bn_at(const float *x, int c, int inner, int ch, int64_t e)
{
    return x[((e / inner) * c + ch) * inner + e % inner];
}

/* training: stats = (mean, 1/sqrt(var_biased + eps)) and the running
 * statistics updated; eval: from the running statistics.  One block per channel. */
__global__ void bn_stats_kernel(int n, int c, int inner, const float *x, bool training,
                                float momentum, float eps, float *running_mean,
                                float *running_var, int64_t *num_batches, float *stats)
{
    int ch = blockIdx.x;
    if (!training) {
        if (threadIdx.x == 0) {
            stats[ch] = running_mean[ch];
            stats[c + ch] = (float)(1.0 / sqrt((double)running_var[ch] + eps));
        }
        return;
    }
    int64_t m = (int64_t)n * inner;
    double sum = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x)
        sum += bn_at(x, c, inner, ch, e);
    double mean = ct_block_sum(sum) / (double)m;
    double sq_dev = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        double d = bn_at(x, c, inner, ch, e) - mean;
        sq_dev += d * d;
    }
    sq_dev = ct_block_sum(sq_dev);
    if (threadIdx.x != 0)
        return;
    double var_unbiased = m > 1 ? sq_dev / (double)(m - 1) : sq_dev;
    stats[ch] = (float)mean;
    stats[c + ch] = (float)(1.0 / sqrt(sq_dev / (double)m + eps));
    running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + (double)momentum * mean);
    running_var[ch] =
        (float)((1.0 - momentum) * running_var[ch] + (double)momentum * var_unbiased);
    if (ch == 0 && num_batches)
        num_batches[0] += 1;
}

/* y = x*scale[c] + shift[c],  scale = invstd*gamma, shift = beta - mean*scale */
__global__ void bn_apply_kernel(int64_t count, int c, int inner, const float *x,
                                const float *stats, const float *gamma, const float *beta,
                                float *y)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        int ch = (int)(i / inner % c);
        float scale = stats[c + ch] * gamma[ch];
        float shift = beta[ch] - stats[ch] * scale;
        y[i] = x[i] * scale + shift;
    }
}

/* dgamma[c] = invstd[c] * sum dy*(x - mean[c]),  dbeta[c] = sum dy;  one block per channel */
__global__ void bn_backward_params_kernel(int n, int c, int inner, const float *x,
                                          const float *dy, const float *stats, float *dparams)
{
    int ch = blockIdx.x;
    int64_t m = (int64_t)n * inner;
    double mean = stats[ch], dot = 0.0, sum = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        double g = bn_at(dy, c, inner, ch, e);
        dot += g * (bn_at(x, c, inner, ch, e) - mean);
        sum += g;
    }
    dot = ct_block_sum(dot);
    sum = ct_block_sum(sum);
    if (threadIdx.x == 0) {
        dparams[ch] = (float)(dot * stats[c + ch]);
        dparams[c + ch] = (float)sum;
    }
}

/* dx = (dy - dbeta/M - (x - mean) * invstd*dgamma/M) * invstd*gamma,  M = n*inner */
__global__ void bn_backward_data_kernel(int64_t count, int c, int inner, double m,
                                        const float *x, const float *dy, const float *stats,
                                        const float *gamma, const float *dparams, float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        int ch = (int)(i / inner % c);
        float mean = stats[ch], invstd = stats[c + ch];
        float dy_mean = (float)(dparams[c + ch] / m);
        float projection = (float)((double)dparams[ch] * invstd / m);
        float scale = invstd * gamma[ch];
        dx[i] = (dy[i] - dy_mean - (x[i] - mean) * projection) * scale;
    }
}

extern "C" ct_status ct_cuda_batchnorm_stats(int n, int c, int inner, const float *x,
                                             bool training, float momentum, float eps,
                                             float *running_mean, float *running_var,
                                             int64_t *num_batches, float *stats,
                                             cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    CT_CUDA_LAUNCH(bn_stats_kernel, c, CT_CUDA_BLOCK, 0, stream,
                   n, c, inner, x, training, momentum, eps, running_mean, running_var, num_batches,
                   stats);
    return CT_OK;
}

extern "C" ct_status ct_cuda_batchnorm_apply(int n, int c, int inner, const float *x,
                                             const float *stats, const float *gamma,
                                             const float *beta, float *y, cudaStream_t stream)
{
    int64_t count = (int64_t)n * c * inner;
    CT_CUDA_LAUNCH_ITEMS(bn_apply_kernel, count, stream, count, c, inner, x, stats, gamma, beta,
                         y);
    return CT_OK;
}

extern "C" ct_status ct_cuda_batchnorm_backward_params(int n, int c, int inner, const float *x,
                                                       const float *dy, const float *stats,
                                                       float *dparams, cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    CT_CUDA_LAUNCH(bn_backward_params_kernel, c, CT_CUDA_BLOCK, 0, stream,
                   n, c, inner, x, dy, stats, dparams);
    return CT_OK;
}

extern "C" ct_status ct_cuda_batchnorm_backward_data(int n, int c, int inner, const float *x,
                                                     const float *dy, const float *stats,
                                                     const float *gamma, const float *dparams,
                                                     float *dx, cudaStream_t stream)
{
    int64_t count = (int64_t)n * c * inner;
    CT_CUDA_LAUNCH_ITEMS(bn_backward_data_kernel, count, stream, count, c, inner,
                         (double)n * inner, x, dy, stats, gamma, dparams, dx);
    return CT_OK;
}
