/*
 * Dropout on the GPU with the counter-based mask of src/cpu/dropout.c:
 * element i is kept when ct_rng_uniform(seed, rng_stream, step, i) >= p, so
 * the mask equals the CPU's bit for bit and the backward pass redraws it.
 * One thread per Philox block of 4 elements, read and written as one
 * 128-bit access each where x and y are 16-byte aligned (a warp's request
 * then covers whole sectors; four 32-bit accesses 16 bytes apart used a
 * quarter of each).  Written with =; in place works.
 */
#include "core/rng.h"
#include "cuda/elementwise.cuh"

enum { DROPOUT_LANES = 4 }; /* elements per Philox block */

/* y[i] = keep(i) ? x[i] * scale : 0,  scale = 1/(1-p) rounded to float once */
__global__ void dropout_kernel(int64_t count, const float *x, float *y, float p, float scale,
                               uint64_t seed, uint32_t rng_stream, const ct_step_values *values)
{
    uint32_t step = (uint32_t)values->step;
    int64_t blocks = (count + DROPOUT_LANES - 1) / DROPOUT_LANES;
    bool aligned = ((uintptr_t)x | (uintptr_t)y) % (DROPOUT_LANES * sizeof(float)) == 0;
    CT_CUDA_GRID_STRIDE(block, blocks)
    {
        uint32_t words[DROPOUT_LANES];
        ct_philox_block(seed, rng_stream, step, (uint64_t)block, words);
        int64_t first = block * DROPOUT_LANES;
        if (aligned && first + DROPOUT_LANES <= count) {
            float v[DROPOUT_LANES];
            ct_load4(x + first, v);
            for (int k = 0; k < DROPOUT_LANES; k++)
                v[k] = ct_rng_to_unit(words[k]) >= p ? v[k] * scale : 0.0f;
            ct_store4(y + first, v);
            continue;
        }
        for (int k = 0; k < DROPOUT_LANES && first + k < count; k++)
            y[first + k] = ct_rng_to_unit(words[k]) >= p ? x[first + k] * scale : 0.0f;
    }
}

extern "C" ct_status ct_cuda_dropout(int64_t count, const float *x, float *y, float p,
                                     uint64_t seed, uint32_t rng_stream,
                                     const ct_step_values *values, cudaStream_t stream)
{
    if (p == 0.0f)
        return x == y ? CT_OK : ct_cuda_copy(count, x, y, stream);
    float scale = 1.0f / (1.0f - p);
    int64_t blocks = (count + DROPOUT_LANES - 1) / DROPOUT_LANES;
    CT_CUDA_LAUNCH_ITEMS(dropout_kernel, blocks, stream, count, x, y, p, scale, seed, rng_stream,
                         values);
    return CT_OK;
}
