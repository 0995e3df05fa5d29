/*
 * The CUDA backend: device memory from the caching allocator, one compute
 * stream that the backend owns, and one table that maps each op to its
 * native kernel (src/cuda/<family>.cu), with cuBLAS/cuDNN as the second
 * implementation of the ops that have one (vendor.h).
 *
 * Synchronization: kernels are queued on the stream and run_node returns at
 * once; the host waits only where it needs results: ct_plan_read, the end
 * of ct_plan_run (the step's status, including a bad label found by
 * cross-entropy on the device) and ct_backend_synchronize.  Writes from
 * host memory are ordered on the same stream.
 *
 * Kernel choice per node (ct_backend_set_kernels):
 *   native: cuttle's kernels;  vendor: cuBLAS/cuDNN where built and able;
 *   auto:   the first run of each node shape runs both on the real data,
 *           times them with events (one warm-up, TUNE_REPS timed runs
 *           each) and remembers the faster by (op, shapes).  Tuning at the
 *           first run, not at plan time, measures real data in the real
 *           memory layout, and costs one synchronization per new shape.
 *           Every op tuned is a pure function of its inputs, so running
 *           it several times leaves the same output.
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
#include "ops/ops.h"

/* NVTX v3 is header-only (it finds a profiler's injection library with
 * dlopen at the first call): Nsight Systems and Nsight Compute show each
 * node's kernels under its op name; without a tool attached a range costs
 * a few nanoseconds. */
#include <nvtx3/nvToolsExt.h>

enum { TUNE_REPS = 3, KEY_DIMS = 3 * CT_MAX_DIMS + 2 };

static const char *const kernels_names[] = {"native", "vendor", "auto"};

static cuda_backend *impl_of(const ct_backend *backend)
{
    return backend->impl;
}

/* ---- vendor kernels and the auto choice --------------------------------------- */

static bool vendor_can_run(const cuda_backend *b, const ct_tensor *node)
{
    return ct_cuda_blas_supports(b->blas, node) || ct_cuda_dnn_supports(b->dnn, node);
}

/* The node's op, TF32 setting, input/output shapes and conv/pool attributes. */
static void node_key(const cuda_backend *b, const ct_tensor *node, int64_t *key)
{
    memset(key, 0, sizeof(((tuned *)0)->key));
    key[0] = node->op;
    key[1] = b->tf32;
    for (int s = 0; s < 3; s++) {
        const ct_tensor *t = s == 0 ? node : s <= node->n_src ? node->src[s - 1] : NULL;
        for (int d = 0; t && d < t->ndim; d++)
            key[2 + s * CT_MAX_DIMS + d] = t->shape[d];
    }
    key[KEY_DIMS] = node->n_src;
    const ct_pool2d_shape *p = &node->attr.pool;
    const ct_conv2d_shape *c = &node->attr.conv;
    int64_t *extra = key + KEY_DIMS + 1;
    if (node->op == CT_OP_MAXPOOL2D || node->op == CT_OP_AVGPOOL2D) {
        int64_t fields[] = {p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h,
                            p->pad_w, p->exclude_pad};
        memcpy(extra, fields, sizeof fields);
    } else if (node->op == CT_OP_CONV2D || node->op == CT_OP_CONV2D_BWD_DATA ||
               node->op == CT_OP_CONV2D_BWD_WEIGHT) {
        int64_t fields[] = {c->kernel_h, c->kernel_w, c->stride_h,   c->stride_w, c->pad_h,
                            c->pad_w,    c->dilation_h, c->dilation_w, c->groups};
        memcpy(extra, fields, sizeof fields);
    }
}

/* The record of the node's shape, made (zeroed) if new; NULL without memory. */
static tuned *tuned_of(cuda_backend *b, const ct_tensor *node)
{
    int64_t key[CT_CUDA_KEY_INTS];
    node_key(b, node, key);
    for (int i = 0; i < b->n_choices; i++)
        if (memcmp(b->choices[i].key, key, sizeof key) == 0)
            return &b->choices[i];
    if (b->n_choices == b->choices_capacity) {
        int capacity = b->choices_capacity ? 2 * b->choices_capacity : 32;
        tuned *grown = realloc(b->choices, sizeof *grown * (size_t)capacity);
        if (!grown) {
            ct_set_error(CT_ERR_MEMORY, "out of host memory for kernel choices");
            return NULL;
        }
        b->choices = grown;
        b->choices_capacity = capacity;
    }
    tuned *entry = &b->choices[b->n_choices++];
    memset(entry, 0, sizeof *entry);
    memcpy(entry->key, key, sizeof key);
    return entry;
}

/* The vendor library for the node; when it fails (no algorithm for the
 * shape, or an error it returns), the native kernel runs instead, and the
 * shape keeps the native kernel from then on: a failing call is made once,
 * not every step.  An error the device reports later (a fault) is not
 * caught here: it is sticky and fails the step. */
static ct_status run_vendor(cuda_backend *b, const ct_exec *e, const ct_tensor *node)
{
    ct_status status = ct_cuda_blas_supports(b->blas, node) ? ct_cuda_blas_run(b->blas, e, node)
                                                             : ct_cuda_dnn_run(b->dnn, e, node);
    if (status == CT_OK)
        return CT_OK;
    tuned *entry = tuned_of(b, node);
    if (!entry)
        return CT_ERR_MEMORY;
    entry->vendor_failed = true;
    b->vendor_fallbacks++;
    if (status != CT_ERR_UNSUPPORTED) /* "unsupported" is a shape limit, not news */
        fprintf(stderr, "cuttle: cuda:%d: %s; this %s shape runs cuttle's own kernel from now on\n",
                b->device, ct_last_error(), ct_op_name(node->op));
    return ct_cuda_run_native(b, e, node);
}

static ct_status run_variant(cuda_backend *b, const ct_exec *e, const ct_tensor *node,
                             bool vendor)
{
    return vendor ? run_vendor(b, e, node) : ct_cuda_run_native(b, e, node);
}

/* Milliseconds for TUNE_REPS runs of one variant, after a warm-up run. */
static ct_status time_variant(cuda_backend *b, const ct_exec *e, const ct_tensor *node,
                              bool vendor, float *ms)
{
    CT_TRY(run_variant(b, e, node, vendor));
    CT_CUDA_CALL(cudaEventRecord(b->tune_start, b->stream));
    for (int rep = 0; rep < TUNE_REPS; rep++)
        CT_TRY(run_variant(b, e, node, vendor));
    CT_CUDA_CALL(cudaEventRecord(b->tune_stop, b->stream));
    CT_CUDA_CALL(cudaEventSynchronize(b->tune_stop));
    CT_CUDA_CALL(cudaEventElapsedTime(ms, b->tune_start, b->tune_stop));
    return CT_OK;
}

/* Whether the node runs the vendor library: never where it failed; in
 * vendor mode otherwise always; in auto mode the faster of the two, timed
 * at the shape's first run. */
static ct_status choose(cuda_backend *b, const ct_exec *e, const ct_tensor *node, bool *vendor)
{
    *vendor = false;
    if (b->kernels == KERNELS_NATIVE || !vendor_can_run(b, node))
        return CT_OK;
    tuned *entry = tuned_of(b, node);
    if (!entry)
        return CT_ERR_MEMORY;
    if (!entry->vendor_failed && b->kernels == KERNELS_AUTO && !entry->timed) {
        float native_ms = 0, vendor_ms = 0;
        CT_TRY(time_variant(b, e, node, false, &native_ms));
        CT_TRY(time_variant(b, e, node, true, &vendor_ms));
        entry = tuned_of(b, node); /* the vendor run may have grown the table */
        entry->timed = true;
        entry->vendor = vendor_ms < native_ms;
    }
    *vendor = !entry->vendor_failed && (b->kernels == KERNELS_VENDOR || entry->vendor);
    return CT_OK;
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

static bool cuda_supports_op(const ct_backend *backend, const ct_tensor *node)
{
    if (impl_of((ct_backend *)backend)->refused_ops >> node->op & 1)
        return false;
    if (node->op == CT_OP_CUSTOM || node->op == CT_OP_CUSTOM_BWD)
        return ct_custom_has_cuda(node);
    return node->op == CT_OP_VIEW || ct_cuda_native_has(node->op);
}

/* Enough for either implementation, so the choice can change after planning. */
static size_t cuda_workspace_bytes(const ct_backend *backend, const ct_tensor *node)
{
    cuda_backend *b = impl_of(backend);
    size_t native = 0, vendor = 0;
    if (node->op == CT_OP_CONV2D_BWD_WEIGHT)
        native = ct_cuda_conv2d_workspace(&node->attr.conv);
    if (node->op == CT_OP_BN_STATS || node->op == CT_OP_BN_BWD_PARAMS ||
        node->op == CT_OP_CHANNEL_SUM) {
        const ct_tensor *x = node->src[0]; /* [n, c, inner...]: x, or dy of the channel sum */
        int n = (int)x->shape[0], c = x->ndim > 1 ? (int)x->shape[1] : 1, inner = 1;
        for (int d = 2; d < x->ndim; d++)
            inner *= (int)x->shape[d];
        native = node->op == CT_OP_CHANNEL_SUM ? ct_cuda_channel_sum_workspace(n, c, inner)
                                               : ct_cuda_batchnorm_workspace(n, c, inner);
    }
    if (ct_cuda_dnn_supports(b->dnn, node) && ct_cuda_dnn_workspace(b->dnn, node, &vendor))
        vendor = 0; /* no algorithm fits: the node will run natively */
    return native > vendor ? native : vendor;
}

static void cuda_begin_step(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    b->ce_node = NULL;
    b->device_current = false;
}

static ct_status cuda_run_node(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
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
    bool vendor = false;
    CT_TRY(choose(b, exec, node, &vendor));
    nvtxRangePushA(ct_op_name(node->op));
    ct_status status = run_variant(b, exec, node, vendor);
    nvtxRangePop();
    return status;
}

/* ---- the profiler's device clock (graph/backend.h): a CUDA event per mark */

typedef struct cuda_timer {
    int n_marks;
    cudaEvent_t events[];
} cuda_timer;

static void cuda_timer_free(ct_backend *backend, void *timer)
{
    cuda_timer *t = timer;
    if (!t)
        return;
    if (cuda_set_device(impl_of(backend)) == CT_OK)
        for (int i = 0; i < t->n_marks; i++)
            cudaEventDestroy(t->events[i]);
    free(t);
}

static ct_status cuda_timer_new(ct_backend *backend, int n_marks, void **timer)
{
    CT_TRY(cuda_set_device(impl_of(backend)));
    cuda_timer *t = calloc(1, sizeof *t + sizeof(cudaEvent_t) * (size_t)n_marks);
    if (!t)
        return ct_set_error(CT_ERR_MEMORY, "profiler: out of host memory for %d CUDA events",
                            n_marks);
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
        if (b->tune_start)
            cudaEventDestroy(b->tune_start);
        if (b->tune_stop)
            cudaEventDestroy(b->tune_stop);
        if (b->stream)
            cudaStreamDestroy(b->stream);
        free(b->choices);
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

static void update_name(ct_backend *backend)
{
    cuda_backend *b = impl_of(backend);
    snprintf(backend->name, sizeof backend->name, "cuda:%d (%.24s, %s kernels%s)", b->device,
             b->gpu_name, kernels_names[b->kernels], b->tf32 ? ", tf32" : "");
}

static ct_status cuda_set_kernels(ct_backend *backend, const char *kernels)
{
    cuda_backend *b = impl_of(backend);
    for (int mode = KERNELS_NATIVE; mode <= KERNELS_AUTO; mode++) {
        if (strcmp(kernels, kernels_names[mode]) == 0) {
            if (mode == KERNELS_VENDOR && !b->blas && !b->dnn)
                return ct_set_error(CT_ERR_UNSUPPORTED,
                                    "kernels 'vendor' on cuda:%d: neither vendor library is "
                                    "here: %s; %s",
                                    b->device, ct_cublas_why(), ct_cudnn_why());
            b->kernels = (kernels_mode)mode;
            update_name(backend);
            return CT_OK;
        }
    }
    return ct_set_error(CT_ERR_ARG, "kernels '%s': use native, vendor or auto", kernels);
}

static ct_status cuda_set_tf32(ct_backend *backend, bool enabled)
{
    cuda_backend *b = impl_of(backend);
    b->tf32 = enabled;
    ct_cuda_dnn_set_tf32(b->dnn, enabled);
    update_name(backend);
    return ct_cuda_blas_set_tf32(b->blas, enabled);
}

static const ct_backend_i cuda_backend_i = {
    .alloc = cuda_alloc,
    .release = cuda_release,
    .write = cuda_write,
    .read = cuda_read,
    .supports_op = cuda_supports_op,
    .workspace_bytes = cuda_workspace_bytes,
    .begin_step = cuda_begin_step,
    .run_node = cuda_run_node,
    .synchronize = cuda_synchronize,
    .destroy = cuda_destroy,
    .timer_new = cuda_timer_new,
    .timer_mark = cuda_timer_mark,
    .timer_elapsed_ns = cuda_timer_elapsed_ns,
    .timer_free = cuda_timer_free,
    .memory_stats = cuda_memory_stats,
    .release_cache = cuda_release_cache,
    .set_memory_limit = cuda_set_memory_limit,
    .set_kernels = cuda_set_kernels,
    .set_tf32 = cuda_set_tf32,
};

/* Streams, events, the label word and the vendor handles of a new backend. */
static ct_status cuda_setup(cuda_backend *b)
{
    struct cudaDeviceProp props;
    CT_CUDA_CALL(cudaGetDeviceProperties(&props, b->device));
    snprintf(b->gpu_name, sizeof b->gpu_name, "%s", props.name);
    ct_cuda_set_device_info(b->device, props.multiProcessorCount);
    CT_CUDA_CALL(cudaSetDevice(b->device));
    CT_CUDA_CALL(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    b->allocator.stream = b->stream;
    CT_CUDA_CALL(cudaEventCreate(&b->tune_start));
    CT_CUDA_CALL(cudaEventCreate(&b->tune_stop));
    CT_CUDA_CALL(cudaMalloc((void **)&b->bad_row, sizeof *b->bad_row));
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
    backend->n_threads = 1;
#ifdef CUDA_EMU
    backend->emulated = true;
#endif
    b->device = device;
    b->kernels = KERNELS_AUTO;
    ct_cuda_allocator_init(&b->allocator, device, NULL); /* its stream: cuda_setup */
    ct_status status = cuda_setup(b);
    if (status != CT_OK) {
        cuda_destroy(backend);
        return status;
    }
    update_name(backend);
    *out = backend;
    return CT_OK;
}

ct_status ct_cuda_backend_poison(ct_backend *backend, bool enabled)
{
    if (!backend || backend->iface != &cuda_backend_i)
        return ct_set_error(CT_ERR_ARG, "ct_cuda_backend_poison: not a CUDA backend");
    impl_of(backend)->allocator.poison = enabled;
    return CT_OK;
}

ct_status ct_cuda_backend_refuse(ct_backend *backend, ct_op op)
{
    if (!backend || backend->iface != &cuda_backend_i || op >= 64)
        return ct_set_error(CT_ERR_ARG, "ct_cuda_backend_refuse: not a CUDA backend or op");
    impl_of(backend)->refused_ops |= (uint64_t)1 << op;
    return CT_OK;
}

int ct_cuda_vendor_fallbacks(const ct_backend *backend)
{
    if (!backend || backend->iface != &cuda_backend_i)
        return 0;
    return impl_of((ct_backend *)backend)->vendor_fallbacks;
}
