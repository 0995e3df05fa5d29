/*
 * The CUDA backend's native op table: each op's node attributes and tensors
 * turned into a call of its kernel in src/cuda/<family>.cu, exactly as
 * src/cpu/backend.c does for the CPU kernels.
 */
#include "core/error.h"
#include "cuda/backend_impl.h"
#include "cuda/kernels.h"
#include "ops/ops.h"

typedef ct_status (*cuda_run_fn)(cuda_backend *b, const ct_exec *exec, const ct_tensor *node);

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

/* ---- the native op table (mirrors src/cpu/backend.c) ---------------------- */

static ct_status run_conv2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_forward(&n->attr.conv, in_f32(e, n, 0), in_f32(e, n, 1),
                                  in_opt(e, n, 2), out_f32(e, n), e->workspace, b->stream);
}

static ct_status run_conv2d_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_backward_data(&n->attr.conv, in_f32(e, n, 0), in_f32(e, n, 1),
                                        out_f32(e, n), e->workspace, b->stream);
}

static ct_status run_conv2d_bwd_weight(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_backward_weight(&n->attr.conv, in_f32(e, n, 0), in_f32(e, n, 1),
                                          out_f32(e, n), e->workspace, b->stream);
}

static ct_status run_channel_sum(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n->src[0]);
    return ct_cuda_channel_sum(d.n, d.c, d.inner, in_f32(e, n, 0), out_f32(e, n), e->workspace,
                               b->stream);
}

static ct_status run_linear(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *x = n->src[0], *w = n->src[1];
    return ct_cuda_linear_forward((int)x->shape[0], (int)x->shape[1], (int)w->shape[0],
                                  in_f32(e, n, 0), in_f32(e, n, 1), in_opt(e, n, 2),
                                  out_f32(e, n), b->stream);
}

static ct_status run_linear_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *dy = n->src[0], *w = n->src[1];
    return ct_cuda_linear_backward_data((int)dy->shape[0], (int)w->shape[1], (int)w->shape[0],
                                        in_f32(e, n, 0), in_f32(e, n, 1), out_f32(e, n),
                                        b->stream);
}

static ct_status run_linear_bwd_weight(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *x = n->src[0], *dy = n->src[1];
    return ct_cuda_linear_backward_weight((int)x->shape[0], (int)x->shape[1],
                                          (int)dy->shape[1], in_f32(e, n, 0), in_f32(e, n, 1),
                                          out_f32(e, n), b->stream);
}

static ct_status run_maxpool2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_maxpool2d_forward(&n->attr.pool, in_f32(e, n, 0), out_f32(e, n), b->stream);
}

static ct_status run_maxpool2d_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_maxpool2d_backward(&n->attr.pool, in_f32(e, n, 0), in_f32(e, n, 1),
                                      out_f32(e, n), b->stream);
}

static ct_status run_avgpool2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_avgpool2d_forward(&n->attr.pool, in_f32(e, n, 0), out_f32(e, n), b->stream);
}

static ct_status run_avgpool2d_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_avgpool2d_backward(&n->attr.pool, in_f32(e, n, 0), out_f32(e, n),
                                      b->stream);
}

static ct_status run_global_avgpool(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n->src[0]);
    return ct_cuda_global_avgpool_forward(d.n, d.c, d.inner, in_f32(e, n, 0), out_f32(e, n),
                                          b->stream);
}

static ct_status run_global_avgpool_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n);
    return ct_cuda_global_avgpool_backward(d.n, d.c, d.inner, in_f32(e, n, 0), out_f32(e, n),
                                           b->stream);
}

#define UNARY(fn, kernel)                                                                 \
    static ct_status fn(cuda_backend *b, const ct_exec *e, const ct_tensor *n)            \
    {                                                                                     \
        return kernel(ct_tensor_numel(n), in_f32(e, n, 0), out_f32(e, n), b->stream);     \
    }
#define BINARY(fn, kernel)                                                                \
    static ct_status fn(cuda_backend *b, const ct_exec *e, const ct_tensor *n)            \
    {                                                                                     \
        return kernel(ct_tensor_numel(n), in_f32(e, n, 0), in_f32(e, n, 1), out_f32(e, n), \
                      b->stream);                                                         \
    }

UNARY(run_relu, ct_cuda_relu_forward)
BINARY(run_relu_bwd, ct_cuda_relu_backward)
UNARY(run_sigmoid, ct_cuda_sigmoid_forward)
BINARY(run_sigmoid_bwd, ct_cuda_sigmoid_backward)
UNARY(run_tanh, ct_cuda_tanh_forward)
BINARY(run_tanh_bwd, ct_cuda_tanh_backward)
BINARY(run_add, ct_cuda_add)

static ct_status run_bn_stats(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n->src[0]);
    int64_t *num_batches = n->n_src > 3 ? ct_exec_data(e, n->src[3]) : NULL;
    return ct_cuda_batchnorm_stats(d.n, d.c, d.inner, in_f32(e, n, 0), e->training,
                                   n->attr.bn.momentum, n->attr.bn.eps,
                                   ct_exec_data(e, n->src[1]), ct_exec_data(e, n->src[2]),
                                   num_batches, out_f32(e, n), e->workspace, b->stream);
}

static ct_status run_bn_apply(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n);
    return ct_cuda_batchnorm_apply(d.n, d.c, d.inner, in_f32(e, n, 0), in_f32(e, n, 1),
                                   in_f32(e, n, 2), in_f32(e, n, 3), out_f32(e, n), b->stream);
}

static ct_status run_bn_bwd_params(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n->src[0]);
    return ct_cuda_batchnorm_backward_params(d.n, d.c, d.inner, in_f32(e, n, 0),
                                             in_f32(e, n, 1), in_f32(e, n, 2), out_f32(e, n),
                                             e->workspace, b->stream);
}

static ct_status run_bn_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n);
    return ct_cuda_batchnorm_backward_data(d.n, d.c, d.inner, in_f32(e, n, 0), in_f32(e, n, 1),
                                           in_f32(e, n, 2), in_f32(e, n, 3), in_f32(e, n, 4),
                                           out_f32(e, n), b->stream);
}

static ct_status run_dropout(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    int64_t count = ct_tensor_numel(n);
    if (!e->training)
        return ct_cuda_copy(count, in_f32(e, n, 0), out_f32(e, n), b->stream);
    return ct_cuda_dropout(count, in_f32(e, n, 0), out_f32(e, n), n->attr.dropout.p, e->seed,
                           n->attr.dropout.stream, (uint32_t)e->step, b->stream);
}

static ct_status run_concat(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    int channels[CT_MAX_SRC];
    const float *xs[CT_MAX_SRC];
    for (int i = 0; i < n->n_src; i++) {
        channels[i] = (int)n->src[i]->shape[1];
        xs[i] = in_f32(e, n, i);
    }
    nci d = nci_of(n);
    return ct_cuda_concat(d.n, d.inner, n->n_src, channels, xs, out_f32(e, n), b->stream);
}

static ct_status run_slice_channels(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    nci d = nci_of(n->src[0]);
    return ct_cuda_slice_channels(d.n, d.inner, d.c, n->attr.slice.start, n->attr.slice.count,
                                  in_f32(e, n, 0), out_f32(e, n), b->stream);
}

static ct_status run_softmax(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_softmax_forward((int)n->shape[0], (int)n->shape[1], in_f32(e, n, 0),
                                   out_f32(e, n), b->stream);
}

static ct_status run_softmax_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_softmax_backward((int)n->shape[0], (int)n->shape[1], in_f32(e, n, 0),
                                    in_f32(e, n, 1), out_f32(e, n), b->stream);
}

/* A bad label is found on the device; synchronize reports it (check_labels). */
static ct_status run_cross_entropy(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *logits = n->src[0], *labels = n->src[1];
    b->ce_node = n;
    b->ce_labels = ct_exec_data(e, labels);
    return ct_cuda_cross_entropy_forward((int)logits->shape[0], (int)logits->shape[1],
                                         in_f32(e, n, 0), b->ce_labels, labels->dtype == CT_I64,
                                         n->attr.ce.smoothing, out_f32(e, n), b->bad_row,
                                         b->stream);
}

static ct_status run_cross_entropy_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *logits = n->src[1], *labels = n->src[2];
    return ct_cuda_cross_entropy_backward((int)logits->shape[0], (int)logits->shape[1],
                                          in_f32(e, n, 1), ct_exec_data(e, labels),
                                          labels->dtype == CT_I64, n->attr.ce.smoothing,
                                          in_f32(e, n, 0), out_f32(e, n), b->stream);
}

static ct_status run_fill(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_fill(ct_tensor_numel(n), n->attr.fill.value, out_f32(e, n), b->stream);
}

static ct_status run_sgd_update(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_sgd_args *a = &n->attr.sgd;
    float *momentum_buf = n->n_src > 2 ? ct_exec_data(e, n->src[2]) : NULL;
    return ct_cuda_sgd_update(ct_tensor_numel(n), ct_exec_data(e, n->src[0]), in_f32(e, n, 1),
                              momentum_buf, e->lr, a->momentum, a->dampening, a->weight_decay,
                              a->nesterov, e->step == 0, b->stream);
}

static ct_status run_adam_update(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_adam_args *a = &n->attr.adam;
    return ct_cuda_adam_update(ct_tensor_numel(n), ct_exec_data(e, n->src[0]), in_f32(e, n, 1),
                               ct_exec_data(e, n->src[2]), ct_exec_data(e, n->src[3]), e->lr,
                               a->beta1, a->beta2, a->eps, a->weight_decay, a->decoupled,
                               e->step + 1, b->stream);
}

static void *exec_data(const void *exec, const ct_tensor *t)
{
    return ct_exec_data(exec, t);
}

/* The op's own CUDA kernel, on the backend's stream (cuda_supports_op
 * sends a custom op without one to the CPU fallback). */
static ct_status run_custom(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_custom_run(n, exec_data, e, true, b->stream);
}

static const cuda_run_fn cuda_kernels[CT_OP_COUNT] = {
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

bool ct_cuda_native_has(ct_op op)
{
    return op < CT_OP_COUNT && cuda_kernels[op];
}

ct_status ct_cuda_run_native(cuda_backend *b, const ct_exec *exec, const ct_tensor *node)
{
    return cuda_kernels[node->op](b, exec, node);
}
