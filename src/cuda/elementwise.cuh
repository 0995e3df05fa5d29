/*
 * Elementwise kernels with 128-bit memory accesses.
 *
 * ct_map runs body(e) for every i < count on the values e[k] = arrays[k][i]
 * and stores back the arrays it writes, four elements per thread with one
 * 128-bit load per array read and one 128-bit store per array written
 * (LDG.E.128 / STG.E.128) when every array is 16-byte aligned, one element
 * at a time for the tail and for unaligned arrays.  A warp then moves 512
 * bytes per instruction instead of 128: a quarter of the load and store
 * instructions, the same bytes.  The results are the same bits: each
 * element goes through the same body.
 *
 * Occupancy: four elements per thread take more registers (adam 48, the
 * sigmoid 36: 62.5% and 75% occupancy on sm_90, docs/kernel-resources.md),
 * but each thread has four times the bytes in flight, so an SM still keeps
 * more loads outstanding than the scalar kernels did at 100% (adam: 40
 * warps x 64 bytes per lane per array against 64 warps x 16).
 */
#ifndef CT_CUDA_ELEMENTWISE_CUH
#define CT_CUDA_ELEMENTWISE_CUH

#include <stdint.h>
#include <string.h>

#include "cuda/common.cuh"

enum { CT_VEC = 4 }; /* floats per 128-bit access */

/* Threads a ct_map over `count` elements needs: one per group of four. */
static inline int64_t ct_vec_items(int64_t count)
{
    return (count + CT_VEC - 1) / CT_VEC;
}

#ifdef CUDA_EMU
/* The host's 16-byte vector: loaded and stored as one traced access. */
typedef float ct_emu_float4 __attribute__((vector_size(16)));
#endif

/* Four floats at p (16-byte aligned) in one access.  The emulator sees one
 * 16-byte load or store, as the GPU executes one 128-bit instruction. */
__device__ inline void ct_load4(const float *p, float v[CT_VEC])
{
#ifdef CUDA_EMU
    ct_emu_float4 bits = *reinterpret_cast<const ct_emu_float4 *>(p);
    asm("" : "+x"(bits)); /* keeps the host compiler from splitting the access */
    memcpy(v, &bits, sizeof bits);
#else
    float4 f = *reinterpret_cast<const float4 *>(p);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
#endif
}

__device__ inline void ct_store4(float *p, const float v[CT_VEC])
{
#ifdef CUDA_EMU
    ct_emu_float4 bits;
    memcpy(&bits, v, sizeof bits);
    asm("" : "+x"(bits));
    *reinterpret_cast<ct_emu_float4 *>(p) = bits;
#else
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
#endif
}

/* Two floats at p (8-byte aligned) in one 64-bit access. */
__device__ inline void ct_load2(const float *p, float v[2])
{
#ifdef CUDA_EMU
    unsigned long long bits = *reinterpret_cast<const unsigned long long *>(p);
    asm("" : "+r"(bits)); /* keeps the host compiler from splitting it into two loads */
    memcpy(v, &bits, sizeof bits);
#else
    float2 f = *reinterpret_cast<const float2 *>(p);
    v[0] = f.x, v[1] = f.y;
#endif
}

__device__ inline void ct_store2(float *p, const float v[2])
{
#ifdef CUDA_EMU
    unsigned long long bits;
    memcpy(&bits, v, sizeof bits);
    asm("" : "+r"(bits));
    *reinterpret_cast<unsigned long long *>(p) = bits;
#else
    *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
#endif
}

/* `reads` and `writes` are bit masks over the arrays (bit k: arrays[k]);
 * an array only written is never loaded, and one not in `writes` is never
 * stored to (so a read-only input may be passed with its const cast away).
 * ct_map_blocks: the same over blocks [block, ...) of `blocks` (a kernel
 * whose grid several maps share, one range of blocks each); ct_map: over
 * the whole grid. */
template <int N, class Body>
__device__ void ct_map_blocks(int64_t count, float *const (&arrays)[N], unsigned reads,
                              unsigned writes, unsigned block, unsigned blocks, Body body)
{
    uintptr_t address_bits = 0;
    for (int k = 0; k < N; k++)
        address_bits |= (uintptr_t)arrays[k];
    int64_t vectors = address_bits % (CT_VEC * sizeof(float)) == 0 ? count / CT_VEC : 0;
    int64_t first = (int64_t)block * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)blocks * blockDim.x;
    for (int64_t v = first; v < vectors; v += stride) {
        float values[N][CT_VEC] = {};
        for (int k = 0; k < N; k++)
            if (reads >> k & 1u)
                ct_load4(arrays[k] + v * CT_VEC, values[k]);
        for (int lane = 0; lane < CT_VEC; lane++) {
            float e[N];
            for (int k = 0; k < N; k++)
                e[k] = values[k][lane];
            body(e);
            for (int k = 0; k < N; k++)
                values[k][lane] = e[k];
        }
        for (int k = 0; k < N; k++)
            if (writes >> k & 1u)
                ct_store4(arrays[k] + v * CT_VEC, values[k]);
    }
    int64_t done = vectors * CT_VEC;
    for (int64_t t = first; t < count - done; t += stride) {
        float e[N];
        for (int k = 0; k < N; k++)
            e[k] = (reads >> k & 1u) ? arrays[k][done + t] : 0.0f;
        body(e);
        for (int k = 0; k < N; k++)
            if (writes >> k & 1u)
                arrays[k][done + t] = e[k];
    }
}

template <int N, class Body>
__device__ void ct_map(int64_t count, float *const (&arrays)[N], unsigned reads,
                       unsigned writes, Body body)
{
    ct_map_blocks(count, arrays, reads, writes, blockIdx.x, gridDim.x, body);
}

/* ct_map's launch: a grid for one thread per group of four. */
#define CT_CUDA_LAUNCH_MAP(kernel, count, stream, ...)                                   \
    CT_CUDA_LAUNCH(kernel, ct_cuda_grid_for((const void *)kernel, ct_vec_items(count)),  \
                   CT_CUDA_BLOCK, 0, stream, __VA_ARGS__)

#endif
