/*
 * FLOP and byte estimates of every op, one function per op family (the
 * families of src/ops/<family>.c).  Conventions:
 *   - a multiply-add is 2 FLOPs; a compare, add, multiply or max is 1;
 *     exp, log and division count 1 each (they are not the bottleneck of
 *     any model here, and a fixed rule keeps the numbers comparable);
 *   - bytes are the least traffic: each input read once, the output written
 *     once, and state that an update writes back counted twice.
 */
#include "ops/cost.h"

static double numel(const ct_tensor *t)
{
    return (double)ct_tensor_numel(t);
}

/* Each input read once, the output written once. */
static double io_bytes(const ct_tensor *node)
{
    double bytes = (double)ct_tensor_bytes(node);
    for (int i = 0; i < node->n_src; i++)
        bytes += (double)ct_tensor_bytes(node->src[i]);
    return bytes;
}

/* The bias gradient: one add per element of dy. */
static ct_cost channel_sum_cost(const ct_tensor *node)
{
    return (ct_cost){numel(node->src[0]), io_bytes(node)};
}

/* conv2d and its gradients: the same 2*N*O*OH*OW*(C/G)*KH*KW for all three. */
static ct_cost conv_cost(const ct_tensor *node)
{
    const ct_conv2d_shape *s = &node->attr.conv;
    double outputs = (double)s->n_batch * s->out_channels * s->out_h * s->out_w;
    double per_output = (double)(s->in_channels / s->groups) * s->kernel_h * s->kernel_w;
    ct_cost cost = {2.0 * outputs * per_output, io_bytes(node)};
    if (node->op == CT_OP_CONV2D && node->n_src > 2)
        cost.flops += outputs; /* the bias */
    return cost;
}

/* linear and its gradients: 2*N*IN*OUT each.  w is src[1] of the forward
 * and of bwd_data; bwd_weight's output is w's shape. */
static ct_cost linear_cost(const ct_tensor *node)
{
    const ct_tensor *w = node->op == CT_OP_LINEAR_BWD_WEIGHT ? node : node->src[1];
    double batch = (double)node->src[0]->shape[0];
    ct_cost cost = {2.0 * batch * numel(w), io_bytes(node)};
    if (node->op == CT_OP_LINEAR && node->n_src > 2)
        cost.flops += numel(node); /* the bias */
    return cost;
}

/* Pooling: one compare or add per window element and output. */
static ct_cost pool_cost(const ct_tensor *node)
{
    if (node->op == CT_OP_GLOBAL_AVGPOOL || node->op == CT_OP_GLOBAL_AVGPOOL_BWD) {
        const ct_tensor *big = node->op == CT_OP_GLOBAL_AVGPOOL ? node->src[0] : node;
        return (ct_cost){numel(big), io_bytes(node)};
    }
    const ct_pool2d_shape *s = &node->attr.pool;
    double outputs = (double)s->n_batch * s->channels * s->out_h * s->out_w;
    return (ct_cost){outputs * s->kernel_h * s->kernel_w, io_bytes(node)};
}

/* relu: 1 per element; sigmoid and tanh: 4 (exp, add, divide, scale);
 * each backward: 2 (a multiply by the derivative from y). */
static ct_cost activation_cost(const ct_tensor *node)
{
    double per_element = node->op == CT_OP_SIGMOID || node->op == CT_OP_TANH ? 4.0
                         : node->op == CT_OP_RELU                            ? 1.0
                                                                             : 2.0;
    return (ct_cost){per_element * numel(node), io_bytes(node)};
}

/* batchnorm, per element of x: stats 3 (sum, square, add), apply 2
 * (scale and shift folded), backward params 3, backward data 5. */
static ct_cost norm_cost(const ct_tensor *node)
{
    double per_element = node->op == CT_OP_BN_APPLY     ? 2.0
                         : node->op == CT_OP_BN_BWD_DATA ? 5.0
                                                         : 3.0;
    ct_cost cost = {per_element * numel(node->src[0]), io_bytes(node)};
    if (node->op == CT_OP_BN_STATS) /* the running statistics are written back */
        cost.bytes += (double)(ct_tensor_bytes(node->src[1]) + ct_tensor_bytes(node->src[2]));
    return cost;
}

/* add, dropout: 1 per element; concat, slice, fill: copies only. */
static ct_cost tensor_cost(const ct_tensor *node)
{
    bool arithmetic = node->op == CT_OP_ADD || node->op == CT_OP_DROPOUT;
    return (ct_cost){arithmetic ? numel(node) : 0.0, io_bytes(node)};
}

/* softmax: 4 per element (max, subtract, exp, divide), backward 3;
 * cross-entropy: the same per logit plus the pick. */
static ct_cost loss_cost(const ct_tensor *node)
{
    bool forward = node->op == CT_OP_SOFTMAX || node->op == CT_OP_CROSS_ENTROPY;
    const ct_tensor *logits = node->op == CT_OP_CROSS_ENTROPY_BWD ? node : node->src[0];
    return (ct_cost){(forward ? 4.0 : 3.0) * numel(logits), io_bytes(node)};
}

/* Per parameter element.  SGD: weight decay, momentum and nesterov are one
 * multiply-add each when on, the step one more.  Adam: ~12 (two moment
 * updates, bias corrections, sqrt, divide, decay, step).  The node writes
 * the parameter and every moment buffer back. */
static ct_cost optim_cost(const ct_tensor *node)
{
    double n = numel(node), per_element = 12.0;
    if (node->op == CT_OP_SGD_UPDATE) {
        const ct_sgd_args *a = &node->attr.sgd;
        per_element = 2.0 * (1 + (a->weight_decay != 0) + (a->momentum != 0) + a->nesterov);
    }
    double written_back = 0;
    for (int i = 2; i < node->n_src; i++)
        written_back += (double)ct_tensor_bytes(node->src[i]);
    return (ct_cost){per_element * n, io_bytes(node) + written_back};
}

ct_cost ct_op_cost(const ct_tensor *node)
{
    switch (node->op) {
    case CT_OP_CONV2D:
    case CT_OP_CONV2D_BWD_DATA:
    case CT_OP_CONV2D_BWD_WEIGHT:
        return conv_cost(node);
    case CT_OP_CHANNEL_SUM:
        return channel_sum_cost(node);
    case CT_OP_LINEAR:
    case CT_OP_LINEAR_BWD_DATA:
    case CT_OP_LINEAR_BWD_WEIGHT:
        return linear_cost(node);
    case CT_OP_MAXPOOL2D:
    case CT_OP_MAXPOOL2D_BWD:
    case CT_OP_AVGPOOL2D:
    case CT_OP_AVGPOOL2D_BWD:
    case CT_OP_GLOBAL_AVGPOOL:
    case CT_OP_GLOBAL_AVGPOOL_BWD:
        return pool_cost(node);
    case CT_OP_RELU:
    case CT_OP_RELU_BWD:
    case CT_OP_SIGMOID:
    case CT_OP_SIGMOID_BWD:
    case CT_OP_TANH:
    case CT_OP_TANH_BWD:
        return activation_cost(node);
    case CT_OP_BN_STATS:
    case CT_OP_BN_APPLY:
    case CT_OP_BN_BWD_PARAMS:
    case CT_OP_BN_BWD_DATA:
        return norm_cost(node);
    case CT_OP_DROPOUT:
    case CT_OP_ADD:
    case CT_OP_CONCAT:
    case CT_OP_SLICE_CHANNELS:
    case CT_OP_FILL:
    case CT_OP_CAST:
    case CT_OP_CHECK_FINITE:
    case CT_OP_QCONV2D: /* counted as a pass over its bytes, like a custom op */
    case CT_OP_QLINEAR:
    case CT_OP_CUSTOM: /* its flops are the user's: counted as a pass over its bytes */
    case CT_OP_CUSTOM_BWD:
        return tensor_cost(node);
    case CT_OP_SOFTMAX:
    case CT_OP_SOFTMAX_BWD:
    case CT_OP_CROSS_ENTROPY:
    case CT_OP_CROSS_ENTROPY_BWD:
        return loss_cost(node);
    case CT_OP_SGD_UPDATE:
    case CT_OP_ADAM_UPDATE:
        return optim_cost(node);
    case CT_OP_LEAF:
    case CT_OP_VIEW:
    case CT_OP_COUNT:
        break;
    }
    return (ct_cost){0.0, 0.0};
}
