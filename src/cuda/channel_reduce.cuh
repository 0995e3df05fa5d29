/*
 * Reductions over each channel of x: [n, c, inner] (batchnorm statistics and
 * parameter gradients in batchnorm.cu, bias gradients in channel_sum.cu), split
 * across blocks so that a few channels still fill the device.
 *
 * A channel's m = n*inner elements, taken in (image, offset) order, are cut
 * into `count` chunks of `length` elements (the last may be shorter):
 *   pass 1: c*count blocks, block ch*count + k reducing chunk k of channel
 *           ch in double with the fixed tree of ct_block_sum and writing its
 *           partial to the workspace at [ch, k];
 *   pass 2: one warp per channel, lane l adding partials k = l, l+32, ...
 *           in order, then a fixed shuffle tree.
 * Every partial and every sum has a fixed place in a fixed tree, whichever
 * block or thread runs first, so results are the same bits in every run
 * (and CUDA_EMU_ORDER).
 *
 * Pass 2 is a kernel of its own only where it must be: a channel of one
 * chunk is finished by its block, and where the stream has a ticket per
 * channel (ct_cuda_tickets) the last of a channel's blocks to store its
 * partial finishes it (ct_last_arrival: one atomic a block), by its first
 * warp in pass 2's order, so the bits are the same either way
 * (ct_channel_finishes_here).
 */
#ifndef CT_CUDA_CHANNEL_REDUCE_CUH
#define CT_CUDA_CHANNEL_REDUCE_CUH

#include <type_traits>

#include "cuda/common.cuh"

enum {
    /* The shortest chunk: 16 elements per thread of a block; shorter, the
     * block's reduction costs about as much as its loads. */
    CT_CHANNEL_CHUNK_MIN = 4096,
    /* The longest: 32 KiB of floats, which the batchnorm statistics read a
     * second time (deviations from the chunk's mean) while still in cache. */
    CT_CHANNEL_CHUNK_MAX = 2 * CT_CHANNEL_CHUNK_MIN,
    /* Blocks to aim for per SM: two waves of the 8 blocks of 256 threads
     * that an SM holds at once (2,048 threads). */
    CT_CHANNEL_BLOCKS_PER_SM = 16,
    CT_CHANNEL_WARPS_PER_BLOCK = CT_CUDA_BLOCK / CT_CUDA_WARP, /* pass 2: a warp per channel */
};

struct ct_channel_chunks {
    int count;      /* chunks per channel */
    int64_t length; /* elements per chunk, a multiple of CT_CUDA_BLOCK (the last may be shorter) */
};

/* The most chunks a channel of m elements is cut into on any device: the
 * workspaces are sized by it, so they fit whichever device's SM count the
 * launch sees. */
static inline int64_t ct_channel_chunks_most(int64_t m)
{
    return m / CT_CHANNEL_CHUNK_MIN > 1 ? m / CT_CHANNEL_CHUNK_MIN : 1;
}

/* Enough chunks that c*count blocks cover the current device
 * (CT_CHANNEL_BLOCKS_PER_SM per SM) and none is longer than
 * CT_CHANNEL_CHUNK_MAX, but none shorter than CT_CHANNEL_CHUNK_MIN: a small
 * channel is one chunk. */
static inline ct_channel_chunks ct_channel_chunks_for(int n, int c, int inner)
{
    int64_t m = (int64_t)n * inner;
    int64_t target = (int64_t)CT_CHANNEL_BLOCKS_PER_SM * ct_cuda_sm_count();
    int64_t count = (target + c - 1) / c;
    int64_t shortest = (m + CT_CHANNEL_CHUNK_MAX - 1) / CT_CHANNEL_CHUNK_MAX;
    if (count < shortest)
        count = shortest;
    if (count > ct_channel_chunks_most(m))
        count = ct_channel_chunks_most(m);
    int64_t length = (m + count - 1) / count;
    length = (length + CT_CUDA_BLOCK - 1) / CT_CUDA_BLOCK * CT_CUDA_BLOCK;
    ct_channel_chunks chunks = {length > 0 ? (int)((m + length - 1) / length) : 1, length};
    return chunks;
}

/* Blocks of pass 2 for c channels. */
static inline unsigned ct_channel_finish_blocks(int c)
{
    return (unsigned)((c + CT_CHANNEL_WARPS_PER_BLOCK - 1) / CT_CHANNEL_WARPS_PER_BLOCK);
}

/* Elements [start, end) of chunk k of a channel of m elements. */
__device__ inline int64_t ct_chunk_start(ct_channel_chunks chunks, int k)
{
    return (int64_t)k * chunks.length;
}

__device__ inline int64_t ct_chunk_end(ct_channel_chunks chunks, int k, int64_t m)
{
    int64_t end = ((int64_t)k + 1) * chunks.length;
    return end < m ? end : m;
}

/* visit(at), or visit(at, e % inner), for this thread's elements of
 * [start, end) of channel ch:
 * element e = start + threadIdx.x, + blockDim.x, ... is at offset
 * at = (e / inner * c + ch) * inner + e % inner.  Consecutive threads read
 * consecutive addresses within an inner run (coalesced); the walk steps
 * (image, offset) without a division per element.  The offsets of
 * CT_CHANNEL_WALK_GROUP elements come first, then their visits in order
 * (the same order as one at a time): the group's loads are in flight
 * together, one round trip to memory per group instead of per element
 * (the batchnorm statistics of ResNet-18 at batch 64: 36 rounds a
 * thread, 12.4 us of chain on the model against a floor of 5; emulated
 * counts, docs/perf.md). */
enum {
    CT_CHANNEL_WALK_GROUP = 8,
};

/* Where this thread's elements of channel ch lie, from element e on, one
 * blockDim.x step at a time. */
struct ct_channel_cursor {
    int64_t at, plane, step_at; /* plane: from one image to the next */
    int offset, inner, step_offset;

    __device__ ct_channel_cursor(int c, int inner_, int ch, int64_t e)
        : plane((int64_t)c * inner_), offset((int)(e % inner_)), inner(inner_),
          step_offset((int)(blockDim.x % inner_))
    {
        at = e / inner * plane + (int64_t)ch * inner + offset;
        step_at = (int64_t)(blockDim.x / inner) * plane + step_offset;
    }
    __device__ void next()
    {
        offset += step_offset;
        at += step_at;
        if (offset >= inner) { /* into the next image */
            offset -= inner;
            at += plane - inner;
        }
    }
};

template <class Visit>
__device__ inline void ct_channel_walk(int c, int inner, int ch, int64_t start, int64_t end,
                                       Visit visit)
{
    /* a visit of (at, offset) also gets the element's place in its plane */
    constexpr bool places = std::is_invocable<Visit, int64_t, int>::value;
    int64_t e = start + threadIdx.x;
    if (e >= end)
        return;
    ct_channel_cursor cursor(c, inner, ch, e);
    for (; e < end; e += (int64_t)CT_CHANNEL_WALK_GROUP * blockDim.x) {
        int64_t group[CT_CHANNEL_WALK_GROUP];
        int place[CT_CHANNEL_WALK_GROUP];
#pragma unroll
        for (int u = 0; u < CT_CHANNEL_WALK_GROUP; u++) {
            group[u] = cursor.at;
            place[u] = cursor.offset;
            cursor.next();
        }
#pragma unroll
        for (int u = 0; u < CT_CHANNEL_WALK_GROUP; u++)
            if (e + (int64_t)u * blockDim.x < end) {
                if constexpr (places)
                    visit(group[u], place[u]);
                else
                    visit(group[u]);
            }
    }
}

/* load(at) of this thread's elements of [start, end) of channel ch, in
 * ct_channel_walk's order, into v (0 past them), and their count; the
 * chunk at most MOST x blockDim.x elements.  All MOST loads are in flight
 * together, one round trip; held in registers, they serve a second pass
 * over the chunk without reading it again. */
template <int MOST, class Load>
__device__ inline int ct_channel_values(int c, int inner, int ch, int64_t start, int64_t end,
                                        float (&v)[MOST], Load load)
{
    int64_t e = start + threadIdx.x;
    int count = e < end ? (int)((end - e + blockDim.x - 1) / blockDim.x) : 0;
    ct_channel_cursor cursor(c, inner, ch, e < end ? e : start);
#pragma unroll
    for (int u = 0; u < MOST; u++) {
        v[u] = u < count ? load(cursor.at) : 0.0f;
        cursor.next();
    }
    return count;
}

/* The channel of this thread's warp in pass 2 (c or more: none). */
__device__ inline int ct_channel_of_warp(void)
{
    return (int)(blockIdx.x * CT_CHANNEL_WARPS_PER_BLOCK + threadIdx.x / CT_CUDA_WARP);
}

/* Pass 2 reads the partials of its block's channels through shared memory:
 * with the [ch, k] layout they are one contiguous run of the workspace,
 * which the block copies in one coalesced pass, where a warp reading only
 * its own channel's `count` doubles touched part-used sectors at both ends
 * (20-29% load efficiency at the counts of small layers).  Runs of more
 * than CT_CHANNEL_STAGE_CHUNKS partials per channel are long enough to be
 * read in place.  The results go through shared memory too, so that the
 * block's first CT_CHANNEL_WARPS_PER_BLOCK threads store them as one
 * contiguous request instead of a 4-byte store per warp. */
enum { CT_CHANNEL_STAGE_CHUNKS = 64 };

/* Pass 2's block: its first channel, and how many it has (1 to
 * CT_CHANNEL_WARPS_PER_BLOCK). */
__device__ inline int ct_channel_block_first(void)
{
    return (int)blockIdx.x * CT_CHANNEL_WARPS_PER_BLOCK;
}

__device__ inline int ct_channel_block_count(int c)
{
    int left = c - ct_channel_block_first();
    return left < CT_CHANNEL_WARPS_PER_BLOCK ? left : (int)CT_CHANNEL_WARPS_PER_BLOCK;
}

/* The `count` partials of this warp's channel out of parts: [c, count],
 * copied by the whole block into stage (CT_CHANNEL_WARPS_PER_BLOCK x
 * CT_CHANNEL_STAGE_CHUNKS doubles of shared memory) or, for long runs, in
 * place.  Every thread of the block must call it (it synchronizes). */
__device__ inline const double *ct_channel_partials(const double *parts, int c, int count,
                                                    double *stage)
{
    int first = ct_channel_block_first(), warp = (int)threadIdx.x / CT_CUDA_WARP;
    if (count > CT_CHANNEL_STAGE_CHUNKS)
        return parts + (int64_t)(first + warp) * count;
    const double *src = parts + (int64_t)first * count;
    for (int i = threadIdx.x; i < ct_channel_block_count(c) * count; i += blockDim.x)
        stage[i] = src[i];
    __syncthreads();
    return stage + warp * count;
}

/* sum_{k < count} partials[k] by a warp: lane l adds k = l, l+32, ... in
 * order, then the fixed shuffle tree; the total in every lane.  Every lane
 * of the warp must call it.  Stored: partials that other blocks of this
 * kernel stored, read past the SM's L1. */
template <bool Stored = false>
__device__ inline double ct_warp_sum_partials(const double *partials, int count)
{
    double sum = 0.0;
    for (int k = threadIdx.x % CT_CUDA_WARP; k < count; k += CT_CUDA_WARP)
        sum += Stored ? __ldcg(partials + k) : partials[k];
    return __shfl_sync(0xffffffffu, ct_warp_sum(sum), 0);
}

/* After pass 1's thread 0 stored this block's partials for channel ch (of
 * `count` chunks): whether this block finishes the channel, by its first
 * warp (ct_warp_sum_partials<true>).  Yes for a channel of one chunk, and
 * for the last of its blocks to arrive where `tickets` (one per channel)
 * is not NULL.  Every thread of the block must call it. */
__device__ inline bool ct_channel_finishes_here(unsigned *tickets, int ch, int count)
{
    if (count == 1) {
        __syncthreads(); /* thread 0's partials, stored, before warp 0 reads them */
        return true;
    }
    return tickets && ct_last_arrival(tickets + ch, count);
}

/* The tickets of a pass 1 over c channels of `count` chunks on `stream`:
 * none needed for one chunk, NULL where the stream has too few (pass 2
 * then runs as its own kernel). */
static inline unsigned *ct_channel_tickets(int c, int count, cudaStream_t stream)
{
    return count > 1 ? ct_cuda_tickets(stream, c) : nullptr;
}

/* Whether pass 1 finishes every channel itself. */
static inline bool ct_channel_finished(int count, const unsigned *tickets)
{
    return count == 1 || tickets;
}

#endif
