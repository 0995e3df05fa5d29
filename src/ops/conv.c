/*
 * conv2d and linear: builders (shape rules) and backward rules.
 *   conv2d: dx = conv2d_bwd_data(dy, w), dw = conv2d_bwd_weight(x, dy),
 *           db = channel_sum(dy)
 *   linear: dx = dy w,  dw = dy^T x,  db = channel_sum(dy)
 */
#include "core/window_math.h"
#include "ops/common.h"

static int arg_or(int value, int fallback)
{
    return value ? value : fallback;
}

/* Autocast of the operands of conv2d and linear (ops/autocast.c): the input
 * and the weight in the op's dtype (the graph's 16-bit type, else the
 * input's), the bias f32.  Returns the op's dtype; CT_DTYPE_COUNT when a
 * cast failed (the graph has the error). */
static ct_dtype cast_operands(ct_graph *graph, ct_tensor **srcs, int n_src)
{
    ct_dtype dtype = ct_autocast_dtype(graph);
    if (dtype == CT_F32)
        dtype = srcs[0]->dtype;
    srcs[0] = ct_autocast(graph, srcs[0], dtype);
    srcs[1] = ct_autocast(graph, srcs[1], dtype);
    if (n_src == 3)
        srcs[2] = ct_autocast(graph, srcs[2], CT_F32);
    return graph->status == CT_OK ? dtype : CT_DTYPE_COUNT;
}

ct_tensor *ct_conv2d(ct_graph *graph, ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                     ct_conv_args args)
{
    if (!graph)
        return NULL;
    ct_tensor *srcs[3] = {x, weight, bias};
    int n_src = bias ? 3 : 2;
    if (!ct_graph_check_srcs(graph, "conv2d", n_src, srcs))
        return NULL;
    CT_DESCRIBE(x);
    CT_DESCRIBE(weight);
    if (!ct_check_float(graph, "conv2d", n_src, srcs))
        return NULL;
    if (x->ndim != 4 || weight->ndim != 4)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "conv2d: input %s and weight %s must both be 4-D (NCHW and OIHW)",
                             x_desc, weight_desc);
    ct_conv2d_shape s = {0};
    s.groups = arg_or(args.groups, 1);
    s.stride_h = arg_or(args.stride[0], 1);
    s.stride_w = arg_or(args.stride[1], 1);
    s.dilation_h = arg_or(args.dilation[0], 1);
    s.dilation_w = arg_or(args.dilation[1], 1);
    s.pad_h = args.pad[0];
    s.pad_w = args.pad[1];
    if (s.groups < 0 || s.stride_h < 0 || s.stride_w < 0 || s.dilation_h < 0 ||
        s.dilation_w < 0 || s.pad_h < 0 || s.pad_w < 0)
        return ct_graph_fail(graph, CT_ERR_ARG,
                             "conv2d on %s: stride, padding, dilation and groups must not be "
                             "negative",
                             x_desc);
    s.n_batch = (int)x->shape[0];
    s.in_channels = (int)x->shape[1];
    s.in_h = (int)x->shape[2];
    s.in_w = (int)x->shape[3];
    s.out_channels = (int)weight->shape[0];
    s.kernel_h = (int)weight->shape[2];
    s.kernel_w = (int)weight->shape[3];
    if (s.in_channels % s.groups || s.out_channels % s.groups)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "conv2d: groups=%d must divide the input channels of %s and the "
                             "output channels of weight %s",
                             s.groups, x_desc, weight_desc);
    if (weight->shape[1] != s.in_channels / s.groups)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "conv2d: input %s has %d channels, so weight %s needs %d input "
                             "channels (in_channels/groups, groups=%d), not %lld",
                             x_desc, s.in_channels, weight_desc, s.in_channels / s.groups,
                             s.groups, (long long)weight->shape[1]);
    if (bias && (bias->ndim != 1 || bias->shape[0] != s.out_channels)) {
        CT_DESCRIBE(bias);
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "conv2d: bias %s must be [%d] to match weight %s", bias_desc,
                             s.out_channels, weight_desc);
    }
    s.out_h = ct_window_count(s.in_h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h);
    s.out_w = ct_window_count(s.in_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w);
    if (s.out_h == 0 || s.out_w == 0)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "conv2d: kernel %dx%d (dilation %dx%d) is larger than input %s "
                             "padded by %dx%d",
                             s.kernel_h, s.kernel_w, s.dilation_h, s.dilation_w, x_desc,
                             s.pad_h, s.pad_w);
    int64_t shape[4] = {s.n_batch, s.out_channels, s.out_h, s.out_w};
    ct_dtype dtype = cast_operands(graph, srcs, n_src);
    if (dtype == CT_DTYPE_COUNT)
        return NULL;
    ct_tensor *y = ct_graph_add_node(graph, CT_OP_CONV2D, dtype, 4, shape, n_src, srcs);
    if (y)
        y->attr.conv = s;
    return y;
}

/* db for conv and linear: sum of dy over every dim but 1, in the bias's
 * dtype (f32). */
static ct_tensor *channel_sum(ct_graph *graph, ct_tensor *dy, const ct_tensor *bias)
{
    int64_t shape[1] = {dy->shape[1]};
    return ct_graph_add_node(graph, CT_OP_CHANNEL_SUM, bias->dtype, 1, shape, 1, &dy);
}

ct_status ct_conv2d_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                             const bool *needs_grad, ct_tensor **dsrc)
{
    ct_tensor *x = node->src[0], *weight = node->src[1];
    if (needs_grad[0]) {
        ct_tensor *in[2] = {dy, weight};
        dsrc[0] = ct_graph_add_node(graph, CT_OP_CONV2D_BWD_DATA, x->dtype, 4, x->shape, 2, in);
        if (dsrc[0])
            dsrc[0]->attr.conv = node->attr.conv;
    }
    if (needs_grad[1]) {
        ct_tensor *in[2] = {x, dy};
        dsrc[1] = ct_graph_add_node(graph, CT_OP_CONV2D_BWD_WEIGHT, weight->dtype, 4,
                                    weight->shape, 2, in);
        if (dsrc[1])
            dsrc[1]->attr.conv = node->attr.conv;
    }
    if (node->n_src == 3 && needs_grad[2])
        dsrc[2] = channel_sum(graph, dy, node->src[2]);
    return graph->status;
}

ct_tensor *ct_linear(ct_graph *graph, ct_tensor *x, ct_tensor *weight, ct_tensor *bias)
{
    if (!graph)
        return NULL;
    ct_tensor *srcs[3] = {x, weight, bias};
    int n_src = bias ? 3 : 2;
    if (!ct_graph_check_srcs(graph, "linear", n_src, srcs) ||
        !ct_check_float(graph, "linear", n_src, srcs))
        return NULL;
    CT_DESCRIBE(x);
    CT_DESCRIBE(weight);
    if (x->ndim != 2 || weight->ndim != 2)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "linear: input %s and weight %s must be 2-D (flatten the input "
                             "first)",
                             x_desc, weight_desc);
    if (x->shape[1] != weight->shape[1])
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "linear: input %s has %lld features but weight %s expects %lld",
                             x_desc, (long long)x->shape[1], weight_desc,
                             (long long)weight->shape[1]);
    if (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0])) {
        CT_DESCRIBE(bias);
        return ct_graph_fail(graph, CT_ERR_SHAPE, "linear: bias %s must be [%lld] to match %s",
                             bias_desc, (long long)weight->shape[0], weight_desc);
    }
    int64_t shape[2] = {x->shape[0], weight->shape[0]};
    ct_dtype dtype = cast_operands(graph, srcs, n_src);
    if (dtype == CT_DTYPE_COUNT)
        return NULL;
    return ct_graph_add_node(graph, CT_OP_LINEAR, dtype, 2, shape, n_src, srcs);
}

ct_status ct_linear_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                             const bool *needs_grad, ct_tensor **dsrc)
{
    ct_tensor *x = node->src[0], *weight = node->src[1];
    if (needs_grad[0]) {
        ct_tensor *in[2] = {dy, weight};
        dsrc[0] = ct_graph_add_node(graph, CT_OP_LINEAR_BWD_DATA, x->dtype, 2, x->shape, 2, in);
    }
    if (needs_grad[1]) {
        ct_tensor *in[2] = {x, dy};
        dsrc[1] = ct_graph_add_node(graph, CT_OP_LINEAR_BWD_WEIGHT, weight->dtype, 2,
                                    weight->shape, 2, in);
    }
    if (node->n_src == 3 && needs_grad[2])
        dsrc[2] = channel_sum(graph, dy, node->src[2]);
    return graph->status;
}
