/*
 * The tensor-core implementations of convolution and linear (gemm_tc.cu,
 * conv_tc.cu) for the CUDA op table (table.c lists them first for their
 * ops): 16-bit nodes of a bf16 or fp16 graph only, all of whose inputs are
 * of the node's dtype but a forward pass's bias, f32 (ops/autocast.c).
 * An f32 node does not reach them and runs the f32 kernels as before; a
 * 16-bit node reaches them and, for convolutions, cuDNN (dnn.c), which
 * `vendor` picks and `auto` times against them; the other native kernels
 * and cuBLAS are f32 (graph/impl.h's `half`).  Forward passes apply a fused relu, as every other
 * implementation of their ops does; backward data passes the backward of
 * a relu before the layer (0 where its output is <= 0, as the f32 GEMMs);
 * weight gradients give the f32 bias gradient of the same dy
 * (CT_FUSES_BIAS_GRAD).
 */
#include "core/error.h"
#include "cuda/backend_impl.h"
#include "cuda/kernels.h"
#include "graph/impl.h"
#include "graph/node_args.h"
#include "ops/ops.h"

/* A relu fused into the node (graph/fuse.c): its kernel stores max(y, 0). */
static bool fused_relu(const ct_exec *e, const ct_tensor *n)
{
    return e->epilogue[n->id] == CT_EPILOGUE_RELU;
}

static ct_status run_conv2d(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_forward_tc(n->dtype, &n->attr.conv, ct_in(e, n, 0), ct_in(e, n, 1),
                                     ct_in_opt(e, n, 2), fused_relu(e, n), ct_out(e, n),
                                     b->stream);
}

static ct_status run_conv2d_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_backward_data_tc(n->dtype, &n->attr.conv, ct_in(e, n, 0),
                                           ct_in(e, n, 1), ct_exec_relu_mask(e, n), ct_out(e, n),
                                           b->stream);
}

static ct_status run_conv2d_bwd_weight(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_conv2d_backward_weight_tc(n->dtype, &n->attr.conv, ct_in(e, n, 0),
                                             ct_in(e, n, 1), ct_out(e, n), ct_exec_bias_grad(e, n),
                                             e->workspace, b->stream);
}

static ct_status run_linear(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *x = n->src[0], *w = n->src[1];
    return ct_cuda_linear_forward_tc(n->dtype, (int)x->shape[0], (int)x->shape[1],
                                     (int)w->shape[0], ct_in(e, n, 0), ct_in(e, n, 1),
                                     ct_in_opt(e, n, 2), fused_relu(e, n), ct_out(e, n),
                                     b->stream);
}

static ct_status run_linear_bwd_data(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *dy = n->src[0], *w = n->src[1];
    return ct_cuda_linear_backward_data_tc(n->dtype, (int)dy->shape[0], (int)w->shape[1],
                                           (int)w->shape[0], ct_in(e, n, 0), ct_in(e, n, 1),
                                           ct_exec_relu_mask(e, n), ct_out(e, n), b->stream);
}

static ct_status run_linear_bwd_weight(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_tensor *x = n->src[0], *dy = n->src[1];
    return ct_cuda_linear_backward_weight_tc(n->dtype, (int)x->shape[0], (int)x->shape[1],
                                             (int)dy->shape[1], ct_in(e, n, 0),
                                             ct_in(e, n, 1), ct_out(e, n), ct_exec_bias_grad(e, n),
                                             b->stream);
}

static bool tensor_core_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_half_layer_inputs(node);
}

static size_t conv_bwd_weight_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cuda_conv2d_backward_weight_tc_workspace(&node->attr.conv);
}

/* ct_cuda_<var>_tc, named "tensor_core", running `fn` on the backend's stream. */
#define TENSOR_CORE(var, fn, ...)                                                         \
    static ct_status var##_run(ct_backend *backend, const ct_exec *e, const ct_tensor *n) \
    {                                                                                     \
        return fn(backend->impl, e, n);                                                   \
    }                                                                                     \
    const ct_impl ct_cuda_##var##_tc = {.name = "tensor_core", .run = var##_run,          \
                                        .half = true, .supports = tensor_core_supports,   \
                                        __VA_ARGS__}

TENSOR_CORE(conv2d, run_conv2d, .fuses = CT_FUSES_RELU);
TENSOR_CORE(conv2d_bwd_data, run_conv2d_bwd_data, .fuses = CT_FUSES_RELU_BWD);
TENSOR_CORE(conv2d_bwd_weight, run_conv2d_bwd_weight, .workspace = conv_bwd_weight_workspace,
            .fuses = CT_FUSES_BIAS_GRAD);
TENSOR_CORE(linear, run_linear, .fuses = CT_FUSES_RELU);
TENSOR_CORE(linear_bwd_data, run_linear_bwd_data, .fuses = CT_FUSES_RELU_BWD);
TENSOR_CORE(linear_bwd_weight, run_linear_bwd_weight, .workspace = NULL,
            .fuses = CT_FUSES_BIAS_GRAD);
