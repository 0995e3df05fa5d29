/*
 * Elementwise activations.  Each backward rule reads the output y:
 *   relu: dx = dy * (y > 0);  sigmoid: dx = dy * y * (1-y);  tanh: dx = dy * (1-y^2)
 */
#include "ops/common.h"

static ct_tensor *activation(ct_graph *graph, ct_op op, ct_tensor *x)
{
    if (!graph)
        return NULL;
    const char *op_name = ct_op_name(op);
    if (!ct_graph_check_srcs(graph, op_name, 1, &x) || !ct_check_float(graph, op_name, 1, &x))
        return NULL;
    return ct_node_like(graph, op, x, 1, &x);
}

ct_tensor *ct_relu(ct_graph *graph, ct_tensor *x)
{
    return activation(graph, CT_OP_RELU, x);
}

ct_tensor *ct_sigmoid(ct_graph *graph, ct_tensor *x)
{
    return activation(graph, CT_OP_SIGMOID, x);
}

ct_tensor *ct_tanh(ct_graph *graph, ct_tensor *x)
{
    return activation(graph, CT_OP_TANH, x);
}

ct_status ct_activation_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                 const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    ct_op backward_op = node->op == CT_OP_RELU      ? CT_OP_RELU_BWD
                        : node->op == CT_OP_SIGMOID ? CT_OP_SIGMOID_BWD
                                                    : CT_OP_TANH_BWD;
    ct_tensor *in[2] = {node, dy};
    dsrc[0] = ct_node_like(graph, backward_op, node, 2, in);
    return graph->status;
}
