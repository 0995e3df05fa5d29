/* A plan's checks and settings for its graph's precision (graph/precision.c). */
#ifndef CT_GRAPH_PRECISION_H
#define CT_GRAPH_PRECISION_H

#include "graph/backend.h"

/* Whether the backend computes the graph's 16-bit dtypes (an error naming
 * the device and the choices if not); a tf32 graph switches its TF32 on. */
ct_status ct_plan_precision(ct_graph *graph, ct_backend *backend);

#endif
