/*
 * Dropout on the GPU with the counter-based mask of src/cpu/dropout.c:
 * element i is kept when ct_rng_uniform(seed, rng_stream, step, i) >= p, so
 * the mask equals the CPU's bit for bit and the backward pass redraws it.
 * One thread per Philox block of 4 elements.  Written with =; in place works.
 */
#include "core/rng.h"
#include "cuda/common.cuh"

enum { DROPOUT_LANES = 4 }; /* elements per Philox block */

/* y[i] = keep(i) ? x[i] * scale : 0,  scale = 1/(1-p) rounded to float once */
__global__ void dropout_kernel(int64_t count, const float *x, float *y, float p, float scale,
                               uint64_t seed, uint32_t rng_stream, uint32_t step)
{
    int64_t blocks = (count + DROPOUT_LANES - 1) / DROPOUT_LANES;
    CT_CUDA_GRID_STRIDE(block, blocks)
    {
        uint32_t words[DROPOUT_LANES];
        ct_philox_block(seed, rng_stream, step, (uint64_t)block, words);
        for (int k = 0; k < DROPOUT_LANES; k++) {
            int64_t i = block * DROPOUT_LANES + k;
            if (i < count)
                y[i] = ct_rng_to_unit(words[k]) >= p ? x[i] * scale : 0.0f;
        }
    }
}

extern "C" ct_status ct_cuda_dropout(int64_t count, const float *x, float *y, float p,
                                     uint64_t seed, uint32_t rng_stream, uint32_t step,
                                     cudaStream_t stream)
{
    if (p == 0.0f)
        return x == y ? CT_OK : ct_cuda_copy(count, x, y, stream);
    float scale = 1.0f / (1.0f - p);
    int64_t blocks = (count + DROPOUT_LANES - 1) / DROPOUT_LANES;
    CT_CUDA_LAUNCH_ITEMS(dropout_kernel, blocks, stream, count, x, y, p, scale, seed, rng_stream,
                         step);
    return CT_OK;
}
