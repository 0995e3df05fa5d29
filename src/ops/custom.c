/*
 * Custom ops: registered by name from outside the library
 * (ct_custom_op_register), built into the graph as CT_OP_CUSTOM nodes, and
 * differentiated into one CT_OP_CUSTOM_BWD node per input that needs a
 * gradient, whose kernel is the op's backward with `wrt` set.  The backends
 * call the registered kernels (cpu/backend.c, cuda/table.c).
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/common.h"

#define MAX_CUSTOM_OPS 64
#define NAME_CAPACITY 48

static struct {
    pthread_mutex_t lock;
    int count;
    ct_custom_op ops[MAX_CUSTOM_OPS];
    char names[MAX_CUSTOM_OPS][NAME_CAPACITY];
    char backward_names[MAX_CUSTOM_OPS][NAME_CAPACITY + 4]; /* "<name>_bwd" */
} registry = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}, {{0}}, {{0}}};

static bool valid_name(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= NAME_CAPACITY)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!islower((unsigned char)name[i]) && !isdigit((unsigned char)name[i]) && name[i] != '_')
            return false;
    return true;
}

/* The id of a registered name, or -1.  Call with the lock held. */
static int find(const char *name)
{
    for (int i = 0; i < registry.count; i++)
        if (strcmp(registry.names[i], name) == 0)
            return i;
    return -1;
}

ct_status ct_custom_op_register(const ct_custom_op *op)
{
    if (!op || !valid_name(op->name))
        return ct_set_error(CT_ERR_ARG, "ct_custom_op_register: the name must be 1 to %d "
                            "characters of [a-z0-9_]", NAME_CAPACITY - 1);
    if (op->n_inputs < 1 || op->n_inputs > CT_CUSTOM_MAX_INPUTS || !op->forward)
        return ct_set_error(CT_ERR_ARG, "ct_custom_op_register: '%s' needs 1 to %d inputs and "
                            "a CPU forward kernel", op->name, CT_CUSTOM_MAX_INPUTS);
    if (op->cuda_backward && !op->backward)
        return ct_set_error(CT_ERR_ARG, "ct_custom_op_register: '%s' has a CUDA backward "
                            "kernel but no CPU one (the CPU kernel is the reference)", op->name);
    pthread_mutex_lock(&registry.lock);
    ct_status status = CT_OK;
    if (find(op->name) >= 0)
        status = ct_set_error(CT_ERR_ARG, "ct_custom_op_register: '%s' is registered already",
                              op->name);
    else if (registry.count == MAX_CUSTOM_OPS)
        status = ct_set_error(CT_ERR_ARG, "ct_custom_op_register: '%s': %d custom ops are "
                              "registered, the most a process may have", op->name,
                              MAX_CUSTOM_OPS);
    else {
        int id = registry.count;
        strcpy(registry.names[id], op->name);
        snprintf(registry.backward_names[id], sizeof registry.backward_names[id], "%s_bwd",
                 op->name);
        registry.ops[id] = *op;
        registry.ops[id].name = registry.names[id];
        registry.count = id + 1; /* last: readers see complete entries only */
    }
    pthread_mutex_unlock(&registry.lock);
    return status;
}

const ct_custom_op *ct_custom_op_of(const ct_tensor *node)
{
    CT_ASSERT(node->op == CT_OP_CUSTOM || node->op == CT_OP_CUSTOM_BWD);
    return &registry.ops[node->attr.custom.id];
}

const char *ct_node_op_name(const ct_tensor *node)
{
    if (node->op == CT_OP_CUSTOM)
        return registry.names[node->attr.custom.id];
    if (node->op == CT_OP_CUSTOM_BWD)
        return registry.backward_names[node->attr.custom.id];
    return ct_op_name(node->op);
}

/* "%12 (mish)": the label a node would have had if its op were built in. */
static void label(ct_tensor *node)
{
    snprintf(node->label, sizeof node->label, "%%%d (%s)", node->id, ct_node_op_name(node));
}

/* The call's shapes and attributes (the pointers stay NULL). */
static void describe(const ct_custom_op *op, ct_tensor *const *inputs, const float *attrs,
                     int n_attrs, ct_custom_call *call)
{
    memset(call, 0, sizeof *call);
    call->n_inputs = op->n_inputs;
    for (int i = 0; i < op->n_inputs; i++) {
        call->input_shapes[i] = inputs[i]->shape;
        call->input_ndims[i] = inputs[i]->ndim;
        call->input_numels[i] = ct_tensor_numel(inputs[i]);
    }
    call->attrs = attrs;
    call->n_attrs = n_attrs;
    call->user = op->user;
}

ct_tensor *ct_custom(ct_graph *graph, const char *name, int n_inputs, ct_tensor *const *inputs,
                     const float *attrs, int n_attrs)
{
    if (!graph)
        return NULL;
    pthread_mutex_lock(&registry.lock);
    int id = name ? find(name) : -1;
    pthread_mutex_unlock(&registry.lock);
    if (id < 0)
        return ct_graph_fail(graph, CT_ERR_ARG, "ct_custom: no op '%s' is registered "
                             "(ct_custom_op_register)", name ? name : "(null)");
    const ct_custom_op *op = &registry.ops[id];
    if (n_inputs != op->n_inputs || !inputs)
        return ct_graph_fail(graph, CT_ERR_ARG, "%s: takes %d input(s), given %d", op->name,
                             op->n_inputs, n_inputs);
    if (n_attrs < 0 || n_attrs > CT_CUSTOM_MAX_ATTRS || (n_attrs > 0 && !attrs))
        return ct_graph_fail(graph, CT_ERR_ARG, "%s: 0 to %d attributes, given %d", op->name,
                             CT_CUSTOM_MAX_ATTRS, n_attrs);
    if (!ct_graph_check_srcs(graph, op->name, n_inputs, inputs) ||
        !ct_check_float(graph, op->name, n_inputs, inputs))
        return NULL;
    /* custom kernels take f32: 16-bit inputs (autocast) are cast up */
    ct_tensor *as_f32[CT_MAX_SRC];
    for (int i = 0; i < n_inputs; i++)
        as_f32[i] = ct_autocast(graph, inputs[i], CT_F32);
    if (graph->status != CT_OK)
        return NULL;
    inputs = as_f32;
    ct_custom_call call;
    describe(op, inputs, attrs, n_attrs, &call);
    int ndim = inputs[0]->ndim;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, inputs[0]->shape, sizeof shape);
    if (op->shape && op->shape(&call, &ndim, shape) != CT_OK)
        return ct_graph_fail(graph, CT_ERR_SHAPE, "%s: %s", op->name, ct_last_error());
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return ct_graph_fail(graph, CT_ERR_SHAPE, "%s: its shape rule gave %d dimensions",
                             op->name, ndim);
    ct_tensor *y = ct_graph_add_node(graph, CT_OP_CUSTOM, CT_F32, ndim, shape, n_inputs, inputs);
    if (y) {
        y->attr.custom.id = id;
        y->attr.custom.n_attrs = n_attrs;
        if (n_attrs > 0)
            memcpy(y->attr.custom.attrs, attrs, sizeof(float) * (size_t)n_attrs);
        label(y);
    }
    return y;
}

ct_status ct_custom_backward(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                             const bool *needs_grad, ct_tensor **dsrc)
{
    const ct_custom_op *op = ct_custom_op_of(node);
    if (!op->backward) {
        ct_graph_fail(graph, CT_ERR_UNSUPPORTED, "%s: the op has no backward kernel, so no "
                      "gradient flows through it", op->name);
        return ct_graph_status(graph);
    }
    ct_tensor *srcs[CT_CUSTOM_MAX_INPUTS + 2];
    memcpy(srcs, node->src, sizeof(ct_tensor *) * (size_t)node->n_src);
    srcs[node->n_src] = node;
    srcs[node->n_src + 1] = dy;
    for (int i = 0; i < node->n_src; i++) {
        if (!needs_grad[i])
            continue;
        const ct_tensor *x = node->src[i];
        dsrc[i] = ct_graph_add_node(graph, CT_OP_CUSTOM_BWD, CT_F32, x->ndim, x->shape,
                                    node->n_src + 2, srcs);
        if (!dsrc[i])
            return ct_graph_status(graph);
        dsrc[i]->attr.custom = node->attr.custom;
        dsrc[i]->attr.custom.wrt = i;
        label(dsrc[i]);
    }
    return CT_OK;
}

bool ct_custom_has_cuda(const ct_tensor *node)
{
    const ct_custom_op *op = ct_custom_op_of(node);
    return node->op == CT_OP_CUSTOM ? op->cuda_forward != NULL : op->cuda_backward != NULL;
}

ct_status ct_custom_run(const ct_tensor *node, void *(*data)(const void *ctx, const ct_tensor *t),
                        const void *ctx, bool cuda, void *stream)
{
    const ct_custom_op *op = ct_custom_op_of(node);
    int n = op->n_inputs;
    ct_custom_call call;
    describe(op, node->src, node->attr.custom.attrs, node->attr.custom.n_attrs, &call);
    for (int i = 0; i < n; i++)
        call.inputs[i] = data(ctx, node->src[i]);
    call.out = data(ctx, node);
    call.out_numel = ct_tensor_numel(node);
    bool forward = node->op == CT_OP_CUSTOM;
    if (!forward) {
        call.y = data(ctx, node->src[n]);
        call.dy = data(ctx, node->src[n + 1]);
        call.wrt = node->attr.custom.wrt;
    }
    call.stream = stream;
    ct_custom_kernel kernel = cuda ? (forward ? op->cuda_forward : op->cuda_backward)
                                   : (forward ? op->forward : op->backward);
    ct_status status = kernel(&call);
    if (status != CT_OK)
        return ct_set_error(status, "custom op '%s': its %s %s kernel returned %s", op->name,
                            cuda ? "CUDA" : "CPU", forward ? "forward" : "backward",
                            ct_status_name(status));
    return CT_OK;
}
