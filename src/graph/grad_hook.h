/*
 * The point between backward and the optimizer, for data-parallel training
 * (src/dist/): a hook that the plan calls as each parameter's gradient is
 * finished during a training step, and once more when all are, before the
 * first node that reads one.  A step is forward nodes, then backward
 * nodes, then optimizer nodes (creation order, graph/graph.c); so "before
 * the first optimizer node" is "after the last gradient".
 */
#ifndef CT_GRAPH_GRAD_HOOK_H
#define CT_GRAPH_GRAD_HOOK_H

#include "graph/backend.h"

typedef struct ct_grad_hook ct_grad_hook;

/* Embedded first in its owner's struct, like ct_run_hook; destroy frees the
 * owner.  An error fails the step. */
struct ct_grad_hook {
    /* In a training step, once per parameter with a gradient, right after
     * the node that writes it ran (so in the order backward produces them,
     * the last layer's first): `grad` is its memory on the plan's backend,
     * final for this step (kernels queued on a GPU may still be running). */
    ct_status (*grad_ready)(ct_grad_hook *hook, const ct_tensor *param, void *grad);
    /* After the last grad_ready of the step, before the optimizer: the hook
     * may change the gradients in place (average them over the ranks). */
    ct_status (*grads_done)(ct_grad_hook *hook);
    void (*destroy)(ct_grad_hook *hook);
    /* Synchronized batchnorm (ct_plan_set_sync_bn): the sums over the ranks
     * that training steps' batchnorm kernels use (ct_exec.sync_bn); NULL:
     * each rank's batchnorm sees its own batch. */
    const ct_rank_sum *sync_bn;
};

/* Where in a training step's runs each gradient is finished: built by the
 * plan when a hook is set (graph/plan.c), used by its run loop. */
typedef struct ct_grad_points {
    ct_grad_hook *hook; /* NULL: none */
    int n_runs;
    int *first;                /* [n_runs + 1]: params[first[i], first[i + 1]) after run i */
    const ct_tensor **params;  /* grouped by the run that finishes their gradient */
    int done_at;               /* the first optimizer node's run index, or n_runs */
} ct_grad_points;

/* For the training runs `runs` of `graph`; alias_of and written_by (by
 * node id, as the plan's): the producer that a fused relu writes through,
 * and the weight gradient that computes a fused bias gradient, else NULL.
 * CT_ERR_STATE if a gradient is written by no run or after the first
 * optimizer node. */
ct_status ct_grad_points_build(ct_grad_points *points, const ct_graph *graph,
                               const ct_tensor *const *runs, int n_runs,
                               const ct_tensor *const *alias_of,
                               const ct_tensor *const *written_by);
/* Frees the points and destroys their hook; leaves them empty. */
void ct_grad_points_free(ct_grad_points *points);

/* The run loop's calls: before run `index` (grads_done there), and after
 * runs [index, index + count) (grad_ready for the gradients they finished). */
ct_status ct_grad_points_before(const ct_grad_points *points, int index);
ct_status ct_grad_points_after(const ct_grad_points *points, const ct_exec *exec, int index,
                               int count);

#endif
