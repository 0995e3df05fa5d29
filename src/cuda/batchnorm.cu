/*
 * Batch normalization on the GPU over x: [n, c, inner], the op split and
 * the math of src/cpu/batchnorm.c.  stats: [2, c] = (mean, invstd);
 * dparams: [2, c] = (dgamma, dbeta).
 *
 * Reductions split each channel into chunks over many blocks and add the
 * parts in a fixed order (channel_reduce.cuh), in double as the CPU does, so
 * results are deterministic.  The variance stays two-pass in effect: each
 * chunk's squared deviations are taken from the chunk's own mean, and the
 * chunks are combined exactly (Chan et al.):
 *   M2 = sum_k [M2_k + n_k (mean_k - mean)^2],
 * a sum of non-negative terms, so nothing cancels however large |mean| is
 * against the spread, and x is read from memory once.  Elementwise passes
 * use a per-channel scale and shift.  Outputs are written with =.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cuda/channel_reduce.cuh"

/* The workspace of the statistics and of the parameter gradients: two
 * doubles per chunk of each channel. */
enum { BN_PARTS = 2 };

/* eval: stats = (running_mean, 1/sqrt(running_var + eps)) */
__global__ void bn_stats_eval_kernel(int c, float eps, const float *running_mean,
                                     const float *running_var, float *stats)
{
    CT_CUDA_GRID_STRIDE(ch, c)
    {
        stats[ch] = running_mean[ch];
        stats[c + ch] = ct_bn_invstd(running_var[ch], eps);
    }
}

/* Pass 1, block ch*count + k: parts[0][ch,k] = sum x over chunk k of channel
 * ch, parts[1][ch,k] = sum (x - chunk mean)^2 over it (a second read of
 * the chunk, from cache).  parts: [2, c, count] */
__global__ void bn_stats_chunk_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                      const float *x, double *parts)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, (int64_t)n * inner);
    double sum = 0.0;
    ct_channel_walk(c, inner, ch, start, end, [&](int64_t at) { sum += x[at]; });
    sum = ct_block_sum(sum);
    double chunk_mean = sum / (double)(end - start), sq_dev = 0.0;
    ct_channel_walk(c, inner, ch, start, end, [&](int64_t at) {
        double d = x[at] - chunk_mean;
        sq_dev += d * d;
    });
    sq_dev = ct_block_sum(sq_dev);
    if (threadIdx.x == 0) {
        parts[blockIdx.x] = sum;
        parts[(int64_t)c * chunks.count + blockIdx.x] = sq_dev;
    }
}

/* Pass 2, one warp per channel: mean and M2 from the chunks' parts, then
 * stats = (mean, 1/sqrt(M2/m + eps)) and the running statistics updated
 * (by lane 0 of the channel's warp: once per channel). */
__global__ void bn_stats_finish_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                       const double *parts, float momentum, float eps,
                                       float *running_mean, float *running_var,
                                       int64_t *num_batches, float *stats)
{
    int ch = ct_channel_of_warp();
    if (ch >= c)
        return; /* the whole warp */
    int64_t m = (int64_t)n * inner;
    const double *sums = parts + (int64_t)ch * chunks.count;
    const double *sq_devs = sums + (int64_t)c * chunks.count;
    double mean = ct_warp_sum_partials(sums, chunks.count) / (double)m;
    double spread = 0.0;
    for (int k = threadIdx.x % CT_CUDA_WARP; k < chunks.count; k += CT_CUDA_WARP) {
        double chunk_size = (double)(ct_chunk_end(chunks, k, m) - ct_chunk_start(chunks, k));
        double d = sums[k] / chunk_size - mean;
        spread += sq_devs[k] + chunk_size * d * d;
    }
    double sq_dev = ct_warp_sum(spread);
    if (threadIdx.x % CT_CUDA_WARP != 0)
        return;
    ct_bn_channel_stats(mean, sq_dev, m, eps, momentum, &stats[ch], &stats[c + ch],
                        &running_mean[ch], &running_var[ch]);
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
        float scale, shift;
        ct_bn_scale_shift(stats[ch], stats[c + ch], gamma[ch], beta[ch], &scale, &shift);
        y[i] = x[i] * scale + shift;
    }
}

/* Pass 1, block ch*count + k, over chunk k of channel ch:
 * parts[0][ch,k] = sum dy*(x - mean[ch]),  parts[1][ch,k] = sum dy.  parts: [2, c, count] */
__global__ void bn_params_chunk_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                       const float *x, const float *dy, const float *stats,
                                       double *parts)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, (int64_t)n * inner);
    double mean = stats[ch], dot = 0.0, sum = 0.0;
    ct_channel_walk(c, inner, ch, start, end, [&](int64_t at) {
        double g = dy[at];
        dot += g * (x[at] - mean);
        sum += g;
    });
    dot = ct_block_sum(dot);
    sum = ct_block_sum(sum);
    if (threadIdx.x == 0) {
        parts[blockIdx.x] = dot;
        parts[(int64_t)c * chunks.count + blockIdx.x] = sum;
    }
}

/* Pass 2, one warp per channel:
 * dgamma[c] = invstd[c] * sum dy*(x - mean[c]),  dbeta[c] = sum dy */
__global__ void bn_params_finish_kernel(int c, ct_channel_chunks chunks, const double *parts,
                                        const float *stats, float *dparams)
{
    int ch = ct_channel_of_warp();
    if (ch >= c)
        return; /* the whole warp */
    const double *dots = parts + (int64_t)ch * chunks.count;
    const double *sums = dots + (int64_t)c * chunks.count;
    double dot = ct_warp_sum_partials(dots, chunks.count);
    double sum = ct_warp_sum_partials(sums, chunks.count);
    if (threadIdx.x % CT_CUDA_WARP == 0) {
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
        ct_bn_grad g = ct_bn_grad_of(stats[ch], stats[c + ch], gamma[ch], dparams[ch],
                                     dparams[c + ch], m);
        dx[i] = ct_bn_dx(&g, x[i], dy[i]);
    }
}

extern "C" size_t ct_cuda_batchnorm_workspace(int n, int c, int inner)
{
    return sizeof(double) * BN_PARTS * (size_t)c * ct_channel_chunks_most((int64_t)n * inner);
}

extern "C" ct_status ct_cuda_batchnorm_stats(int n, int c, int inner, const float *x,
                                             bool training, float momentum, float eps,
                                             float *running_mean, float *running_var,
                                             int64_t *num_batches, float *stats,
                                             void *workspace, cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    if (!training) {
        CT_CUDA_LAUNCH_ITEMS(bn_stats_eval_kernel, c, stream, c, eps, running_mean, running_var,
                             stats);
        return CT_OK;
    }
    ct_channel_chunks chunks = ct_channel_chunks_for(n, c, inner);
    double *parts = (double *)workspace;
    CT_CUDA_LAUNCH(bn_stats_chunk_kernel, (unsigned)((int64_t)c * chunks.count), CT_CUDA_BLOCK,
                   0, stream, n, c, inner, chunks, x, parts);
    CT_CUDA_LAUNCH(bn_stats_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0, stream,
                   n, c, inner, chunks, parts, momentum, eps, running_mean, running_var,
                   num_batches, stats);
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
                                                       float *dparams, void *workspace,
                                                       cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    ct_channel_chunks chunks = ct_channel_chunks_for(n, c, inner);
    double *parts = (double *)workspace;
    CT_CUDA_LAUNCH(bn_params_chunk_kernel, (unsigned)((int64_t)c * chunks.count), CT_CUDA_BLOCK,
                   0, stream, n, c, inner, chunks, x, dy, stats, parts);
    CT_CUDA_LAUNCH(bn_params_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0, stream,
                   c, chunks, parts, stats, dparams);
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
