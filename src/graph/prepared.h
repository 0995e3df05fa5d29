/*
 * Memory a kernel keeps between a plan's runs: what it derives from a
 * node's constant inputs once instead of on every run (the CPU's Winograd
 * convolution keeps its transformed weights, 4x the weights' size, whose
 * making cost two thirds of a 14x14 layer at batch 1: docs/perf.md).
 *
 * The plan counts the writes to each of its tensors (ct_plan_write: loads,
 * the optimizer's folding, pruning, data parallel's broadcast) and the
 * training steps it runs (which update every parameter in place); what a
 * kernel kept is fresh while both counts are what they were when it was
 * made.  Only inference runs (CT_EVAL) get such memory: a training step
 * changes its weights every time.  The memory is the backend's (alloc and
 * release), held by the plan until it is freed.
 */
#ifndef CT_GRAPH_PREPARED_H
#define CT_GRAPH_PREPARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/backend.h"

typedef struct ct_prepared_slot {
    ct_backend *backend; /* whose memory data is */
    void *data;
    size_t bytes;
    uint64_t writes, steps; /* the counts it was made at */
} ct_prepared_slot;

struct ct_prepared {
    int n_nodes;
    uint64_t *writes;        /* by node id: ct_plan_write calls on the tensor */
    uint64_t steps;          /* training steps run */
    uint64_t made;           /* times a kernel had to (re)make what it keeps */
    ct_prepared_slot *slots; /* by node id */
};

/* For a plan of n_nodes nodes (*out NULL when out of host memory). */
ct_status ct_prepared_new(int n_nodes, ct_prepared **out);
/* Releases what every kernel kept; NULL is accepted. */
void ct_prepared_free(ct_prepared *prepared);
/* Counts a write to t (its storage root) / a training step. */
void ct_prepared_wrote(ct_prepared *prepared, const ct_tensor *t);
void ct_prepared_stepped(ct_prepared *prepared);

/* The bytes kernels keep now (tests, reports). */
size_t ct_prepared_bytes(const ct_prepared *prepared);

/* For a kernel running `node` on `backend`: `bytes` of memory kept for the
 * node, made from its input `from` (*fresh: made from from's values as they
 * are now; else the caller fills it, now).  NULL where the run keeps none
 * (training, exec->prepared NULL), `from` is not a parameter or buffer the
 * plan holds (a computed tensor: its changes are not counted) or the
 * backend has no memory for it: the kernel then works as without. */
void *ct_exec_prepared(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                       const ct_tensor *from, size_t bytes, bool *fresh);

#endif
