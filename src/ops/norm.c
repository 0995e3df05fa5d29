/*
 * batchnorm2d and dropout.
 *
 * batchnorm2d is two nodes: stats = bn_stats(x, running_mean, running_var)
 * ([2,C]: mean and 1/sqrt(var+eps) — of the batch while training, of the
 * running values while evaluating; training also updates the running values
 * in place) and y = bn_apply(x, stats, gamma, beta).  The backward rule of
 * bn_apply carries the whole training-mode gradient, so no gradient flows
 * through bn_stats:
 *   dparams = (dgamma, dbeta) = bn_bwd_params(x, dy, stats)
 *   dx = bn_bwd_data(x, dy, stats, gamma, dparams)
 *
 * dropout draws its mask from (seed, node id, step), so the backward node
 * (a dropout of dy with the forward node's stream) recomputes the same mask
 * instead of storing it.
 */
#include "ops/common.h"

static bool check_channel_vector(ct_graph *graph, const ct_tensor *v, int64_t channels,
                                 const char *x_desc)
{
    if (v->dtype == CT_F32 && v->ndim == 1 && v->shape[0] == channels)
        return true;
    CT_DESCRIBE(v);
    ct_graph_fail(graph, CT_ERR_SHAPE,
                  "batchnorm2d: %s must be an f32 vector of %lld channels to match input %s",
                  v_desc, (long long)channels, x_desc);
    return false;
}

ct_tensor *ct_batchnorm2d_tracked(ct_graph *graph, ct_tensor *x, ct_tensor *gamma,
                                  ct_tensor *beta, ct_tensor *running_mean,
                                  ct_tensor *running_var, ct_tensor *num_batches_tracked,
                                  float eps, float momentum)
{
    if (!graph)
        return NULL;
    ct_tensor *srcs[5] = {x, gamma, beta, running_mean, running_var};
    if (!ct_graph_check_srcs(graph, "batchnorm2d", 5, srcs) ||
        !ct_check_float(graph, "batchnorm2d", 1, &x))
        return NULL;
    CT_DESCRIBE(x);
    if (x->ndim != 4 && x->ndim != 2)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "batchnorm2d: input %s must be [N,C,H,W] or [N,C]", x_desc);
    for (int i = 1; i < 5; i++) {
        if (!check_channel_vector(graph, srcs[i], x->shape[1], x_desc))
            return NULL;
    }
    if (running_mean->role != CT_ROLE_BUFFER || running_var->role != CT_ROLE_BUFFER)
        return ct_graph_fail(graph, CT_ERR_ARG,
                             "batchnorm2d: running_mean and running_var must be ct_buffer "
                             "tensors (they are updated in place)");
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
        return ct_graph_fail(graph, CT_ERR_ARG,
                             "batchnorm2d on %s: eps %g must be > 0 and momentum %g in [0,1]",
                             x_desc, eps, momentum);
    if (num_batches_tracked && (num_batches_tracked->dtype != CT_I64 ||
                                ct_tensor_numel(num_batches_tracked) != 1))
        return ct_graph_fail(graph, CT_ERR_DTYPE,
                             "batchnorm2d: num_batches_tracked must be an i64 scalar buffer");
    ct_tensor *stats_in[4] = {x, running_mean, running_var, num_batches_tracked};
    int64_t stats_shape[2] = {2, x->shape[1]};
    ct_tensor *stats = ct_graph_add_node(graph, CT_OP_BN_STATS, CT_F32, 2, stats_shape,
                                         num_batches_tracked ? 4 : 3, stats_in);
    if (!stats)
        return NULL;
    stats->attr.bn.eps = eps;
    stats->attr.bn.momentum = momentum;
    ct_tensor *apply_in[4] = {x, stats, gamma, beta};
    return ct_node_like(graph, CT_OP_BN_APPLY, x, 4, apply_in);
}

ct_tensor *ct_batchnorm2d(ct_graph *graph, ct_tensor *x, ct_tensor *gamma, ct_tensor *beta,
                          ct_tensor *running_mean, ct_tensor *running_var, float eps,
                          float momentum)
{
    return ct_batchnorm2d_tracked(graph, x, gamma, beta, running_mean, running_var, NULL, eps,
                                  momentum);
}

ct_status ct_bn_apply_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                               const bool *needs_grad, ct_tensor **dsrc)
{
    ct_tensor *x = node->src[0], *stats = node->src[1], *gamma = node->src[2];
    ct_tensor *params_in[3] = {x, dy, stats};
    ct_tensor *dparams = ct_graph_add_node(graph, CT_OP_BN_BWD_PARAMS, CT_F32, 2, stats->shape,
                                           3, params_in);
    if (!dparams)
        return graph->status;
    int64_t channels = x->shape[1];
    if (needs_grad[0]) {
        ct_tensor *data_in[5] = {x, dy, stats, gamma, dparams};
        dsrc[0] = ct_node_like(graph, CT_OP_BN_BWD_DATA, x, 5, data_in);
    }
    if (needs_grad[2])
        dsrc[2] = ct_graph_add_view(graph, dparams, 0, 1, &channels);
    if (needs_grad[3])
        dsrc[3] = ct_graph_add_view(graph, dparams, (size_t)channels * sizeof(float), 1,
                                    &channels);
    return graph->status;
}

ct_tensor *ct_dropout(ct_graph *graph, ct_tensor *x, float p)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, "dropout", 1, &x) || !ct_check_float(graph, "dropout", 1, &x))
        return NULL;
    if (!(p >= 0 && p < 1)) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_ARG, "dropout on %s: p = %g must be in [0, 1)",
                             x_desc, p);
    }
    ct_tensor *y = ct_node_like(graph, CT_OP_DROPOUT, x, 1, &x);
    if (y) {
        y->attr.dropout.p = p;
        y->attr.dropout.stream = (uint32_t)y->id;
    }
    return y;
}

ct_status ct_dropout_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                              const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    dsrc[0] = ct_node_like(graph, CT_OP_DROPOUT, dy, 1, &dy);
    if (dsrc[0])
        dsrc[0]->attr.dropout = node->attr.dropout;
    return graph->status;
}
