/*
 * Pooling: builders and backward rules.
 *   maxpool: dx = maxpool_bwd(x, dy)   (argmax recomputed from x)
 *   avgpool: dx = avgpool_bwd(dy)
 *   global avgpool: dx[n,c,i] = dy[n,c] / (H*W)
 */
#include "core/window_math.h"
#include "ops/common.h"

static ct_tensor *pool2d(ct_graph *graph, ct_op op, const char *op_name, ct_tensor *x,
                         ct_pool_args args)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, op_name, 1, &x) || !ct_check_float(graph, op_name, 1, &x))
        return NULL;
    CT_DESCRIBE(x);
    if (x->ndim != 4)
        return ct_graph_fail(graph, CT_ERR_SHAPE, "%s: input %s must be 4-D (NCHW)", op_name,
                             x_desc);
    ct_pool2d_shape s = {0};
    s.kernel_h = args.kernel[0];
    s.kernel_w = args.kernel[1];
    s.stride_h = args.stride[0] ? args.stride[0] : s.kernel_h;
    s.stride_w = args.stride[1] ? args.stride[1] : s.kernel_w;
    s.pad_h = args.pad[0];
    s.pad_w = args.pad[1];
    s.exclude_pad = args.exclude_pad;
    if (s.kernel_h <= 0 || s.kernel_w <= 0 || s.stride_h <= 0 || s.stride_w <= 0)
        return ct_graph_fail(graph, CT_ERR_ARG,
                             "%s on %s: kernel %dx%d and stride %dx%d must be positive",
                             op_name, x_desc, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w);
    if (s.pad_h < 0 || s.pad_w < 0 || 2 * s.pad_h > s.kernel_h || 2 * s.pad_w > s.kernel_w)
        return ct_graph_fail(graph, CT_ERR_ARG,
                             "%s on %s: padding %dx%d must be between 0 and half the kernel "
                             "%dx%d",
                             op_name, x_desc, s.pad_h, s.pad_w, s.kernel_h, s.kernel_w);
    s.n_batch = (int)x->shape[0];
    s.channels = (int)x->shape[1];
    s.in_h = (int)x->shape[2];
    s.in_w = (int)x->shape[3];
    s.out_h = ct_window_count(s.in_h, s.kernel_h, s.stride_h, s.pad_h, 1);
    s.out_w = ct_window_count(s.in_w, s.kernel_w, s.stride_w, s.pad_w, 1);
    if (s.out_h == 0 || s.out_w == 0)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "%s: kernel %dx%d is larger than input %s padded by %dx%d",
                             op_name, s.kernel_h, s.kernel_w, x_desc, s.pad_h, s.pad_w);
    int64_t shape[4] = {s.n_batch, s.channels, s.out_h, s.out_w};
    ct_tensor *y = ct_graph_add_node(graph, op, x->dtype, 4, shape, 1, &x);
    if (y)
        y->attr.pool = s;
    return y;
}

ct_tensor *ct_maxpool2d(ct_graph *graph, ct_tensor *x, ct_pool_args args)
{
    return pool2d(graph, CT_OP_MAXPOOL2D, "maxpool2d", x, args);
}

ct_tensor *ct_avgpool2d(ct_graph *graph, ct_tensor *x, ct_pool_args args)
{
    return pool2d(graph, CT_OP_AVGPOOL2D, "avgpool2d", x, args);
}

ct_status ct_maxpool2d_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    ct_tensor *in[2] = {node->src[0], dy};
    dsrc[0] = ct_node_like(graph, CT_OP_MAXPOOL2D_BWD, node->src[0], 2, in);
    if (dsrc[0])
        dsrc[0]->attr.pool = node->attr.pool;
    return graph->status;
}

ct_status ct_avgpool2d_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    dsrc[0] = ct_node_like(graph, CT_OP_AVGPOOL2D_BWD, node->src[0], 1, &dy);
    if (dsrc[0])
        dsrc[0]->attr.pool = node->attr.pool;
    return graph->status;
}

ct_tensor *ct_global_avgpool(ct_graph *graph, ct_tensor *x)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, "global_avgpool", 1, &x) ||
        !ct_check_float(graph, "global_avgpool", 1, &x))
        return NULL;
    if (x->ndim != 4) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE, "global_avgpool: input %s must be 4-D (NCHW)",
                             x_desc);
    }
    int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
    return ct_graph_add_node(graph, CT_OP_GLOBAL_AVGPOOL, x->dtype, 4, shape, 1, &x);
}

ct_status ct_global_avgpool_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                     const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    dsrc[0] = ct_node_like(graph, CT_OP_GLOBAL_AVGPOOL_BWD, node->src[0], 1, &dy);
    return graph->status;
}
