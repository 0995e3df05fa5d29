/*
 * A node's tensors as its kernel's arguments, for the backends' op tables
 * (src/cpu/table.c, src/cuda/table.c): input i, an optional input, the
 * output, and a tensor seen as [n, c, inner].
 */
#ifndef CT_GRAPH_NODE_ARGS_H
#define CT_GRAPH_NODE_ARGS_H

#include "graph/backend.h"

static inline const float *ct_in(const ct_exec *exec, const ct_tensor *node, int i)
{
    return ct_exec_data(exec, node->src[i]);
}

/* Input i, or NULL when the node has fewer inputs (a conv without bias). */
static inline const float *ct_in_opt(const ct_exec *exec, const ct_tensor *node, int i)
{
    return node->n_src > i ? ct_in(exec, node, i) : NULL;
}

static inline float *ct_out(const ct_exec *exec, const ct_tensor *node)
{
    return ct_exec_data(exec, node);
}

/* A tensor seen as [n, c, inner]: batch, channels and the rest. */
typedef struct ct_nci {
    int n, c, inner;
} ct_nci;

static inline ct_nci ct_nci_of(const ct_tensor *t)
{
    ct_nci dims = {(int)t->shape[0], t->ndim > 1 ? (int)t->shape[1] : 1, 1};
    for (int i = 2; i < t->ndim; i++)
        dims.inner *= (int)t->shape[i];
    return dims;
}

#endif
