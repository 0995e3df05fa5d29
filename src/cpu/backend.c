/*
 * The CPU backend: host memory, and one table that maps each op to its
 * kernel in src/cpu/<family>.c.  Kernels run one after another; each one is
 * parallel inside (OpenMP) with the backend's thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "core/error.h"
#include "cpu/backend.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"
#include "graph/backend.h"
#include "ops/ops.h"

#define CT_CPU_ALIGNMENT 64

typedef ct_status (*cpu_run_fn)(const ct_exec *exec, const ct_tensor *node);

static const float *in_f32(const ct_exec *exec, const ct_tensor *node, int i)
{
    return ct_exec_data(exec, node->src[i]);
}

static const float *in_opt(const ct_exec *exec, const ct_tensor *node, int i)
{
    return node->n_src > i ? in_f32(exec, node, i) : NULL;
}

static float *out_f32(const ct_exec *exec, const ct_tensor *node)
{
    return ct_exec_data(exec, node);
}

/* A tensor seen as [n, c, inner]: batch, channels and the rest. */
typedef struct nci {
    int n, c, inner;
} nci;

static nci nci_of(const ct_tensor *t)
{
    nci dims = {(int)t->shape[0], t->ndim > 1 ? (int)t->shape[1] : 1, 1};
    for (int i = 2; i < t->ndim; i++)
        dims.inner *= (int)t->shape[i];
    return dims;
}

static bool fused_relu(const ct_exec *exec, const ct_tensor *node)
{
    return exec->epilogue && exec->epilogue[node->id] == CT_EPILOGUE_RELU;
}

static ct_status run_conv2d(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *pool = exec->pool_into ? exec->pool_into[node->id] : NULL;
    if (pool) {
        ct_cpu_conv2d_forward_relu_maxpool(&node->attr.conv, in_f32(exec, node, 0),
                                           in_f32(exec, node, 1), in_opt(exec, node, 2),
                                           out_f32(exec, node), out_f32(exec, pool),
                                           exec->workspace);
        return CT_OK;
    }
    (fused_relu(exec, node) ? ct_cpu_conv2d_forward_relu : ct_cpu_conv2d_forward)(
        &node->attr.conv, in_f32(exec, node, 0), in_f32(exec, node, 1), in_opt(exec, node, 2),
        out_f32(exec, node), exec->workspace);
    return CT_OK;
}

static ct_status run_conv2d_bwd_data(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_conv2d_backward_data(&node->attr.conv, in_f32(exec, node, 0), in_f32(exec, node, 1),
                                out_f32(exec, node), exec->workspace);
    return CT_OK;
}

static ct_status run_conv2d_bwd_weight(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_conv2d_backward_weight(&node->attr.conv, in_f32(exec, node, 0),
                                  in_f32(exec, node, 1), out_f32(exec, node), exec->workspace);
    return CT_OK;
}

static ct_status run_channel_sum(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node->src[0]);
    ct_cpu_channel_sum(dims.n, dims.c, dims.inner, in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_linear(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *x = node->src[0], *w = node->src[1];
    (fused_relu(exec, node) ? ct_cpu_linear_forward_relu : ct_cpu_linear_forward)(
        (int)x->shape[0], (int)x->shape[1], (int)w->shape[0], in_f32(exec, node, 0),
        in_f32(exec, node, 1), in_opt(exec, node, 2), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_linear_bwd_data(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *dy = node->src[0], *w = node->src[1];
    ct_cpu_linear_backward_data((int)dy->shape[0], (int)w->shape[1], (int)w->shape[0],
                                in_f32(exec, node, 0), in_f32(exec, node, 1),
                                out_f32(exec, node));
    return CT_OK;
}

static ct_status run_linear_bwd_weight(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *x = node->src[0], *dy = node->src[1];
    ct_cpu_linear_backward_weight((int)x->shape[0], (int)x->shape[1], (int)dy->shape[1],
                                  in_f32(exec, node, 0), in_f32(exec, node, 1),
                                  out_f32(exec, node));
    return CT_OK;
}

static ct_status run_maxpool2d(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_maxpool2d_forward(&node->attr.pool, in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_maxpool2d_bwd(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_maxpool2d_backward(&node->attr.pool, in_f32(exec, node, 0), in_f32(exec, node, 1),
                              out_f32(exec, node));
    return CT_OK;
}

static ct_status run_avgpool2d(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_avgpool2d_forward(&node->attr.pool, in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_avgpool2d_bwd(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_avgpool2d_backward(&node->attr.pool, in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_global_avgpool(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node->src[0]);
    ct_cpu_global_avgpool_forward(dims.n, dims.c, dims.inner, in_f32(exec, node, 0),
                                  out_f32(exec, node));
    return CT_OK;
}

static ct_status run_global_avgpool_bwd(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node);
    ct_cpu_global_avgpool_backward(dims.n, dims.c, dims.inner, in_f32(exec, node, 0),
                                   out_f32(exec, node));
    return CT_OK;
}

typedef void (*unary_fn)(int64_t count, const float *x, float *y);
typedef void (*binary_fn)(int64_t count, const float *a, const float *b, float *y);

static ct_status run_unary(const ct_exec *exec, const ct_tensor *node, unary_fn kernel)
{
    kernel(ct_tensor_numel(node), in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_binary(const ct_exec *exec, const ct_tensor *node, binary_fn kernel)
{
    kernel(ct_tensor_numel(node), in_f32(exec, node, 0), in_f32(exec, node, 1),
           out_f32(exec, node));
    return CT_OK;
}

static ct_status run_relu(const ct_exec *e, const ct_tensor *n)
{
    return run_unary(e, n, ct_cpu_relu_forward);
}

static ct_status run_relu_bwd(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_relu_backward);
}

static ct_status run_sigmoid(const ct_exec *e, const ct_tensor *n)
{
    return run_unary(e, n, ct_cpu_sigmoid_forward);
}

static ct_status run_sigmoid_bwd(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_sigmoid_backward);
}

static ct_status run_tanh(const ct_exec *e, const ct_tensor *n)
{
    return run_unary(e, n, ct_cpu_tanh_forward);
}

static ct_status run_tanh_bwd(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_tanh_backward);
}

static ct_status run_add(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_add);
}

static ct_status run_bn_stats(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node->src[0]);
    ct_cpu_batchnorm_stats(dims.n, dims.c, dims.inner, in_f32(exec, node, 0), exec->training,
                           node->attr.bn.momentum, node->attr.bn.eps,
                           ct_exec_data(exec, node->src[1]), ct_exec_data(exec, node->src[2]),
                           out_f32(exec, node));
    if (exec->training && node->n_src > 3)
        (*(int64_t *)ct_exec_data(exec, node->src[3]))++;
    return CT_OK;
}

static ct_status run_bn_apply(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node);
    ct_cpu_batchnorm_apply(dims.n, dims.c, dims.inner, in_f32(exec, node, 0),
                           in_f32(exec, node, 1), in_f32(exec, node, 2), in_f32(exec, node, 3),
                           out_f32(exec, node));
    return CT_OK;
}

static ct_status run_bn_bwd_params(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node->src[0]);
    ct_cpu_batchnorm_backward_params(dims.n, dims.c, dims.inner, in_f32(exec, node, 0),
                                     in_f32(exec, node, 1), in_f32(exec, node, 2),
                                     out_f32(exec, node));
    return CT_OK;
}

static ct_status run_bn_bwd_data(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node);
    ct_cpu_batchnorm_backward_data(dims.n, dims.c, dims.inner, in_f32(exec, node, 0),
                                   in_f32(exec, node, 1), in_f32(exec, node, 2),
                                   in_f32(exec, node, 3), in_f32(exec, node, 4),
                                   out_f32(exec, node));
    return CT_OK;
}

static ct_status run_dropout(const ct_exec *exec, const ct_tensor *node)
{
    int64_t count = ct_tensor_numel(node);
    if (!exec->training) {
        ct_cpu_copy(count, in_f32(exec, node, 0), out_f32(exec, node));
        return CT_OK;
    }
    ct_cpu_dropout(count, in_f32(exec, node, 0), out_f32(exec, node), node->attr.dropout.p,
                   exec->seed, node->attr.dropout.stream, (uint32_t)exec->step);
    return CT_OK;
}

static ct_status run_concat(const ct_exec *exec, const ct_tensor *node)
{
    int channels[CT_MAX_SRC];
    const float *xs[CT_MAX_SRC];
    for (int i = 0; i < node->n_src; i++) {
        channels[i] = (int)node->src[i]->shape[1];
        xs[i] = in_f32(exec, node, i);
    }
    nci dims = nci_of(node);
    ct_cpu_concat(dims.n, dims.inner, node->n_src, channels, xs, out_f32(exec, node));
    return CT_OK;
}

static ct_status run_slice_channels(const ct_exec *exec, const ct_tensor *node)
{
    nci dims = nci_of(node->src[0]);
    ct_cpu_slice_channels(dims.n, dims.inner, dims.c, node->attr.slice.start,
                          node->attr.slice.count, in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_softmax(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_softmax_forward((int)node->shape[0], (int)node->shape[1], in_f32(exec, node, 0),
                           out_f32(exec, node));
    return CT_OK;
}

static ct_status run_softmax_bwd(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_softmax_backward((int)node->shape[0], (int)node->shape[1], in_f32(exec, node, 0),
                            in_f32(exec, node, 1), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_cross_entropy(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *logits = node->src[0], *labels = node->src[1];
    int n = (int)logits->shape[0], c = (int)logits->shape[1];
    const void *label_data = ct_exec_data(exec, labels);
    bool is_i64 = labels->dtype == CT_I64;
    int bad = ct_cpu_cross_entropy_forward(n, c, in_f32(exec, node, 0), label_data, is_i64,
                                           node->attr.ce.smoothing, out_f32(exec, node));
    if (bad < 0)
        return CT_OK;
    long long value = is_i64 ? (long long)((const int64_t *)label_data)[bad]
                             : (long long)((const int32_t *)label_data)[bad];
    return ct_set_error(CT_ERR_ARG,
                        "cross_entropy: label %lld in row %d of '%s' is not a class index in "
                        "[0, %d)",
                        value, bad, ct_tensor_name(labels), c);
}

static ct_status run_cross_entropy_bwd(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *logits = node->src[1], *labels = node->src[2];
    ct_cpu_cross_entropy_backward((int)logits->shape[0], (int)logits->shape[1],
                                  in_f32(exec, node, 1), ct_exec_data(exec, labels),
                                  labels->dtype == CT_I64, node->attr.ce.smoothing,
                                  in_f32(exec, node, 0), out_f32(exec, node));
    return CT_OK;
}

static ct_status run_fill(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_fill(ct_tensor_numel(node), node->attr.fill.value, out_f32(exec, node));
    return CT_OK;
}

static ct_status run_sgd_update(const ct_exec *exec, const ct_tensor *node)
{
    const ct_sgd_args *a = &node->attr.sgd;
    float *momentum_buf = node->n_src > 2 ? ct_exec_data(exec, node->src[2]) : NULL;
    ct_cpu_sgd_update(ct_tensor_numel(node), ct_exec_data(exec, node->src[0]),
                      in_f32(exec, node, 1), momentum_buf, exec->lr, a->momentum, a->dampening,
                      a->weight_decay, a->nesterov, exec->step == 0);
    return CT_OK;
}

static ct_status run_adam_update(const ct_exec *exec, const ct_tensor *node)
{
    const ct_adam_args *a = &node->attr.adam;
    ct_cpu_adam_update(ct_tensor_numel(node), ct_exec_data(exec, node->src[0]),
                       in_f32(exec, node, 1), ct_exec_data(exec, node->src[2]),
                       ct_exec_data(exec, node->src[3]), exec->lr, a->beta1, a->beta2, a->eps,
                       a->weight_decay, a->decoupled, exec->step + 1);
    return CT_OK;
}

static void *exec_data(const void *exec, const ct_tensor *t)
{
    return ct_exec_data(exec, t);
}

static ct_status run_custom(const ct_exec *exec, const ct_tensor *node)
{
    return ct_custom_run(node, exec_data, exec, false, NULL);
}

static const cpu_run_fn cpu_kernels[CT_OP_COUNT] = {
    [CT_OP_CONV2D] = run_conv2d,
    [CT_OP_CONV2D_BWD_DATA] = run_conv2d_bwd_data,
    [CT_OP_CONV2D_BWD_WEIGHT] = run_conv2d_bwd_weight,
    [CT_OP_CHANNEL_SUM] = run_channel_sum,
    [CT_OP_LINEAR] = run_linear,
    [CT_OP_LINEAR_BWD_DATA] = run_linear_bwd_data,
    [CT_OP_LINEAR_BWD_WEIGHT] = run_linear_bwd_weight,
    [CT_OP_MAXPOOL2D] = run_maxpool2d,
    [CT_OP_MAXPOOL2D_BWD] = run_maxpool2d_bwd,
    [CT_OP_AVGPOOL2D] = run_avgpool2d,
    [CT_OP_AVGPOOL2D_BWD] = run_avgpool2d_bwd,
    [CT_OP_GLOBAL_AVGPOOL] = run_global_avgpool,
    [CT_OP_GLOBAL_AVGPOOL_BWD] = run_global_avgpool_bwd,
    [CT_OP_RELU] = run_relu,
    [CT_OP_RELU_BWD] = run_relu_bwd,
    [CT_OP_SIGMOID] = run_sigmoid,
    [CT_OP_SIGMOID_BWD] = run_sigmoid_bwd,
    [CT_OP_TANH] = run_tanh,
    [CT_OP_TANH_BWD] = run_tanh_bwd,
    [CT_OP_BN_STATS] = run_bn_stats,
    [CT_OP_BN_APPLY] = run_bn_apply,
    [CT_OP_BN_BWD_PARAMS] = run_bn_bwd_params,
    [CT_OP_BN_BWD_DATA] = run_bn_bwd_data,
    [CT_OP_DROPOUT] = run_dropout,
    [CT_OP_ADD] = run_add,
    [CT_OP_CONCAT] = run_concat,
    [CT_OP_SLICE_CHANNELS] = run_slice_channels,
    [CT_OP_SOFTMAX] = run_softmax,
    [CT_OP_SOFTMAX_BWD] = run_softmax_bwd,
    [CT_OP_CROSS_ENTROPY] = run_cross_entropy,
    [CT_OP_CROSS_ENTROPY_BWD] = run_cross_entropy_bwd,
    [CT_OP_FILL] = run_fill,
    [CT_OP_SGD_UPDATE] = run_sgd_update,
    [CT_OP_ADAM_UPDATE] = run_adam_update,
    [CT_OP_CUSTOM] = run_custom,
    [CT_OP_CUSTOM_BWD] = run_custom,
};

static ct_status cpu_alloc(ct_backend *backend, size_t bytes, void **out)
{
    (void)backend;
    size_t rounded = (bytes + CT_CPU_ALIGNMENT - 1) / CT_CPU_ALIGNMENT * CT_CPU_ALIGNMENT;
    *out = aligned_alloc(CT_CPU_ALIGNMENT, rounded);
    if (!*out)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory allocating %zu bytes", bytes);
    return CT_OK;
}

static void cpu_release(ct_backend *backend, void *ptr)
{
    (void)backend;
    free(ptr);
}

static ct_status cpu_copy(ct_backend *backend, void *dst, const void *src, size_t bytes)
{
    (void)backend;
    memcpy(dst, src, bytes);
    return CT_OK;
}

static bool cpu_supports_op(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return node->op == CT_OP_VIEW || (node->op < CT_OP_COUNT && cpu_kernels[node->op]);
}

/* Both conv2d paths and linear apply a relu as they store (ct_exec.epilogue). */
static bool cpu_fuses_relu(const ct_backend *backend, const ct_tensor *producer)
{
    (void)backend;
    return producer->op == CT_OP_CONV2D || producer->op == CT_OP_LINEAR;
}

/* ct_cpu_conv2d_forward_relu_maxpool: the unpadded 2x2/2 pool, both paths. */
static bool cpu_fuses_relu_maxpool(const ct_backend *backend, const ct_tensor *conv,
                                   const ct_tensor *pool)
{
    (void)backend;
    const ct_pool2d_shape *p = &pool->attr.pool;
    return conv->op == CT_OP_CONV2D && p->kernel_h == 2 && p->kernel_w == 2 &&
           p->stride_h == 2 && p->stride_w == 2 && p->pad_h == 0 && p->pad_w == 0 &&
           p->out_h == p->in_h / 2 && p->out_w == p->in_w / 2;
}

static size_t cpu_workspace_bytes(const ct_backend *backend, const ct_tensor *node)
{
    switch (node->op) {
    case CT_OP_CONV2D:
    case CT_OP_CONV2D_BWD_DATA:
    case CT_OP_CONV2D_BWD_WEIGHT:
        return ct_cpu_conv2d_workspace(&node->attr.conv, backend->n_threads);
    default:
        return 0;
    }
}

static void cpu_begin_step(ct_backend *backend)
{
    ct_cpu_set_threads(backend->n_threads);
#ifdef CT_HAVE_OPENBLAS
    openblas_set_num_threads(backend->n_threads);
#endif
    (void)backend;
}

static ct_status cpu_run_node(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    (void)backend;
    return cpu_kernels[node->op](exec, node);
}

static ct_status cpu_synchronize(ct_backend *backend)
{
    (void)backend;
    return CT_OK;
}

static void cpu_destroy(ct_backend *backend)
{
    free(backend);
}

static const ct_backend_i cpu_backend_i = {
    .alloc = cpu_alloc,
    .release = cpu_release,
    .write = cpu_copy,
    .read = cpu_copy,
    .supports_op = cpu_supports_op,
    .fuses_relu = cpu_fuses_relu,
    .fuses_relu_maxpool = cpu_fuses_relu_maxpool,
    .workspace_bytes = cpu_workspace_bytes,
    .begin_step = cpu_begin_step,
    .run_node = cpu_run_node,
    .synchronize = cpu_synchronize,
    .destroy = cpu_destroy,
};


ct_status ct_cpu_backend_new(int n_threads, ct_backend **out)
{
    ct_backend *backend = calloc(1, sizeof *backend);
    if (!backend)
        return ct_set_error(CT_ERR_MEMORY, "ct_backend_new: out of host memory");
    backend->iface = &cpu_backend_i;
    backend->n_threads = n_threads > 0 ? n_threads : ct_cpu_n_procs();
#ifndef _OPENMP
    backend->n_threads = 1; /* a build without OpenMP runs one thread, and says so */
#endif
    snprintf(backend->name, sizeof backend->name, "cpu (%d thread%s, %s gemm)",
             backend->n_threads, backend->n_threads == 1 ? "" : "s", ct_cpu_gemm_name());
    *out = backend;
    return CT_OK;
}
