/*
 * The graph's internals, shared by src/graph, src/ops and the backends.
 *
 * A graph is an append-only list of nodes; a node only refers to nodes made
 * before it, so creation order is a topological order.  Parameters, buffers
 * and optimizer state are "state": persistent across steps, in creation
 * order.  Everything else lives in the plan's arena.
 */
#ifndef CT_GRAPH_GRAPH_H
#define CT_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "cuttle.h"
#include "core/op_kinds.h"

typedef enum ct_role {
    CT_ROLE_NODE = 0, /* computed by an op */
    CT_ROLE_INPUT,    /* written by the caller */
    CT_ROLE_PARAM,    /* trainable state */
    CT_ROLE_BUFFER,   /* non-trainable model state (batchnorm running statistics) */
    CT_ROLE_OPTIM     /* optimizer state (momentum, Adam moments) */
} ct_role;

typedef enum ct_phase {
    CT_PHASE_FORWARD = 0,
    CT_PHASE_BACKWARD,
    CT_PHASE_OPTIMIZER
} ct_phase;

#define CT_LABEL_CAPACITY 48

struct ct_tensor {
    ct_graph *graph;
    int id;
    ct_op op;
    ct_role role;
    ct_phase phase;
    ct_dtype dtype;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int n_src;
    ct_tensor *src[CT_MAX_SRC];
    ct_op_attr attr;
    char *name;                     /* owned; NULL for unnamed nodes */
    char label[CT_LABEL_CAPACITY];  /* "%12 (relu)" */
    ct_tensor *view_of;             /* storage owner for views and in-place updates */
    size_t view_offset;             /* bytes into view_of's storage */
    ct_tensor *grad;
    /* the 16-bit copy that autocast made of this tensor (ops/autocast.c), so
     * that a weight or input used by several ops is converted once */
    ct_tensor *cast_cache;
    bool keep;
    bool requires_grad;
    ct_init init;
    float init_scale;
    int state_index; /* position among the state tensors, or -1 */
};

struct ct_graph {
    ct_tensor **nodes;
    int n_nodes, nodes_capacity;
    ct_tensor **state;
    int n_state, state_capacity;
    /* The named nodes (leaves: inputs, parameters, buffers) by name, for
     * ct_graph_find: open addressing, a power of two at least twice
     * n_named (graph.c).  A name never changes once given. */
    ct_tensor **by_name;
    size_t by_name_capacity, n_named;
    ct_status status; /* the first error while building */
    bool has_backward;
    bool has_optimizer;
    float optimizer_lr;
    ct_precision precision; /* of the ops built from now on (ct_graph_set_precision) */
    /* backward seeds the loss's gradient with the step's loss scale and the
     * optimizer skips steps with inf or NaN gradients: set by backward when
     * the graph holds f16 tensors (fp16's dynamic loss scaling) */
    bool loss_scaling;
};

/* Record an error unless one is already recorded; returns NULL. */
ct_tensor *ct_graph_fail(ct_graph *graph, ct_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when every tensor is non-NULL and of this graph.  A NULL input after
 * an earlier error fails quietly (the first message stands). */
bool ct_graph_check_srcs(ct_graph *graph, const char *op_name, int n, ct_tensor *const *srcs);

/* Append a computed node; NULL (with the error recorded) when memory runs
 * out.  The shape is copied. */
ct_tensor *ct_graph_add_node(ct_graph *graph, ct_op op, ct_dtype dtype, int ndim,
                             const int64_t *shape, int n_src, ct_tensor *const *srcs);

/* A view of `base` (itself possibly a view) at a byte offset. */
ct_tensor *ct_graph_add_view(ct_graph *graph, ct_tensor *base, size_t offset, int ndim,
                             const int64_t *shape);

/* A new state tensor (optimizer state, for instance). */
ct_tensor *ct_graph_add_state(ct_graph *graph, ct_role role, const char *name, ct_dtype dtype,
                              int ndim, const int64_t *shape, ct_init init, float scale);

/* "'conv1.weight' [6,3,5,5]" or "%12 (relu) [8,6,28,28]" into buf. */
const char *ct_tensor_describe(const ct_tensor *t, char *buf, size_t capacity);
#define CT_DESCRIBE_CAPACITY 160

bool ct_same_shape(const ct_tensor *a, const ct_tensor *b);

static inline bool ct_dtype_is_half(ct_dtype dtype)
{
    return dtype == CT_F16 || dtype == CT_BF16;
}

/* Whether the node reads or writes a 16-bit float tensor (f16, bf16). */
static inline bool ct_node_touches_half(const ct_tensor *node)
{
    bool half = ct_dtype_is_half(node->dtype);
    for (int s = 0; s < node->n_src; s++)
        half = half || ct_dtype_is_half(node->src[s]->dtype);
    return half;
}

/* The tensor that owns the storage of t (t itself unless a view). */
static inline const ct_tensor *ct_storage_root(const ct_tensor *t)
{
    return t->view_of ? t->view_of : t;
}

#endif
