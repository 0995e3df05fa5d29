/*
 * Symbolic reverse-mode differentiation.  Walks the forward nodes from the
 * output back to the leaves, asks each op's backward rule for the gradients
 * of its inputs, and sums the gradients of a tensor used more than once with
 * add nodes.  Every kernel writes its output with =; those add nodes are the
 * only place where gradient contributions accumulate.
 */
#include <stdlib.h>

#include "core/error.h"
#include "graph/graph.h"
#include "ops/ops.h"

/* needs[i]: node i depends on a parameter or an input that requires grad. */
static bool *mark_needs_grad(const ct_graph *graph, int n_nodes)
{
    bool *needs = calloc((size_t)n_nodes + 1, sizeof *needs);
    if (!needs)
        return NULL;
    for (int i = 0; i < n_nodes; i++) {
        const ct_tensor *t = graph->nodes[i];
        if (t->op == CT_OP_LEAF) {
            needs[i] = t->role == CT_ROLE_PARAM || t->requires_grad;
        } else if (ct_op_backward(t->op)) {
            for (int s = 0; s < t->n_src; s++)
                needs[i] = needs[i] || needs[t->src[s]->id];
        }
    }
    return needs;
}

static ct_status propagate(ct_graph *graph, ct_tensor *y, const bool *needs, ct_tensor **grads)
{
    for (int i = y->id; i >= 0; i--) {
        ct_tensor *t = graph->nodes[i];
        ct_backward_fn backward = ct_op_backward(t->op);
        if (!grads[i] || !backward)
            continue;
        bool src_needs[CT_MAX_SRC] = {false};
        bool any = false;
        for (int s = 0; s < t->n_src; s++) {
            src_needs[s] = needs[t->src[s]->id];
            any = any || src_needs[s];
        }
        if (!any)
            continue;
        ct_tensor *dsrc[CT_MAX_SRC] = {NULL};
        CT_TRY(backward(graph, t, grads[i], src_needs, dsrc));
        for (int s = 0; s < t->n_src; s++) {
            int src_id = t->src[s]->id;
            if (!src_needs[s] || !dsrc[s])
                continue;
            grads[src_id] = grads[src_id] ? ct_add(graph, grads[src_id], dsrc[s]) : dsrc[s];
            if (!grads[src_id])
                return graph->status;
        }
    }
    return graph->status;
}

static ct_status backward_from(ct_graph *graph, ct_tensor *y, ct_tensor *dy)
{
    int n_nodes = graph->n_nodes;
    bool *needs = mark_needs_grad(graph, n_nodes);
    ct_tensor **grads = calloc((size_t)n_nodes + 1, sizeof *grads);
    ct_status status = CT_OK;
    if (!needs || !grads) {
        status = ct_set_error(CT_ERR_MEMORY, "ct_graph_backward: out of host memory");
        goto done;
    }
    if (!needs[y->id]) {
        status = ct_set_error(CT_ERR_ARG,
                              "ct_graph_backward: '%s' depends on no parameter (and no input "
                              "marked with ct_tensor_requires_grad): nothing to differentiate",
                              ct_tensor_name(y));
        goto done;
    }
    graph->has_backward = true;
    /* fp16 scales the loss (a seed other than dy): see ct_plan_loss_scale */
    for (int i = 0; !dy && i < n_nodes; i++)
        graph->loss_scaling = graph->loss_scaling || graph->nodes[i]->dtype == CT_F16;
    grads[y->id] = dy ? dy : ct_fill(graph, y, 1.0f);
    if (!grads[y->id]) {
        status = graph->status;
        goto done;
    }
    grads[y->id]->attr.fill.scaled = graph->loss_scaling;
    status = propagate(graph, y, needs, grads);
    for (int i = 0; status == CT_OK && i < n_nodes; i++) {
        ct_tensor *t = graph->nodes[i];
        if (t->op == CT_OP_LEAF && needs[i] && grads[i]) {
            t->grad = grads[i];
            t->grad->keep = true;
        }
    }
    y->keep = true;
done:
    free(needs);
    free(grads);
    return status;
}

static ct_status check_backward_args(ct_graph *graph, ct_tensor *y, const char *what)
{
    if (!graph)
        return ct_set_error(CT_ERR_ARG, "%s: graph is NULL", what);
    if (graph->status != CT_OK)
        return ct_set_error(graph->status, "%s: the graph has an earlier error: %s", what,
                            ct_last_error());
    if (!y || y->graph != graph)
        return ct_set_error(CT_ERR_ARG, "%s: the output tensor is NULL or of another graph",
                            what);
    if (graph->has_backward)
        return ct_set_error(CT_ERR_STATE, "%s: the backward graph was already built", what);
    if (y->dtype != CT_F32)
        return ct_set_error(CT_ERR_DTYPE, "%s: '%s' is %s; only f32 outputs differentiate", what,
                            ct_tensor_name(y), ct_dtype_name(y->dtype));
    return CT_OK;
}

ct_status ct_graph_backward(ct_graph *graph, ct_tensor *loss)
{
    CT_TRY(check_backward_args(graph, loss, "ct_graph_backward"));
    if (ct_tensor_numel(loss) != 1) {
        char desc[CT_DESCRIBE_CAPACITY];
        return ct_set_error(CT_ERR_SHAPE,
                            "ct_graph_backward: loss %s is not a scalar (use "
                            "ct_graph_backward_vjp for other outputs)",
                            ct_tensor_describe(loss, desc, sizeof desc));
    }
    return backward_from(graph, loss, NULL);
}

ct_status ct_graph_backward_vjp(ct_graph *graph, ct_tensor *y, ct_tensor *dy)
{
    CT_TRY(check_backward_args(graph, y, "ct_graph_backward_vjp"));
    if (!dy || dy->graph != graph || dy->role != CT_ROLE_INPUT || dy->dtype != CT_F32 ||
        !ct_same_shape(y, dy)) {
        char y_desc[CT_DESCRIBE_CAPACITY], dy_desc[CT_DESCRIBE_CAPACITY] = "NULL";
        if (dy)
            ct_tensor_describe(dy, dy_desc, sizeof dy_desc);
        return ct_set_error(CT_ERR_SHAPE,
                            "ct_graph_backward_vjp: dy %s must be an f32 input of the shape of "
                            "%s",
                            dy_desc, ct_tensor_describe(y, y_desc, sizeof y_desc));
    }
    return backward_from(graph, y, dy);
}
