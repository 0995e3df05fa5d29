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
 *
 * 16-bit storage (f16, bf16: a bf16 or fp16 graph, ct_graph_set_precision):
 * the arrays may be of a 16-bit storage type (ct_bf16_bits, ct_f16_bits)
 * instead of float.  The body still computes in f32: each element is
 * widened exactly as it is loaded and rounded once, to nearest even
 * (core/half.h), as it is stored, the rounding of the CPU reference
 * (cpu/widen.c), so the results are its bits.  A 128-bit access then moves
 * eight elements (CT_VEC_OF(T)).
 */
#ifndef CT_CUDA_ELEMENTWISE_CUH
#define CT_CUDA_ELEMENTWISE_CUH

#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "cuda/common.cuh"

enum { CT_VEC = 4 }; /* floats per 128-bit access */

/* Elements of storage type T per 128-bit access: 4 floats, 8 halves. */
#define CT_VEC_OF(T) ((int)(16 / sizeof(T)))

/* Threads a ct_map over `count` elements needs: one per group of `width`
 * (four floats, eight halves). */
static inline int64_t ct_vec_items(int64_t count, int width = CT_VEC)
{
    return (count + width - 1) / width;
}

/* ---- storage types: f32, and the bits of a bf16 or an f16 value -------------------- */

/* Distinct types, so that a kernel templated on its storage type picks its
 * conversions; 2 bytes each, as the tensors store them. */
struct ct_bf16_bits {
    uint16_t bits;
};
struct ct_f16_bits {
    uint16_t bits;
};

__device__ inline float ct_to_f32(float v)
{
    return v;
}
__device__ inline float ct_to_f32(ct_bf16_bits v)
{
    return ct_bf16_to_f32(v.bits);
}
__device__ inline float ct_to_f32(ct_f16_bits v)
{
    return ct_f16_to_f32(v.bits);
}

/* f32 to storage type T: rounded to nearest even for 16 bits, once. */
template <class T> __device__ inline T ct_from_f32(float v);
template <> __device__ inline float ct_from_f32<float>(float v)
{
    return v;
}
template <> __device__ inline ct_bf16_bits ct_from_f32<ct_bf16_bits>(float v)
{
    return {ct_bf16_from_f32(v)};
}
template <> __device__ inline ct_f16_bits ct_from_f32<ct_f16_bits>(float v)
{
    return {ct_f16_from_f32(v)};
}

/* Element i of an array of storage type T, as f32; and stored from f32. */
template <class T> __device__ inline float ct_load_f32(const T *p, int64_t i)
{
    return ct_to_f32(p[i]);
}
template <class T> __device__ inline void ct_store_f32(T *p, int64_t i, float v)
{
    p[i] = ct_from_f32<T>(v);
}

/* launch(tag), tag a value of the storage type of `dtype` (float,
 * ct_bf16_bits or ct_f16_bits): how a kernel function instantiates its
 * kernel templated on the storage type for the dtype of its node. */
template <class Launch> inline ct_status ct_with_storage(ct_dtype dtype, Launch launch)
{
    switch (dtype) {
    case CT_F32: return launch(float{});
    case CT_BF16: return launch(ct_bf16_bits{});
    case CT_F16: return launch(ct_f16_bits{});
    default: break;
    }
    return ct_set_error(CT_ERR_DTYPE, "a CUDA kernel of f32, f16 and bf16 was given %s data",
                        ct_dtype_name(dtype));
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

/* Sixteen bytes at p (16-byte aligned) in one access, to and from `bits`. */
__device__ inline void ct_load16(const void *p, void *bits)
{
#ifdef CUDA_EMU
    ct_emu_float4 v = *reinterpret_cast<const ct_emu_float4 *>(p);
    asm("" : "+x"(v));
    memcpy(bits, &v, sizeof v);
#else
    uint4 v = *reinterpret_cast<const uint4 *>(p);
    memcpy(bits, &v, sizeof v);
#endif
}

__device__ inline void ct_store16(void *p, const void *bits)
{
#ifdef CUDA_EMU
    ct_emu_float4 v;
    memcpy(&v, bits, sizeof v);
    asm("" : "+x"(v));
    *reinterpret_cast<ct_emu_float4 *>(p) = v;
#else
    uint4 v;
    memcpy(&v, bits, sizeof v);
    *reinterpret_cast<uint4 *>(p) = v;
#endif
}

/* CT_VEC_OF(T) elements at p (16-byte aligned) as f32, in one 128-bit
 * access: four floats, or eight halves widened; and stored back (halves
 * rounded). */
__device__ inline void ct_load_vec(const float *p, float v[CT_VEC])
{
    ct_load4(p, v);
}
__device__ inline void ct_store_vec(float *p, const float v[CT_VEC])
{
    ct_store4(p, v);
}
template <class H> __device__ inline void ct_load_vec(const H *p, float v[CT_VEC_OF(H)])
{
    H h[CT_VEC_OF(H)];
    ct_load16(p, h);
    for (int k = 0; k < CT_VEC_OF(H); k++)
        v[k] = ct_to_f32(h[k]);
}
template <class H> __device__ inline void ct_store_vec(H *p, const float v[CT_VEC_OF(H)])
{
    H h[CT_VEC_OF(H)];
    for (int k = 0; k < CT_VEC_OF(H); k++)
        h[k] = ct_from_f32<H>(v[k]);
    ct_store16(p, h);
}

/* `reads` and `writes` are bit masks over the arrays (bit k: arrays[k]);
 * an array only written is never loaded, and one not in `writes` is never
 * stored to (so a read-only input may be passed with its const cast away).
 * ct_map_blocks: the same over blocks [block, ...) of `blocks` (a kernel
 * whose grid several maps share, one range of blocks each); ct_map: over
 * the whole grid. */
template <class T, int N, class Body>
__device__ void ct_map_blocks(int64_t count, T *const (&arrays)[N], unsigned reads,
                              unsigned writes, unsigned block, unsigned blocks, Body body)
{
    const int width = CT_VEC_OF(T);
    uintptr_t address_bits = 0;
    for (int k = 0; k < N; k++)
        address_bits |= (uintptr_t)arrays[k];
    int64_t vectors = address_bits % 16 == 0 ? count / width : 0;
    int64_t first = (int64_t)block * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)blocks * blockDim.x;
    for (int64_t v = first; v < vectors; v += stride) {
        float values[N][width] = {};
        for (int k = 0; k < N; k++)
            if (reads >> k & 1u)
                ct_load_vec(arrays[k] + v * width, values[k]);
        for (int lane = 0; lane < width; lane++) {
            float e[N];
            for (int k = 0; k < N; k++)
                e[k] = values[k][lane];
            body(e);
            for (int k = 0; k < N; k++)
                values[k][lane] = e[k];
        }
        for (int k = 0; k < N; k++)
            if (writes >> k & 1u)
                ct_store_vec(arrays[k] + v * width, values[k]);
    }
    int64_t done = vectors * width;
    for (int64_t t = first; t < count - done; t += stride) {
        float e[N];
        for (int k = 0; k < N; k++)
            e[k] = (reads >> k & 1u) ? ct_load_f32(arrays[k], done + t) : 0.0f;
        body(e);
        for (int k = 0; k < N; k++)
            if (writes >> k & 1u)
                ct_store_f32(arrays[k], done + t, e[k]);
    }
}

template <class T, int N, class Body>
__device__ void ct_map(int64_t count, T *const (&arrays)[N], unsigned reads, unsigned writes,
                       Body body)
{
    ct_map_blocks(count, arrays, reads, writes, blockIdx.x, gridDim.x, body);
}

/* This step's values (core/step_values.h) in every lane: the 32-byte struct
 * read as one request, each lane a word of it (lanes 8 apart the same),
 * then passed round the warp.  Read field by field, each lane read the same
 * 4 or 8 bytes: a sector moved for them, four requests a warp, which took
 * the optimizer's loads to 89.3 % efficiency on SimpleCNN (docs/perf.md,
 * 2026-12-07 seventh session).  Every lane of the warp calls it. */
__device__ inline ct_step_values ct_step_values_load(const ct_step_values *values)
{
    enum { WORDS = sizeof(ct_step_values) / sizeof(uint32_t) };
    static_assert(sizeof(ct_step_values) == 32, "a step's values are one sector");
    const uint32_t *words = reinterpret_cast<const uint32_t *>(values);
    uint32_t mine = words[threadIdx.x % WORDS], all[WORDS];
#pragma unroll
    for (int k = 0; k < WORDS; k++)
        all[k] = __shfl_sync(0xffffffffu, mine, k);
    ct_step_values v;
    memcpy(&v, all, sizeof v);
    return v;
}

/* ct_map's launch: a grid for one thread per group of four floats. */
#define CT_CUDA_LAUNCH_MAP(kernel, count, stream, ...)                                   \
    CT_CUDA_LAUNCH(kernel, ct_cuda_grid_for((const void *)kernel, ct_vec_items(count)),  \
                   CT_CUDA_BLOCK, 0, stream, __VA_ARGS__)

/* The same for a map over storage type T: one thread per CT_VEC_OF(T). */
#define CT_CUDA_LAUNCH_MAP_OF(T, kernel, count, stream, ...)                             \
    CT_CUDA_LAUNCH(kernel,                                                              \
                   ct_cuda_grid_for((const void *)kernel,                               \
                                    ct_vec_items(count, CT_VEC_OF(T))),                 \
                   CT_CUDA_BLOCK, 0, stream, __VA_ARGS__)

#endif
