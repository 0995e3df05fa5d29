/*
 * The plan's insides, shared by the files that implement it: plan.c (the
 * layout and the run loop), plan_host.c (the nodes that run on the
 * backend's fallback) and plan_access.c (settings, hooks and sizes).
 * Nothing outside src/graph/plan*.c includes this.
 */
#ifndef CT_GRAPH_PLAN_IMPL_H
#define CT_GRAPH_PLAN_IMPL_H

#include "graph/backend.h"
#include "graph/grad_hook.h"
#include "graph/plan.h"
#include "graph/precision.h"
#include "graph/replay.h"
#include "graph/staging.h"

#define CT_MODE_COUNT 2

struct ct_plan {
    ct_graph *graph;
    ct_backend *backend;
    int n_nodes; /* the graph's size when planned: it must not change */
    const ct_tensor **schedule[CT_MODE_COUNT];
    int n_schedule[CT_MODE_COUNT];
    /* The nodes that run a kernel: the schedule without views and without
     * ops fused into their producer (relus; in eval, also 2x2 max pools). */
    const ct_tensor **runs[CT_MODE_COUNT];
    int n_runs[CT_MODE_COUNT];
    size_t *offsets;  /* by node id */
    uint8_t *storage; /* ct_storage by node id */
    const ct_tensor **alias_of; /* by node id: a fused relu's producer, else NULL */
    uint8_t *epilogue;          /* ct_epilogue by node id */
    const ct_tensor **epilogue_src; /* by node id: what a CT_EPILOGUE_RELU_BWD reads */
    /* by mode, then node id: the pool a conv also computes (ct_fuse_maxpool),
     * and the nodes that another kernel computes in that mode */
    const ct_tensor **pool_into[CT_MODE_COUNT];
    bool *pool_skip[CT_MODE_COUNT];
    /* by node id: the bias gradient a weight gradient also computes (its
     * kernel writes that channel_sum node's output; ct_fuse_bias_grad) */
    const ct_tensor **bias_into;
    /* by node id: the cross-entropy backward a loss also computes
     * (ct_fuse_loss_grad) */
    const ct_tensor **grad_into;
    /* by node id: the node whose kernel computes it (a weight gradient its
     * bias gradient, a loss its gradient and that gradient's seed fill,
     * which nothing then reads), so that it runs nothing itself */
    const ct_tensor **written_by;
    /* by node id: the add that computes this batchnorm apply as it reads
     * it (ct_fuse_bn_add); the apply has no bytes and runs nothing */
    const ct_tensor **computed_in;
    /* by node id: the batchnorm parameter gradients an add also computes
     * (ct_fuse_bn_params; each is written_by the add) */
    const ct_tensor *(*bn_params_into)[2];
    bool *pool_codes; /* by node id: ct_exec.pool_codes */
    /* by node id: the next training run this one may run with as a pair
     * (ct_impl.run_pair: a layer's backward data and its weight gradient) */
    const ct_tensor **pair_next;
    void *arena, *state, *workspace;
    size_t arena_bytes, state_bytes, workspace_bytes;
    ct_step_values *step_values; /* in the backend's memory: see ct_exec */
    ct_loss_scaler scaler;       /* fp16's loss scaling (graph/precision.h) */
    ct_replay replay;
    uint64_t seed;
    int64_t step;
    float lr;
    ct_run_hook *hook; /* the profiler, when profiling is on */
    ct_grad_points grad; /* data parallel's hook between backward and the optimizer */
    /* ct_plan_set_check_numerics: a host copy of the largest float output */
    bool check_numerics;
    void *numerics_buffer;
    /* Nodes the backend cannot run, run by its fallback (the CPU) on host
     * copies of the arena and state (NULL when there are none). */
    bool *on_host;
    void *host_arena, *host_state, *host_workspace;
    size_t host_workspace_bytes;
    ct_prepared *prepared; /* what kernels keep between inference runs */
    ct_staging *staging;   /* inputs staged for later runs (ct_plan_stage), or NULL */
};

/* The memory and settings a step of `mode` runs with. */
ct_exec ct_plan_exec(const ct_plan *plan, ct_mode mode);

/* plan_host.c: marks plan->on_host (the nodes the backend cannot run, for
 * its fallback), allocates the fallback's host copies, and runs such a node. */
ct_status ct_plan_find_host_nodes(ct_plan *plan);
ct_status ct_plan_allocate_host_copies(ct_plan *plan);
ct_status ct_plan_run_on_host(ct_plan *plan, const ct_exec *exec, const ct_tensor *node,
                              const ct_impl **ran);

#endif
