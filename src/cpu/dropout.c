/*
 * Dropout with a counter-based mask: element i is kept when
 * ct_rng_uniform(seed, stream, step, i) >= p, so the backward pass (and the
 * CUDA kernel) redraws the same mask from the same key without storing it.
 * Output written with =; in place (y == x) is fine.
 */
#include <string.h>

#include "core/rng.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"

/* Philox blocks per OpenMP iteration: enough work to amortize scheduling. */
#define BLOCKS_PER_CHUNK 4096
#define LANES_PER_BLOCK 4

/* Elements [first, first + len) of one chunk; len is a whole number of blocks
 * except in the last chunk.  One philox call yields the draws of 4 elements,
 * lane k of block b being element 4b + k, exactly as ct_rng_uniform reads it. */
static void dropout_span(int64_t first, int64_t len, const float *x, float *y, float p,
                         float scale, uint64_t seed, uint32_t stream, uint32_t step)
{
    for (int64_t offset = 0; offset < len; offset += LANES_PER_BLOCK) {
        uint32_t words[LANES_PER_BLOCK];
        ct_philox_block(seed, stream, step, (uint64_t)(first + offset) / LANES_PER_BLOCK, words);
        int64_t lanes = len - offset < LANES_PER_BLOCK ? len - offset : LANES_PER_BLOCK;
        for (int64_t k = 0; k < lanes; k++) {
            int64_t i = first + offset + k;
            y[i] = ct_rng_to_unit(words[k]) >= p ? x[i] * scale : 0.0f;
        }
    }
}

/* y[i] = keep(i) ? x[i] / (1-p) : 0, the scale rounded to float once, as PyTorch does.
 * 0 <= p < 1; p == 0 copies. */
void ct_cpu_dropout(int64_t count, const float *x, float *y, float p, uint64_t seed,
                    uint32_t stream, uint32_t step)
{
    if (p == 0.0f) {
        if (x != y)
            memcpy(y, x, (size_t)count * sizeof(float));
        return;
    }
    float scale = 1.0f / (1.0f - p);
    const int64_t chunk = (int64_t)BLOCKS_PER_CHUNK * LANES_PER_BLOCK;
    int64_t n_chunks = (count + chunk - 1) / chunk;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static)
    for (int64_t ci = 0; ci < n_chunks; ci++) {
        int64_t first = ci * chunk;
        int64_t len = count - first < chunk ? count - first : chunk;
        dropout_span(first, len, x, y, p, scale, seed, stream, step);
    }
}
