/*
 * The ONNX ops cuttle imports, one function each (onnx_import.h), for
 * opsets 13 to 17 (docs/onnx.md lists them with their attributes).  Each
 * refuses what it does not handle (an attribute value, a layout, a
 * broadcast) with a message naming it: a model runs as written or not at
 * all, never approximately.
 */
#include "io/onnx_import.h"

#include <string.h>

#include "core/error.h"

#define IM_MAX_INTS 64 /* the longest shape or index list a shape computation holds */

/* ---- layers ------------------------------------------------------------------------ */

/* kernel_shape, strides, pads and dilations of a 2-D Conv or pool: pads
 * [top, left, bottom, right] must be symmetric; auto_pad NOTSET or VALID. */
static ct_status window(importer *im, int64_t kernel[2], int stride[2], int pad[2],
                        int dilation[2])
{
    int64_t strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dilations[2] = {1, 1};
    const char *auto_pad = im_attr_string(im, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
        return im_fail(im, CT_ERR_UNSUPPORTED, "auto_pad %s is not supported (NOTSET with "
                       "explicit pads, or VALID)", auto_pad);
    if (!im_attr_ints(im, "kernel_shape", kernel, 2) && im->graph->status == CT_OK && !kernel[0])
        return im_fail(im, CT_ERR_UNSUPPORTED, "needs kernel_shape with 2 values");
    im_attr_ints(im, "strides", strides, 2);
    im_attr_ints(im, "pads", pads, 4);
    im_attr_ints(im, "dilations", dilations, 2);
    if (im->graph->status != CT_OK)
        return im->graph->status;
    if (pads[0] != pads[2] || pads[1] != pads[3])
        return im_fail(im, CT_ERR_UNSUPPORTED, "pads [%lld, %lld, %lld, %lld] are not symmetric",
                       (long long)pads[0], (long long)pads[1], (long long)pads[2],
                       (long long)pads[3]);
    for (int d = 0; d < 2; d++) {
        if (kernel[d] < 1 || strides[d] < 1 || pads[d] < 0 || dilations[d] < 1 ||
            kernel[d] > INT32_MAX || strides[d] > INT32_MAX || pads[d] > INT32_MAX ||
            dilations[d] > INT32_MAX)
            return im_fail(im, CT_ERR_UNSUPPORTED, "a kernel, stride, pad or dilation is out of "
                           "range");
        stride[d] = (int)strides[d];
        pad[d] = (int)pads[d];
        if (dilation)
            dilation[d] = (int)dilations[d];
        else if (dilations[d] != 1)
            return im_fail(im, CT_ERR_UNSUPPORTED, "dilated pooling is not supported");
    }
    return CT_OK;
}

static ct_status op_conv(importer *im)
{
    static const char *const attrs[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads",
                                        "strides", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    ct_tensor *x = im_tensor(im, 0);
    ct_tensor *w = im_weight(im, 1, CT_ROLE_PARAM, false);
    ct_tensor *b = im_value_of(im, 2) ? im_weight(im, 2, CT_ROLE_PARAM, false) : NULL;
    if (!x || !w || im->graph->status != CT_OK)
        return im->graph->status;
    if (w->ndim != 4)
        return im_fail(im, CT_ERR_UNSUPPORTED, "a %dD convolution; cuttle's are 2-D", w->ndim - 2);
    int64_t kernel[2] = {w->shape[2], w->shape[3]};
    ct_conv_args args = {.groups = (int)im_attr_int(im, "group", 1)};
    CT_TRY(window(im, kernel, args.stride, args.pad, args.dilation));
    if (kernel[0] != w->shape[2] || kernel[1] != w->shape[3])
        return im_fail(im, CT_ERR_SHAPE, "kernel_shape differs from the weight's");
    return im_set_tensor(im, 0, ct_conv2d(im->graph, x, w, b, args));
}

static ct_status pool(importer *im, bool max)
{
    static const char *const max_attrs[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                            "pads", "storage_order", "strides", NULL};
    static const char *const avg_attrs[] = {"auto_pad", "ceil_mode", "count_include_pad",
                                            "kernel_shape", "pads", "strides", NULL};
    if (im_check_attrs(im, max ? max_attrs : avg_attrs) != CT_OK)
        return im->graph->status;
    if (im_attr_int(im, "ceil_mode", 0) != 0)
        return im_fail(im, CT_ERR_UNSUPPORTED, "ceil_mode=1 is not supported");
    if (im_attr_int(im, "storage_order", 0) != 0 || im->node->n_outputs > 1)
        return im_fail(im, CT_ERR_UNSUPPORTED, "the Indices output and storage_order are not "
                       "supported");
    int64_t kernel[2] = {0, 0};
    ct_pool_args args = {.exclude_pad = im_attr_int(im, "count_include_pad", 0) == 0};
    if (max) {
        int dilation[2];
        CT_TRY(window(im, kernel, args.stride, args.pad, dilation));
        if (dilation[0] != 1 || dilation[1] != 1)
            return im_fail(im, CT_ERR_UNSUPPORTED, "dilated pooling is not supported");
    } else {
        CT_TRY(window(im, kernel, args.stride, args.pad, NULL));
    }
    args.kernel[0] = (int)kernel[0];
    args.kernel[1] = (int)kernel[1];
    ct_tensor *x = im_tensor(im, 0);
    return im_set_tensor(im, 0, max ? ct_maxpool2d(im->graph, x, args)
                                    : ct_avgpool2d(im->graph, x, args));
}

static ct_status op_maxpool(importer *im)
{
    return pool(im, true);
}

static ct_status op_averagepool(importer *im)
{
    return pool(im, false);
}


/* A linear layer y = x w^T + b from a weight stored [out, in] (transposed:
 * stored [in, out]). */
static ct_status linear(importer *im, int weight, bool transposed, int bias)
{
    ct_tensor *x = im_tensor(im, 0);
    ct_tensor *w = im_weight(im, weight, CT_ROLE_PARAM, transposed);
    ct_tensor *b = bias >= 0 ? im_weight(im, bias, CT_ROLE_PARAM, false) : NULL;
    if (!x || !w || (bias >= 0 && !b))
        return im->graph->status;
    if (x->ndim != 2)
        return im_fail(im, CT_ERR_UNSUPPORTED, "input A is %dD; cuttle's linear layers take "
                       "[N, features]", x->ndim);
    if (b && b->ndim != 1)
        return im_fail(im, CT_ERR_UNSUPPORTED, "bias '%s' is %dD; cuttle adds a bias of [out] "
                       "only", ct_tensor_name(b), b->ndim);
    return im_set_tensor(im, 0, ct_linear(im->graph, x, w, b));
}

static ct_status op_gemm(importer *im)
{
    static const char *const attrs[] = {"alpha", "beta", "transA", "transB", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    bool has_c = im_value_of(im, 2) != NULL;
    if (im_attr_float(im, "alpha", 1.0f) != 1.0f ||
        (has_c && im_attr_float(im, "beta", 1.0f) != 1.0f) || im_attr_int(im, "transA", 0))
        return im_fail(im, CT_ERR_UNSUPPORTED, "alpha, beta other than 1 or transA=1 are not "
                       "supported (torch.nn.Linear exports alpha=1, beta=1, transB=1)");
    return linear(im, 1, im_attr_int(im, "transB", 0) == 0, has_c ? 2 : -1);
}

/* The input of `node` that is not `name`, when it is a 1-D float initializer. */
static const im_value *bias_of_add(importer *im, const onnx_node *node, const char *name)
{
    if (strcmp(node->op_type, "Add") != 0 || node->n_inputs != 2)
        return NULL;
    const char *other = strcmp(node->inputs[0], name) == 0 ? node->inputs[1] : node->inputs[0];
    const im_value *v = im_find_value(im, other);
    const onnx_tensor *init = v && v->initializer >= 0 ? &im->m->initializers[v->initializer]
                                                       : NULL;
    return init && init->ndim == 1 && init->data_type == ONNX_FLOAT ? v : NULL;
}

/* MatMul by a [in, out] weight.  When its one reader is an Add of a 1-D
 * initializer (a Linear as some exporters write it), that is its bias: the
 * layer takes it, and the Add passes the layer's output on. */
static ct_status op_matmul(importer *im)
{
    static const char *const attrs[] = {NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    const onnx_node *next = NULL;
    const im_value *bias = NULL;
    if (im_consumers(im, im->node->outputs[0], &next) == 1 && next)
        bias = bias_of_add(im, next, im->node->outputs[0]);
    ct_tensor *x = im_tensor(im, 0);
    ct_tensor *w = im_weight(im, 1, CT_ROLE_PARAM, true);
    ct_tensor *b = bias ? im_weight_of(im, bias, CT_ROLE_PARAM, false) : NULL;
    if (!x || !w || (bias && !b))
        return im->graph->status;
    if (x->ndim != 2)
        return im_fail(im, CT_ERR_UNSUPPORTED, "input A is %dD; cuttle's linear layers take "
                       "[N, features]", x->ndim);
    CT_TRY(im_set_tensor(im, 0, ct_linear(im->graph, x, w, b)));
    if (b)
        im_find_value(im, im->node->outputs[0])->bias_added = true;
    return CT_OK;
}

static ct_status op_batchnorm(importer *im)
{
    static const char *const attrs[] = {"epsilon", "momentum", "training_mode", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    if (im_attr_int(im, "training_mode", 0) != 0 || im->node->n_outputs > 1)
        return im_fail(im, CT_ERR_UNSUPPORTED, "training_mode=1 (batch statistics as outputs) "
                       "is not supported; export the model in eval mode");
    ct_tensor *x = im_tensor(im, 0);
    ct_tensor *gamma = im_weight(im, 1, CT_ROLE_PARAM, false);
    ct_tensor *beta = im_weight(im, 2, CT_ROLE_PARAM, false);
    ct_tensor *mean = im_weight(im, 3, CT_ROLE_BUFFER, false);
    ct_tensor *var = im_weight(im, 4, CT_ROLE_BUFFER, false);
    /* ONNX's momentum weighs the running value; PyTorch's (and cuttle's) the batch's */
    float momentum = 1.0f - im_attr_float(im, "momentum", 0.9f);
    return im_set_tensor(im, 0, ct_batchnorm2d(im->graph, x, gamma, beta, mean, var,
                                               im_attr_float(im, "epsilon", 1e-5f), momentum));
}

/* ---- elementwise and activations ------------------------------------------------------ */

static ct_status unary(importer *im, ct_tensor *(*fn)(ct_graph *, ct_tensor *))
{
    static const char *const attrs[] = {NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    return im_set_tensor(im, 0, fn(im->graph, im_tensor(im, 0)));
}

static ct_status op_relu(importer *im)
{
    return unary(im, ct_relu);
}

static ct_status op_sigmoid(importer *im)
{
    return unary(im, ct_sigmoid);
}

static ct_status op_tanh(importer *im)
{
    return unary(im, ct_tanh);
}

static ct_status op_global_averagepool(importer *im)
{
    return unary(im, ct_global_avgpool);
}

/* Add of two tensors of one shape, or of a linear layer's output and a
 * bias [out] (MatMul + Add). */
static ct_status op_add(importer *im)
{
    static const char *const attrs[] = {NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    const im_value *va = im_value_of(im, 0), *vb = im_value_of(im, 1);
    if (va && vb && (va->bias_added || vb->bias_added)) /* MatMul took this Add's bias */
        return im_set_tensor(im, 0, va->bias_added ? va->tensor : vb->tensor);
    ct_tensor *a = im_tensor(im, 0), *b = im_tensor(im, 1);
    if (!a || !b)
        return im->graph->status;
    if (!ct_same_shape(a, b))
        return im_fail(im, CT_ERR_UNSUPPORTED, "adds '%s' and '%s' of different shapes; cuttle "
                       "adds tensors of the same shape (no broadcasting)", ct_tensor_name(a),
                       ct_tensor_name(b));
    return im_set_tensor(im, 0, ct_add(im->graph, a, b));
}

static ct_status op_softmax(importer *im)
{
    static const char *const attrs[] = {"axis", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    ct_tensor *x = im_tensor(im, 0);
    if (!x)
        return im->graph->status;
    int64_t axis = im_attr_int(im, "axis", -1);
    if (x->ndim != 2 || (axis != 1 && axis != -1))
        return im_fail(im, CT_ERR_UNSUPPORTED, "softmax over axis %lld of a %dD tensor; cuttle's "
                       "is over the classes of [N, classes]", (long long)axis, x->ndim);
    return im_set_tensor(im, 0, ct_softmax(im->graph, x));
}

/* Identity, and Dropout in inference (its mask output unused). */
static ct_status op_identity(importer *im)
{
    static const char *const attrs[] = {"seed", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    const onnx_node *first = NULL;
    if (im->node->n_outputs > 1 && *im->node->outputs[1] &&
        im_consumers(im, im->node->outputs[1], &first) > 0)
        return im_fail(im, CT_ERR_UNSUPPORTED, "Dropout's mask output is used");
    int64_t training = 0; /* Dropout's third input, training_mode */
    int count = 0;
    if (im_value_of(im, 2) && (!im_ints(im, 2, &training, 1, &count) || training))
        return im_fail(im, CT_ERR_UNSUPPORTED, "Dropout in training mode (or with a training_mode "
                       "not known when the model is built)");
    const im_value *v = im_value_of(im, 0);
    if (v && v->is_const)
        return im_set_const(im, 0, v->const_ndim, v->const_values, v->const_count);
    if (v && v->initializer >= 0) /* torch.onnx shares equal initializers this way */
        return im_set_initializer(im, 0, v->initializer);
    return im_set_tensor(im, 0, im_tensor(im, 0));
}

/* Pad by zeros on no side (torch.onnx writes one before F.avg_pool2d): an
 * identity.  Real padding belongs in the next Conv's or pool's pads. */
static ct_status op_pad(importer *im)
{
    static const char *const attrs[] = {"mode", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    int64_t pads[2 * CT_MAX_DIMS];
    int count = 0;
    if (!im_ints(im, 1, pads, 2 * CT_MAX_DIMS, &count))
        return im->graph->status;
    bool zero = strcmp(im_attr_string(im, "mode", "constant"), "constant") == 0 &&
                !im_value_of(im, 3); /* no axes */
    for (int i = 0; i < count; i++)
        zero = zero && pads[i] == 0;
    if (!zero)
        return im_fail(im, CT_ERR_UNSUPPORTED, "padding that is not zero on every side (cuttle "
                       "pads inside Conv and pooling: use their pads)");
    return im_set_tensor(im, 0, im_tensor(im, 0));
}

/* ---- shapes ------------------------------------------------------------------------- */

static ct_status op_flatten(importer *im)
{
    static const char *const attrs[] = {"axis", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    ct_tensor *x = im_tensor(im, 0);
    if (!x)
        return im->graph->status;
    int64_t axis = im_attr_int(im, "axis", 1);
    if (axis < 0)
        axis += x->ndim;
    if (axis < 0 || axis > x->ndim)
        return im_fail(im, CT_ERR_SHAPE, "axis %lld is out of range", (long long)axis);
    int64_t shape[2] = {1, 1};
    for (int d = 0; d < x->ndim; d++)
        shape[d >= axis] *= x->shape[d];
    return im_set_tensor(im, 0, ct_reshape(im->graph, x, 2, shape));
}

static ct_status op_reshape(importer *im)
{
    static const char *const attrs[] = {"allowzero", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    ct_tensor *x = im_tensor(im, 0);
    int64_t shape[IM_MAX_INTS];
    int ndim = 0;
    if (!x || !im_ints(im, 1, shape, IM_MAX_INTS, &ndim))
        return im->graph->status;
    if (ndim > CT_MAX_DIMS)
        return im_fail(im, CT_ERR_UNSUPPORTED, "a %d-D shape (at most %d)", ndim, CT_MAX_DIMS);
    bool allow_zero = im_attr_int(im, "allowzero", 0) != 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0 && !allow_zero) /* 0: keep the input's size */
            shape[d] = d < x->ndim ? x->shape[d] : 0;
    }
    return im_set_tensor(im, 0, ct_reshape(im->graph, x, ndim, shape));
}

static ct_status op_shape(importer *im)
{
    static const char *const attrs[] = {"start", "end", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    const im_value *v = im_value_of(im, 0);
    ct_tensor *x = v && v->tensor ? v->tensor : im_tensor(im, 0);
    if (!x)
        return im->graph->status;
    int64_t start = im_attr_int(im, "start", 0), end = im_attr_int(im, "end", x->ndim);
    start = start < 0 ? start + x->ndim : start;
    end = end < 0 ? end + x->ndim : end > x->ndim ? x->ndim : end;
    start = start < 0 ? 0 : start > x->ndim ? x->ndim : start;
    int64_t count = end > start ? end - start : 0;
    return im_set_const(im, 0, 1, x->shape + start, count);
}

static ct_status op_constant(importer *im)
{
    static const char *const attrs[] = {"value", "value_int", "value_ints", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    const onnx_attr *a = im->node->n_attrs == 1 ? &im->node->attrs[0] : NULL;
    if (a && a->type == ONNX_ATTR_INT)
        return im_set_const(im, 0, 0, &a->i, 1);
    if (a && a->type == ONNX_ATTR_INTS)
        return im_set_const(im, 0, 1, a->ints, a->n_ints);
    const onnx_tensor *t = a && a->type == ONNX_ATTR_TENSOR ? a->t : NULL;
    if (!t || !t->data || (t->data_type != ONNX_INT64 && t->data_type != ONNX_INT32) ||
        t->ndim > 1 || t->numel > IM_MAX_INTS)
        return im_fail(im, CT_ERR_UNSUPPORTED, "cuttle imports integer constants of up to %d "
                       "values (for shapes); this one is %s", IM_MAX_INTS,
                       t ? onnx_dtype_name(t->data_type) : "not a tensor");
    int64_t values[IM_MAX_INTS];
    for (int64_t i = 0; i < t->numel; i++)
        values[i] = onnx_tensor_int(t, i);
    return im_set_const(im, 0, t->ndim, values, t->numel);
}

/* Gather on a shape: data and indices integers known at build time. */
static ct_status op_gather(importer *im)
{
    static const char *const attrs[] = {"axis", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    int64_t data[IM_MAX_INTS], indices[IM_MAX_INTS], out[IM_MAX_INTS];
    int n_data = 0, n_indices = 0;
    if (im_attr_int(im, "axis", 0) != 0)
        return im_fail(im, CT_ERR_UNSUPPORTED, "Gather on axis %lld; cuttle gathers from shapes "
                       "(axis 0)", (long long)im_attr_int(im, "axis", 0));
    if (!im_ints(im, 0, data, IM_MAX_INTS, &n_data) ||
        !im_ints(im, 1, indices, IM_MAX_INTS, &n_indices))
        return im->graph->status;
    for (int i = 0; i < n_indices; i++) {
        int64_t at = indices[i] < 0 ? indices[i] + n_data : indices[i];
        if (at < 0 || at >= n_data)
            return im_fail(im, CT_ERR_SHAPE, "index %lld is out of range", (long long)indices[i]);
        out[i] = data[at];
    }
    const im_value *index_value = im_value_of(im, 1);
    int ndim = index_value->is_const ? index_value->const_ndim
                                     : im->m->initializers[index_value->initializer].ndim;
    return im_set_const(im, 0, ndim, out, n_indices);
}

/* Unsqueeze of a scalar into a 1-element list (axes [0]), as shapes do. */
static ct_status op_unsqueeze(importer *im)
{
    static const char *const attrs[] = {NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    const im_value *v = im_required(im, 0);
    int64_t axes[IM_MAX_INTS];
    int n_axes = 0;
    if (!v || !im_ints(im, 1, axes, IM_MAX_INTS, &n_axes))
        return im->graph->status;
    if (!v->is_const || v->const_ndim != 0 || n_axes != 1 || (axes[0] != 0 && axes[0] != -1))
        return im_fail(im, CT_ERR_UNSUPPORTED, "cuttle unsqueezes scalars of a shape computation "
                       "only (axes [0])");
    return im_set_const(im, 0, 1, v->const_values, 1);
}

/* Concat of tensors along channels, or of shape lists. */
static ct_status op_concat(importer *im)
{
    static const char *const attrs[] = {"axis", NULL};
    if (im_check_attrs(im, attrs) != CT_OK)
        return im->graph->status;
    int64_t axis = im_attr_int(im, "axis", 0);
    const im_value *first = im_required(im, 0);
    if (!first)
        return im->graph->status;
    int n = im->node->n_inputs;
    if (first->is_const) {
        int64_t values[IM_MAX_INTS];
        int total = 0, count = 0;
        for (int i = 0; i < n; i++) {
            if (!im_ints(im, i, values + total, IM_MAX_INTS - total, &count))
                return im->graph->status;
            total += count;
        }
        return im_set_const(im, 0, 1, values, total);
    }
    ct_tensor *xs[CT_MAX_SRC];
    if (n > CT_MAX_SRC)
        return im_fail(im, CT_ERR_UNSUPPORTED, "concatenates %d tensors; at most %d", n,
                       CT_MAX_SRC);
    for (int i = 0; i < n; i++)
        if (!(xs[i] = im_tensor(im, i)))
            return im->graph->status;
    if (axis != 1 && axis != 1 - xs[0]->ndim)
        return im_fail(im, CT_ERR_UNSUPPORTED, "concatenates along axis %lld; cuttle "
                       "concatenates channels (axis 1)", (long long)axis);
    return im_set_tensor(im, 0, ct_concat(im->graph, n, xs));
}

/* ---- the table ---------------------------------------------------------------------------- */

static const struct {
    const char *name;
    im_op_fn fn;
} im_ops[] = {
    {"Add", op_add},
    {"AveragePool", op_averagepool},
    {"BatchNormalization", op_batchnorm},
    {"Concat", op_concat},
    {"Constant", op_constant},
    {"Conv", op_conv},
    {"Dropout", op_identity},
    {"Flatten", op_flatten},
    {"Gather", op_gather},
    {"Gemm", op_gemm},
    {"GlobalAveragePool", op_global_averagepool},
    {"Identity", op_identity},
    {"MatMul", op_matmul},
    {"MaxPool", op_maxpool},
    {"Pad", op_pad},
    {"Relu", op_relu},
    {"Reshape", op_reshape},
    {"Shape", op_shape},
    {"Sigmoid", op_sigmoid},
    {"Softmax", op_softmax},
    {"Tanh", op_tanh},
    {"Unsqueeze", op_unsqueeze},
};
#define IM_N_OPS ((int)(sizeof im_ops / sizeof im_ops[0]))

im_op_fn im_find_op(const char *op_type)
{
    for (int i = 0; i < IM_N_OPS; i++)
        if (strcmp(im_ops[i].name, op_type) == 0)
            return im_ops[i].fn;
    return NULL;
}

const char *im_op_list(void)
{
    return "Add, AveragePool, BatchNormalization, Concat, Constant, Conv, Dropout, Flatten, "
           "Gather, Gemm, GlobalAveragePool, Identity, MatMul, MaxPool, Pad, Relu, Reshape, Shape, "
           "Sigmoid, Softmax, Tanh, Unsqueeze";
}
