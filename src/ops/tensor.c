/*
 * Structural ops: add, views (flatten, reshape), concat, fill.
 *   add: da = db = dy
 *   view: dx = dy viewed with x's shape
 *   concat: dx_i = slice_channels(dy, start_i, count_i)
 */
#include "ops/common.h"

#include <string.h>

ct_tensor *ct_node_like(ct_graph *graph, ct_op op, const ct_tensor *like, int n_src,
                        ct_tensor *const *srcs)
{
    return ct_graph_add_node(graph, op, like->dtype, like->ndim, like->shape, n_src, srcs);
}

/* Mixed float dtypes among srcs (an f32 and a 16-bit tensor): all cast to f32,
 * as PyTorch promotes.  False when a cast failed. */
static bool promote(ct_graph *graph, int n, ct_tensor **srcs)
{
    bool mixed = false;
    for (int i = 1; i < n; i++)
        mixed = mixed || srcs[i]->dtype != srcs[0]->dtype;
    for (int i = 0; mixed && i < n; i++)
        srcs[i] = ct_autocast(graph, srcs[i], CT_F32);
    return graph->status == CT_OK;
}

ct_tensor *ct_add(ct_graph *graph, ct_tensor *a, ct_tensor *b)
{
    if (!graph)
        return NULL;
    ct_tensor *srcs[2] = {a, b};
    if (!ct_graph_check_srcs(graph, "add", 2, srcs) || !ct_check_float(graph, "add", 2, srcs))
        return NULL;
    if (!ct_same_shape(a, b)) {
        CT_DESCRIBE(a);
        CT_DESCRIBE(b);
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "add: %s and %s differ in shape (add does not broadcast)", a_desc,
                             b_desc);
    }
    if (!promote(graph, 2, srcs))
        return NULL;
    return ct_node_like(graph, CT_OP_ADD, srcs[0], 2, srcs);
}

ct_status ct_add_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                          const bool *needs_grad, ct_tensor **dsrc)
{
    (void)node;
    dsrc[0] = needs_grad[0] ? dy : NULL;
    dsrc[1] = needs_grad[1] ? dy : NULL;
    return graph->status;
}

ct_tensor *ct_reshape(ct_graph *graph, ct_tensor *x, int ndim, const int64_t *shape)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, "reshape", 1, &x))
        return NULL;
    CT_DESCRIBE(x);
    if (ndim < 0 || ndim > CT_MAX_DIMS || (ndim > 0 && !shape))
        return ct_graph_fail(graph, CT_ERR_SHAPE, "reshape of %s: %d dimensions (0 to %d)",
                             x_desc, ndim, CT_MAX_DIMS);
    int64_t resolved[CT_MAX_DIMS];
    int infer_axis = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        resolved[i] = shape[i];
        if (shape[i] == -1 && infer_axis < 0) {
            infer_axis = i;
        } else if (shape[i] <= 0) {
            return ct_graph_fail(graph, CT_ERR_SHAPE,
                                 "reshape of %s: dimension %d is %lld (positive, or one -1)",
                                 x_desc, i, (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    int64_t count = ct_tensor_numel(x);
    if (infer_axis >= 0 && count % known == 0)
        resolved[infer_axis] = count / known;
    int64_t total = 1;
    for (int i = 0; i < ndim; i++)
        total *= resolved[i];
    if (total != count)
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "reshape of %s (%lld elements) to %d dims: element counts differ",
                             x_desc, (long long)count, ndim);
    return ct_graph_add_view(graph, x, 0, ndim, resolved);
}

ct_tensor *ct_flatten(ct_graph *graph, ct_tensor *x)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, "flatten", 1, &x))
        return NULL;
    if (x->ndim < 1) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE, "flatten: %s has no batch dimension", x_desc);
    }
    int64_t shape[2] = {x->shape[0], ct_tensor_numel(x) / x->shape[0]};
    return ct_graph_add_view(graph, x, 0, 2, shape);
}

ct_status ct_view_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                           const bool *needs_grad, ct_tensor **dsrc)
{
    (void)needs_grad;
    CT_ASSERT(node->view_offset == node->src[0]->view_offset);
    dsrc[0] = ct_graph_add_view(graph, dy, 0, node->src[0]->ndim, node->src[0]->shape);
    return graph->status;
}

ct_tensor *ct_concat(ct_graph *graph, int n, ct_tensor *const *xs)
{
    if (!graph)
        return NULL;
    if (n < 1 || n > CT_MAX_SRC || !xs)
        return ct_graph_fail(graph, CT_ERR_ARG, "concat: %d inputs (1 to %d allowed)", n,
                             CT_MAX_SRC);
    if (!ct_graph_check_srcs(graph, "concat", n, xs) || !ct_check_float(graph, "concat", n, xs))
        return NULL;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof shape);
    if (xs[0]->ndim < 2) {
        char first[CT_DESCRIBE_CAPACITY];
        return ct_graph_fail(graph, CT_ERR_SHAPE, "concat: %s needs a channel dimension (dim 1)",
                             ct_tensor_describe(xs[0], first, sizeof first));
    }
    for (int i = 1; i < n; i++) {
        bool fits = xs[i]->ndim == xs[0]->ndim;
        for (int d = 0; fits && d < xs[0]->ndim; d++)
            fits = d == 1 || xs[i]->shape[d] == xs[0]->shape[d];
        if (!fits) {
            char first[CT_DESCRIBE_CAPACITY], other[CT_DESCRIBE_CAPACITY];
            return ct_graph_fail(graph, CT_ERR_SHAPE,
                                 "concat: %s and %s must match in every dimension but 1",
                                 ct_tensor_describe(xs[0], first, sizeof first),
                                 ct_tensor_describe(xs[i], other, sizeof other));
        }
        shape[1] += xs[i]->shape[1];
    }
    ct_tensor *srcs[CT_MAX_SRC];
    memcpy(srcs, xs, (size_t)n * sizeof *srcs);
    if (!promote(graph, n, srcs))
        return NULL;
    return ct_graph_add_node(graph, CT_OP_CONCAT, srcs[0]->dtype, xs[0]->ndim, shape, n, srcs);
}

ct_status ct_concat_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                             const bool *needs_grad, ct_tensor **dsrc)
{
    int start = 0;
    for (int i = 0; i < node->n_src; i++) {
        ct_tensor *x = node->src[i];
        if (needs_grad[i]) {
            dsrc[i] = ct_node_like(graph, CT_OP_SLICE_CHANNELS, x, 1, &dy);
            if (!dsrc[i])
                return graph->status;
            dsrc[i]->attr.slice.start = start;
            dsrc[i]->attr.slice.count = (int)x->shape[1];
        }
        start += (int)x->shape[1];
    }
    return graph->status;
}

ct_tensor *ct_fill(ct_graph *graph, const ct_tensor *like, float value)
{
    ct_tensor *y = ct_graph_add_node(graph, CT_OP_FILL, CT_F32, like->ndim, like->shape, 0,
                                     NULL);
    if (y)
        y->attr.fill.value = value;
    return y;
}
