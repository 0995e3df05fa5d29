/*
 * Inputs staged for later runs (ct_plan_stage): each input keeps a queue of
 * at most CT_STAGE_DEPTH values; every ct_plan_run begins by giving each
 * input with a queued value its oldest one.  Two is what a training loop
 * needs to copy batch j+1 while step j runs: it stages j+1 before it runs
 * j, so j and j+1 wait side by side.
 *
 * Where the backend has staging of its own (a GPU: pinned host memory, a
 * copy stream, graph/backend.h's stage_*), a value goes through it; else
 * the plan keeps the value in host memory and writes it when a run takes
 * it.
 */
#ifndef CT_GRAPH_STAGING_H
#define CT_GRAPH_STAGING_H

#include "graph/backend.h"

enum { CT_STAGE_DEPTH = 2 };

typedef struct ct_staging ct_staging;

/* Queues `bytes` of `host` for input t (*staging made at the first call). */
ct_status ct_staging_put(ct_staging **staging, ct_backend *backend, const ct_tensor *t,
                         const void *host, size_t bytes);
/* Gives every input with a queued value its oldest, into exec's memory,
 * ordered before the work queued next on the backend. */
ct_status ct_staging_take(ct_staging *staging, ct_backend *backend, const ct_exec *exec);
void ct_staging_free(ct_staging *staging, ct_backend *backend);

#endif
