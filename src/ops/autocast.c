/*
 * Casts between float dtypes, and autocast: the rules by which the op
 * builders place 16-bit values when the graph's precision is bf16 or fp16
 * (ct_graph_set_precision), as PyTorch's autocast does on CUDA:
 *   - convolution and linear take 16-bit copies of their input and weight
 *     (the bias stays f32: the kernels add it in f32 before the one rounding
 *     of the output) and store a 16-bit output;
 *   - ops that move or select values (relu, pooling, dropout, add, concat,
 *     views) keep their input's dtype; batchnorm keeps f32 statistics and
 *     parameters and outputs its input's dtype;
 *   - softmax and custom ops compute in f32 (their input cast up); the
 *     cross-entropy reads 16-bit logits and computes in f32.
 * A weight's 16-bit copy is made once per graph and shared by every op that
 * uses it (ct_tensor.cast_cache); it runs each step, as the weights change.
 *   cast: dx = cast(dy) back to x's dtype.
 */
#include "ops/common.h"

static bool is_float(ct_dtype dtype)
{
    return dtype == CT_F32 || dtype == CT_F16 || dtype == CT_BF16;
}

bool ct_check_float(ct_graph *graph, const char *op_name, int n, ct_tensor *const *srcs)
{
    for (int i = 0; i < n; i++) {
        if (srcs[i] && !is_float(srcs[i]->dtype)) {
            char desc[CT_DESCRIBE_CAPACITY];
            ct_graph_fail(graph, CT_ERR_DTYPE, "%s: %s is %s; this op takes f32, f16 or bf16",
                          op_name, ct_tensor_describe(srcs[i], desc, sizeof desc),
                          ct_dtype_name(srcs[i]->dtype));
            return false;
        }
    }
    return true;
}

ct_tensor *ct_cast(ct_graph *graph, ct_tensor *x, ct_dtype dtype)
{
    if (!graph)
        return NULL;
    if (!ct_graph_check_srcs(graph, "cast", 1, &x) || !ct_check_float(graph, "cast", 1, &x))
        return NULL;
    if (!is_float(dtype))
        return ct_graph_fail(graph, CT_ERR_DTYPE, "cast: to %s; casts go to f32, f16 or bf16",
                             ct_dtype_name(dtype));
    if (x->dtype == dtype)
        return x;
    return ct_graph_add_node(graph, CT_OP_CAST, dtype, x->ndim, x->shape, 1, &x);
}

ct_status ct_cast_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                           const bool *needs_grad, ct_tensor **dsrc)
{
    if (needs_grad[0])
        dsrc[0] = ct_cast(graph, dy, node->src[0]->dtype);
    return graph->status;
}

ct_dtype ct_autocast_dtype(const ct_graph *graph)
{
    switch (graph->precision) {
    case CT_PRECISION_BF16: return CT_BF16;
    case CT_PRECISION_FP16: return CT_F16;
    case CT_PRECISION_FP32:
    case CT_PRECISION_TF32:
    case CT_PRECISION_COUNT: break;
    }
    return CT_F32;
}

ct_tensor *ct_autocast(ct_graph *graph, ct_tensor *x, ct_dtype dtype)
{
    if (!x || x->dtype == dtype)
        return x;
    if (x->cast_cache && x->cast_cache->dtype == dtype)
        return x->cast_cache;
    ct_tensor *y = ct_cast(graph, x, dtype);
    if (y && !x->cast_cache)
        x->cast_cache = y;
    return y;
}
