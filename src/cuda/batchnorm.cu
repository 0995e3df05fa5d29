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
 *
 * x, y, dy and dx are of one storage type T (float, or the bits of a bf16
 * or f16: elementwise.cuh), the statistics, gamma, beta, the running
 * buffers and the parameter gradients f32: 16-bit values are widened as
 * they are loaded, the work is the f32 kernel's, and y and dx are rounded
 * once as they are stored, where the CPU reference rounds (cpu/widen.c).
 */
#include <math.h>

#include "core/math_shared.h"
#include "cuda/channel_reduce.cuh"
#include "cuda/divmod.cuh"
#include "cuda/elementwise.cuh"

/* The workspace of the statistics and of the parameter gradients: two
 * doubles per chunk of each channel. */
enum {
    BN_PARTS = 2,
    BN_MAX_GRID_Y = 65535, /* the CUDA limit on gridDim.y */
};

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

/* Channel ch's mean and sum of squared deviations from its chunks'
 * partials (sums, sq_devs: [count] each; Stored: in global memory, stored
 * by other blocks), by one warp, in every lane:
 *   M2 = sum_k [M2_k + n_k (mean_k - mean)^2]. */
template <bool Stored>
__device__ inline void bn_channel_moments(int64_t m, ct_channel_chunks chunks,
                                          const double *sums, const double *sq_devs,
                                          double *mean, double *sq_dev)
{
    *mean = ct_warp_sum_partials<Stored>(sums, chunks.count) / (double)m;
    double spread = 0.0;
    for (int k = threadIdx.x % CT_CUDA_WARP; k < chunks.count; k += CT_CUDA_WARP) {
        double chunk_size = (double)(ct_chunk_end(chunks, k, m) - ct_chunk_start(chunks, k));
        double sum = Stored ? __ldcg(sums + k) : sums[k];
        double d = sum / chunk_size - *mean;
        spread += (Stored ? __ldcg(sq_devs + k) : sq_devs[k]) + chunk_size * d * d;
    }
    *sq_dev = ct_warp_sum(spread); /* complete in lane 0 */
}

/* What the statistics' pass 2 writes besides stats: the running buffers. */
struct bn_running {
    float momentum, eps;
    float *mean, *var;
    int64_t *num_batches;
};

/* Channel ch's stats = (mean, 1/sqrt(M2/m + eps)) and running statistics
 * (the count of batches with channel 0). */
__device__ inline void bn_store_channel(int c, int ch, int64_t m, double mean, double sq_dev,
                                        const bn_running &run, float *stats)
{
    ct_bn_channel_stats(mean, sq_dev, m, run.eps, run.momentum, &stats[ch], &stats[c + ch],
                        &run.mean[ch], &run.var[ch]);
    if (ch == 0 && run.num_batches)
        run.num_batches[0] += 1;
}

/* The most values a thread of bn_stats_chunk_kernel holds: the shortest
 * chunk (ct_channel_chunks_for), every chunk of ResNet-18's layers at
 * batch 64.  The longest's 32 took 120 registers (two blocks an SM);
 * longer chunks are read twice. */
enum {
    BN_STATS_HELD = CT_CHANNEL_CHUNK_MIN / CT_CUDA_BLOCK,
};

/* Pass 1, block ch*count + k: parts[0][ch,k] = sum x over chunk k of channel
 * ch, parts[1][ch,k] = sum (x - chunk mean)^2 over it, from the values
 * held in registers (read a second time, from cache, the chunk took 9.6 us
 * on ResNet-18's first layers at batch 64 against a floor of 5.0: twice
 * the bytes through L2 and the round trips; emulated counts, docs/perf.md
 * 2026-12-04).  parts: [2, c, count].  The block that finishes
 * the channel (ct_channel_finishes_here; tickets: one per channel, or
 * NULL) does pass 2's work for it: stats and the running statistics. */
template <class T>
__global__ void bn_stats_chunk_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                      const T *x, double *parts, unsigned *tickets,
                                      bn_running run, float *stats)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t m = (int64_t)n * inner;
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, m);
    double sum = 0.0, sq_dev = 0.0, chunk_mean;
    if (end - start <= (int64_t)BN_STATS_HELD * blockDim.x) {
        float v[BN_STATS_HELD];
        int count = ct_channel_values(c, inner, ch, start, end, v,
                                      [&](int64_t at) { return ct_load_f32(x, at); });
#pragma unroll
        for (int u = 0; u < BN_STATS_HELD; u++)
            if (u < count)
                sum += v[u];
        sum = ct_block_sum(sum);
        chunk_mean = sum / (double)(end - start);
#pragma unroll
        for (int u = 0; u < BN_STATS_HELD; u++)
            if (u < count) {
                double d = v[u] - chunk_mean;
                sq_dev += d * d;
            }
    } else {
        ct_channel_walk(c, inner, ch, start, end,
                        [&](int64_t at) { sum += ct_load_f32(x, at); });
        sum = ct_block_sum(sum);
        chunk_mean = sum / (double)(end - start);
        ct_channel_walk(c, inner, ch, start, end, [&](int64_t at) {
            double d = ct_load_f32(x, at) - chunk_mean;
            sq_dev += d * d;
        });
    }
    sq_dev = ct_block_sum(sq_dev);
    double *sums = parts + (int64_t)ch * chunks.count;
    double *sq_devs = parts + ((int64_t)c + ch) * chunks.count;
    if (threadIdx.x == 0)
        sums[k] = sum, sq_devs[k] = sq_dev;
    if (!ct_channel_finishes_here(tickets, ch, chunks.count) || threadIdx.x >= CT_CUDA_WARP)
        return;
    double mean, channel_sq_dev;
    bn_channel_moments<true>(m, chunks, sums, sq_devs, &mean, &channel_sq_dev);
    if (threadIdx.x == 0)
        bn_store_channel(c, ch, m, mean, channel_sq_dev, run, stats);
}

/* Pass 2, one warp per channel: the moments from the chunks' parts, then
 * stats and the running statistics, by the block's first threads, one
 * channel each (channel_reduce.cuh: partials staged, results stored
 * together). */
__global__ void bn_stats_finish_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                       const double *parts, bn_running run, float *stats)
{
    __shared__ double stage_sums[CT_CHANNEL_WARPS_PER_BLOCK * CT_CHANNEL_STAGE_CHUNKS],
        stage_sq_devs[CT_CHANNEL_WARPS_PER_BLOCK * CT_CHANNEL_STAGE_CHUNKS];
    __shared__ double means[CT_CHANNEL_WARPS_PER_BLOCK],
        channel_sq_devs[CT_CHANNEL_WARPS_PER_BLOCK];
    int64_t m = (int64_t)n * inner;
    const double *sums = ct_channel_partials(parts, c, chunks.count, stage_sums);
    const double *sq_devs =
        ct_channel_partials(parts + (int64_t)c * chunks.count, c, chunks.count, stage_sq_devs);
    int warp = (int)threadIdx.x / CT_CUDA_WARP;
    if (ct_channel_of_warp() < c) {
        double mean, sq_dev;
        bn_channel_moments<false>(m, chunks, sums, sq_devs, &mean, &sq_dev);
        if (threadIdx.x % CT_CUDA_WARP == 0)
            means[warp] = mean, channel_sq_devs[warp] = sq_dev;
    }
    __syncthreads();
    if ((int)threadIdx.x >= ct_channel_block_count(c))
        return;
    int ch = ct_channel_block_first() + (int)threadIdx.x;
    bn_store_channel(c, ch, m, means[threadIdx.x], channel_sq_devs[threadIdx.x], run, stats);
}

/* The elementwise passes (apply, backward data) run a 2-D grid: block
 * (s, i) takes segment s, BN_SEGMENT elements, of each image's [c, inner]
 * plane, in images i, i + gridDim.y, ...  It first turns its channels'
 * statistics into a table in shared memory (one coalesced read per
 * parameter for all its channels), then streams x with one 128-bit access
 * per thread per image where inner is a multiple of 4 and the tensors are
 * 16-byte aligned (a thread's four elements then share a channel), one
 * coalesced 32-bit access per element otherwise; halves the same, four per
 * 64-bit access (8-byte aligned), one 16-bit access otherwise.  Reading each channel's
 * parameters in every thread (the old grid-stride loop) made a warp's
 * parameter loads 4 bytes of a 32-byte sector each: 57-68% efficiency.
 * 256 threads, one float4 each: a segment is 4 KiB of a plane; the table
 * is at most BN_SEGMENT channels (inner = 1), 8 or 16 KiB of shared memory,
 * so 8 blocks (2,048 threads) still fit an SM. */
enum { BN_SEGMENT = CT_VEC * CT_CUDA_BLOCK };

/* Elements [start, start + length) of each image's plane, of channels
 * first .. first + channels - 1. */
struct bn_segment {
    int64_t plane, start;
    int length, first, channels;
};

__device__ inline bn_segment bn_segment_of(int c, int inner)
{
    bn_segment seg;
    seg.plane = (int64_t)c * inner;
    seg.start = (int64_t)blockIdx.x * BN_SEGMENT;
    int64_t left = seg.plane - seg.start;
    seg.length = left < BN_SEGMENT ? (int)left : (int)BN_SEGMENT;
    seg.first = (int)(seg.start / inner);
    seg.channels = (int)((seg.start + seg.length - 1) / inner) - seg.first + 1;
    return seg;
}

/* Four elements at p as f32 in one access (16 bytes of floats, 8 of
 * halves; p aligned to that), and stored back (halves rounded once). */
__device__ inline void bn_load4(const float *p, float v[CT_VEC])
{
    ct_load4(p, v);
}
__device__ inline void bn_store4(float *p, const float v[CT_VEC])
{
    ct_store4(p, v);
}
template <class H> __device__ inline void bn_load4(const H *p, float v[CT_VEC])
{
    H h[CT_VEC];
    uint64_t bits = *reinterpret_cast<const uint64_t *>(p);
    memcpy(h, &bits, sizeof bits);
    for (int k = 0; k < CT_VEC; k++)
        v[k] = ct_to_f32(h[k]);
}
template <class H> __device__ inline void bn_store4(H *p, const float v[CT_VEC])
{
    H h[CT_VEC];
    for (int k = 0; k < CT_VEC; k++)
        h[k] = ct_from_f32<H>(v[k]);
    uint64_t bits;
    memcpy(&bits, h, sizeof bits);
    *reinterpret_cast<uint64_t *>(p) = bits;
}

/* out[at] = body(slot, {in[0][at], ...}) for every element `at` of the
 * block's segment in each of its images; slot is the element's channel
 * less seg.first (its row of the block's table).  in and out of storage
 * type T; body computes in f32. */
template <class T, int N_IN, class Body>
__device__ void bn_segment_map(int n, int inner, bn_segment seg, bool vec,
                               const T *const (&in)[N_IN], T *out, Body body)
{
    if (vec) {
        int e = (int)threadIdx.x * CT_VEC;
        if (e >= seg.length)
            return;
        int slot = (int)((seg.start + e) / inner) - seg.first;
        for (int64_t image = blockIdx.y; image < n; image += gridDim.y) {
            int64_t at = image * seg.plane + seg.start + e;
            float values[N_IN][CT_VEC], result[CT_VEC];
            for (int k = 0; k < N_IN; k++)
                bn_load4(in[k] + at, values[k]);
            for (int lane = 0; lane < CT_VEC; lane++) {
                float element[N_IN];
                for (int k = 0; k < N_IN; k++)
                    element[k] = values[k][lane];
                result[lane] = body(slot, element);
            }
            bn_store4(out + at, result);
        }
        return;
    }
    int slots[CT_VEC]; /* the same for every image: divided once */
    for (int j = 0; j < CT_VEC; j++) {
        int e = (int)threadIdx.x + j * (int)blockDim.x;
        slots[j] = e < seg.length ? (int)((seg.start + e) / inner) - seg.first : -1;
    }
    for (int64_t image = blockIdx.y; image < n; image += gridDim.y)
        for (int j = 0; j < CT_VEC; j++) {
            if (slots[j] < 0)
                continue;
            int64_t at = image * seg.plane + seg.start + threadIdx.x + j * blockDim.x;
            float element[N_IN];
            for (int k = 0; k < N_IN; k++)
                element[k] = ct_load_f32(in[k], at);
            ct_store_f32(out, at, body(slots[j], element));
        }
}

/* The scale and shift of the segment's channels into shared memory
 * (ct_bn_scale_shift); the caller's barrier follows. */
__device__ inline void bn_segment_table(int c, const bn_segment &seg, const float *stats,
                                        const float *gamma, const float *beta, float *scale,
                                        float *shift)
{
    for (int w = threadIdx.x; w < seg.channels; w += blockDim.x) {
        int ch = seg.first + w;
        ct_bn_scale_shift(stats[ch], stats[c + ch], gamma[ch], beta[ch], &scale[w], &shift[w]);
    }
}

/* y = x*scale[c] + shift[c],  scale = invstd*gamma, shift = beta - mean*scale;
 * then max(y, 0) when relu (the fused relu, graph/fuse.c) */
template <class T>
static __global__ void bn_apply_kernel(int n, int c, int inner, bool vec, const T *x,
                                       const float *stats, const float *gamma,
                                       const float *beta, bool relu, T *y)
{
    __shared__ float scale[BN_SEGMENT], shift[BN_SEGMENT];
    bn_segment seg = bn_segment_of(c, inner);
    bn_segment_table(c, seg, stats, gamma, beta, scale, shift);
    __syncthreads();
    const T *in[1] = {x};
    bn_segment_map(n, inner, seg, vec, in, y, [&](int slot, const float *e) {
        float v = e[0] * scale[slot] + shift[slot];
        return relu ? ct_relu(v) : v;
    });
}

/* y = a + b, then max(y, 0) when relu: a residual block's add computing its
 * input's batchnorm, a = xa*scale_a[c] + shift_a[c], rounded to T as
 * bn_apply_kernel stores it, and b the same where b_stats is given, else xb
 * itself (graph/fuse.c).  One pass over the block's tensors where the
 * apply and the add made three: the apply's output is neither stored nor
 * read back.  The same bits as the two kernels (the apply's expression, its
 * rounding, then the add's). */
template <class T>
static __global__ void bn_add_kernel(int n, int c, int inner, bool vec, const T *xa,
                                     const float *a_stats, const float *a_gamma,
                                     const float *a_beta, const T *xb, const float *b_stats,
                                     const float *b_gamma, const float *b_beta, bool relu, T *y)
{
    __shared__ float scale[2][BN_SEGMENT], shift[2][BN_SEGMENT];
    bn_segment seg = bn_segment_of(c, inner);
    bn_segment_table(c, seg, a_stats, a_gamma, a_beta, scale[0], shift[0]);
    if (b_stats) /* a uniform branch: the launch's */
        bn_segment_table(c, seg, b_stats, b_gamma, b_beta, scale[1], shift[1]);
    __syncthreads();
    const T *in[2] = {xa, xb};
    bool b_norm = b_stats != nullptr;
    bn_segment_map(n, inner, seg, vec, in, y, [&](int slot, const float *e) {
        float a = ct_to_f32(ct_from_f32<T>(e[0] * scale[0][slot] + shift[0][slot]));
        float b = b_norm ? ct_to_f32(ct_from_f32<T>(e[1] * scale[1][slot] + shift[1][slot]))
                         : e[1];
        float v = a + b;
        return relu ? ct_relu(v) : v;
    });
}

/* Chunk k's partials of channel ch into parts: [2, c, count] (dots, then
 * sums), by thread 0. */
__device__ inline void bn_params_store(double *parts, int c, ct_channel_chunks chunks, int ch,
                                       int k, double dot, double sum)
{
    if (threadIdx.x == 0) {
        parts[(int64_t)ch * chunks.count + k] = dot;
        parts[((int64_t)c + ch) * chunks.count + k] = sum;
    }
}

/* Pass 2's work for channel ch, by the first warp of the block that
 * finishes it: dgamma = invstd * sum of the dots, dbeta = sum of the sums. */
__device__ inline void bn_params_finish_channel(const double *parts, int c,
                                                ct_channel_chunks chunks, int ch,
                                                const float *stats, float *dparams)
{
    double dot = ct_warp_sum_partials<true>(parts + (int64_t)ch * chunks.count, chunks.count);
    double sum =
        ct_warp_sum_partials<true>(parts + ((int64_t)c + ch) * chunks.count, chunks.count);
    if (threadIdx.x == 0) {
        dparams[ch] = (float)(dot * stats[c + ch]);
        dparams[c + ch] = (float)sum;
    }
}

/* Pass 1, block ch*count + k, over chunk k of channel ch:
 * parts[0][ch,k] = sum dy*(x - mean[ch]),  parts[1][ch,k] = sum dy.
 * parts: [2, c, count].  The block that finishes the channel
 * (ct_channel_finishes_here) does pass 2's work for it. */
template <class T>
__global__ void bn_params_chunk_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                       const T *x, const T *dy, const float *stats,
                                       double *parts, unsigned *tickets, float *dparams)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, (int64_t)n * inner);
    double mean = stats[ch], dot = 0.0, sum = 0.0;
    ct_channel_walk(c, inner, ch, start, end, [&](int64_t at) {
        double g = ct_load_f32(dy, at);
        dot += g * (ct_load_f32(x, at) - mean);
        sum += g;
    });
    dot = ct_block_sum(dot);
    sum = ct_block_sum(sum);
    bn_params_store(parts, c, chunks, ch, k, dot, sum);
    if (ct_channel_finishes_here(tickets, ch, chunks.count) && threadIdx.x < CT_CUDA_WARP)
        bn_params_finish_channel(parts, c, chunks, ch, stats, dparams);
}

/* A batchnorm whose parameter gradients bn_made_params_kernel computes:
 * its x (of dy's storage type), statistics, the parts of its pass 1
 * ([2, c, count], as bn_params_chunk_kernel's) and dparams. */
template <class T> struct bn_params_of {
    const T *x;
    const float *stats;
    double *parts;
    float *dparams;
};

/* dy at `at` as the add of tensor_ops.cu's add_relu_grad_kernel makes it:
 * a + b, then the backward of the relu whose output is mask where given
 * (a residual block's input gradient). */
template <class T> struct bn_dy_of_add {
    const T *a, *b, *mask;

    __device__ float operator()(int64_t at, int) const
    {
        float v = ct_load_f32(a, at) + ct_load_f32(b, at);
        return mask ? ct_relu_grad(ct_load_f32(mask, at), v) : v;
    }
};

/* dx at `at` of the 2x2 stride-2 max pool whose every input lies in one
 * window, as pool.cu's maxpool2x2_backward_kernel makes it: 0, but 0 + dy
 * of the window at its argmax (relu'd backward by the max where relu: the
 * relu's output is the pool's input), the argmax found by each of the
 * window's elements (conv -> batchnorm -> relu -> max pool: VGG).  The
 * element's place in its plane comes from the channel walk: its row by a
 * multiply and shift, the plane's start in x by a subtraction and in dy
 * by a quarter of it (even sides: ct_cuda_maxpool2x2_backward_fits), where
 * a 64-bit and a 32-bit division found them (VGG-11-bn's five fused pool
 * passes: 52.6 M warp instructions against 31.3 M for the separate pool
 * and parameter kernels; emulated counts, docs/perf.md 2026-12-07). */
template <class T> struct bn_dy_of_pool {
    const T *x, *dy;
    int in_w, out_w;
    ct_divmod by_in_w;
    bool relu;

    __device__ float operator()(int64_t at, int offset) const
    {
        int h = ct_div(by_in_w, offset), w = offset - h * in_w;
        int64_t plane = at - offset; /* x's plane; dy's is a quarter of it */
        int64_t top = plane + (int64_t)(h & ~1) * in_w + (w & ~1);
        float window[4] = {ct_load_f32(x, top), ct_load_f32(x, top + 1),
                           ct_load_f32(x, top + in_w), ct_load_f32(x, top + in_w + 1)};
        float m;
        int best = ct_argmax4(window, &m);
        float g = 0.0f + ct_load_f32(dy, plane / 4 + (int64_t)(h >> 1) * out_w + (w >> 1));
        if (relu)
            g = ct_relu_grad(m, g);
        return (h & 1) * 2 + (w & 1) == best ? g : 0.0f;
    }
};

/* dy = make(at, its place in its plane), stored, while bn_params_chunk_kernel's pass (and its
 * finish, by tickets) runs on the stored dy for the batchnorms that read it
 * (graph/fuse.c ct_fuse_bn_params): bn[0], and bn[1] where its x is not
 * NULL (a downsampling block's bn2 and shortcut: the same dy, so the same
 * dbeta).  The grid and every sum in bn_params_chunk_kernel's order, and
 * each dy the value its own kernel stores: the same bits as the two or
 * three kernels, with dy written once and read back by none. */
template <class T, class Make>
__global__ void bn_made_params_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                      Make make, T *dy, bn_params_of<T> bn0,
                                      bn_params_of<T> bn1, unsigned *tickets)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, (int64_t)n * inner);
    bool two = bn1.x != nullptr; /* uniform: the launch's */
    double mean0 = bn0.stats[ch], mean1 = two ? bn1.stats[ch] : 0.0;
    double dot0 = 0.0, dot1 = 0.0, sum = 0.0;
    ct_channel_walk(c, inner, ch, start, end, [&](int64_t at, int offset) {
        float v = make(at, offset);
        ct_store_f32(dy, at, v);
        double g = ct_to_f32(ct_from_f32<T>(v)); /* as stored */
        dot0 += g * (ct_load_f32(bn0.x, at) - mean0);
        if (two)
            dot1 += g * (ct_load_f32(bn1.x, at) - mean1);
        sum += g;
    });
    dot0 = ct_block_sum(dot0);
    if (two)
        dot1 = ct_block_sum(dot1);
    sum = ct_block_sum(sum);
    bn_params_store(bn0.parts, c, chunks, ch, k, dot0, sum);
    if (two)
        bn_params_store(bn1.parts, c, chunks, ch, k, dot1, sum);
    if (!ct_channel_finishes_here(tickets, ch, chunks.count) || threadIdx.x >= CT_CUDA_WARP)
        return;
    bn_params_finish_channel(bn0.parts, c, chunks, ch, bn0.stats, bn0.dparams);
    if (two)
        bn_params_finish_channel(bn1.parts, c, chunks, ch, bn1.stats, bn1.dparams);
}

/* Pass 2, one warp per channel:
 * dgamma[c] = invstd[c] * sum dy*(x - mean[c]),  dbeta[c] = sum dy
 * (partials staged and results stored as in bn_stats_finish_kernel) */
__global__ void bn_params_finish_kernel(int c, ct_channel_chunks chunks, const double *parts,
                                        const float *stats, float *dparams)
{
    __shared__ double stage_dots[CT_CHANNEL_WARPS_PER_BLOCK * CT_CHANNEL_STAGE_CHUNKS],
        stage_sums[CT_CHANNEL_WARPS_PER_BLOCK * CT_CHANNEL_STAGE_CHUNKS];
    __shared__ double channel_dots[CT_CHANNEL_WARPS_PER_BLOCK],
        channel_sums[CT_CHANNEL_WARPS_PER_BLOCK];
    const double *dots = ct_channel_partials(parts, c, chunks.count, stage_dots);
    const double *sums =
        ct_channel_partials(parts + (int64_t)c * chunks.count, c, chunks.count, stage_sums);
    int warp = (int)threadIdx.x / CT_CUDA_WARP;
    if (ct_channel_of_warp() < c) {
        double dot = ct_warp_sum_partials(dots, chunks.count);
        double sum = ct_warp_sum_partials(sums, chunks.count);
        if (threadIdx.x % CT_CUDA_WARP == 0)
            channel_dots[warp] = dot, channel_sums[warp] = sum;
    }
    __syncthreads();
    if ((int)threadIdx.x >= ct_channel_block_count(c))
        return;
    int ch = ct_channel_block_first() + (int)threadIdx.x;
    dparams[ch] = (float)(channel_dots[threadIdx.x] * stats[c + ch]);
    dparams[c + ch] = (float)channel_sums[threadIdx.x];
}

/* dx = (dy - dbeta/M - (x - mean) * invstd*dgamma/M) * invstd*gamma,  M = n*inner,
 * or *count (synchronized batchnorm: every rank's n*inner); the grid of
 * bn_apply_kernel, a table of ct_bn_grad per channel */
template <class T>
static __global__ void bn_backward_data_kernel(int n, int c, int inner, bool vec,
                                               const T *x, const T *dy, const float *stats,
                                               const float *gamma, const float *dparams,
                                               const double *count, T *dx)
{
    __shared__ float mean[BN_SEGMENT], dy_mean[BN_SEGMENT], projection[BN_SEGMENT],
        scale[BN_SEGMENT];
    bn_segment seg = bn_segment_of(c, inner);
    double m = count ? *count : (double)n * inner;
    for (int w = threadIdx.x; w < seg.channels; w += blockDim.x) {
        int ch = seg.first + w;
        ct_bn_grad g = ct_bn_grad_of(stats[ch], stats[c + ch], gamma[ch], dparams[ch],
                                     dparams[c + ch], m);
        mean[w] = g.mean, dy_mean[w] = g.dy_mean, projection[w] = g.projection;
        scale[w] = g.scale;
    }
    __syncthreads();
    const T *in[2] = {x, dy};
    bn_segment_map(n, inner, seg, vec, in, dx, [&](int slot, const float *e) {
        ct_bn_grad g = {mean[slot], dy_mean[slot], projection[slot], scale[slot]};
        return ct_bn_dx(&g, e[0], e[1]);
    });
}

/* The grid of the elementwise passes: every segment of the plane, and
 * enough image rows to fill the device (ct_cuda_grid_for's count for one
 * thread per four elements), at most n. */
static dim3 bn_segment_grid(const void *kernel, int n, int c, int inner)
{
    int64_t plane = (int64_t)c * inner;
    int64_t segments = (plane + BN_SEGMENT - 1) / BN_SEGMENT;
    int64_t fill = ct_cuda_grid_for(kernel, (int64_t)n * plane / CT_VEC);
    int64_t rows = (fill + segments - 1) / segments;
    rows = rows < n ? rows : n;
    rows = rows < (int64_t)BN_MAX_GRID_Y ? rows : (int64_t)BN_MAX_GRID_Y;
    return dim3((unsigned)segments, (unsigned)(rows > 0 ? rows : 1));
}

/* Whether every thread's four elements share a channel and every tensor
 * takes one access for them (aligned to four elements of `size` bytes). */
static bool bn_vec_fits(int inner, size_t size, const void *a, const void *b, const void *out)
{
    return inner % CT_VEC == 0 &&
           ((uintptr_t)a | (uintptr_t)b | (uintptr_t)out) % (CT_VEC * size) == 0;
}

extern "C" size_t ct_cuda_batchnorm_workspace(int n, int c, int inner)
{
    return sizeof(double) * BN_PARTS * (size_t)c * ct_channel_chunks_most((int64_t)n * inner) +
           ct_cuda_batchnorm_sync_workspace(c);
}

extern "C" ct_status ct_cuda_batchnorm_stats(ct_dtype dtype, int n, int c, int inner,
                                             const void *x, bool training, float momentum,
                                             float eps, float *running_mean, float *running_var,
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
    unsigned *tickets = ct_channel_tickets(c, chunks.count, stream);
    bn_running run = {momentum, eps, running_mean, running_var, num_batches};
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(bn_stats_chunk_kernel<T>, (unsigned)((int64_t)c * chunks.count),
                       CT_CUDA_BLOCK, 0, stream, n, c, inner, chunks, (const T *)x, parts,
                       tickets, run, stats);
        if (!ct_channel_finished(chunks.count, tickets))
            CT_CUDA_LAUNCH(bn_stats_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0,
                           stream, n, c, inner, chunks, parts, run, stats);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_batchnorm_apply(ct_dtype dtype, int n, int c, int inner,
                                             const void *x, const float *stats,
                                             const float *gamma, const float *beta, bool relu,
                                             void *y, cudaStream_t stream)
{
    if ((int64_t)n * c * inner == 0)
        return CT_OK;
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(bn_apply_kernel<T>,
                       bn_segment_grid((const void *)bn_apply_kernel<T>, n, c, inner),
                       CT_CUDA_BLOCK, 0, stream, n, c, inner,
                       bn_vec_fits(inner, sizeof(T), x, x, y), (const T *)x, stats, gamma, beta,
                       relu, (T *)y);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_batchnorm_add(ct_dtype dtype, int n, int c, int inner,
                                           ct_bn_input a, ct_bn_input b, bool relu, void *y,
                                           cudaStream_t stream)
{
    if ((int64_t)n * c * inner == 0)
        return CT_OK;
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(bn_add_kernel<T>,
                       bn_segment_grid((const void *)bn_add_kernel<T>, n, c, inner),
                       CT_CUDA_BLOCK, 0, stream, n, c, inner,
                       bn_vec_fits(inner, sizeof(T), a.x, b.x, y), (const T *)a.x, a.stats,
                       a.gamma, a.beta, (const T *)b.x, b.stats, b.gamma, b.beta, relu, (T *)y);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_batchnorm_backward_params(ct_dtype dtype, int n, int c, int inner,
                                                       const void *x, const void *dy,
                                                       const float *stats, float *dparams,
                                                       void *workspace, cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    ct_channel_chunks chunks = ct_channel_chunks_for(n, c, inner);
    double *parts = (double *)workspace;
    unsigned *tickets = ct_channel_tickets(c, chunks.count, stream);
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(bn_params_chunk_kernel<T>, (unsigned)((int64_t)c * chunks.count),
                       CT_CUDA_BLOCK, 0, stream, n, c, inner, chunks, (const T *)x,
                       (const T *)dy, stats, parts, tickets, dparams);
        if (!ct_channel_finished(chunks.count, tickets))
            CT_CUDA_LAUNCH(bn_params_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0,
                           stream, c, chunks, parts, stats, dparams);
        return CT_OK;
    });
}

/* bn_made_params_kernel named `name` over x: [n, c, inner], its finishing
 * kernels after it on a stream without tickets. */
template <class T, class Make>
static ct_status bn_made_params_launch(const char *name, int n, int c, int inner, Make make,
                                       T *dy, const ct_bn_params_out bn[2], void *workspace,
                                       cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    ct_channel_chunks chunks = ct_channel_chunks_for(n, c, inner);
    unsigned *tickets = ct_channel_tickets(c, chunks.count, stream);
    int count = bn[1].x ? 2 : 1;
    bn_params_of<T> of[2] = {};
    for (int i = 0; i < count; i++) {
        double *parts =
            (double *)((char *)workspace + i * ct_cuda_batchnorm_workspace(n, c, inner));
        of[i] = {(const T *)bn[i].x, bn[i].stats, parts, bn[i].dparams};
    }
    CT_CUDA_LAUNCH_NAMED(name, (bn_made_params_kernel<T, Make>),
                         (unsigned)((int64_t)c * chunks.count), CT_CUDA_BLOCK, 0, stream, n, c,
                         inner, chunks, make, dy, of[0], of[1], tickets);
    for (int i = 0; i < count && !ct_channel_finished(chunks.count, tickets); i++)
        CT_CUDA_LAUNCH(bn_params_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK, 0,
                       stream, c, chunks, of[i].parts, bn[i].stats, bn[i].dparams);
    return CT_OK;
}

extern "C" ct_status ct_cuda_add_batchnorm_params(ct_dtype dtype, int n, int c, int inner,
                                                  const void *a, const void *b,
                                                  const void *mask, void *dy,
                                                  const ct_bn_params_out bn[2], void *workspace,
                                                  cudaStream_t stream)
{
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        bn_dy_of_add<T> make = {(const T *)a, (const T *)b, (const T *)mask};
        return bn_made_params_launch("bn_add_params_kernel", n, c, inner, make, (T *)dy, bn,
                                     workspace, stream);
    });
}

extern "C" ct_status ct_cuda_maxpool2x2_backward_batchnorm_params(
    ct_dtype dtype, const ct_pool2d_shape *s, const void *x, const void *dy, void *dx, bool relu,
    const ct_bn_params_out bn[2], void *workspace, cudaStream_t stream)
{
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        bn_dy_of_pool<T> make = {(const T *)x, (const T *)dy, s->in_w, s->out_w,
                                 ct_divmod_of(s->in_w), relu};
        return bn_made_params_launch("bn_pool_params_kernel", s->n_batch, s->channels,
                                     s->in_h * s->in_w, make, (T *)dx, bn, workspace, stream);
    });
}

extern "C" ct_status ct_cuda_batchnorm_backward_data(ct_dtype dtype, int n, int c, int inner,
                                                     const void *x, const void *dy,
                                                     const float *stats, const float *gamma,
                                                     const float *dparams,
                                                     const double *count, void *dx,
                                                     cudaStream_t stream)
{
    if ((int64_t)n * c * inner == 0)
        return CT_OK;
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(bn_backward_data_kernel<T>,
                       bn_segment_grid((const void *)bn_backward_data_kernel<T>, n, c, inner),
                       CT_CUDA_BLOCK, 0, stream, n, c, inner,
                       bn_vec_fits(inner, sizeof(T), x, dy, dx), (const T *)x, (const T *)dy,
                       stats, gamma, dparams, count, (T *)dx);
        return CT_OK;
    });
}
