/*
 * A plan's step recorded once and replayed (CUDA Graphs on a CUDA backend):
 * one launch per step instead of one or more per node, and no host work per
 * node.  The plan (graph/plan.c) asks ct_replay_run for every step; it
 * records a mode's step after CT_REPLAY_AFTER steps of that mode have run
 * node by node (the autotuner times new shapes in the first), and replays
 * it from then on.  A step that cannot be recorded (a vendor library that
 * refuses, an op that synchronizes) runs node by node from then on; why is
 * kept for ct_plan_cuda_graph.
 *
 * What a replay cannot see changes: kernel arguments are recorded by
 * value, so what changes between steps (learning rate, step count) reaches
 * kernels through ct_exec.step_values, in device memory; a change of the
 * backend's kernel choices (ct_backend.choices, e.g. tf32 or --kernels)
 * drops the recording and records again.
 */
#ifndef CT_GRAPH_REPLAY_H
#define CT_GRAPH_REPLAY_H

#include "graph/backend.h"

enum { CT_REPLAY_AFTER = 2, CT_REPLAY_WHY_CAPACITY = 320 };

typedef struct ct_replay {
    void *recorded[2];             /* by mode: the backend's replayable step */
    unsigned choices[2];           /* by mode: backend->choices when recorded */
    int eager_runs[2];             /* by mode: steps run node by node since */
    bool failed;                   /* recording failed: node by node for good */
    char why[CT_REPLAY_WHY_CAPACITY];
} ct_replay;

/* Runs the step of `mode` as a replay when it can (recording it first when
 * due): *replayed says whether it did; if not, the caller runs the nodes.
 * `possible`: the plan allows it this step (no profiler hook, no node on
 * the host).  The backend's synchronize is left to the caller. */
ct_status ct_replay_run(ct_replay *r, ct_backend *backend, ct_mode mode, const ct_exec *exec,
                        const ct_tensor *const *runs, int n_runs, bool possible,
                        bool *replayed);

/* After a step ran node by node. */
void ct_replay_count_eager(ct_replay *r, ct_mode mode);

/* Frees the recordings (the plan's memory must still be there). */
void ct_replay_free(ct_replay *r, ct_backend *backend);

#endif
