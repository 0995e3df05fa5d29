/*
 * The bias gradient of convolution and linear layers: db[ch] = sum of dy
 * over every image and position of channel ch.  Each channel is cut into
 * chunks over many blocks and the parts are added in order
 * (channel_reduce.cuh), so the result is the same bits in every run.
 * dy is of storage type T (float, or the bits of a bf16 or f16:
 * elementwise.cuh; the gradient of a 16-bit layer), widened exactly as it
 * is loaded; db is f32, the sums the f32 kernel's.
 */
#include "cuda/channel_reduce.cuh"
#include "cuda/elementwise.cuh"

/* Pass 1, block ch*count + k: parts[ch,k] = sum dy over chunk k of channel
 * ch, in double (channel_reduce.cuh).  parts: [c, count].  The block that
 * finishes the channel (ct_channel_finishes_here) stores db[ch]. */
template <class T>
__global__ void channel_sum_chunk_kernel(int n, int c, int inner, ct_channel_chunks chunks,
                                         const T *dy, double *parts, unsigned *tickets,
                                         float *db)
{
    int ch = (int)(blockIdx.x / chunks.count), k = (int)(blockIdx.x % chunks.count);
    int64_t start = ct_chunk_start(chunks, k), end = ct_chunk_end(chunks, k, (int64_t)n * inner);
    double sum = 0.0;
    ct_channel_walk(c, inner, ch, start, end,
                    [&](int64_t at) { sum += ct_load_f32(dy, at); });
    sum = ct_block_sum(sum);
    if (threadIdx.x == 0)
        parts[blockIdx.x] = sum;
    if (!ct_channel_finishes_here(tickets, ch, chunks.count) || threadIdx.x >= CT_CUDA_WARP)
        return;
    sum = ct_warp_sum_partials<true>(parts + (int64_t)ch * chunks.count, chunks.count);
    if (threadIdx.x == 0)
        db[ch] = (float)sum;
}

/* Pass 2, one warp per channel: db[ch] = sum_k parts[ch,k] */
__global__ void channel_sum_finish_kernel(int c, ct_channel_chunks chunks, const double *parts,
                                          float *db)
{
    __shared__ double stage[CT_CHANNEL_WARPS_PER_BLOCK * CT_CHANNEL_STAGE_CHUNKS];
    __shared__ float sums[CT_CHANNEL_WARPS_PER_BLOCK];
    const double *mine = ct_channel_partials(parts, c, chunks.count, stage);
    int warp = (int)threadIdx.x / CT_CUDA_WARP;
    if (ct_channel_of_warp() < c) {
        double sum = ct_warp_sum_partials(mine, chunks.count);
        if (threadIdx.x % CT_CUDA_WARP == 0)
            sums[warp] = (float)sum;
    }
    __syncthreads();
    if ((int)threadIdx.x < ct_channel_block_count(c))
        db[ct_channel_block_first() + threadIdx.x] = sums[threadIdx.x];
}

/*
 * The linear layer's bias gradient (inner = 1, dy: [n, c]) when it is small:
 * one block, one launch.  Walking one channel, pass 1 read every c-th
 * float (a sector per 4 bytes); here the block copies runs of whole rows
 * into shared memory (one contiguous, sector-aligned read: ct_copy_runs)
 * and thread ch adds column ch row by row in double, db[ch] its sum in row
 * order: the same bits in every run.  Halves are staged widened, read by
 * consecutive threads (a warp's 64 bytes: two whole sectors but at a run's
 * ends).
 */
enum {
    COLUMN_STAGE = 4096, /* floats of rows staged at once */
    COLUMN_MAX = 1024,   /* columns: the running sums in shared memory */
    COLUMN_MAX_ELEMENTS = 1 << 16,
};

/* count elements of dy at `from` into stage as f32 */
__device__ inline void stage_rows(float *stage, const float *from, int count)
{
    ct_copy_runs(stage, 0, from, 0, 1, count);
}
template <class H> __device__ inline void stage_rows(float *stage, const H *from, int count)
{
    for (int i = threadIdx.x; i < count; i += blockDim.x)
        stage[i] = ct_to_f32(from[i]);
}

template <class T>
static __global__ void channel_sum_columns_kernel(int n, int c, const T *dy, float *db)
{
    __shared__ float stage[COLUMN_STAGE];
    __shared__ double sums[COLUMN_MAX];
    for (int ch = threadIdx.x; ch < c; ch += blockDim.x)
        sums[ch] = 0.0;
    int rows = COLUMN_STAGE / c;
    for (int r0 = 0; r0 < n; r0 += rows) {
        int count = min(rows, n - r0);
        __syncthreads(); /* the previous rows are added */
        stage_rows(stage, dy + (size_t)r0 * c, count * c);
        __syncthreads();
        for (int ch = threadIdx.x; ch < c; ch += blockDim.x) {
            double sum = sums[ch];
            for (int r = 0; r < count; r++)
                sum += stage[r * c + ch];
            sums[ch] = sum;
        }
    }
    for (int ch = threadIdx.x; ch < c; ch += blockDim.x)
        db[ch] = (float)sums[ch];
}

extern "C" size_t ct_cuda_channel_sum_workspace(int n, int c, int inner)
{
    return sizeof(double) * (size_t)c * ct_channel_chunks_most((int64_t)n * inner);
}

/* db[ch] = sum_{n,i} dy[n,ch,i] */
extern "C" ct_status ct_cuda_channel_sum(ct_dtype dtype, int n, int c, int inner, const void *dy,
                                         float *db, void *workspace, cudaStream_t stream)
{
    if (c <= 0)
        return CT_OK;
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        if (inner == 1 && c <= COLUMN_MAX && (int64_t)n * c <= COLUMN_MAX_ELEMENTS) {
            CT_CUDA_LAUNCH(channel_sum_columns_kernel<T>, 1, CT_CUDA_BLOCK, 0, stream, n, c,
                           (const T *)dy, db);
            return CT_OK;
        }
        ct_channel_chunks chunks = ct_channel_chunks_for(n, c, inner);
        double *parts = (double *)workspace;
        unsigned *tickets = ct_channel_tickets(c, chunks.count, stream);
        CT_CUDA_LAUNCH(channel_sum_chunk_kernel<T>, (unsigned)((int64_t)c * chunks.count),
                       CT_CUDA_BLOCK, 0, stream, n, c, inner, chunks, (const T *)dy, parts,
                       tickets, db);
        if (!ct_channel_finished(chunks.count, tickets))
            CT_CUDA_LAUNCH(channel_sum_finish_kernel, ct_channel_finish_blocks(c), CT_CUDA_BLOCK,
                           0, stream, c, chunks, parts, db);
        return CT_OK;
    });
}
