/*
 * Staged inputs on a GPU (graph/staging.h, ct_plan_stage): the next batch
 * is copied to the device on a stream of its own while the step before it
 * runs on the compute stream.
 *
 * A stage is pinned host memory, a device slot of the same size and two
 * events:
 *   put:  host -> pinned (memcpy), then on the copy stream, after the
 *         slot's last value was taken: pinned -> slot; record `filled`.
 *   take: on the compute stream, after `filled`: slot -> the input
 *         tensor; record `taken`.
 * The compute stream waits only for the copy it takes, so a copy staged
 * for a later step runs beside the steps queued before it.  Pinned memory
 * is read when the copy runs, not when it is queued: put first waits for
 * the stage's previous copy.  The plan keeps two stages per input
 * (batch j waits while j+1 is put), so neither wait is long in a loop
 * that puts j+1, then runs j.
 */
#include <string.h>

#include "core/error.h"
#include "cuda/backend_impl.h"
#include "cuda/check.h"

typedef struct cuda_stage {
    void *pinned, *slot;
    size_t bytes;
    cudaEvent_t filled, taken;
} cuda_stage;

static cuda_backend *impl_of(const ct_backend *backend)
{
    return backend->impl;
}

void ct_cuda_stage_free(ct_backend *backend, void *stage)
{
    cuda_backend *b = impl_of(backend);
    cuda_stage *s = stage;
    if (!s)
        return;
    if (cudaSetDevice(b->device) == cudaSuccess) {
        /* the copies in and out of the slot may be queued */
        if ((s->filled && cudaEventSynchronize(s->filled) != cudaSuccess) ||
            (s->taken && cudaEventSynchronize(s->taken) != cudaSuccess))
            (void)cudaGetLastError();
        if (s->filled)
            cudaEventDestroy(s->filled);
        if (s->taken)
            cudaEventDestroy(s->taken);
        if (s->pinned)
            cudaFreeHost(s->pinned);
    }
    if (s->slot)
        backend->iface->release(backend, s->slot);
    free(s);
}

ct_status ct_cuda_stage_new(ct_backend *backend, size_t bytes, void **stage)
{
    cuda_backend *b = impl_of(backend);
    *stage = NULL;
    CT_CUDA_CALL(cudaSetDevice(b->device));
    if (!b->copy_stream)
        CT_CUDA_CALL(cudaStreamCreateWithFlags(&b->copy_stream, cudaStreamNonBlocking));
    cuda_stage *s = calloc(1, sizeof *s);
    if (!s)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_stage: out of host memory");
    s->bytes = bytes;
    cudaError_t error = cudaMallocHost(&s->pinned, bytes ? bytes : 1);
    const char *call = "cudaMallocHost (a staged input)";
    if (error == cudaSuccess) {
        call = "cudaEventCreateWithFlags";
        error = cudaEventCreateWithFlags(&s->filled, cudaEventDisableTiming);
    }
    if (error == cudaSuccess)
        error = cudaEventCreateWithFlags(&s->taken, cudaEventDisableTiming);
    if (error != cudaSuccess) {
        ct_cuda_stage_free(backend, s);
        return ct_cuda_fail(error, __FILE__, __LINE__, call);
    }
    ct_status status = backend->iface->alloc(backend, bytes, &s->slot);
    if (status != CT_OK) {
        ct_cuda_stage_free(backend, s);
        return status;
    }
    *stage = s;
    return CT_OK;
}

ct_status ct_cuda_stage_put(ct_backend *backend, void *stage, const void *host, size_t bytes)
{
    cuda_backend *b = impl_of(backend);
    cuda_stage *s = stage;
    CT_ASSERT(bytes == s->bytes);
    CT_CUDA_CALL(cudaSetDevice(b->device));
    CT_CUDA_CALL(cudaEventSynchronize(s->filled)); /* the last copy has read pinned */
    memcpy(s->pinned, host, bytes);
    CT_CUDA_CALL(cudaStreamWaitEvent(b->copy_stream, s->taken, 0));
    CT_CUDA_CALL(cudaMemcpyAsync(s->slot, s->pinned, bytes, cudaMemcpyHostToDevice,
                                 b->copy_stream));
    CT_CUDA_CALL(cudaEventRecord(s->filled, b->copy_stream));
    return CT_OK;
}

ct_status ct_cuda_stage_take(ct_backend *backend, void *stage, void *dst, size_t bytes)
{
    cuda_backend *b = impl_of(backend);
    cuda_stage *s = stage;
    CT_ASSERT(bytes == s->bytes);
    CT_CUDA_CALL(cudaSetDevice(b->device));
    CT_CUDA_CALL(cudaStreamWaitEvent(b->stream, s->filled, 0));
    CT_CUDA_CALL(cudaMemcpyAsync(dst, s->slot, bytes, cudaMemcpyDeviceToDevice, b->stream));
    CT_CUDA_CALL(cudaEventRecord(s->taken, b->stream));
    return CT_OK;
}
