/*
 * The CPU backend's INT8 ops (quant/model.c makes them): a convolution
 * or linear layer on u8 input, multiplied by int8 weights packed once by
 * ct_plan_quantize, with the bias, a relu and the output's format in the
 * kernel's epilogue (src/quant/int8.h).
 *   qconv2d: y[n,o,h,w] = b[o] + w_scale[o] * x_scale *
 *            sum_{c,i,j} qw[o,c,i,j] * (qx[n,c,h*s+i-p,w*s+j-p] - x_zp)
 *   qlinear: y[n,o] = b[o] + w_scale[o] * x_scale * sum_i qw[o,i] * (qx[n,i] - x_zp)
 * x: [N, C, H, W] or [N, in], f32 (quantized to u8 in the workspace here)
 * or u8 (an int8 layer's output); y f32, or u8 requantized with the node's
 * out_scale and out_zero_point.
 */
#include "core/error.h"
#include "cpu/kernels.h"
#include "graph/impl.h"
#include "graph/node_args.h"
#include "quant/int8.h"

/* The quantized input's bytes, rounded up so that the kernel's workspace
 * after it stays aligned. */
static size_t input_bytes(const ct_tensor *node)
{
    enum { ALIGNMENT = 64 };
    if (node->src[0]->dtype == CT_U8)
        return 0;
    size_t bytes = (size_t)ct_tensor_numel(node->src[0]);
    return (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
}

static size_t qconv2d_workspace(const ct_backend *backend, const ct_tensor *node)
{
    return input_bytes(node) + ct_int8_conv2d_workspace(&node->attr.quant.conv,
                                                        node->attr.quant.weights,
                                                        backend->n_threads);
}

static size_t qlinear_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return input_bytes(node) +
           ct_int8_linear_workspace((int)node->src[0]->shape[0], node->attr.quant.weights);
}

/* The input quantized to u8 in the workspace (unless it is u8), then the
 * int8 kernel with its epilogue. */
static ct_status run(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *x = node->src[0];
    ct_quant_act x_q = {node->attr.quant.x_scale, node->attr.quant.x_zero_point};
    const uint8_t *qx = ct_exec_data(exec, x);
    void *workspace = (char *)exec->workspace + input_bytes(node);
    if (x->dtype != CT_U8) {
        CT_ASSERT(x->dtype == CT_F32);
        ct_int8_quantize(ct_tensor_numel(x), ct_exec_data(exec, x), x_q, exec->workspace);
        qx = exec->workspace;
    }
    ct_int8_epilogue e = {.bias = ct_in_opt(exec, node, 1),
                          .relu = node->attr.quant.relu ||
                                  (exec->epilogue && exec->epilogue[node->id] == CT_EPILOGUE_RELU),
                          .out_u8 = node->dtype == CT_U8,
                          .out_q = {node->attr.quant.out_scale, node->attr.quant.out_zero_point}};
    if (node->op == CT_OP_QCONV2D)
        ct_int8_conv2d_forward(&node->attr.quant.conv, qx, x_q, node->attr.quant.weights, &e,
                               ct_out(exec, node), workspace, backend->n_threads);
    else
        ct_int8_linear_forward((int)x->shape[0], qx, x_q, node->attr.quant.weights, &e,
                               ct_out(exec, node), workspace);
    return CT_OK;
}

const ct_impl ct_cpu_qconv2d = {.name = "int8", .fuses = CT_FUSES_RELU,
                                .workspace = qconv2d_workspace, .run = run};
const ct_impl ct_cpu_qlinear = {.name = "int8", .fuses = CT_FUSES_RELU,
                                .workspace = qlinear_workspace, .run = run};
