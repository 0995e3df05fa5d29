/*
 * The CUDA backend: device memory from the caching allocator, one compute
 * stream that the backend owns, and its op table (table.c), which lists for
 * each op its native kernels (src/cuda/<family>.cu) and, where there is
 * one, the cuBLAS/cuDNN call (vendor.h).
 *
 * Synchronization: kernels are queued on the stream and run_node returns at
 * once; the host waits only where it needs results: ct_plan_read, the end
 * of ct_plan_run (the step's status, including a bad label found by
 * cross-entropy on the device) and ct_backend_synchronize.  Writes from
 * host memory are ordered on the same stream.
 *
 * Kernel choice (graph/impl.h) defaults to "auto": the first run of each
 * node shape times its implementations on the real data with CUDA events
 * (this backend's device clock) and keeps the fastest.  Tuning at the
 * first run, not at plan time, measures real data in the real memory
 * layout, and costs one synchronization per new shape.  Every op with
 * several implementations is a pure function of its inputs, so running it
 * several times leaves the same output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/backend_impl.h"
#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/vendor_api.h"
#include "cuda/kernels.h"
#include "graph/impl.h"
#include "ops/ops.h"
#include "prof/roofline.h"

/* NVTX v3 is header-only (it finds a profiler's injection library with
 * dlopen at the first call): Nsight Systems and Nsight Compute show each
 * node's kernels under its op name; without a tool attached a range costs
 * a few nanoseconds. */
#include <nvtx3/nvToolsExt.h>


static cuda_backend *impl_of(const ct_backend *backend)
{
    return backend->impl;
}

/* ---- the vtable ------------------------------------------------------------------ */

static ct_status cuda_set_device(const cuda_backend *b)
{
    CT_CUDA_CALL(cudaSetDevice(b->device));
    return CT_OK;
}

static ct_status cuda_alloc(ct_backend *backend, size_t bytes, void **out)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    return ct_cuda_allocator_alloc(&b->allocator, bytes, out);
}

static void cuda_release(ct_backend *backend, void *ptr)
{
    cuda_backend *b = impl_of(backend);
    /* A freed plan's kernels may still be queued: the block must not be
     * handed out again before they finish. */
    if (cudaStreamSynchronize(b->stream) != cudaSuccess)
        (void)cudaGetLastError();
    ct_cuda_allocator_release(&b->allocator, ptr);
}

static ct_status cuda_write(ct_backend *backend, void *dst, const void *host, size_t bytes)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    /* From pageable memory the copy is staged before this returns, so the
     * caller may reuse `host` at once. */
    CT_CUDA_CALL(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, b->stream));
    return CT_OK;
}

static ct_status cuda_read(ct_backend *backend, void *host, const void *src, size_t bytes)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    CT_CUDA_CALL(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, b->stream));
    CT_CUDA_CALL(cudaStreamSynchronize(b->stream));
    return CT_OK;
}

static ct_status cuda_copy(ct_backend *backend, void *dst, const void *src, size_t bytes)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    CT_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, b->stream));
    return CT_OK;
}

static void cuda_begin_step(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    b->ce_node = NULL;
    b->device_current = false;
}

static ct_status cuda_run_node(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                               const ct_impl *impl)
{
    cuda_backend *b = impl_of(backend);
    /* Another backend in this thread may have made its GPU current since
     * the last step: kernels go to this backend's stream, on its device. */
    if (!b->device_current) {
        CT_TRY(cuda_set_device(b));
        b->device_current = true;
    }
    if (node->op == CT_OP_CROSS_ENTROPY && !b->ce_node)
        CT_CUDA_CALL(cudaMemsetAsync(b->bad_row, 0x7f, sizeof *b->bad_row, b->stream));
    nvtxRangePushA(ct_op_name(node->op));
    ct_status status = impl->run(backend, exec, node);
    nvtxRangePop();
    return status;
}

/* ---- a step recorded once and replayed: CUDA Graphs (graph/replay.h) ------------ */

typedef struct cuda_replay {
    cudaGraphExec_t exec;
    int nodes;
    /* the label check the recorded cross-entropy asks for (check_labels) */
    const ct_tensor *ce_node;
    const void *ce_labels;
} cuda_replay;

static ct_status cuda_capture_begin(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    /* Thread-local: what another host thread does (a loader's pinned
     * allocation) cannot spoil the recording; a call of this thread that
     * would synchronize fails it, and the step then runs node by node. */
    CT_CUDA_CALL(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal));
    return CT_OK;
}

/* A failed recording leaves no error behind for the next CUDA call. */
static ct_status capture_failed(cudaError_t error, int line, const char *call)
{
    (void)cudaGetLastError();
    return ct_cuda_fail(error, __FILE__, line, call);
}

static ct_status cuda_capture_end(ct_backend *backend, void **out)
{
    cuda_backend *b = impl_of(backend);
    *out = NULL;
    cudaGraph_t graph = NULL;
    cudaError_t error = cudaStreamEndCapture(b->stream, &graph);
    if (error != cudaSuccess)
        return capture_failed(error, __LINE__, "cudaStreamEndCapture");
    cuda_replay *r = calloc(1, sizeof *r);
    size_t nodes = 0;
    const char *call = "cudaGraphGetNodes";
    error = r ? cudaGraphGetNodes(graph, NULL, &nodes) : cudaErrorMemoryAllocation;
    if (error == cudaSuccess) {
        call = "cudaGraphInstantiate";
        error = cudaGraphInstantiate(&r->exec, graph, 0);
    }
    cudaGraphDestroy(graph); /* the instance keeps what it needs */
    if (error != cudaSuccess) {
        free(r);
        return capture_failed(error, __LINE__, call);
    }
    r->nodes = (int)nodes;
    r->ce_node = b->ce_node;
    r->ce_labels = b->ce_labels;
    *out = r;
    return CT_OK;
}

static ct_status cuda_replay_run(ct_backend *backend, void *replay)
{
    cuda_backend *b = impl_of(backend);
    const cuda_replay *r = replay;
    CT_TRY(cuda_set_device(b));
    b->ce_node = r->ce_node;
    b->ce_labels = r->ce_labels;
    CT_CUDA_CALL(cudaGraphLaunch(r->exec, b->stream));
    return CT_OK;
}

static void cuda_replay_free(ct_backend *backend, void *replay)
{
    cuda_backend *b = impl_of(backend);
    cuda_replay *r = replay;
    if (!r)
        return;
    if (cuda_set_device(b) == CT_OK) {
        if (cudaStreamSynchronize(b->stream) != cudaSuccess) /* a replay may be queued */
            (void)cudaGetLastError();
        cudaGraphExecDestroy(r->exec);
    }
    free(r);
}

static int cuda_replay_nodes(const ct_backend *backend, const void *replay)
{
    (void)backend;
    return ((const cuda_replay *)replay)->nodes;
}

/* ---- the profiler's device clock (graph/backend.h): a CUDA event per mark */

typedef struct cuda_timer {
    int n_marks;
    bool counts; /* holds one of the emulator's counting enables */
    cudaEvent_t events[];
} cuda_timer;

static void cuda_timer_free(ct_backend *backend, void *timer)
{
    cuda_timer *t = timer;
    if (!t)
        return;
#ifdef CUDA_EMU
    if (t->counts)
        cuda_emu_counters_enable(0);
#endif
    if (cuda_set_device(impl_of(backend)) == CT_OK)
        for (int i = 0; i < t->n_marks; i++)
            cudaEventDestroy(t->events[i]);
    free(t);
}

static ct_status cuda_timer_new(ct_backend *backend, int n_marks, bool counts, void **timer)
{
    CT_TRY(cuda_set_device(impl_of(backend)));
    cuda_timer *t = calloc(1, sizeof *t + sizeof(cudaEvent_t) * (size_t)n_marks);
    if (!t)
        return ct_set_error(CT_ERR_MEMORY, "profiler: out of host memory for %d CUDA events",
                            n_marks);
#ifdef CUDA_EMU
    /* the marks' counters (cuda_timer_counts) while the timer lives; the
     * emulator's enables nest, and cuda_timer_free gives this one back */
    t->counts = counts;
    if (counts) {
        /* each launch's latency by the model the profiler predicts with */
        const ct_gpu_model *gpu = &ct_gpu_h100_sxm;
        cuda_emu_counters_latency_weights(gpu->instruction_clocks, gpu->load_clocks,
                                          gpu->collective_clocks, gpu->barrier_clocks,
                                          gpu->sm_issue_per_clock);
        cuda_emu_counters_enable(1);
    }
#else
    (void)counts;
#endif
    for (; t->n_marks < n_marks; t->n_marks++) {
        cudaError_t error = cudaEventCreate(&t->events[t->n_marks]);
        if (error != cudaSuccess) {
            cuda_timer_free(backend, t);
            return ct_cuda_fail(error, __FILE__, __LINE__, "cudaEventCreate (profiler)");
        }
    }
    *timer = t;
    return CT_OK;
}

/* Recorded on the stream after the work queued so far; an error here shows
 * again at the step's synchronize or in timer_elapsed_ns. */
static void cuda_timer_mark(ct_backend *backend, void *timer, int mark)
{
    cuda_timer *t = timer;
    if (mark >= 0 && mark < t->n_marks)
        cudaEventRecord(t->events[mark], impl_of(backend)->stream);
}

static ct_status cuda_timer_elapsed_ns(ct_backend *backend, void *timer, int mark, int64_t *ns)
{
    (void)backend;
    cuda_timer *t = timer;
    CT_ASSERT(mark >= 0 && mark < t->n_marks);
    float ms = 0.0f;
    CT_CUDA_CALL(cudaEventElapsedTime(&ms, t->events[0], t->events[mark]));
    *ns = (int64_t)((double)ms * 1e6);
    return CT_OK;
}

#ifdef CUDA_EMU
/* The emulator's counters when mark `mark` ran (emu/counters.cpp). */
static ct_status cuda_timer_counts(ct_backend *backend, void *timer, int mark,
                                   ct_kernel_counts *out)
{
    (void)backend;
    cuda_timer *t = timer;
    cuda_emu_kernel_counters c;
    if (!cuda_emu_counters_available())
        return ct_set_error(CT_ERR_UNSUPPORTED, "this emulated build counts nothing (it needs "
                            "clang, without SANITIZE)");
    CT_ASSERT(t->counts); /* made to count (timer_new) */
    if (mark < 0 || mark >= t->n_marks || cuda_emu_event_counters(t->events[mark], &c) != 0)
        return ct_set_error(CT_ERR_STATE, "profiler: mark %d has not run", mark);
    *out = (ct_kernel_counts){
        .counted = true,
        .launches = (int64_t)c.launches,
        .bytes_used = (double)(c.global_load_unique_bytes + c.global_store_unique_bytes),
        .bytes_moved = 32.0 * (double)(c.global_load_sectors + c.global_store_sectors),
        .dram_bytes = 32.0 * (double)c.distinct_sectors,
        .shared_wavefronts = (double)c.shared_wavefronts,
        .shared_ideal_wavefronts = (double)c.shared_ideal_wavefronts,
        .flops_executed = (double)c.flops,
        .tensor_flops = 2.0 * (double)c.mma_ops,
        .branches = (double)c.branches,
        .divergent_branches = (double)c.divergent_branches,
        .warp_instructions = (double)c.warp_instructions,
        .chain_instructions = (double)c.chain_instructions,
        .chain_load_rounds = (double)c.chain_load_rounds,
        .chain_collectives = (double)c.chain_collectives,
        .chain_barriers = (double)c.chain_barriers,
        .sm_instructions = (double)c.sm_instructions,
        .latency_clocks = (double)c.latency_clocks,
    };
    return CT_OK;
}
#endif

/* After the stream is idle: the first bad label cross-entropy met, if any.
 * Checked once: the node (and its plan) may be gone by the next synchronize. */
static ct_status check_labels(cuda_backend *b)
{
    if (!b->ce_node)
        return CT_OK;
    const ct_tensor *ce_node = b->ce_node;
    b->ce_node = NULL;
    int bad_row = CT_CUDA_NO_BAD_ROW;
    CT_CUDA_CALL(cudaMemcpy(&bad_row, b->bad_row, sizeof bad_row, cudaMemcpyDeviceToHost));
    if (bad_row == CT_CUDA_NO_BAD_ROW)
        return CT_OK;
    const ct_tensor *labels = ce_node->src[1];
    long long value = 0;
    if (labels->dtype == CT_I64) {
        int64_t label = 0;
        CT_CUDA_CALL(cudaMemcpy(&label, (const int64_t *)b->ce_labels + bad_row, sizeof label,
                                cudaMemcpyDeviceToHost));
        value = label;
    } else {
        int32_t label = 0;
        CT_CUDA_CALL(cudaMemcpy(&label, (const int32_t *)b->ce_labels + bad_row, sizeof label,
                                cudaMemcpyDeviceToHost));
        value = label;
    }
    return ct_set_error(CT_ERR_ARG,
                        "cross_entropy: label %lld in row %d of '%s' is not a class index in "
                        "[0, %lld)",
                        value, bad_row, ct_tensor_name(labels),
                        (long long)ce_node->src[0]->shape[1]);
}

static ct_status cuda_synchronize(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    CT_CUDA_CALL(cudaStreamSynchronize(b->stream));
    return check_labels(b);
}

static void cuda_destroy(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    if (b) {
        cudaSetDevice(b->device);
        if (b->stream)
            cudaStreamSynchronize(b->stream);
        ct_cuda_blas_free(b->blas);
        ct_cuda_dnn_free(b->dnn);
        ct_cuda_allocator_destroy(&b->allocator);
        if (b->bad_row)
            cudaFree(b->bad_row);
        if (b->tickets) {
            ct_cuda_set_tickets(b->stream, NULL);
            cudaFree(b->tickets);
        }
        if (b->stream)
            cudaStreamDestroy(b->stream);
        if (b->copy_stream)
            cudaStreamDestroy(b->copy_stream);
        free(b);
    }
    free(backend);
}

static ct_status cuda_memory_stats(const ct_backend *backend, ct_memory_stats *out)
{
    *out = impl_of(backend)->allocator.stats;
    return CT_OK;
}

static ct_status cuda_release_cache(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    CT_TRY(cuda_set_device(b));
    CT_CUDA_CALL(cudaStreamSynchronize(b->stream));
    return ct_cuda_allocator_release_cache(&b->allocator);
}

static ct_status cuda_set_memory_limit(ct_backend *backend, size_t bytes)
{
    impl_of(backend)->allocator.stats.limit = bytes;
    return CT_OK;
}

static void cuda_rename(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    snprintf(backend->name, sizeof backend->name, "cuda:%d (%.24s, %.23s kernels%s)", b->device,
             b->gpu_name, backend->kernels, b->tf32 ? ", tf32" : "");
}

static ct_status cuda_set_tf32(ct_backend *backend, bool enabled)
{
    cuda_backend *b = impl_of(backend);
    b->tf32 = enabled;
    ct_cuda_dnn_set_tf32(b->dnn, enabled);
    ct_impl_forget(backend); /* timings under the other math are void */
    cuda_rename(backend);
    return ct_cuda_blas_set_tf32(b->blas, enabled);
}

/* bf16 and TF32 tensor cores came with compute capability 8.0 (Ampere),
 * fp16 ones with 7.0 (Volta). */
static ct_status cuda_check_precision(const ct_backend *backend, int precision)
{
    const cuda_backend *b = impl_of(backend);
    int needed = precision == CT_PRECISION_FP16 ? 70 : precision == CT_PRECISION_FP32 ? 0 : 80;
    if (b->major * 10 + b->minor >= needed)
        return CT_OK;
    return ct_set_error(CT_ERR_DEVICE,
                        "precision %s needs a GPU of compute capability %d.%d or later; "
                        "cuda:%d (%s) is %d.%d: use %s",
                        ct_precision_name((ct_precision)precision), needed / 10, needed % 10,
                        b->device, b->gpu_name, b->major, b->minor,
                        b->major * 10 + b->minor >= 70 ? "fp16 or fp32" : "fp32");
}

static const ct_backend_i cuda_backend_i = {
    .alloc = cuda_alloc,
    .release = cuda_release,
    .write = cuda_write,
    .read = cuda_read,
    .copy = cuda_copy,
    .begin_step = cuda_begin_step,
    .run_node = cuda_run_node,
    .synchronize = cuda_synchronize,
    .destroy = cuda_destroy,
    .timer_new = cuda_timer_new,
    .timer_mark = cuda_timer_mark,
    .timer_elapsed_ns = cuda_timer_elapsed_ns,
    .timer_free = cuda_timer_free,
#ifdef CUDA_EMU
    .timer_counts = cuda_timer_counts,
#endif
    .memory_stats = cuda_memory_stats,
    .release_cache = cuda_release_cache,
    .set_memory_limit = cuda_set_memory_limit,
    .set_tf32 = cuda_set_tf32,
    .check_precision = cuda_check_precision,
    .rename = cuda_rename,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .replay = cuda_replay_run,
    .replay_free = cuda_replay_free,
    .replay_nodes = cuda_replay_nodes,
    .stage_new = ct_cuda_stage_new,
    .stage_put = ct_cuda_stage_put,
    .stage_take = ct_cuda_stage_take,
    .stage_free = ct_cuda_stage_free,
};

/* Streams, events, the label word and the vendor handles of a new backend. */
static ct_status cuda_setup(cuda_backend *b)
{
    struct cudaDeviceProp props;
    CT_CUDA_CALL(cudaGetDeviceProperties(&props, b->device));
    snprintf(b->gpu_name, sizeof b->gpu_name, "%s", props.name);
    b->major = props.major;
    b->minor = props.minor;
    ct_cuda_set_device_info(b->device, props.multiProcessorCount);
    CT_CUDA_CALL(cudaSetDevice(b->device));
    CT_CUDA_CALL(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    b->allocator.stream = b->stream;
    CT_CUDA_CALL(cudaMalloc((void **)&b->bad_row, sizeof *b->bad_row));
    CT_CUDA_CALL(cudaMalloc((void **)&b->tickets, sizeof *b->tickets * CT_CUDA_TICKETS));
    CT_CUDA_CALL(cudaMemsetAsync(b->tickets, 0, sizeof *b->tickets * CT_CUDA_TICKETS, b->stream));
    ct_cuda_set_tickets(b->stream, b->tickets);
    /* A vendor library that cannot start leaves its ops to the native kernels. */
    if (ct_cuda_blas_new(b->stream, b->tf32, &b->blas) != CT_OK) {
        ct_cuda_blas_free(b->blas);
        b->blas = NULL;
    }
    if (ct_cuda_dnn_new(b->stream, b->tf32, &b->dnn) != CT_OK) {
        ct_cuda_dnn_free(b->dnn);
        b->dnn = NULL;
    }
    return CT_OK;
}

ct_status ct_cuda_backend_new(int device, ct_backend **out)
{
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
        int driver = 0;
        const char *why = error != cudaSuccess ? cudaGetErrorString(error) : "no GPU found";
        if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0)
            why = "no NVIDIA driver is installed: libcuda.so.1 was not found";
        (void)cudaGetLastError();
        return ct_set_error(CT_ERR_DEVICE, "device 'cuda:%d': no usable CUDA GPU (%s); use "
                            "'cpu', or run `cuttle doctor` to see what is missing",
                            device, why);
    }
    if (device >= count)
        return ct_set_error(CT_ERR_DEVICE, "device 'cuda:%d': this machine has %d GPU%s "
                            "(cuda:0 to cuda:%d)", device, count, count == 1 ? "" : "s",
                            count - 1);
    ct_backend *backend = calloc(1, sizeof *backend);
    cuda_backend *b = calloc(1, sizeof *b);
    if (!backend || !b) {
        free(backend);
        free(b);
        return ct_set_error(CT_ERR_MEMORY, "ct_backend_new: out of host memory");
    }
    backend->iface = &cuda_backend_i;
    backend->impl = b;
    backend->impls = ct_cuda_impls;
    snprintf(backend->kernels, sizeof backend->kernels, "auto");
    backend->n_threads = 1;
#ifdef CUDA_EMU
    backend->emulated = true;
#endif
    b->device = device;
    ct_cuda_allocator_init(&b->allocator, device, NULL); /* its stream: cuda_setup */
    ct_status status = cuda_setup(b);
    if (status != CT_OK) {
        cuda_destroy(backend);
        return status;
    }
    cuda_rename(backend);
    *out = backend;
    return CT_OK;
}

ct_status ct_cuda_backend_stream(const ct_backend *backend, int *device, void **stream)
{
    if (!backend || backend->iface != &cuda_backend_i)
        return ct_set_error(CT_ERR_ARG, "ct_cuda_backend_stream: '%s' is not a CUDA backend",
                            backend ? backend->name : "(null)");
    *device = impl_of(backend)->device;
    *stream = impl_of(backend)->stream;
    return CT_OK;
}

ct_status ct_cuda_backend_poison(ct_backend *backend, bool enabled)
{
    if (!backend || backend->iface != &cuda_backend_i)
        return ct_set_error(CT_ERR_ARG, "ct_cuda_backend_poison: not a CUDA backend");
    impl_of(backend)->allocator.poison = enabled;
    return CT_OK;
}
