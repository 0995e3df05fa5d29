/*
 * Fusion, decided when a plan is made: the graph itself is never rewritten,
 * so autodiff, ct_plan_read and a later plan on another backend see the
 * graph as it was built.  See docs/design.md, "Fusion".
 */
#ifndef CT_GRAPH_FUSE_H
#define CT_GRAPH_FUSE_H

#include <stdint.h>

#include "graph/backend.h"

/* Finds every relu whose input is a conv2d or linear output that nothing
 * else reads, is not kept, and that the backend can finish with a relu
 * (ct_backend_i.fuses_relu).  For each: epilogue[producer id] =
 * CT_EPILOGUE_RELU and alias_of[relu id] = producer, meaning the producer's
 * kernel writes relu(y) and the relu node owns no memory and runs nothing:
 * its readers (relu_bwd, maxpool, the next layer) read the producer's bytes.
 * Both arrays are indexed by node id and zeroed by the caller.  Returns how
 * many were fused. */
int ct_fuse_relu(const ct_graph *graph, const ct_backend *backend, const ct_tensor **alias_of,
                 uint8_t *epilogue);

#endif
