/*
 * ONNX export (ct_onnx_export): the inference graph from x to y, written
 * with the wire writer of protobuf.h.
 *
 * The nodes that y depends on are written in graph order (a topological
 * order).  Each cuttle op maps to one ONNX op, except: batchnorm's two
 * nodes (statistics, apply) are one BatchNormalization; dropout is nothing
 * (its output is its input's name); a view is a Flatten or a Reshape.
 * Parameters and buffers are initializers under their own names, which are
 * PyTorch's state_dict names, so the file reads like torch.onnx's with
 * do_constant_folding=False.  The int8 layers of a quantized plan
 * (qconv2d, qlinear) are written in QDQ form: QuantizeLinear and
 * DequantizeLinear on the input, DequantizeLinear of the int8 weight per
 * output channel, then the float Conv or Gemm (docs/quantization.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "io/atomic_file.h"
#include "io/onnx_import.h"
#include "io/protobuf.h"
#include "quant/int8.h"
#include "quant/model.h"

/* ModelProto, GraphProto, NodeProto, ... field numbers (onnx.proto). */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3,
    MODEL_GRAPH = 7, MODEL_OPSET_IMPORT = 8, MODEL_METADATA = 14,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5,
    ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20,
    TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9,
    VALUE_NAME = 1, VALUE_TYPE = 2, TYPE_TENSOR = 1, TENSOR_TYPE_ELEM = 1, TENSOR_TYPE_SHAPE = 2,
    SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
    ENTRY_KEY = 1, ENTRY_VALUE = 2, OPSET_VERSION = 2,
};

/* IR version 7 came with opset 13, 8 with opsets 14 to 17. */
#define EXPORT_IR_VERSION(opset) ((opset) >= 14 ? 8 : 7)
#define EXPORT_DEFAULT_OPSET 13
#define EXPORT_BATCH_PARAM "N"
#define EXPORT_NAME_CAPACITY 64

typedef struct exporter {
    ct_plan *plan;
    ct_graph *graph;
    const ct_onnx_export_args *args;
    const char *path;
    pb_writer w;
    ct_tensor *x, *y;
    bool *needed;       /* per node id: y depends on it */
    bool *initializer;  /* per node id: written as an initializer */
    const ct_tensor **alias; /* per node id: the tensor whose name it goes by (dropout) */
    int n_extra;        /* shape initializers written so far */
} exporter;

static ct_status unsupported(const exporter *e, const ct_tensor *node, const char *why)
{
    char desc[CT_DESCRIBE_CAPACITY];
    return ct_set_error(CT_ERR_UNSUPPORTED, "ct_onnx_export %s: %s %s", e->path,
                        ct_tensor_describe(node, desc, sizeof desc), why);
}

/* The ONNX name of a tensor: its own name, "input" for x, or "t<id>". */
static const char *value_name(const exporter *e, const ct_tensor *t, char *buf)
{
    while (e->alias[t->id])
        t = e->alias[t->id];
    if (t == e->x)
        return "input";
    if (t == e->y)
        return e->args->softmax ? "logits" : "output";
    if (t->name && t->role != CT_ROLE_NODE)
        return t->name;
    snprintf(buf, EXPORT_NAME_CAPACITY, "t%d", t->id);
    return buf;
}

/* ---- writing pieces ----------------------------------------------------------------- */

static void put_attr_int(pb_writer *w, const char *name, int64_t value)
{
    size_t mark = pb_begin(w, NODE_ATTRIBUTE);
    pb_put_string(w, ATTR_NAME, name);
    pb_put_varint(w, ATTR_I, (uint64_t)value);
    pb_put_varint(w, ATTR_TYPE, ONNX_ATTR_INT);
    pb_end(w, mark);
}

static void put_attr_float(pb_writer *w, const char *name, float value)
{
    size_t mark = pb_begin(w, NODE_ATTRIBUTE);
    pb_put_string(w, ATTR_NAME, name);
    pb_put_float(w, ATTR_F, value);
    pb_put_varint(w, ATTR_TYPE, ONNX_ATTR_FLOAT);
    pb_end(w, mark);
}

static void put_attr_ints(pb_writer *w, const char *name, const int64_t *values, int count)
{
    size_t mark = pb_begin(w, NODE_ATTRIBUTE);
    pb_put_string(w, ATTR_NAME, name);
    pb_put_packed_varints(w, ATTR_INTS, values, count);
    pb_put_varint(w, ATTR_TYPE, ONNX_ATTR_INTS);
    pb_end(w, mark);
}

/* kernel_shape, strides, pads of a 2-D window (pads [top, left, bottom, right]). */
static void put_window(pb_writer *w, int kernel_h, int kernel_w, int stride_h, int stride_w,
                       int pad_h, int pad_w)
{
    int64_t kernel[2] = {kernel_h, kernel_w}, strides[2] = {stride_h, stride_w};
    int64_t pads[4] = {pad_h, pad_w, pad_h, pad_w};
    put_attr_ints(w, "kernel_shape", kernel, 2);
    put_attr_ints(w, "pads", pads, 4);
    put_attr_ints(w, "strides", strides, 2);
}

/* A tensor's type and shape; the batch is symbolic unless fixed. */
static void put_value_info(exporter *e, uint32_t field, const char *name, const ct_tensor *t)
{
    pb_writer *w = &e->w;
    size_t value = pb_begin(w, field);
    pb_put_string(w, VALUE_NAME, name);
    size_t type = pb_begin(w, VALUE_TYPE);
    size_t tensor = pb_begin(w, TYPE_TENSOR);
    pb_put_varint(w, TENSOR_TYPE_ELEM, ONNX_FLOAT);
    size_t shape = pb_begin(w, TENSOR_TYPE_SHAPE);
    for (int d = 0; d < t->ndim; d++) {
        size_t dim = pb_begin(w, SHAPE_DIM);
        if (d == 0 && !e->args->fixed_batch)
            pb_put_string(w, DIM_PARAM, EXPORT_BATCH_PARAM);
        else
            pb_put_varint(w, DIM_VALUE, (uint64_t)t->shape[d]);
        pb_end(w, dim);
    }
    pb_end(w, shape);
    pb_end(w, tensor);
    pb_end(w, type);
    pb_end(w, value);
}

static void put_initializer(pb_writer *w, const char *name, int32_t data_type, int ndim,
                            const int64_t *dims, const void *data, size_t bytes)
{
    size_t mark = pb_begin(w, GRAPH_INITIALIZER);
    pb_put_packed_varints(w, TENSOR_DIMS, dims, ndim);
    pb_put_varint(w, TENSOR_DATA_TYPE, (uint64_t)data_type);
    pb_put_string(w, TENSOR_NAME, name);
    pb_put_bytes(w, TENSOR_RAW_DATA, data, bytes);
    pb_end(w, mark);
}

/* A parameter or buffer of the plan, read back from the backend. */
static ct_status put_state(exporter *e, const ct_tensor *t)
{
    size_t bytes = ct_tensor_bytes(t);
    void *data = malloc(bytes ? bytes : 1);
    if (!data)
        return ct_set_error(CT_ERR_MEMORY, "ct_onnx_export %s: out of memory for '%s'", e->path,
                            t->name);
    ct_status status = ct_plan_read(e->plan, t, data, bytes);
    if (status == CT_OK)
        put_initializer(&e->w, t->name, t->dtype == CT_I64 ? ONNX_INT64 : ONNX_FLOAT, t->ndim,
                        t->shape, data, bytes);
    free(data);
    return status;
}

/* Begin a node of a given name and output; the caller adds attributes and
 * ends it with pb_end. */
static size_t begin_named_node(exporter *e, const char *op_type, const char *name, int n_inputs,
                               const char *const *inputs, const char *output)
{
    pb_writer *w = &e->w;
    size_t mark = pb_begin(w, GRAPH_NODE);
    for (int i = 0; i < n_inputs; i++)
        pb_put_string(w, NODE_INPUT, inputs[i]);
    pb_put_string(w, NODE_OUTPUT, output);
    pb_put_string(w, NODE_NAME, name);
    pb_put_string(w, NODE_OP_TYPE, op_type);
    return mark;
}

/* Begin a node named "<op>_<id>" whose output is `out`'s value. */
static size_t begin_node(exporter *e, const char *op_type, const ct_tensor *out, int n_inputs,
                         const char *const *inputs)
{
    char buf[EXPORT_NAME_CAPACITY], name[EXPORT_NAME_CAPACITY + 16];
    snprintf(name, sizeof name, "%s_%d", op_type, out->id);
    return begin_named_node(e, op_type, name, n_inputs, inputs, value_name(e, out, buf));
}

/* A node whose inputs are all of node's sources (NULL ones left out). */
static size_t begin_node_srcs(exporter *e, const char *op_type, const ct_tensor *node, int n_src)
{
    char bufs[CT_MAX_SRC][EXPORT_NAME_CAPACITY];
    const char *inputs[CT_MAX_SRC];
    for (int s = 0; s < n_src; s++)
        inputs[s] = value_name(e, node->src[s], bufs[s]);
    return begin_node(e, op_type, node, n_src, inputs);
}

/* ---- ops ------------------------------------------------------------------------------- */

static void put_conv_attrs(pb_writer *w, const ct_conv2d_shape *c)
{
    int64_t dilations[2] = {c->dilation_h, c->dilation_w};
    put_attr_ints(w, "dilations", dilations, 2);
    put_attr_int(w, "group", c->groups);
    put_window(w, c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h, c->pad_w);
}

static void put_conv(exporter *e, const ct_tensor *node)
{
    size_t mark = begin_node_srcs(e, "Conv", node, node->n_src);
    put_conv_attrs(&e->w, &node->attr.conv);
    pb_end(&e->w, mark);
}

/* The names of an int8 layer's QDQ values, from its weight's ("conv2.weight"). */
enum { QDQ_WEIGHT_SCALE, QDQ_WEIGHT_ZERO_POINT, QDQ_WEIGHT_DEQUANTIZED, QDQ_INPUT_SCALE,
       QDQ_INPUT_ZERO_POINT, QDQ_INPUT_QUANTIZED, QDQ_INPUT_DEQUANTIZED, QDQ_NAMES };
static const char *const qdq_suffixes[QDQ_NAMES] = {
    "_scale", "_zero_point", "_dequantized", ".input_scale", ".input_zero_point",
    ".input_quantized", ".input_dequantized"};

/* An int8 layer (qconv2d, qlinear) in QDQ form, the layout ONNX Runtime's
 * quantization tools write (opset 13: per-axis DequantizeLinear):
 *   x (f32) -> QuantizeLinear(input_scale, input_zero_point: u8)
 *           -> DequantizeLinear(input_scale, input_zero_point)    -> x'
 *   weight (int8) -> DequantizeLinear(weight_scale [out], weight_zero_point
 *                                     (int8 zeros [out]), axis 0) -> w'
 *   Conv(x', w', bias) or Gemm(x', w', bias, transB 1)            -> y (f32)
 * with the int8 file's names (docs/quantization.md).  The fused relu is
 * the Relu node that follows, as in the f32 export; a relu folded into the
 * layer (u8 between int8 layers) is a Relu after the Conv or Gemm.  A u8
 * output is written as the f32 it stands for: the QDQ pair of each layer
 * that reads it gives the same u8 values. */
static ct_status put_int8_layer(exporter *e, const ct_tensor *node)
{
    const ct_int8_weights *w = node->attr.quant.weights;
    const char *weight = node->attr.quant.weight_name;
    size_t length = strlen(weight), stem = ct_quant_stem_length(weight);
    char *names[QDQ_NAMES] = {NULL};
    int8_t *zeros = calloc((size_t)w->rows, 1);
    ct_status status = zeros ? CT_OK : CT_ERR_MEMORY;
    for (int i = 0; i < QDQ_NAMES && status == CT_OK; i++) {
        size_t base = i < QDQ_INPUT_SCALE ? length : stem;
        if (!(names[i] = malloc(base + strlen(qdq_suffixes[i]) + 1)))
            status = CT_ERR_MEMORY;
        else
            sprintf(names[i], "%.*s%s", (int)base, weight, qdq_suffixes[i]);
    }
    if (status != CT_OK) {
        for (int i = 0; i < QDQ_NAMES; i++)
            free(names[i]);
        free(zeros);
        return ct_set_error(CT_ERR_MEMORY, "ct_onnx_export %s: out of memory", e->path);
    }
    pb_writer *pw = &e->w;
    const ct_conv2d_shape *c = &node->attr.quant.conv;
    int64_t rows = w->rows, dims[4] = {w->rows, w->depth, 0, 0};
    int ndim = 2;
    if (node->op == CT_OP_QCONV2D) {
        dims[1] = c->in_channels / c->groups, dims[2] = c->kernel_h, dims[3] = c->kernel_w;
        ndim = 4;
    }
    float x_scale = node->attr.quant.x_scale;
    uint8_t x_zero_point = (uint8_t)node->attr.quant.x_zero_point;
    put_initializer(pw, weight, ONNX_INT8, ndim, dims, w->values, (size_t)w->rows * w->depth);
    put_initializer(pw, names[QDQ_WEIGHT_SCALE], ONNX_FLOAT, 1, &rows, w->scales,
                    sizeof(float) * (size_t)rows);
    put_initializer(pw, names[QDQ_WEIGHT_ZERO_POINT], ONNX_INT8, 1, &rows, zeros, (size_t)rows);
    put_initializer(pw, names[QDQ_INPUT_SCALE], ONNX_FLOAT, 0, NULL, &x_scale, sizeof x_scale);
    put_initializer(pw, names[QDQ_INPUT_ZERO_POINT], ONNX_UINT8, 0, NULL, &x_zero_point, 1);
    char buf[EXPORT_NAME_CAPACITY], node_name[EXPORT_NAME_CAPACITY];
    const char *quantize[3] = {value_name(e, node->src[0], buf), names[QDQ_INPUT_SCALE],
                               names[QDQ_INPUT_ZERO_POINT]};
    snprintf(node_name, sizeof node_name, "QuantizeLinear_%d", node->id);
    pb_end(pw, begin_named_node(e, "QuantizeLinear", node_name, 3, quantize,
                                names[QDQ_INPUT_QUANTIZED]));
    const char *dequantize[3] = {names[QDQ_INPUT_QUANTIZED], names[QDQ_INPUT_SCALE],
                                 names[QDQ_INPUT_ZERO_POINT]};
    snprintf(node_name, sizeof node_name, "DequantizeLinear_input_%d", node->id);
    pb_end(pw, begin_named_node(e, "DequantizeLinear", node_name, 3, dequantize,
                                names[QDQ_INPUT_DEQUANTIZED]));
    const char *weights[3] = {weight, names[QDQ_WEIGHT_SCALE], names[QDQ_WEIGHT_ZERO_POINT]};
    snprintf(node_name, sizeof node_name, "DequantizeLinear_weight_%d", node->id);
    size_t mark = begin_named_node(e, "DequantizeLinear", node_name, 3, weights,
                                   names[QDQ_WEIGHT_DEQUANTIZED]);
    put_attr_int(pw, "axis", 0);
    pb_end(pw, mark);
    char bias[EXPORT_NAME_CAPACITY];
    const char *inputs[3] = {names[QDQ_INPUT_DEQUANTIZED], names[QDQ_WEIGHT_DEQUANTIZED],
                             node->n_src > 1 ? value_name(e, node->src[1], bias) : NULL};
    bool conv = node->op == CT_OP_QCONV2D, relu = node->attr.quant.relu;
    char product[EXPORT_NAME_CAPACITY + 16], out[EXPORT_NAME_CAPACITY];
    snprintf(product, sizeof product, "%s%s", value_name(e, node, out), relu ? "_prerelu" : "");
    snprintf(node_name, sizeof node_name, "%s_%d", conv ? "Conv" : "Gemm", node->id);
    mark = begin_named_node(e, conv ? "Conv" : "Gemm", node_name, node->n_src > 1 ? 3 : 2,
                            inputs, product);
    if (conv)
        put_conv_attrs(pw, c);
    else
        put_attr_int(pw, "transB", 1);
    pb_end(pw, mark);
    if (relu) {
        const char *relu_in[1] = {product};
        pb_end(pw, begin_node(e, "Relu", node, 1, relu_in));
    }
    for (int i = 0; i < QDQ_NAMES; i++)
        free(names[i]);
    free(zeros);
    return CT_OK;
}

static void put_pool(exporter *e, const ct_tensor *node, const char *op_type)
{
    const ct_pool2d_shape *p = &node->attr.pool;
    size_t mark = begin_node_srcs(e, op_type, node, 1);
    if (node->op == CT_OP_AVGPOOL2D)
        put_attr_int(&e->w, "count_include_pad", p->exclude_pad ? 0 : 1);
    put_window(&e->w, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
    pb_end(&e->w, mark);
}

/* BN_APPLY (x, stats, gamma, beta) with stats = BN_STATS (x, mean, var...). */
static ct_status put_batchnorm(exporter *e, const ct_tensor *node)
{
    const ct_tensor *stats = node->src[1];
    if (stats->op != CT_OP_BN_STATS)
        return unsupported(e, node, "is not a batchnorm of running statistics");
    char bufs[5][EXPORT_NAME_CAPACITY];
    const ct_tensor *srcs[5] = {node->src[0], node->src[2], node->src[3], stats->src[1],
                                stats->src[2]};
    const char *inputs[5];
    for (int i = 0; i < 5; i++)
        inputs[i] = value_name(e, srcs[i], bufs[i]);
    size_t mark = begin_node(e, "BatchNormalization", node, 5, inputs);
    put_attr_float(&e->w, "epsilon", stats->attr.bn.eps);
    /* ONNX's momentum weighs the running value; cuttle's (PyTorch's) the batch's */
    put_attr_float(&e->w, "momentum", 1.0f - stats->attr.bn.momentum);
    pb_end(&e->w, mark);
    return CT_OK;
}

/* A view: Flatten when it makes [N, rest] of [N, ...], else a Reshape to a
 * shape initializer whose first entry 0 keeps the batch. */
static ct_status put_view(exporter *e, const ct_tensor *node)
{
    const ct_tensor *x = node->src[0];
    if (node->view_offset != x->view_offset)
        return unsupported(e, node, "is a view into part of a tensor, which has no ONNX form");
    bool keeps_batch = node->ndim >= 1 && x->ndim >= 1 && node->shape[0] == x->shape[0];
    if (!keeps_batch && !e->args->fixed_batch)
        return unsupported(e, node, "reshapes the batch dimension: export with a fixed batch");
    if (keeps_batch && node->ndim == 2) {
        size_t mark = begin_node_srcs(e, "Flatten", node, 1);
        put_attr_int(&e->w, "axis", 1);
        pb_end(&e->w, mark);
        return CT_OK;
    }
    char shape_name[EXPORT_NAME_CAPACITY], buf[EXPORT_NAME_CAPACITY];
    snprintf(shape_name, sizeof shape_name, "shape_%d", node->id);
    int64_t shape[CT_MAX_DIMS], count = node->ndim;
    memcpy(shape, node->shape, sizeof *shape * (size_t)node->ndim);
    if (keeps_batch)
        shape[0] = 0;
    put_initializer(&e->w, shape_name, ONNX_INT64, 1, &count, shape,
                    sizeof *shape * (size_t)count);
    const char *inputs[2] = {value_name(e, x, buf), shape_name};
    pb_end(&e->w, begin_node(e, "Reshape", node, 2, inputs));
    return CT_OK;
}

static ct_status put_node(exporter *e, const ct_tensor *node)
{
    pb_writer *w = &e->w;
    switch (node->op) {
    case CT_OP_CONV2D: put_conv(e, node); return CT_OK;
    case CT_OP_QCONV2D:
    case CT_OP_QLINEAR: return put_int8_layer(e, node);
    case CT_OP_LINEAR: {
        size_t mark = begin_node_srcs(e, "Gemm", node, node->n_src);
        put_attr_int(w, "transB", 1);
        pb_end(w, mark);
        return CT_OK;
    }
    case CT_OP_MAXPOOL2D: put_pool(e, node, "MaxPool"); return CT_OK;
    case CT_OP_AVGPOOL2D: put_pool(e, node, "AveragePool"); return CT_OK;
    case CT_OP_GLOBAL_AVGPOOL: pb_end(w, begin_node_srcs(e, "GlobalAveragePool", node, 1)); return CT_OK;
    case CT_OP_RELU: pb_end(w, begin_node_srcs(e, "Relu", node, 1)); return CT_OK;
    case CT_OP_SIGMOID: pb_end(w, begin_node_srcs(e, "Sigmoid", node, 1)); return CT_OK;
    case CT_OP_TANH: pb_end(w, begin_node_srcs(e, "Tanh", node, 1)); return CT_OK;
    case CT_OP_ADD: pb_end(w, begin_node_srcs(e, "Add", node, 2)); return CT_OK;
    case CT_OP_BN_STATS: return CT_OK; /* part of the BatchNormalization of its BN_APPLY */
    case CT_OP_BN_APPLY: return put_batchnorm(e, node);
    case CT_OP_VIEW: return put_view(e, node);
    case CT_OP_CONCAT: {
        size_t mark = begin_node_srcs(e, "Concat", node, node->n_src);
        put_attr_int(w, "axis", 1);
        pb_end(w, mark);
        return CT_OK;
    }
    case CT_OP_SOFTMAX: {
        size_t mark = begin_node_srcs(e, "Softmax", node, 1);
        put_attr_int(w, "axis", 1);
        pb_end(w, mark);
        return CT_OK;
    }
    case CT_OP_DROPOUT: return CT_OK; /* an identity in inference: aliased */
    default: return unsupported(e, node, "has no ONNX form in cuttle's exporter");
    }
}

/* ---- the whole file --------------------------------------------------------------------- */

/* Mark what y depends on; BN_STATS's running statistics and the inputs of
 * every needed op are initializers when they are state. */
static ct_status mark_needed(exporter *e)
{
    ct_graph *g = e->graph;
    e->needed[e->y->id] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ct_tensor *t = g->nodes[i];
        if (!e->needed[t->id])
            continue;
        if (t->phase != CT_PHASE_FORWARD)
            return unsupported(e, t, "is not part of a forward pass");
        if (t->op == CT_OP_DROPOUT)
            e->alias[t->id] = t->src[0];
        for (int s = 0; s < t->n_src; s++) {
            const ct_tensor *src = t->src[s];
            /* BN_STATS's num_batches_tracked has no place in BatchNormalization */
            if (t->op == CT_OP_BN_STATS && s == 3)
                continue;
            e->needed[src->id] = true;
        }
        if (t->op == CT_OP_LEAF && t->role == CT_ROLE_INPUT && t != e->x)
            return unsupported(e, t, "is an input other than x that the output depends on");
        e->initializer[t->id] = t->op == CT_OP_LEAF && t->role != CT_ROLE_INPUT;
    }
    if (!e->needed[e->x->id])
        return ct_set_error(CT_ERR_ARG, "ct_onnx_export %s: the output does not depend on x",
                            e->path);
    return CT_OK;
}

static ct_status put_graph(exporter *e)
{
    ct_graph *g = e->graph;
    pb_writer *w = &e->w;
    size_t graph = pb_begin(w, MODEL_GRAPH);
    pb_put_string(w, GRAPH_NAME, e->args->model_name ? e->args->model_name : "cuttle");
    ct_status status = CT_OK;
    for (int i = 0; status == CT_OK && i < g->n_nodes; i++)
        if (e->initializer[g->nodes[i]->id])
            status = put_state(e, g->nodes[i]);
    for (int i = 0; status == CT_OK && i < g->n_nodes; i++) {
        const ct_tensor *t = g->nodes[i];
        if (e->needed[t->id] && t->op != CT_OP_LEAF)
            status = put_node(e, t);
    }
    char buf[EXPORT_NAME_CAPACITY];
    const char *output = value_name(e, e->y, buf);
    if (status == CT_OK && e->args->softmax) {
        const char *inputs[1] = {output};
        size_t mark = pb_begin(w, GRAPH_NODE);
        pb_put_string(w, NODE_INPUT, inputs[0]);
        pb_put_string(w, NODE_OUTPUT, "probabilities");
        pb_put_string(w, NODE_NAME, "softmax");
        pb_put_string(w, NODE_OP_TYPE, "Softmax");
        put_attr_int(w, "axis", 1);
        pb_end(w, mark);
        output = "probabilities";
    }
    put_value_info(e, GRAPH_INPUT, "input", e->x);
    put_value_info(e, GRAPH_OUTPUT, output, e->y);
    pb_end(w, graph);
    return status;
}

static void put_meta(pb_writer *w, const char *key, const char *value)
{
    size_t mark = pb_begin(w, MODEL_METADATA);
    pb_put_string(w, ENTRY_KEY, key);
    pb_put_string(w, ENTRY_VALUE, value);
    pb_end(w, mark);
}

static ct_status export_model(exporter *e)
{
    pb_writer *w = &e->w;
    int opset = e->args->opset ? e->args->opset : EXPORT_DEFAULT_OPSET;
    pb_put_varint(w, MODEL_IR_VERSION, EXPORT_IR_VERSION(opset));
    pb_put_string(w, MODEL_PRODUCER_NAME, "cuttle");
    pb_put_string(w, MODEL_PRODUCER_VERSION, CT_VERSION_STRING);
    CT_TRY(put_graph(e));
    size_t mark = pb_begin(w, MODEL_OPSET_IMPORT);
    pb_put_varint(w, OPSET_VERSION, (uint64_t)opset);
    pb_end(w, mark);
    bool named = false; /* a caller's own "model_name" goes in once */
    for (int i = 0; i < e->args->n_meta; i++)
        named = named || strcmp(e->args->meta[i].key, "model_name") == 0;
    if (e->args->model_name && !named)
        put_meta(w, "model_name", e->args->model_name);
    for (int i = 0; i < e->args->n_meta; i++)
        put_meta(w, e->args->meta[i].key, e->args->meta[i].value);
    if (w->failed)
        return ct_set_error(CT_ERR_MEMORY, "ct_onnx_export %s: out of memory", e->path);
    const void *data[1] = {w->data};
    size_t bytes[1] = {w->length};
    return ct_write_file_atomic("ct_onnx_export", e->path, 1, data, bytes);
}

static ct_status check_args(ct_plan *plan, ct_tensor *x, ct_tensor *y,
                            const ct_onnx_export_args *args, const char *path)
{
    if (!plan || !x || !y || !path || !*path)
        return ct_set_error(CT_ERR_ARG, "ct_onnx_export: plan, x, y and path are required");
    ct_graph *g = ct_plan_graph(plan);
    if (x->graph != g || y->graph != g)
        return ct_set_error(CT_ERR_ARG, "ct_onnx_export %s: x and y must be of the plan's graph",
                            path);
    if (args->opset && (args->opset < ONNX_MIN_OPSET || args->opset > ONNX_MAX_OPSET))
        return ct_set_error(CT_ERR_ARG, "ct_onnx_export %s: opset %d; cuttle writes opsets %d to "
                            "%d", path, args->opset, ONNX_MIN_OPSET, ONNX_MAX_OPSET);
    if (x->ndim != 4 || x->dtype != CT_F32 || x->role != CT_ROLE_INPUT)
        return ct_set_error(CT_ERR_ARG, "ct_onnx_export %s: x must be an f32 input [N, C, H, W]",
                            path);
    if (y->dtype != CT_F32 || y->ndim < 1 || y->shape[0] != x->shape[0])
        return ct_set_error(CT_ERR_UNSUPPORTED, "ct_onnx_export %s: the output must be f32 with "
                            "the batch first (export a model built in fp32 precision)", path);
    if (args->softmax && y->ndim != 2)
        return ct_set_error(CT_ERR_ARG, "ct_onnx_export %s: softmax needs an output [N, classes]",
                            path);
    return CT_OK;
}

ct_status ct_onnx_export(ct_plan *plan, ct_tensor *x, ct_tensor *y,
                         const ct_onnx_export_args *args, const char *path)
{
    ct_onnx_export_args defaults = {0};
    args = args ? args : &defaults;
    CT_TRY(check_args(plan, x, y, args, path));
    exporter e = {.plan = plan, .graph = ct_plan_graph(plan), .args = args, .path = path,
                  .x = x, .y = y};
    size_t n = (size_t)e.graph->n_nodes;
    e.needed = calloc(n, sizeof *e.needed);
    e.initializer = calloc(n, sizeof *e.initializer);
    e.alias = calloc(n, sizeof *e.alias);
    ct_status status = e.needed && e.initializer && e.alias
                           ? CT_OK
                           : ct_set_error(CT_ERR_MEMORY, "ct_onnx_export %s: out of memory", path);
    if (status == CT_OK)
        status = mark_needed(&e);
    if (status == CT_OK)
        status = export_model(&e);
    pb_writer_free(&e.w);
    free(e.needed);
    free(e.initializer);
    free(e.alias);
    return status;
}
