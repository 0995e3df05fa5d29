/*
 * Dropout on the GPU with the counter-based mask of src/cpu/dropout.c:
 * element i is kept when ct_rng_uniform(seed, rng_stream, step, i) >= p, so
 * the mask equals the CPU's bit for bit, whatever the dtype, and the
 * backward pass redraws it.  One thread per 128-bit group of elements (one
 * Philox block of 4 floats, two of 8 halves), read and written as one
 * 128-bit access each where x and y are 16-byte aligned (a warp's request
 * then covers whole sectors; four 32-bit accesses 16 bytes apart used a
 * quarter of each).  16-bit values are scaled in f32 and rounded once
 * (elementwise.cuh), as the CPU reference rounds.  Written with =; in place
 * works.
 */
#include "core/rng.h"
#include "cuda/elementwise.cuh"

enum { DROPOUT_LANES = 4 }; /* elements per Philox block */

/* y[i] = keep(i) ? x[i] * scale : 0,  scale = 1/(1-p) rounded to float once;
 * x and y of storage type T */
template <class T>
__global__ void dropout_kernel(int64_t count, const T *x, T *y, float p, float scale,
                               uint64_t seed, uint32_t rng_stream, const ct_step_values *values)
{
    const int width = CT_VEC_OF(T); /* elements per thread: one 128-bit access */
    const int philox_blocks = width / DROPOUT_LANES;
    uint32_t step = (uint32_t)ct_step_values_load(values).step;
    int64_t groups = (count + width - 1) / width;
    bool aligned = ((uintptr_t)x | (uintptr_t)y) % 16 == 0;
    CT_CUDA_GRID_STRIDE(group, groups)
    {
        uint32_t words[width];
        for (int b = 0; b < philox_blocks; b++)
            ct_philox_block(seed, rng_stream, step, (uint64_t)(group * philox_blocks + b),
                            words + b * DROPOUT_LANES);
        int64_t first = group * width;
        if (aligned && first + width <= count) {
            float v[width];
            ct_load_vec(x + first, v);
            for (int k = 0; k < width; k++)
                v[k] = ct_rng_to_unit(words[k]) >= p ? v[k] * scale : 0.0f;
            ct_store_vec(y + first, v);
            continue;
        }
        for (int k = 0; k < width && first + k < count; k++)
            ct_store_f32(y, first + k,
                         ct_rng_to_unit(words[k]) >= p ? ct_load_f32(x, first + k) * scale
                                                       : 0.0f);
    }
}

extern "C" ct_status ct_cuda_dropout(ct_dtype dtype, int64_t count, const void *x, void *y,
                                     float p, uint64_t seed, uint32_t rng_stream,
                                     const ct_step_values *values, cudaStream_t stream)
{
    if (p == 0.0f)
        return x == y ? CT_OK : ct_cuda_copy(dtype, count, x, y, stream);
    float scale = 1.0f / (1.0f - p);
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH_ITEMS(dropout_kernel<T>, ct_vec_items(count, CT_VEC_OF(T)), stream,
                             count, (const T *)x, (T *)y, p, scale, seed, rng_stream, values);
        return CT_OK;
    });
}
