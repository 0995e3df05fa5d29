/*
 * Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
 *
 * A random value is a pure function of (seed, stream, step, index), so a
 * kernel can draw element i without any shared state, in any order, on any
 * thread or device, and get the same bits.  cuttle uses:
 *   stream = the node id (dropout) or the state tensor's index (init),
 *   step   = the training step (CT_RNG_INIT_STEP while initializing);
 * and the data pipeline (src/data) its own streams, far above any node id
 * or state index:
 *   CT_RNG_STREAM_SHUFFLE, step = epoch: the loader's permutation,
 *   CT_RNG_STREAM_AUGMENT, step = epoch: crop, flip and cutout of each item,
 *   CT_RNG_STREAM_SPLIT,   step = class: which files of an image folder are
 *                          the test split.
 */
#ifndef CT_CORE_RNG_H
#define CT_CORE_RNG_H

#include <stdint.h>

#define CT_RNG_INIT_STEP 0xffffffffu
#define CT_RNG_STREAM_SHUFFLE 0xda7a0001u
#define CT_RNG_STREAM_AUGMENT 0xda7a0002u
#define CT_RNG_STREAM_SPLIT 0xda7a0003u

/* The CUDA kernels draw the same numbers (src/cuda/dropout.cu). */
#ifdef __CUDACC__
#define CT_RNG_FN static inline __host__ __device__
#else
#define CT_RNG_FN static inline
#endif

CT_RNG_FN void ct_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t product = (uint64_t)a * b;
    *hi = (uint32_t)(product >> 32);
    *lo = (uint32_t)product;
}

/* Four 32-bit random words for counter block `block`. */
CT_RNG_FN void ct_philox_block(uint64_t seed, uint32_t stream, uint32_t step, uint64_t block,
                                   uint32_t out[4])
{
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = stream, c3 = step;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, lo0, hi1, lo1;
        ct_philox_mulhilo(0xD2511F53u, c0, &hi0, &lo0);
        ct_philox_mulhilo(0xCD9E8D57u, c2, &hi1, &lo1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* A float in [0, 1) with 24 random bits. */
CT_RNG_FN float ct_rng_to_unit(uint32_t bits)
{
    return (float)(bits >> 8) * (1.0f / 16777216.0f);
}

/* Element `index` of the stream: lane index%4 of block index/4. */
CT_RNG_FN float ct_rng_uniform(uint64_t seed, uint32_t stream, uint32_t step, uint64_t index)
{
    uint32_t words[4];
    ct_philox_block(seed, stream, step, index / 4, words);
    return ct_rng_to_unit(words[index % 4]);
}

#endif
