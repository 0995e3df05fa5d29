/*
 * Graph construction: nodes, state tensors, names and the sticky first error.
 */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/shapes.h"

#define CT_INITIAL_CAPACITY 64

ct_graph *ct_graph_new(void)
{
    ct_graph *graph = calloc(1, sizeof *graph);
    if (!graph)
        ct_set_error(CT_ERR_MEMORY, "ct_graph_new: out of host memory");
    return graph;
}

void ct_graph_free(ct_graph *graph)
{
    if (!graph)
        return;
    for (int i = 0; i < graph->n_nodes; i++) {
        free(graph->nodes[i]->name);
        free(graph->nodes[i]);
    }
    free(graph->nodes);
    free(graph->state);
    free(graph->by_name);
    free(graph);
}

ct_status ct_graph_status(const ct_graph *graph)
{
    if (!graph)
        return ct_set_error(CT_ERR_ARG, "ct_graph_status: graph is NULL");
    return graph->status;
}

ct_status ct_graph_set_precision(ct_graph *graph, ct_precision precision)
{
    if (!graph)
        return ct_set_error(CT_ERR_ARG, "ct_graph_set_precision: graph is NULL");
    if ((int)precision < 0 || precision >= CT_PRECISION_COUNT)
        return ct_set_error(CT_ERR_ARG, "ct_graph_set_precision: unknown precision %d",
                            (int)precision);
    graph->precision = precision;
    return CT_OK;
}

ct_precision ct_graph_precision(const ct_graph *graph)
{
    return graph ? graph->precision : CT_PRECISION_FP32;
}

ct_tensor *ct_graph_fail(ct_graph *graph, ct_status status, const char *fmt, ...)
{
    if (graph->status != CT_OK)
        return NULL;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    graph->status = ct_set_error(status, "%s", message);
    return NULL;
}

bool ct_graph_check_srcs(ct_graph *graph, const char *op_name, int n, ct_tensor *const *srcs)
{
    for (int i = 0; i < n; i++) {
        if (!srcs[i]) {
            ct_graph_fail(graph, CT_ERR_ARG, "%s: input %d is NULL", op_name, i);
            return false;
        }
        if (srcs[i]->graph != graph) {
            ct_graph_fail(graph, CT_ERR_ARG, "%s: input %d ('%s') belongs to another graph",
                          op_name, i, ct_tensor_name(srcs[i]));
            return false;
        }
    }
    return graph->status == CT_OK;
}

static bool grow(void **array, int *capacity, int needed, size_t item_size)
{
    if (needed <= *capacity)
        return true;
    int new_capacity = *capacity ? *capacity * 2 : CT_INITIAL_CAPACITY;
    while (new_capacity < needed)
        new_capacity *= 2;
    void *grown = realloc(*array, (size_t)new_capacity * item_size);
    if (!grown)
        return false;
    *array = grown;
    *capacity = new_capacity;
    return true;
}

static ct_tensor *append(ct_graph *graph, ct_op op, ct_dtype dtype, int ndim,
                         const int64_t *shape)
{
    if (graph->status != CT_OK)
        return NULL;
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return ct_graph_fail(graph, CT_ERR_SHAPE, "%s: %d dimensions (at most %d)",
                             ct_op_name(op), ndim, CT_MAX_DIMS);
    /* Sizes stay representable: every product of a shape is checked here,
     * once, and nothing later can overflow (a model file that doubles a
     * dimension 64 times is refused, not wrapped). */
    int64_t bytes = (int)dtype >= 0 && dtype < CT_DTYPE_COUNT ? (int64_t)ct_dtype_size(dtype) : 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ct_graph_fail(graph, CT_ERR_SHAPE, "%s: dimension %d is %lld (negative)",
                                 ct_op_name(op), i, (long long)shape[i]);
        if (__builtin_mul_overflow(bytes, shape[i], &bytes) || bytes > CT_MAX_TENSOR_BYTES) {
            char text[160];
            ct_shape_text(ndim, shape, text, sizeof text);
            return ct_graph_fail(graph, CT_ERR_SHAPE,
                                 "%s: an output of shape %s is larger than the %lld TiB a "
                                 "tensor may hold",
                                 ct_op_name(op), text, (long long)(CT_MAX_TENSOR_BYTES >> 40));
        }
    }
    ct_tensor *t = calloc(1, sizeof *t);
    if (!t || !grow((void **)&graph->nodes, &graph->nodes_capacity, graph->n_nodes + 1,
                    sizeof *graph->nodes)) {
        free(t);
        return ct_graph_fail(graph, CT_ERR_MEMORY, "graph: out of host memory at node %d",
                             graph->n_nodes);
    }
    t->graph = graph;
    t->id = graph->n_nodes;
    t->op = op;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->state_index = -1;
    t->phase = graph->has_optimizer ? CT_PHASE_OPTIMIZER
               : graph->has_backward ? CT_PHASE_BACKWARD
                                     : CT_PHASE_FORWARD;
    snprintf(t->label, sizeof t->label, "%%%d (%s)", t->id, ct_op_name(op));
    graph->nodes[graph->n_nodes++] = t;
    return t;
}

ct_tensor *ct_graph_add_node(ct_graph *graph, ct_op op, ct_dtype dtype, int ndim,
                             const int64_t *shape, int n_src, ct_tensor *const *srcs)
{
    CT_ASSERT(n_src <= CT_MAX_SRC);
    ct_tensor *t = append(graph, op, dtype, ndim, shape);
    if (!t)
        return NULL;
    t->n_src = n_src;
    for (int i = 0; i < n_src; i++)
        t->src[i] = srcs[i];
    return t;
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= shape[i];
    return count;
}

ct_tensor *ct_graph_add_view(ct_graph *graph, ct_tensor *base, size_t offset, int ndim,
                             const int64_t *shape)
{
    CT_ASSERT(offset + (size_t)numel_of(ndim, shape) * ct_dtype_size(base->dtype) <=
              ct_tensor_bytes(base));
    ct_tensor *t = ct_graph_add_node(graph, CT_OP_VIEW, base->dtype, ndim, shape, 1, &base);
    if (!t)
        return NULL;
    t->view_of = base->view_of ? base->view_of : base;
    t->view_offset = base->view_offset + offset;
    return t;
}

static bool valid_shape(ct_graph *graph, const char *what, const char *name, int ndim,
                        const int64_t *shape)
{
    if (ndim < 0 || ndim > CT_MAX_DIMS || (ndim > 0 && !shape)) {
        ct_graph_fail(graph, CT_ERR_SHAPE, "%s '%s': %d dimensions (0 to %d allowed)", what,
                      name, ndim, CT_MAX_DIMS);
        return false;
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) {
            ct_graph_fail(graph, CT_ERR_SHAPE, "%s '%s': dimension %d is %lld (must be > 0)",
                          what, name, i, (long long)shape[i]);
            return false;
        }
    }
    return true;
}

/* ---- the name index (ct_graph.by_name) ---- */

static size_t name_hash(const char *name) /* FNV-1a */
{
    uint64_t hash = 1469598103934665603u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        hash = (hash ^ *c) * 1099511628211u;
    return (size_t)hash;
}

static void index_put(ct_tensor **table, size_t capacity, ct_tensor *t)
{
    size_t mask = capacity - 1, i = name_hash(t->name) & mask;
    while (table[i])
        i = (i + 1) & mask;
    table[i] = t;
}

/* Adds named node t; false when memory runs out (nothing changed). */
static bool index_add(ct_graph *graph, ct_tensor *t)
{
    if (2 * (graph->n_named + 1) > graph->by_name_capacity) {
        size_t capacity = graph->by_name_capacity ? 2 * graph->by_name_capacity
                                                  : CT_INITIAL_CAPACITY;
        ct_tensor **table = calloc(capacity, sizeof *table);
        if (!table)
            return false;
        for (size_t i = 0; i < graph->by_name_capacity; i++)
            if (graph->by_name[i])
                index_put(table, capacity, graph->by_name[i]);
        free(graph->by_name);
        graph->by_name = table;
        graph->by_name_capacity = capacity;
    }
    index_put(graph->by_name, graph->by_name_capacity, t);
    graph->n_named++;
    return true;
}

static ct_tensor *add_leaf(ct_graph *graph, ct_role role, const char *what, const char *name,
                           ct_dtype dtype, int ndim, const int64_t *shape)
{
    if (!graph)
        return NULL;
    if (graph->status != CT_OK)
        return NULL;
    if (!name || !*name)
        return ct_graph_fail(graph, CT_ERR_ARG, "%s: a name is required", what);
    if ((int)dtype < 0 || dtype >= CT_DTYPE_COUNT)
        return ct_graph_fail(graph, CT_ERR_DTYPE, "%s '%s': unknown dtype %d", what, name,
                             (int)dtype);
    if (!valid_shape(graph, what, name, ndim, shape))
        return NULL;
    if (ct_graph_find(graph, name))
        return ct_graph_fail(graph, CT_ERR_ARG, "%s '%s': the name is already used", what,
                             name);
    ct_tensor *t = append(graph, CT_OP_LEAF, dtype, ndim, shape);
    if (!t)
        return NULL;
    t->name = strdup(name);
    if (!t->name || !index_add(graph, t))
        return ct_graph_fail(graph, CT_ERR_MEMORY, "%s '%s': out of host memory", what, name);
    t->role = role;
    t->phase = CT_PHASE_FORWARD;
    return t;
}

ct_tensor *ct_graph_add_state(ct_graph *graph, ct_role role, const char *name, ct_dtype dtype,
                              int ndim, const int64_t *shape, ct_init init, float scale)
{
    const char *what = role == CT_ROLE_PARAM ? "ct_param" : "ct_buffer";
    ct_tensor *t = add_leaf(graph, role, what, name, dtype, ndim, shape);
    if (!t)
        return NULL;
    if (!grow((void **)&graph->state, &graph->state_capacity, graph->n_state + 1,
              sizeof *graph->state))
        return ct_graph_fail(graph, CT_ERR_MEMORY, "%s '%s': out of host memory", what, name);
    t->init = init;
    t->init_scale = scale;
    t->state_index = graph->n_state;
    graph->state[graph->n_state++] = t;
    return t;
}

ct_tensor *ct_input(ct_graph *graph, const char *name, ct_dtype dtype, int ndim,
                    const int64_t *shape)
{
    return add_leaf(graph, CT_ROLE_INPUT, "ct_input", name, dtype, ndim, shape);
}

ct_tensor *ct_param(ct_graph *graph, const char *name, int ndim, const int64_t *shape,
                    ct_init init, float scale)
{
    return ct_graph_add_state(graph, CT_ROLE_PARAM, name, CT_F32, ndim, shape, init, scale);
}

ct_tensor *ct_buffer(ct_graph *graph, const char *name, ct_dtype dtype, int ndim,
                     const int64_t *shape, ct_init init, float scale)
{
    if (graph && dtype != CT_F32 && dtype != CT_I64)
        return ct_graph_fail(graph, CT_ERR_DTYPE, "ct_buffer '%s': dtype %s (f32 or i64 only)",
                             name ? name : "?", ct_dtype_name(dtype));
    return ct_graph_add_state(graph, CT_ROLE_BUFFER, name, dtype, ndim, shape, init, scale);
}

const char *ct_tensor_name(const ct_tensor *t)
{
    if (!t)
        return "(null)";
    return t->name ? t->name : t->label;
}

ct_dtype ct_tensor_dtype(const ct_tensor *t)
{
    return t->dtype;
}

int ct_tensor_ndim(const ct_tensor *t)
{
    return t->ndim;
}

int64_t ct_tensor_dim(const ct_tensor *t, int axis)
{
    if (axis < 0)
        axis += t->ndim;
    if (axis < 0 || axis >= t->ndim)
        return 0;
    return t->shape[axis];
}

int64_t ct_tensor_numel(const ct_tensor *t)
{
    return numel_of(t->ndim, t->shape);
}

size_t ct_tensor_bytes(const ct_tensor *t)
{
    return (size_t)ct_tensor_numel(t) * ct_dtype_size(t->dtype);
}

bool ct_tensor_is_param(const ct_tensor *t)
{
    return t && t->role == CT_ROLE_PARAM;
}

ct_tensor *ct_tensor_grad(const ct_tensor *t)
{
    return t ? t->grad : NULL;
}

void ct_tensor_keep(ct_tensor *t)
{
    if (t)
        t->keep = true;
}

void ct_tensor_requires_grad(ct_tensor *input)
{
    if (input && input->role == CT_ROLE_INPUT && input->dtype == CT_F32)
        input->requires_grad = true;
}

int ct_graph_n_state(const ct_graph *graph)
{
    return graph ? graph->n_state : 0;
}

ct_tensor *ct_graph_state(const ct_graph *graph, int index)
{
    if (!graph || index < 0 || index >= graph->n_state)
        return NULL;
    return graph->state[index];
}

ct_tensor *ct_graph_find(const ct_graph *graph, const char *name)
{
    if (!graph || !name || graph->by_name_capacity == 0)
        return NULL;
    size_t mask = graph->by_name_capacity - 1;
    for (size_t i = name_hash(name) & mask; graph->by_name[i]; i = (i + 1) & mask)
        if (strcmp(graph->by_name[i]->name, name) == 0)
            return graph->by_name[i];
    return NULL;
}

const char *ct_tensor_describe(const ct_tensor *t, char *buf, size_t capacity)
{
    int used = snprintf(buf, capacity, t->name ? "'%s' [" : "%s [", ct_tensor_name(t));
    for (int i = 0; i < t->ndim && used > 0 && (size_t)used < capacity; i++)
        used += snprintf(buf + used, capacity - (size_t)used, i ? ",%lld" : "%lld",
                         (long long)t->shape[i]);
    if (used > 0 && (size_t)used < capacity)
        snprintf(buf + used, capacity - (size_t)used, "]");
    return buf;
}

bool ct_same_shape(const ct_tensor *a, const ct_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] != b->shape[i])
            return false;
    }
    return true;
}
