/*
 * The CUDA backend's op table (graph/impl.h): each op's node attributes and
 * tensors turned into a call of its kernel in src/cuda/<family>.cu, as
 * src/cpu/table.c does for the CPU kernels, and beside the native kernels
 * the vendor libraries' calls (cuDNN for convolution and pooling forward,
 * cuBLAS for linear: blas.c, dnn.c).  The native kernels come first: they
 * are the choice of kernels "native", the vendor calls of "vendor", and
 * "auto" times them all.  The forward convolution has two native kernels:
 * a direct one for few input channels, implicit GEMM for every shape.
 * Convolution and linear of 16-bit nodes run on tensor cores (table_tc.c),
 * listed first: the only implementations that take those nodes.  The
 * vendor calls are in table_vendor.c, the optimizers' in table_optim.c.
 */
#include <string.h>

#include "core/error.h"
#include "cuda/backend_impl.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "graph/impl.h"
#include "graph/node_args.h"
#include "ops/ops.h"

/* ---- the native kernels ---------------------------------------------------- */

/* A relu fused into the node (graph/fuse.c): its kernel stores max(y, 0). */
static bool fused_relu(const ct_exec *e, const ct_tensor *n)
{
    return e->epilogue[n->id] == CT_EPILOGUE_RELU;
}

/* A relu_bwd fused into this node: a max pool's backward, or a backward
 * data (graph/fuse.c). */
static bool fused_relu_bwd(const ct_exec *e, const ct_tensor *n)
{
    return e->epilogue[n->id] == CT_EPILOGUE_RELU_BWD;
}

/* The relu output that a relu_bwd fused into a backward data masks its
 * result with, or NULL. */
static const float *relu_mask(const ct_exec *e, const ct_tensor *n)
{
    return (const float *)ct_exec_relu_mask(e, n);
}

static ct_status run_conv2d_direct(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_forward_direct(&n->attr.conv, ct_in(e, n, 0), ct_in(e, n, 1),
                                         ct_in_opt(e, n, 2), fused_relu(e, n), ct_out(e, n),
                                         b->stream);
}

static ct_status run_conv2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_forward(&n->attr.conv, ct_in(e, n, 0), ct_in(e, n, 1),
                                  ct_in_opt(e, n, 2), fused_relu(e, n), ct_out(e, n),
                                  e->workspace, b->stream);
}

static ct_status run_conv2d_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_backward_data(&n->attr.conv, ct_in(e, n, 0), ct_in(e, n, 1),
                                        relu_mask(e, n), ct_out(e, n), e->workspace, b->stream);
}

static ct_status run_conv2d_bwd_weight(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_backward_weight(&n->attr.conv, ct_in(e, n, 0), ct_in(e, n, 1),
                                          ct_out(e, n), ct_exec_bias_grad(e, n), e->workspace,
                                          b->stream);
}

static ct_status run_channel_sum(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n->src[0]);
    return ct_cuda_channel_sum(n->src[0]->dtype, d.n, d.c, d.inner, ct_in(e, n, 0),
                               ct_out(e, n), e->workspace, b->stream);
}

static ct_status run_linear(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *x = n->src[0], *w = n->src[1];
    return ct_cuda_linear_forward((int)x->shape[0], (int)x->shape[1], (int)w->shape[0],
                                  ct_in(e, n, 0), ct_in(e, n, 1), ct_in_opt(e, n, 2),
                                  fused_relu(e, n), ct_out(e, n), e->workspace, b->stream);
}

static ct_status run_linear_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *dy = n->src[0], *w = n->src[1];
    return ct_cuda_linear_backward_data((int)dy->shape[0], (int)w->shape[1], (int)w->shape[0],
                                        ct_in(e, n, 0), ct_in(e, n, 1), relu_mask(e, n),
                                        ct_out(e, n), e->workspace, b->stream);
}

static ct_status run_linear_bwd_weight(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *x = n->src[0], *dy = n->src[1];
    return ct_cuda_linear_backward_weight((int)x->shape[0], (int)x->shape[1],
                                          (int)dy->shape[1], ct_in(e, n, 0), ct_in(e, n, 1),
                                          ct_out(e, n), ct_exec_bias_grad(e, n), e->workspace,
                                          b->stream);
}

/* A linear layer's backward data with its weight gradient (the next node:
 * the same dy, a weight of the same shape) as one launch, both f32 on the
 * native kernels (ct_cuda_linear_backward_pair; graph/impl.h's run_pair). */
static const ct_impl linear_bwd_weight;

static bool linear_pairs_with(const ct_tensor *node, const ct_tensor *partner,
                              const ct_impl *partner_impl)
{
    const ct_tensor *w = node->src[1];
    if (partner->op != CT_OP_LINEAR_BWD_WEIGHT || partner->src[1] != node->src[0] ||
        node->dtype != CT_F32 || partner->dtype != CT_F32 || partner->ndim != 2 ||
        partner->shape[0] != w->shape[0] || partner->shape[1] != w->shape[1])
        return false;
    return !partner_impl || partner_impl == &linear_bwd_weight;
}

/* A pair's device current (as cuda_run_node makes it for a node) and the
 * partner's part of the workspace (ct_impl_pair_offset). */
static ct_status pair_begin(ct_backend *backend, const ct_exec *e, const ct_tensor *data,
                            void **partner_workspace)
{
    cuda_backend *b = backend->impl;
    CT_CUDA_CALL(cudaSetDevice(b->device));
    *partner_workspace =
        e->workspace ? (char *)e->workspace + ct_impl_pair_offset(backend, data) : NULL;
    return CT_OK;
}

static ct_status linear_pair_run(ct_backend *backend, const ct_exec *e, const ct_tensor *data,
                                 const ct_tensor *weight)
{
    cuda_backend *b = backend->impl;
    const ct_tensor *dy = data->src[0], *w = data->src[1];
    void *partner_workspace = NULL;
    CT_TRY(pair_begin(backend, e, data, &partner_workspace));
    return ct_cuda_linear_backward_pair(
        (int)dy->shape[0], (int)w->shape[1], (int)w->shape[0], ct_in(e, data, 0),
        ct_in(e, data, 1), relu_mask(e, data), ct_out(e, data), e->workspace,
        ct_in(e, weight, 0), ct_out(e, weight), ct_exec_bias_grad(e, weight), partner_workspace,
        b->stream);
}

/* A convolution's backward data with its weight gradient (the next node:
 * the same dy and shape) as one launch of their products, both f32 on
 * the native kernels (ct_cuda_conv2d_backward_pair). */
static const ct_impl conv2d_bwd_weight;

static bool conv_pairs_with(const ct_tensor *node, const ct_tensor *partner,
                            const ct_impl *partner_impl)
{
    if (partner->op != CT_OP_CONV2D_BWD_WEIGHT || partner->src[1] != node->src[0] ||
        node->dtype != CT_F32 || partner->dtype != CT_F32 ||
        memcmp(&node->attr.conv, &partner->attr.conv, sizeof node->attr.conv) != 0)
        return false;
    return !partner_impl || partner_impl == &conv2d_bwd_weight;
}

static ct_status conv_pair_run(ct_backend *backend, const ct_exec *e, const ct_tensor *data,
                               const ct_tensor *weight)
{
    cuda_backend *b = backend->impl;
    void *partner_workspace = NULL;
    CT_TRY(pair_begin(backend, e, data, &partner_workspace));
    return ct_cuda_conv2d_backward_pair(&data->attr.conv, ct_in(e, data, 0), ct_in(e, data, 1),
                                        relu_mask(e, data), ct_out(e, data), e->workspace,
                                        ct_in(e, weight, 0), ct_out(e, weight),
                                        ct_exec_bias_grad(e, weight), partner_workspace,
                                        b->stream);
}

/* The kernels below that take a dtype get the node's: its sources have it
 * too (same_dtype_supports), f32, f16 or bf16. */

static ct_status run_maxpool2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_maxpool2d_forward(n->dtype, &n->attr.pool, ct_in(e, n, 0), ct_out(e, n),
                                     b->stream);
}

static ct_status run_maxpool2x2(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_maxpool2x2_forward(n->dtype, &n->attr.pool, ct_in(e, n, 0), ct_out(e, n),
                                      b->stream);
}

/* The batchnorms whose parameter gradients node computes from its output,
 * their dy (ct_exec.bn_params_into, graph/fuse.c), into bn; how many. */
static int bn_params_outs(const ct_exec *e, const ct_tensor *node, ct_bn_params_out bn[2])
{
    int count = 0;
    for (int i = 0; i < 2; i++) {
        const ct_tensor *params = ct_exec_bn_params(e, node, i);
        bn[i] = (ct_bn_params_out){NULL, NULL, NULL};
        if (params)
            bn[count++] = (ct_bn_params_out){ct_in(e, params, 0), ct_in(e, params, 2),
                                             ct_out(e, params)};
    }
    return count;
}

static ct_status run_maxpool2x2_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_bn_params_out bn[2];
    if (bn_params_outs(e, n, bn)) /* the batchnorms whose dy it is (graph/fuse.c) */
        return ct_cuda_maxpool2x2_backward_batchnorm_params(
            n->dtype, &n->attr.pool, ct_in(e, n, 0), ct_in(e, n, 1), ct_out(e, n),
            fused_relu_bwd(e, n), bn, e->workspace, b->stream);
    return ct_cuda_maxpool2x2_backward(n->dtype, &n->attr.pool, ct_in(e, n, 0),
                                       ct_in(e, n, 1), ct_out(e, n), fused_relu_bwd(e, n),
                                       b->stream);
}

/* The general kernel, then (fused, graph/fuse.c) the parameter gradients
 * of the batchnorms whose dy it made, each by its own kernel: the same
 * bits as the 2x2 kernel's fused pass. */
static ct_status run_maxpool2d_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    CT_TRY(ct_cuda_maxpool2d_backward(n->dtype, &n->attr.pool, ct_in(e, n, 0), ct_in(e, n, 1),
                                      ct_out(e, n), fused_relu_bwd(e, n), b->stream));
    ct_bn_params_out bn[2];
    int count = bn_params_outs(e, n, bn);
    ct_nci d = ct_nci_of(n);
    for (int i = 0; i < count; i++)
        CT_TRY(ct_cuda_batchnorm_backward_params(
            n->dtype, d.n, d.c, d.inner, bn[i].x, ct_out(e, n), bn[i].stats, bn[i].dparams,
            (char *)e->workspace + i * ct_cuda_batchnorm_workspace(d.n, d.c, d.inner),
            b->stream));
    return CT_OK;
}

static ct_status run_avgpool2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_avgpool2d_forward(n->dtype, &n->attr.pool, ct_in(e, n, 0), ct_out(e, n),
                                     b->stream);
}

static ct_status run_avgpool2d_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_avgpool2d_backward(n->dtype, &n->attr.pool, ct_in(e, n, 0), ct_out(e, n),
                                      b->stream);
}

static ct_status run_global_avgpool(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n->src[0]);
    return ct_cuda_global_avgpool_forward(n->dtype, d.n, d.c, d.inner, ct_in(e, n, 0),
                                          ct_out(e, n), b->stream);
}

static ct_status run_global_avgpool_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n);
    return ct_cuda_global_avgpool_backward(n->dtype, d.n, d.c, d.inner, ct_in(e, n, 0),
                                           ct_exec_relu_mask(e, n), ct_out(e, n), b->stream);
}

#define UNARY(fn, kernel)                                                                 \
    static ct_status fn(cuda_backend *b, const ct_exec *e, const ct_tensor *n)            \
    {                                                                                     \
        return kernel(n->dtype, ct_tensor_numel(n), ct_in(e, n, 0), ct_out(e, n),        \
                      b->stream);                                                         \
    }
#define BINARY(fn, kernel)                                                                \
    static ct_status fn(cuda_backend *b, const ct_exec *e, const ct_tensor *n)            \
    {                                                                                     \
        return kernel(n->dtype, ct_tensor_numel(n), ct_in(e, n, 0), ct_in(e, n, 1),      \
                      ct_out(e, n), b->stream);                                           \
    }

UNARY(run_relu, ct_cuda_relu_forward)
BINARY(run_relu_bwd, ct_cuda_relu_backward)
UNARY(run_sigmoid, ct_cuda_sigmoid_forward)
BINARY(run_sigmoid_bwd, ct_cuda_sigmoid_backward)
UNARY(run_tanh, ct_cuda_tanh_forward)
BINARY(run_tanh_bwd, ct_cuda_tanh_backward)
static ct_status run_add(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_bn_input x, y;
    if (ct_exec_bn_add_inputs(e, n, &x, &y)) { /* a residual block's batchnorms (graph/fuse.c) */
        ct_nci d = ct_nci_of(n);
        return ct_cuda_batchnorm_add(n->dtype, d.n, d.c, d.inner, x, y, fused_relu(e, n),
                                     ct_out(e, n), b->stream);
    }
    ct_bn_params_out bn[2];
    if (bn_params_outs(e, n, bn)) { /* the batchnorms whose dy it is (graph/fuse.c) */
        ct_nci d = ct_nci_of(n);
        return ct_cuda_add_batchnorm_params(n->dtype, d.n, d.c, d.inner, ct_in(e, n, 0),
                                            ct_in(e, n, 1), ct_exec_relu_mask(e, n),
                                            ct_out(e, n), bn, e->workspace, b->stream);
    }
    return ct_cuda_add(n->dtype, ct_tensor_numel(n), ct_in(e, n, 0), ct_in(e, n, 1),
                       fused_relu(e, n), ct_exec_relu_mask(e, n), ct_out(e, n), b->stream);
}

static ct_status run_bn_stats(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n->src[0]);
    int64_t *num_batches = n->n_src > 3 ? ct_exec_data(e, n->src[3]) : NULL;
    if (e->training && e->sync_bn)
        return ct_cuda_batchnorm_stats_synced(
            n->src[0]->dtype, d.n, d.c, d.inner, ct_in(e, n, 0), n->attr.bn.momentum,
            n->attr.bn.eps, ct_exec_data(e, n->src[1]), ct_exec_data(e, n->src[2]), num_batches,
            ct_out(e, n), e->sync_bn, e->workspace, b->stream);
    return ct_cuda_batchnorm_stats(n->src[0]->dtype, d.n, d.c, d.inner, ct_in(e, n, 0),
                                   e->training, n->attr.bn.momentum, n->attr.bn.eps,
                                   ct_exec_data(e, n->src[1]), ct_exec_data(e, n->src[2]),
                                   num_batches, ct_out(e, n), e->workspace, b->stream);
}

static ct_status run_bn_apply(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n);
    return ct_cuda_batchnorm_apply(n->dtype, d.n, d.c, d.inner, ct_in(e, n, 0), ct_in(e, n, 1),
                                   ct_in(e, n, 2), ct_in(e, n, 3), fused_relu(e, n),
                                   ct_out(e, n), b->stream);
}

static ct_status run_bn_bwd_params(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n->src[0]);
    return ct_cuda_batchnorm_backward_params(n->src[0]->dtype, d.n, d.c, d.inner,
                                             ct_in(e, n, 0), ct_in(e, n, 1), ct_in(e, n, 2),
                                             ct_out(e, n), e->workspace, b->stream);
}

static ct_status run_bn_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n);
    if (e->training && e->sync_bn)
        return ct_cuda_batchnorm_backward_data_synced(
            n->dtype, d.n, d.c, d.inner, ct_in(e, n, 0), ct_in(e, n, 1), ct_in(e, n, 2),
            ct_in(e, n, 3), ct_in(e, n, 4), ct_out(e, n), e->sync_bn, e->workspace, b->stream);
    return ct_cuda_batchnorm_backward_data(n->dtype, d.n, d.c, d.inner, ct_in(e, n, 0),
                                           ct_in(e, n, 1), ct_in(e, n, 2), ct_in(e, n, 3),
                                           ct_in(e, n, 4), NULL, ct_out(e, n), b->stream);
}

static ct_status run_dropout(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    int64_t count = ct_tensor_numel(n);
    if (!e->training)
        return ct_cuda_copy(n->dtype, count, ct_in(e, n, 0), ct_out(e, n), b->stream);
    return ct_cuda_dropout(n->dtype, count, ct_in(e, n, 0), ct_out(e, n), n->attr.dropout.p,
                           e->seed, n->attr.dropout.stream, e->step_values, b->stream);
}

static ct_status run_concat(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    int channels[CT_MAX_SRC];
    const void *xs[CT_MAX_SRC];
    for (int i = 0; i < n->n_src; i++) {
        channels[i] = (int)n->src[i]->shape[1];
        xs[i] = ct_in(e, n, i);
    }
    ct_nci d = ct_nci_of(n);
    return ct_cuda_concat(n->dtype, d.n, d.inner, n->n_src, channels, xs, ct_out(e, n),
                          b->stream);
}

static ct_status run_slice_channels(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_nci d = ct_nci_of(n->src[0]);
    return ct_cuda_slice_channels(n->dtype, d.n, d.inner, d.c, n->attr.slice.start,
                                  n->attr.slice.count, ct_in(e, n, 0), ct_out(e, n),
                                  b->stream);
}

static ct_status run_softmax(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_softmax_forward((int)n->shape[0], (int)n->shape[1], ct_in(e, n, 0),
                                   ct_out(e, n), b->stream);
}

static ct_status run_softmax_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_softmax_backward((int)n->shape[0], (int)n->shape[1], ct_in(e, n, 0),
                                    ct_in(e, n, 1), ct_out(e, n), b->stream);
}

/* A bad label is found on the device; synchronize reports it (check_labels). */
static ct_status run_cross_entropy(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *logits = n->src[0], *labels = n->src[1];
    b->ce_node = n;
    b->ce_labels = ct_exec_data(e, labels);
    /* training: a loss that is not finite skips the step's updates */
    int32_t *found_inf = e->step_values ? &((ct_step_values *)e->step_values)->found_inf : NULL;
    /* training: the logits' gradient too, where the plan fused it in; its
     * seed is the fill's (run_fill) */
    const ct_tensor *back = ct_exec_loss_grad(e, n);
    ct_cuda_ce_grad grad = {0};
    if (back) {
        const ct_tensor *seed = back->src[0];
        grad.dlogits = ct_out(e, back);
        grad.seed = seed->attr.fill.value;
        grad.seed_scale = seed->attr.fill.scaled && e->step_values
                              ? &e->step_values->loss_scale
                              : NULL;
    }
    return ct_cuda_cross_entropy_forward(logits->dtype, (int)logits->shape[0],
                                         (int)logits->shape[1], ct_in(e, n, 0), b->ce_labels,
                                         labels->dtype == CT_I64, n->attr.ce.smoothing,
                                         ct_out(e, n), b->bad_row, found_inf,
                                         back ? &grad : NULL, b->stream);
}

static ct_status run_cross_entropy_bwd(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *logits = n->src[1], *labels = n->src[2];
    return ct_cuda_cross_entropy_backward(logits->dtype, (int)logits->shape[0],
                                          (int)logits->shape[1], ct_in(e, n, 1),
                                          ct_exec_data(e, labels), labels->dtype == CT_I64,
                                          n->attr.ce.smoothing, ct_in(e, n, 0), ct_out(e, n),
                                          b->stream);
}

static ct_status run_fill(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const float *scale = n->attr.fill.scaled && e->step_values ? &e->step_values->loss_scale
                                                                : NULL;
    return ct_cuda_fill(ct_tensor_numel(n), n->attr.fill.value, scale, ct_out(e, n), b->stream);
}

static ct_status run_cast(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_cast(ct_tensor_numel(n), ct_exec_data(e, n->src[0]), n->src[0]->dtype,
                        ct_exec_data(e, n), n->dtype, b->stream);
}

static void *exec_data(const void *exec, const ct_tensor *t)
{
    return ct_exec_data(exec, t);
}

/* The op's own CUDA kernel, on the backend's stream (custom_supports sends
 * a custom op without one to the CPU fallback). */
static ct_status run_custom(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_custom_run(n, exec_data, e, true, b->stream);
}

/* ---- what each implementation runs, and when ------------------------------------- */

static bool custom_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_custom_has_cuda(node);
}

static bool direct_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cuda_conv2d_direct_fits(&node->attr.conv);
}

/* The kernels that take a dtype (.half) read and write one dtype: a node
 * whose sources differ from it (a 16-bit y with an f32 dy, where a graph
 * mixes them) runs on the CPU fallback. */
static bool same_dtype_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    for (int i = 0; i < node->n_src; i++)
        if (node->src[i]->dtype != node->dtype)
            return false;
    return true;
}

/* Batchnorm, the cross-entropy and the channel sum (.half) read and write
 * their activations (x, y, dy, dx, logits, dlogits) in one dtype, f32, f16
 * or bf16, and the rest as f32 (statistics, gamma, beta, running buffers,
 * parameter gradients, the loss) or integers (labels, num_batches): `kinds`
 * names the dtype of the node, then of each source: 'a' the activations'
 * dtype, 'f' f32, 'i' i32 or i64.  A node with another mix runs on the CPU
 * fallback. */
static bool dtypes_are(const ct_tensor *node, const char *kinds)
{
    if ((int)strlen(kinds) < node->n_src + 1)
        return false;
    ct_dtype activations = CT_DTYPE_COUNT;
    for (int i = 0; i <= node->n_src; i++) {
        ct_dtype dtype = i == 0 ? node->dtype : node->src[i - 1]->dtype;
        bool fits = false;
        switch (kinds[i]) {
        case 'a':
            if (activations == CT_DTYPE_COUNT)
                activations = dtype;
            fits = dtype == activations && (dtype == CT_F32 || ct_dtype_is_half(dtype));
            break;
        case 'f': fits = dtype == CT_F32; break;
        case 'i': fits = dtype == CT_I32 || dtype == CT_I64; break;
        default: break;
        }
        if (!fits)
            return false;
    }
    return true;
}

#define DTYPES_SUPPORT(name, kinds)                                                       \
    static bool name(const ct_backend *backend, const ct_tensor *node)                    \
    {                                                                                     \
        (void)backend;                                                                    \
        return dtypes_are(node, kinds);                                                   \
    }
DTYPES_SUPPORT(bn_stats_supports, "faffi")      /* stats <- x, running mean, var, count */
DTYPES_SUPPORT(bn_apply_supports, "aafff")      /* y <- x, stats, gamma, beta */
DTYPES_SUPPORT(bn_bwd_params_supports, "faaf")  /* dparams <- x, dy, stats */
DTYPES_SUPPORT(bn_bwd_data_supports, "aaafff")  /* dx <- x, dy, stats, gamma, dparams */
DTYPES_SUPPORT(cross_entropy_supports, "fai")   /* loss <- logits, labels */
DTYPES_SUPPORT(cross_entropy_bwd_supports, "afai") /* dlogits <- dloss, logits, labels */
DTYPES_SUPPORT(channel_sum_supports, "fa")      /* db <- dy */

/* The loss's gradient fused in (CT_FUSES_LOSS_GRAD) where the forward
 * kernel's one block is enough for it. */
static bool cross_entropy_fuses_with(const ct_tensor *node, unsigned fusion,
                                     const ct_tensor *other)
{
    (void)fusion, (void)other;
    return ct_cuda_cross_entropy_fuses((int)node->src[0]->shape[0], (int)node->src[0]->shape[1]);
}

static bool maxpool2x2_supports(const ct_backend *backend, const ct_tensor *node)
{
    return same_dtype_supports(backend, node) && ct_cuda_maxpool2x2_fits(&node->attr.pool);
}

static bool maxpool2x2_bwd_supports(const ct_backend *backend, const ct_tensor *node)
{
    return same_dtype_supports(backend, node) &&
           ct_cuda_maxpool2x2_backward_fits(&node->attr.pool);
}

static size_t conv_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    if (node->op == CT_OP_CONV2D_BWD_DATA)
        return ct_cuda_conv2d_backward_data_workspace(&node->attr.conv);
    if (node->op == CT_OP_CONV2D)
        return ct_cuda_conv2d_forward_workspace(&node->attr.conv);
    return node->op == CT_OP_CONV2D_BWD_WEIGHT ? ct_cuda_conv2d_workspace(&node->attr.conv) : 0;
}

/* A linear layer's product splits k over blocks where its tiles are few
 * (gemm.cuh), with the parts in the workspace. */
static size_t linear_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    const ct_tensor *a = node->src[0], *b = node->src[1];
    int batch = (int)a->shape[0];
    switch (node->op) {
    case CT_OP_LINEAR: /* x [batch, in], w [out, in] */
        return ct_cuda_linear_workspace(batch, (int)b->shape[0], (int)a->shape[1]);
    case CT_OP_LINEAR_BWD_DATA: /* dy [batch, out], w [out, in] */
        return ct_cuda_linear_workspace(batch, (int)b->shape[1], (int)b->shape[0]);
    default: /* x [batch, in], dy [batch, out]: dw [out, in] and db */
        return ct_cuda_linear_workspace((int)b->shape[1], (int)a->shape[1] + 1, batch);
    }
}

/* Batchnorm's statistics and parameter gradients and the channel sum reduce
 * each channel over many blocks, with the parts in the workspace. */
static size_t channel_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    ct_nci d = ct_nci_of(node->src[0]); /* x, or dy of the channel sum */
    return node->op == CT_OP_CHANNEL_SUM ? ct_cuda_channel_sum_workspace(d.n, d.c, d.inner)
                                         : ct_cuda_batchnorm_workspace(d.n, d.c, d.inner);
}

/* Batchnorm's backward data sums the parameter gradients over the ranks
 * when synchronized (ct_plan_set_sync_bn). */
static size_t bn_sync_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cuda_batchnorm_sync_workspace((int)ct_nci_of(node).c);
}

#define CUDA_IMPL(var, label, fn, ...) CT_CUDA_IMPL(static, var, label, fn, __VA_ARGS__)
#define NATIVE(var, fn, ...) CUDA_IMPL(var, "native", fn, __VA_ARGS__)

CUDA_IMPL(conv2d_direct, "direct", run_conv2d_direct, .supports = direct_supports,
          .fuses = CT_FUSES_RELU);
CUDA_IMPL(conv2d, "implicit_gemm", run_conv2d, .workspace = conv_workspace,
          .fuses = CT_FUSES_RELU);
CUDA_IMPL(conv2d_bwd_data, "implicit_gemm", run_conv2d_bwd_data, .workspace = conv_workspace,
          .fuses = CT_FUSES_RELU_BWD, .pairs_with = conv_pairs_with, .run_pair = conv_pair_run);
CUDA_IMPL(conv2d_bwd_weight, "implicit_gemm", run_conv2d_bwd_weight,
          .workspace = conv_workspace, .fuses = CT_FUSES_BIAS_GRAD);
NATIVE(channel_sum, run_channel_sum, .workspace = channel_workspace, .half = true,
       .supports = channel_sum_supports);
NATIVE(linear, run_linear, .workspace = linear_workspace, .fuses = CT_FUSES_RELU);
NATIVE(linear_bwd_data, run_linear_bwd_data, .workspace = linear_workspace,
       .fuses = CT_FUSES_RELU_BWD, .pairs_with = linear_pairs_with, .run_pair = linear_pair_run);
NATIVE(linear_bwd_weight, run_linear_bwd_weight, .workspace = linear_workspace,
       .fuses = CT_FUSES_BIAS_GRAD);
/* HALF: takes f16 and bf16 nodes too (graph/impl.h), of one dtype. */
#define HALF .half = true, .supports = same_dtype_supports
CUDA_IMPL(maxpool2x2, "pool2x2", run_maxpool2x2, .half = true, .supports = maxpool2x2_supports);
NATIVE(maxpool2d, run_maxpool2d, HALF);
CUDA_IMPL(maxpool2x2_bwd, "pool2x2", run_maxpool2x2_bwd, .half = true,
          .supports = maxpool2x2_bwd_supports, .fuses = CT_FUSES_RELU_BWD | CT_FUSES_BN_PARAMS);
NATIVE(maxpool2d_bwd, run_maxpool2d_bwd, HALF, .fuses = CT_FUSES_RELU_BWD | CT_FUSES_BN_PARAMS);
NATIVE(avgpool2d, run_avgpool2d, HALF);
NATIVE(avgpool2d_bwd, run_avgpool2d_bwd, HALF);
NATIVE(global_avgpool, run_global_avgpool, HALF);
NATIVE(global_avgpool_bwd, run_global_avgpool_bwd, HALF, .fuses = CT_FUSES_RELU_BWD);
NATIVE(relu, run_relu, HALF);
NATIVE(relu_bwd, run_relu_bwd, HALF);
NATIVE(sigmoid, run_sigmoid, HALF);
NATIVE(sigmoid_bwd, run_sigmoid_bwd, HALF);
NATIVE(tanh_, run_tanh, HALF);
NATIVE(tanh_bwd, run_tanh_bwd, HALF);
NATIVE(bn_stats, run_bn_stats, .workspace = channel_workspace, .half = true,
       .supports = bn_stats_supports);
NATIVE(bn_apply, run_bn_apply, .half = true, .supports = bn_apply_supports,
       .fuses = CT_FUSES_RELU);
NATIVE(bn_bwd_params, run_bn_bwd_params, .workspace = channel_workspace, .half = true,
       .supports = bn_bwd_params_supports);
NATIVE(bn_bwd_data, run_bn_bwd_data, .workspace = bn_sync_workspace, .half = true,
       .supports = bn_bwd_data_supports);
NATIVE(dropout, run_dropout, HALF);
NATIVE(add, run_add, HALF,
       .fuses = CT_FUSES_RELU | CT_FUSES_RELU_BWD | CT_FUSES_BN_INPUT | CT_FUSES_BN_PARAMS);
NATIVE(concat, run_concat, HALF);
NATIVE(slice_channels, run_slice_channels, HALF);
NATIVE(softmax, run_softmax);
NATIVE(softmax_bwd, run_softmax_bwd);
NATIVE(cross_entropy, run_cross_entropy, .half = true, .supports = cross_entropy_supports,
       .fuses = CT_FUSES_LOSS_GRAD, .fuses_with = cross_entropy_fuses_with);
NATIVE(cross_entropy_bwd, run_cross_entropy_bwd, .half = true,
       .supports = cross_entropy_bwd_supports);
NATIVE(fill, run_fill);
NATIVE(cast, run_cast, .half = true);
NATIVE(custom, run_custom, .supports = custom_supports);

/* The vendor calls (table_vendor.c), last: "native" never takes them. */
#define CUDNN &ct_cuda_cudnn
#define CUBLAS &ct_cuda_cublas

const ct_impl *const ct_cuda_impls[CT_OP_COUNT][CT_MAX_IMPLS] = {
    [CT_OP_CONV2D] = {&ct_cuda_conv2d_tc, &conv2d_direct, &conv2d, CUDNN},
    [CT_OP_CONV2D_BWD_DATA] = {&ct_cuda_conv2d_bwd_data_tc, &conv2d_bwd_data, CUDNN},
    [CT_OP_CONV2D_BWD_WEIGHT] = {&ct_cuda_conv2d_bwd_weight_tc, &conv2d_bwd_weight, CUDNN},
    [CT_OP_CHANNEL_SUM] = {&channel_sum},
    [CT_OP_LINEAR] = {&ct_cuda_linear_tc, &linear, CUBLAS},
    [CT_OP_LINEAR_BWD_DATA] = {&ct_cuda_linear_bwd_data_tc, &linear_bwd_data, CUBLAS},
    [CT_OP_LINEAR_BWD_WEIGHT] = {&ct_cuda_linear_bwd_weight_tc, &linear_bwd_weight, CUBLAS},
    [CT_OP_MAXPOOL2D] = {&maxpool2x2, &maxpool2d, CUDNN},
    [CT_OP_MAXPOOL2D_BWD] = {&maxpool2x2_bwd, &maxpool2d_bwd},
    [CT_OP_AVGPOOL2D] = {&avgpool2d, CUDNN},
    [CT_OP_AVGPOOL2D_BWD] = {&avgpool2d_bwd},
    [CT_OP_GLOBAL_AVGPOOL] = {&global_avgpool},
    [CT_OP_GLOBAL_AVGPOOL_BWD] = {&global_avgpool_bwd},
    [CT_OP_RELU] = {&relu},
    [CT_OP_RELU_BWD] = {&relu_bwd},
    [CT_OP_SIGMOID] = {&sigmoid},
    [CT_OP_SIGMOID_BWD] = {&sigmoid_bwd},
    [CT_OP_TANH] = {&tanh_},
    [CT_OP_TANH_BWD] = {&tanh_bwd},
    [CT_OP_BN_STATS] = {&bn_stats},
    [CT_OP_BN_APPLY] = {&bn_apply},
    [CT_OP_BN_BWD_PARAMS] = {&bn_bwd_params},
    [CT_OP_BN_BWD_DATA] = {&bn_bwd_data},
    [CT_OP_DROPOUT] = {&dropout},
    [CT_OP_ADD] = {&add},
    [CT_OP_CONCAT] = {&concat},
    [CT_OP_SLICE_CHANNELS] = {&slice_channels},
    [CT_OP_SOFTMAX] = {&softmax},
    [CT_OP_SOFTMAX_BWD] = {&softmax_bwd},
    [CT_OP_CROSS_ENTROPY] = {&cross_entropy},
    [CT_OP_CROSS_ENTROPY_BWD] = {&cross_entropy_bwd},
    [CT_OP_FILL] = {&fill},
    [CT_OP_SGD_UPDATE] = {&ct_cuda_sgd_update_impl},
    [CT_OP_ADAM_UPDATE] = {&ct_cuda_adam_update_impl},
    [CT_OP_CUSTOM] = {&custom},
    [CT_OP_CUSTOM_BWD] = {&custom},
    [CT_OP_CAST] = {&cast},
    [CT_OP_CHECK_FINITE] = {&ct_cuda_check_finite_impl},
};
