/*
 * Caching device allocator (see allocator.h).
 *
 * Size classes: requests below 1 MiB round up to a multiple of 512 bytes;
 * larger ones to a quarter step between powers of two (1, 1.25, 1.5, 1.75
 * times 2^k), which wastes at most 25% and lets a block serve every request
 * of its class.  A block is reused only for its own class, so a small
 * request never pins a huge block.  The block list is searched linearly:
 * allocations happen when plans are made, never inside a step.
 */
#include "cuda/allocator.h"

#include <stdlib.h>

#include "core/error.h"
#include "cuda/check.h"

/* Only where device memory is host memory: the emulated device. */
#if defined(CUDA_EMU) && defined(__SANITIZE_ADDRESS__)
#define CT_DEVICE_ASAN 1
#elif defined(CUDA_EMU) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_DEVICE_ASAN 1
#endif
#endif
#if CT_DEVICE_ASAN
#include <sanitizer/asan_interface.h>
#define DEVICE_POISON(ptr, bytes) ASAN_POISON_MEMORY_REGION(ptr, bytes)
#define DEVICE_UNPOISON(ptr, bytes) ASAN_UNPOISON_MEMORY_REGION(ptr, bytes)
#else
#define DEVICE_POISON(ptr, bytes) ((void)(ptr), (void)(bytes))
#define DEVICE_UNPOISON(ptr, bytes) ((void)(ptr), (void)(bytes))
#endif

#define SMALL_LIMIT ((size_t)1 << 20)
#define SMALL_GRANULE 512
#define MIB (1024.0 * 1024.0)

struct ct_cuda_block {
    void *ptr;
    size_t size;
    bool in_use;
    ct_cuda_block *next;
};

size_t ct_cuda_size_class(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (bytes < SMALL_LIMIT)
        return (bytes + SMALL_GRANULE - 1) / SMALL_GRANULE * SMALL_GRANULE;
    size_t power = SMALL_LIMIT;
    while (power * 2 <= bytes)
        power *= 2;
    size_t quarter = power / 4;
    return (bytes + quarter - 1) / quarter * quarter;
}

void ct_cuda_allocator_init(ct_cuda_allocator *allocator, int device, cudaStream_t stream)
{
    *allocator = (ct_cuda_allocator){.device = device, .stream = stream};
}

void ct_cuda_allocator_destroy(ct_cuda_allocator *allocator)
{
    ct_cuda_block *block = allocator->blocks;
    while (block) {
        ct_cuda_block *next = block->next;
        DEVICE_UNPOISON(block->ptr, block->size);
        cudaFree(block->ptr); /* teardown: nothing useful to do with a failure */
        free(block);
        block = next;
    }
    allocator->blocks = NULL;
}

ct_status ct_cuda_allocator_release_cache(ct_cuda_allocator *allocator)
{
    ct_cuda_block **link = &allocator->blocks;
    while (*link) {
        ct_cuda_block *block = *link;
        if (block->in_use) {
            link = &block->next;
            continue;
        }
        *link = block->next;
        allocator->stats.cached -= block->size;
        DEVICE_UNPOISON(block->ptr, block->size);
        cudaError_t error = cudaFree(block->ptr);
        free(block);
        if (error != cudaSuccess)
            return ct_cuda_fail(error, __FILE__, __LINE__, "cudaFree(block->ptr)");
    }
    return CT_OK;
}

static ct_status out_of_memory(const ct_cuda_allocator *allocator, size_t bytes,
                               const char *why)
{
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        (void)cudaGetLastError();
    const ct_memory_stats *s = &allocator->stats;
    return ct_set_error(CT_ERR_MEMORY,
                        "out of GPU memory on cuda:%d allocating %.1f MiB (%s): in use %.1f "
                        "MiB (peak %.1f MiB), cached %.1f MiB, limit %s%.1f MiB, %lld "
                        "cudaMalloc calls, device free %.1f of %.1f MiB; try a smaller --batch",
                        allocator->device, bytes / MIB, why, s->in_use / MIB,
                        s->peak_in_use / MIB, s->cached / MIB, s->limit ? "" : "none, ",
                        s->limit / MIB, (long long)s->n_device_allocs, free_bytes / MIB,
                        total_bytes / MIB);
}

/* The caller owns the first `bytes`; the class's slack stays poisoned. */
static void hand_out(ct_cuda_allocator *allocator, ct_cuda_block *block, size_t bytes)
{
    DEVICE_UNPOISON(block->ptr, bytes);
    DEVICE_POISON((char *)block->ptr + bytes, block->size - bytes);
    block->in_use = true;
    allocator->stats.in_use += block->size;
    allocator->stats.n_allocs++;
    if (allocator->stats.in_use > allocator->stats.peak_in_use)
        allocator->stats.peak_in_use = allocator->stats.in_use;
}

static bool over_limit(const ct_cuda_allocator *allocator, size_t size)
{
    const ct_memory_stats *s = &allocator->stats;
    return s->limit && s->in_use + s->cached + size > s->limit;
}

/* A fresh block from cudaMalloc; on failure the cache goes back and we try once more. */
static ct_status device_alloc(ct_cuda_allocator *allocator, size_t size, void **ptr)
{
    if (over_limit(allocator, size))
        CT_TRY(ct_cuda_allocator_release_cache(allocator));
    if (over_limit(allocator, size))
        return out_of_memory(allocator, size, "over the memory limit");
    cudaError_t error = cudaMalloc(ptr, size);
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* clear it: it is not sticky */
        CT_TRY(ct_cuda_allocator_release_cache(allocator));
        error = cudaMalloc(ptr, size);
    }
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return out_of_memory(allocator, size, "cudaMalloc failed after releasing the cache");
    }
    if (error != cudaSuccess)
        return ct_cuda_fail(error, __FILE__, __LINE__, "cudaMalloc(ptr, size)");
    allocator->stats.n_device_allocs++;
    return CT_OK;
}

/* Fill the bytes handed out with 0xff (NaN floats) when poisoning.  On the
 * backend's stream: a memset on the legacy stream would not be ordered
 * with the backend's non-blocking stream and could land after its writes
 * (test_gpu fails so in the emulator's reverse and shuffle orders). */
static ct_status poison(const ct_cuda_allocator *allocator, void *ptr, size_t bytes)
{
    if (allocator->poison)
        CT_CUDA_CALL(cudaMemsetAsync(ptr, 0xff, bytes, allocator->stream));
    return CT_OK;
}

ct_status ct_cuda_allocator_alloc(ct_cuda_allocator *allocator, size_t bytes, void **out)
{
    *out = NULL;
    size_t size = ct_cuda_size_class(bytes);
    for (ct_cuda_block *block = allocator->blocks; block; block = block->next) {
        if (!block->in_use && block->size == size) {
            allocator->stats.cached -= size;
            hand_out(allocator, block, bytes);
            CT_TRY(poison(allocator, block->ptr, bytes));
            *out = block->ptr;
            return CT_OK;
        }
    }
    ct_cuda_block *block = malloc(sizeof *block);
    if (!block)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory for an allocator record");
    void *ptr = NULL;
    ct_status status = device_alloc(allocator, size, &ptr);
    if (status == CT_OK) {
        status = poison(allocator, ptr, bytes);
        if (status != CT_OK)
            cudaFree(ptr);
    }
    if (status != CT_OK) {
        free(block);
        return status;
    }
    *block = (ct_cuda_block){.ptr = ptr, .size = size, .next = allocator->blocks};
    allocator->blocks = block;
    hand_out(allocator, block, bytes);
    *out = ptr;
    return CT_OK;
}

void ct_cuda_allocator_release(ct_cuda_allocator *allocator, void *ptr)
{
    for (ct_cuda_block *block = allocator->blocks; block; block = block->next) {
        if (block->ptr == ptr) {
            CT_ASSERT(block->in_use);
            DEVICE_POISON(block->ptr, block->size);
            block->in_use = false;
            allocator->stats.in_use -= block->size;
            allocator->stats.cached += block->size;
            return;
        }
    }
    CT_ASSERT(!"ct_cuda_allocator_release: not a block of this allocator");
}
