/*
 * softmax and cross-entropy.
 *   softmax: dx = softmax_bwd(y, dy) = y * (dy - sum_j dy_j y_j)
 *   cross-entropy: dlogits = cross_entropy_bwd(dloss, logits, labels)
 *                  = dloss * (softmax(logits) - target) / N
 */
#include "ops/common.h"

ct_tensor *ct_softmax(ct_graph *graph, ct_tensor *x)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, "softmax", 1, &x) ||
        !ct_check_float(graph, "softmax", 1, &x))
        return NULL;
    if (x->ndim != 2) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE, "softmax: input %s must be 2-D [N,C]",
                             x_desc);
    }
    x = ct_autocast(graph, x, CT_F32); /* softmax computes in f32 (ops/autocast.c) */
    if (!x)
        return NULL;
    return ct_node_like(graph, CT_OP_SOFTMAX, x, 1, &x);
}

ct_status ct_softmax_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                              const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    ct_tensor *in[2] = {node, dy};
    dsrc[0] = ct_node_like(graph, CT_OP_SOFTMAX_BWD, node, 2, in);
    return graph->status;
}

ct_tensor *ct_cross_entropy(ct_graph *graph, ct_tensor *logits, ct_tensor *labels,
                            float label_smoothing)
{
    if (!graph)
        return NULL;
    ct_tensor *srcs[2] = {logits, labels};
    if (!ct_graph_check_srcs(graph, "cross_entropy", 2, srcs) ||
        !ct_check_float(graph, "cross_entropy", 1, &logits))
        return NULL;
    CT_DESCRIBE(logits);
    CT_DESCRIBE(labels);
    if (labels->dtype != CT_I32 && labels->dtype != CT_I64)
        return ct_graph_fail(graph, CT_ERR_DTYPE,
                             "cross_entropy: labels %s are %s; class indices must be i32 or "
                             "i64",
                             labels_desc, ct_dtype_name(labels->dtype));
    if (logits->ndim != 2 || labels->ndim != 1 || labels->shape[0] != logits->shape[0])
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "cross_entropy: logits %s must be [N,C] and labels %s [N]",
                             logits_desc, labels_desc);
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return ct_graph_fail(graph, CT_ERR_ARG,
                             "cross_entropy: label_smoothing %g must be in [0, 1]",
                             label_smoothing);
    ct_tensor *loss = ct_graph_add_node(graph, CT_OP_CROSS_ENTROPY, CT_F32, 0, NULL, 2, srcs);
    if (loss)
        loss->attr.ce.smoothing = label_smoothing;
    return loss;
}

ct_status ct_cross_entropy_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                    const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    ct_tensor *in[3] = {dy, node->src[0], node->src[1]};
    dsrc[0] = ct_node_like(graph, CT_OP_CROSS_ENTROPY_BWD, node->src[0], 3, in);
    if (dsrc[0])
        dsrc[0]->attr.ce = node->attr.ce;
    return graph->status;
}
