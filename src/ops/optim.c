/*
 * Optimizers as graph nodes: one in-place update node per parameter,
 * appended after the backward graph, so a training step is one graph.  The
 * learning rate is read from the plan at run time (schedules change it
 * without rebuilding); the rest of the hyperparameters live in the node.
 */
#include <stdio.h>

#include "ops/common.h"

ct_adam_args ct_adam_defaults(void)
{
    ct_adam_args args = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    return args;
}

static ct_status check_optimizer_graph(ct_graph *graph, const char *what, float lr)
{
    if (!graph)
        return ct_set_error(CT_ERR_ARG, "%s: graph is NULL", what);
    if (graph->status != CT_OK)
        return ct_set_error(graph->status, "%s: the graph has an earlier error: %s", what,
                            ct_last_error());
    if (!graph->has_backward)
        return ct_set_error(CT_ERR_STATE, "%s: call ct_graph_backward first", what);
    if (graph->has_optimizer)
        return ct_set_error(CT_ERR_STATE, "%s: the graph already has an optimizer", what);
    if (!(lr >= 0))
        return ct_set_error(CT_ERR_ARG, "%s: learning rate %g must be >= 0", what, lr);
    return CT_OK;
}

/* A zero-filled optimizer state tensor "<param>.<suffix>". */
static ct_tensor *zero_state(ct_graph *graph, const ct_tensor *param, const char *suffix)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", param->name, suffix);
    return ct_graph_add_state(graph, CT_ROLE_OPTIM, name, CT_F32, param->ndim, param->shape,
                              CT_INIT_CONST, 0.0f);
}

/* fp16's loss scaling (graph->loss_scaling): check_finite nodes over every
 * gradient the optimizer reads, up to CT_MAX_SRC - 1 each and chained (each
 * takes the one before), so that all of them run before any update; each
 * update takes the last as its last source.  A check that finds an inf or
 * NaN sets ct_step_values.found_inf, and every update of the step then does
 * nothing.  NULL without loss scaling (or with an error recorded).  Of the
 * optimizer phase: after anything that changes the gradients between
 * backward and the update (graph/grad_hook.h, the data-parallel average). */
static ct_tensor *finite_check(ct_graph *graph)
{
    if (!graph->loss_scaling)
        return NULL;
    ct_tensor *last = NULL;
    ct_tensor *srcs[CT_MAX_SRC];
    int n = 0;
    for (int i = 0; i <= graph->n_state; i++) {
        ct_tensor *param = i < graph->n_state ? graph->state[i] : NULL;
        if (param && (param->role != CT_ROLE_PARAM || !param->grad))
            continue;
        if (param)
            srcs[n++] = param->grad;
        if (n == CT_MAX_SRC || (!param && n > (last ? 1 : 0))) {
            last = ct_graph_add_node(graph, CT_OP_CHECK_FINITE, CT_I32, 0, NULL, n, srcs);
            if (!last)
                return NULL;
            n = 0;
            srcs[n++] = last;
        }
    }
    return last;
}

/* The in-place update node: its storage is the parameter's. */
static ct_tensor *update_node(ct_graph *graph, ct_op op, ct_tensor *param, int n_src,
                              ct_tensor *const *srcs)
{
    ct_tensor *node = ct_node_like(graph, op, param, n_src, srcs);
    if (node)
        node->view_of = param;
    return node;
}

ct_status ct_graph_sgd(ct_graph *graph, ct_sgd_args args)
{
    CT_TRY(check_optimizer_graph(graph, "ct_graph_sgd", args.lr));
    if (!(args.momentum >= 0) || !(args.weight_decay >= 0) || !(args.dampening >= 0))
        return ct_set_error(CT_ERR_ARG,
                            "ct_graph_sgd: momentum %g, dampening %g and weight decay %g must "
                            "be >= 0",
                            args.momentum, args.dampening, args.weight_decay);
    if (args.nesterov && (args.momentum <= 0 || args.dampening != 0))
        return ct_set_error(CT_ERR_ARG,
                            "ct_graph_sgd: Nesterov momentum needs momentum > 0 and zero "
                            "dampening");
    graph->has_optimizer = true; /* from here on, nodes are of the optimizer phase */
    graph->optimizer_lr = args.lr;
    ct_tensor *check = finite_check(graph);
    if (graph->status != CT_OK)
        return graph->status;
    int n_state = graph->n_state;
    for (int i = 0; i < n_state; i++) {
        ct_tensor *param = graph->state[i];
        if (param->role != CT_ROLE_PARAM || !param->grad)
            continue;
        ct_tensor *srcs[4] = {param, param->grad, NULL, NULL};
        int n_src = 2;
        if (args.momentum > 0)
            srcs[n_src++] = zero_state(graph, param, "momentum_buffer");
        if (check)
            srcs[n_src++] = check;
        ct_tensor *node = update_node(graph, CT_OP_SGD_UPDATE, param, n_src, srcs);
        if (!node)
            return graph->status;
        node->attr.sgd = args;
    }
    return graph->status;
}

ct_status ct_graph_adam(ct_graph *graph, ct_adam_args args)
{
    CT_TRY(check_optimizer_graph(graph, "ct_graph_adam", args.lr));
    if (!(args.beta1 >= 0 && args.beta1 < 1) || !(args.beta2 >= 0 && args.beta2 < 1) ||
        !(args.eps > 0) || !(args.weight_decay >= 0))
        return ct_set_error(CT_ERR_ARG,
                            "ct_graph_adam: betas (%g, %g) must be in [0, 1), eps %g > 0 and "
                            "weight decay %g >= 0 (ct_adam_defaults() gives PyTorch's)",
                            args.beta1, args.beta2, args.eps, args.weight_decay);
    graph->has_optimizer = true; /* from here on, nodes are of the optimizer phase */
    graph->optimizer_lr = args.lr;
    ct_tensor *check = finite_check(graph);
    if (graph->status != CT_OK)
        return graph->status;
    int n_state = graph->n_state;
    for (int i = 0; i < n_state; i++) {
        ct_tensor *param = graph->state[i];
        if (param->role != CT_ROLE_PARAM || !param->grad)
            continue;
        ct_tensor *srcs[5] = {param, param->grad, zero_state(graph, param, "exp_avg"),
                              zero_state(graph, param, "exp_avg_sq"), check};
        if (!srcs[2] || !srcs[3])
            return graph->status;
        ct_tensor *node = update_node(graph, CT_OP_ADAM_UPDATE, param, check ? 5 : 4, srcs);
        if (!node)
            return graph->status;
        node->attr.adam = args;
    }
    return graph->status;
}
