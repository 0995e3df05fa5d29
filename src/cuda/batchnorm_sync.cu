/*
 * Synchronized batchnorm on the GPU (ct_plan_set_sync_bn): the statistics
 * and dx over the batches of every rank of a data-parallel job, as the CPU
 * computes them (cpu/batchnorm.c, ct_cpu_batchnorm_stats_synced):
 *
 *   statistics: channel sums of x and the count n*inner, summed over the
 *   ranks; the mean; the squared deviations from that mean, summed over
 *   the ranks; then stats and the running statistics from the totals.
 *   backward data: every rank's dparams (dgamma, dbeta) and count summed,
 *   then batchnorm.cu's dx kernel with those and the total count.
 *
 * The sums over the ranks are NCCL all-reduces queued on the stream
 * (ranks->device): the host waits for none of them, the kernels after them
 * on the stream see their result.  Each channel is reduced over chunks in
 * a fixed order (channel_reduce.cuh), so every run gives the same bits.
 *
 * The workspace: the chunk partials of one pass, [c, count] doubles, then
 * the sums: [c] channel sums, the count, [c] squared deviations (the
 * statistics); or [2c] dparams, the count, then [2c] floats of the summed
 * dparams (the backward).
 */
#include "cuda/channel_reduce.cuh"
#include "cuda/elementwise.cuh"
#include "core/math_shared.h"

/* Pass 1, block ch*count + k over chunk k of channel ch: parts[ch,k] = the
 * sum of x, or, with mean, of (x - mean[ch])^2 (the mean as a float, as
 * the CPU's second pass takes it). */
template <class T>
__global__ void bn_sync_chunk_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                     const T *x, const float *mean, double *parts)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, (int64_t)n * inner);
    double sum = 0.0;
    if (mean) {
        double center = mean[ch];
        ct_channel_walk(c, inner, ch, start, end, [&](int64_t at) {
            double d = ct_load_f32(x, at) - center;
            sum += d * d;
        });
    } else {
        ct_channel_walk(c, inner, ch, start, end,
                        [&](int64_t at) { sum += ct_load_f32(x, at); });
    }
    sum = ct_block_sum(sum);
    if (threadIdx.x == 0)
        parts[blockIdx.x] = sum;
}

/* Pass 2, one warp per channel: sums[ch] = sum_k parts[ch,k]; and, when
 * count_at is not NULL, *count_at = count. */
__global__ void bn_sync_finish_kernel(int c, ct_channel_chunks chunks, const double *parts,
                                      double *sums, double *count_at, double count)
{
    __shared__ double stage[CT_CHANNEL_WARPS_PER_BLOCK * CT_CHANNEL_STAGE_CHUNKS];
    const double *mine = ct_channel_partials(parts, c, chunks.count, stage);
    int ch = ct_channel_of_warp();
    if (ch < c) {
        double sum = ct_warp_sum_partials(mine, chunks.count);
        if (threadIdx.x % CT_CUDA_WARP == 0)
            sums[ch] = sum;
    }
    if (count_at && blockIdx.x == 0 && threadIdx.x == 0)
        *count_at = count;
}

/* mean[ch] = sums[ch] / sums[c], rounded to a float */
__global__ void bn_sync_mean_kernel(int c, const double *sums, float *mean)
{
    CT_CUDA_GRID_STRIDE(ch, c)
    mean[ch] = (float)(sums[ch] / sums[c]);
}

/* stats and running statistics from the totals: sums = [c] channel sums,
 * the count, [c] squared deviations */
__global__ void bn_sync_stats_kernel(int c, const double *sums, float momentum, float eps,
                                     float *running_mean, float *running_var,
                                     int64_t *num_batches, float *stats)
{
    double m = sums[c];
    CT_CUDA_GRID_STRIDE(ch, c)
    {
        ct_bn_channel_stats(sums[ch] / m, sums[c + 1 + ch], (int64_t)m, eps, momentum,
                            &stats[ch], &stats[c + ch], &running_mean[ch], &running_var[ch]);
        if (ch == 0 && num_batches)
            num_batches[0] += 1;
    }
}

/* sums = (dparams, count) as doubles */
__global__ void bn_sync_gather_kernel(int c, const float *dparams, double count, double *sums)
{
    CT_CUDA_GRID_STRIDE(i, 2 * (int64_t)c + 1)
    sums[i] = i < 2 * c ? (double)dparams[i] : count;
}

/* global = the summed dparams, rounded to floats */
__global__ void bn_sync_scatter_kernel(int c, const double *sums, float *global)
{
    CT_CUDA_GRID_STRIDE(i, 2 * (int64_t)c)
    global[i] = (float)sums[i];
}

/* The sums over the ranks of values[0..count) on the device; they come
 * from the plan's data-parallel steps, which give a GPU plan NCCL's. */
static ct_status sum_over_ranks(const ct_rank_sum *ranks, double *values, int count)
{
    if (!ranks->device)
        return ct_set_error(CT_ERR_INTERNAL, "synchronized batchnorm on a GPU was given sums "
                                             "over the ranks of host memory");
    return (ct_status)ranks->sum(ranks->ctx, values, count);
}

extern "C" size_t ct_cuda_batchnorm_sync_workspace(int c)
{
    return sizeof(double) * (2 * (size_t)c + 1) + sizeof(float) * 2 * (size_t)c;
}

extern "C" ct_status ct_cuda_batchnorm_stats_synced(ct_dtype dtype, int n, int c, int inner,
                                                    const void *x, float momentum, float eps,
                                                    float *running_mean, float *running_var,
                                                    int64_t *num_batches, float *stats,
                                                    const ct_rank_sum *ranks, void *workspace,
                                                    cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    ct_channel_chunks chunks = ct_channel_chunks_for(n, c, inner);
    double *parts = (double *)workspace; /* the sums: at the end of the statistics' workspace */
    double *sums = (double *)((char *)workspace + ct_cuda_batchnorm_workspace(n, c, inner) -
                              ct_cuda_batchnorm_sync_workspace(c));
    unsigned blocks = (unsigned)((int64_t)c * chunks.count);
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(bn_sync_chunk_kernel<T>, blocks, CT_CUDA_BLOCK, 0, stream, n, c, inner,
                       chunks, (const T *)x, (const float *)NULL, parts);
        CT_CUDA_LAUNCH(bn_sync_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0,
                       stream, c, chunks, parts, sums, sums + c, (double)n * inner);
        CT_TRY(sum_over_ranks(ranks, sums, c + 1));
        CT_CUDA_LAUNCH_ITEMS(bn_sync_mean_kernel, c, stream, c, sums, stats);
        CT_CUDA_LAUNCH(bn_sync_chunk_kernel<T>, blocks, CT_CUDA_BLOCK, 0, stream, n, c, inner,
                       chunks, (const T *)x, (const float *)stats, parts);
        CT_CUDA_LAUNCH(bn_sync_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0,
                       stream, c, chunks, parts, sums + c + 1, (double *)NULL, 0.0);
        CT_TRY(sum_over_ranks(ranks, sums + c + 1, c));
        CT_CUDA_LAUNCH_ITEMS(bn_sync_stats_kernel, c, stream, c, sums, momentum, eps,
                             running_mean, running_var, num_batches, stats);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_batchnorm_backward_data_synced(ct_dtype dtype, int n, int c,
                                                            int inner, const void *x,
                                                            const void *dy, const float *stats,
                                                            const float *gamma,
                                                            const float *dparams, void *dx,
                                                            const ct_rank_sum *ranks,
                                                            void *workspace, cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    double *sums = (double *)workspace;
    float *global = (float *)(sums + 2 * (int64_t)c + 1);
    CT_CUDA_LAUNCH_ITEMS(bn_sync_gather_kernel, 2 * (int64_t)c + 1, stream, c, dparams,
                         (double)n * inner, sums);
    CT_TRY(sum_over_ranks(ranks, sums, 2 * c + 1));
    CT_CUDA_LAUNCH_ITEMS(bn_sync_scatter_kernel, 2 * (int64_t)c, stream, c, sums, global);
    return ct_cuda_batchnorm_backward_data(dtype, n, c, inner, x, dy, stats, gamma, global,
                                           sums + 2 * c, dx, stream);
}
