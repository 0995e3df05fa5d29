/*
 * The CUDA backend's caching allocator.  Device memory comes from
 * cudaMalloc in size classes; a released block goes back to a free list
 * and is handed out again for a request of the same class, so plans that
 * come and go (train, evaluate, train) stop calling cudaMalloc after the
 * first.  It keeps statistics, honours a cap, and turns out-of-memory into
 * CT_ERR_MEMORY with a message that gives the statistics.
 *
 * On the emulated device (emu/) device memory is host memory, and under
 * AddressSanitizer the allocator poisons what no caller owns: a block's
 * slack past the bytes asked for, and cached free blocks, so a kernel that
 * reads or writes there fails as it would past a cudaMalloc'd buffer.
 *
 * Not thread-safe: a backend is used from one thread at a time.
 */
#ifndef CT_CUDA_ALLOCATOR_H
#define CT_CUDA_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "cuttle.h"

typedef struct ct_cuda_block ct_cuda_block;

typedef struct ct_cuda_allocator {
    int device;
    cudaStream_t stream;   /* where its poisoning memsets run: the backend's stream */
    ct_cuda_block *blocks; /* every block cudaMalloc gave us, in use or free */
    ct_memory_stats stats;
    bool poison; /* fill new blocks with 0xff bytes (NaN floats): tests */
} ct_cuda_allocator;

void ct_cuda_allocator_init(ct_cuda_allocator *allocator, int device, cudaStream_t stream);
/* Frees every block, in use or not. */
void ct_cuda_allocator_destroy(ct_cuda_allocator *allocator);

/* Out of memory: the cache is released and cudaMalloc tried once more
 * before CT_ERR_MEMORY. */
ct_status ct_cuda_allocator_alloc(ct_cuda_allocator *allocator, size_t bytes, void **out);
void ct_cuda_allocator_release(ct_cuda_allocator *allocator, void *ptr);
ct_status ct_cuda_allocator_release_cache(ct_cuda_allocator *allocator);

/* The size class of a request: what a block for it really holds. */
size_t ct_cuda_size_class(size_t bytes);

#endif
