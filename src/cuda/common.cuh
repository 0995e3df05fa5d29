/*
 * What every kernel file shares: launch sizes and block reductions.
 *
 * Elementwise kernels use grid-stride loops over as many blocks as the
 * device holds at once (ct_cuda_grid_for), so one launch covers any size.
 * Reductions use a fixed tree (warp shuffles, then one warp over the warp
 * sums), so their result does not depend on timing.
 */
#ifndef CT_CUDA_COMMON_CUH
#define CT_CUDA_COMMON_CUH

#include <stdio.h>
#include <stdlib.h>

#include "cuda/check.h"
#include "cuda/kernels.h"

extern "C" { /* a C header without its own guard (its system headers come first) */
#include "core/error.h"
}

enum {
    CT_CUDA_BLOCK = 256, /* threads per block of the simple kernels */
    CT_CUDA_WARP = 32,
};

/* Blocks of CT_CUDA_BLOCK threads for `count` independent items of
 * `kernel` on the current device: enough to fill it (its SMs times the
 * kernel's resident blocks per SM, from the occupancy API), at least 1. */
unsigned ct_cuda_grid_for(const void *kernel, int64_t count);

/* kernel<<<grid, block, shared_bytes, stream>>>(args...), then the launch
 * check of check.h (which returns the failure from the enclosing function).
 * Under nvcc it is exactly the triple-chevron launch; compiled for the
 * emulated device (emu/, `make CUDA=emu`) it is the emulator's launcher,
 * so one source builds both ways. */
#ifdef CUDA_EMU
#define CT_CUDA_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                    \
    do {                                                                                \
        CT_EMU_LAUNCH(kernel, grid, block, shared_bytes, stream, __VA_ARGS__);          \
        CT_CUDA_LAUNCH_CHECK(#kernel);                                                  \
    } while (0)
#else
#define CT_CUDA_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                    \
    do {                                                                                \
        kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__);                     \
        CT_CUDA_LAUNCH_CHECK(#kernel);                                                  \
    } while (0)
#endif

/* CT_CUDA_LAUNCH under a name of the caller's (a string): a template
 * kernel's spelling names its parameter ("ct_tiled_gemm<Problem>"), so its
 * launches give the type, for error messages and the emulator's counters. */
#ifdef CUDA_EMU
#define CT_CUDA_LAUNCH_NAMED(name, kernel, grid, block, shared_bytes, stream, ...)        \
    do {                                                                                \
        emu::launch(name, __FILE__, __LINE__, kernel, grid, block, shared_bytes, stream,  \
                    __VA_ARGS__);                                                       \
        CT_CUDA_LAUNCH_CHECK_NAMED(name);                                               \
    } while (0)
#else
#define CT_CUDA_LAUNCH_NAMED(name, kernel, grid, block, shared_bytes, stream, ...)        \
    do {                                                                                \
        kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__);                     \
        CT_CUDA_LAUNCH_CHECK_NAMED(name);                                               \
    } while (0)
#endif

/* A kernel's dynamic shared memory (the launch's shared_bytes), as a
 * `type *` called `name`: `extern __shared__ type name[]` under nvcc; the
 * emulator's block buffer otherwise (C++ cannot spell the extern form for
 * it; docs/emulator.md). */
#ifdef CUDA_EMU
#define CT_CUDA_DYNAMIC_SHARED(type, name) CT_EMU_DYNAMIC_SHARED(type, name)
#else
#define CT_CUDA_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif

/* A grid-stride kernel over `count` items: the grid from ct_cuda_grid_for. */
#define CT_CUDA_LAUNCH_ITEMS(kernel, count, stream, ...)                                 \
    CT_CUDA_LAUNCH(kernel, ct_cuda_grid_for((const void *)kernel, count), CT_CUDA_BLOCK, 0, \
                   stream, __VA_ARGS__)

#define CT_CUDA_GRID_STRIDE(i, count)                                               \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count);  \
         i += (int64_t)gridDim.x * blockDim.x)

/* to[c*to_stride + j] = from[c*from_stride + j] for c < count, j < run, by
 * the block: each run is read from the start of its first sector on, a warp
 * at a time (warps never straddle two runs), so every request but a run's
 * last covers whole sectors and the stores to shared memory fall in
 * consecutive banks.  Threads before a run's start or past its end read and
 * write its first or last word (the value a neighbour writes there too): no
 * divergence, no extra sector. */
/* ct_copy_runs_to stores run element j at to[c*to_stride + at(j)] instead
 * (a run whose words land apart: conv_patch.cuh's bordered patch). */
template <class At>
__device__ __forceinline__ void ct_copy_runs_to(float *to, int to_stride, const float *from,
                                                size_t from_stride, int count, int run, At at)
{
    int sector = 32 / (int)sizeof(float);
    int lanes = (run + sector - 1 + CT_CUDA_WARP - 1) / CT_CUDA_WARP * CT_CUDA_WARP;
    /* element e = threadIdx.x + t blockDim.x is lane r of run c: both
     * stepped, not divided by lanes per element (a run-time division, some
     * 20 instructions: a sixth of a convolution patch's staging) */
    int c = (int)threadIdx.x / lanes, r = (int)threadIdx.x - c * lanes;
    int dc = (int)blockDim.x / lanes, dr = (int)blockDim.x - dc * lanes;
    int lane = (int)threadIdx.x % CT_CUDA_WARP; /* e's: lanes and blockDim are whole warps */
    for (; c < count; c += dc, r += dr) {
        if (r >= lanes) {
            r -= lanes;
            c++;
            if (c >= count)
                break;
        }
        const float *src = from + c * from_stride;
        int j = r - (int)((uintptr_t)src / sizeof(float) % sector);
        if (j - lane >= run)
            continue; /* the whole warp is past the run */
        j = min(max(j, 0), run - 1);
        to[c * to_stride + at(j)] = src[j];
    }
}

__device__ __forceinline__ void ct_copy_runs(float *to, int to_stride, const float *from,
                                             size_t from_stride, int count, int run)
{
    ct_copy_runs_to(to, to_stride, from, from_stride, count, run, [](int j) { return j; });
}

/* Whether this block is the last of the `splits` blocks that share
 * `*ticket` to finish (every thread calls it, after its stores of its part;
 * the same answer in every thread).  The last one sees every part the
 * others stored, read with __ldcg (past L1, which is not coherent between
 * SMs), and leaves the ticket at 0 for the stream's next kernel: atomicInc
 * wraps to 0 when it counts the last block.  The order of arrival differs
 * from run to run; a sum of the parts in split order does not. */
static __device__ inline bool ct_last_arrival(unsigned *ticket, int splits)
{
    __shared__ int last;
    __threadfence(); /* this thread's part, visible to the device */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicInc(ticket, (unsigned)splits - 1u) == (unsigned)splits - 1u;
    __syncthreads();
    bool result = last != 0;
    if (result)
        __threadfence(); /* the others' parts, before this block reads them */
    return result;
}

__device__ inline double ct_warp_sum(double value)
{
    for (int offset = CT_CUDA_WARP / 2; offset > 0; offset /= 2)
        value += __shfl_down_sync(0xffffffffu, value, offset);
    return value; /* complete in lane 0 */
}

__device__ inline float ct_warp_max(float value)
{
    for (int offset = CT_CUDA_WARP / 2; offset > 0; offset /= 2) {
        float other = __shfl_xor_sync(0xffffffffu, value, offset);
        value = other > value ? other : value;
    }
    return value; /* in every lane */
}

/* The sum of `value` over the block, returned to every thread.  blockDim.x
 * must be a multiple of 32; every thread of the block must call it. */
static __device__ inline double ct_block_sum(double value)
{
    __shared__ double warp_sums[CT_CUDA_WARP];
    __shared__ double total;
    int lane = threadIdx.x % CT_CUDA_WARP, warp = threadIdx.x / CT_CUDA_WARP;
    value = ct_warp_sum(value);
    __syncthreads(); /* a previous call's readers are done with warp_sums and total */
    if (lane == 0)
        warp_sums[warp] = value;
    __syncthreads();
    if (warp == 0) {
        int n_warps = blockDim.x / CT_CUDA_WARP;
        value = ct_warp_sum(lane < n_warps ? warp_sums[lane] : 0.0);
        if (lane == 0)
            total = value;
    }
    __syncthreads();
    return total;
}

#endif
