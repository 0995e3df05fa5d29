/*
 * What the layers above the graph may ask of a plan (the plan itself is
 * private to src/graph/plan*.c, through graph/plan_impl.h): its backend,
 * the nodes each mode runs, and one hook around ct_plan_run's single run
 * loop.  The profiler (src/prof/) is such a hook, so the graph never calls
 * up into it and there is one loop to keep right.
 */
#ifndef CT_GRAPH_PLAN_H
#define CT_GRAPH_PLAN_H

#include "graph/backend.h"
#include "graph/grad_hook.h"

typedef struct ct_run_hook ct_run_hook;

/* Called by ct_plan_run around the step.  A hook is embedded first in its
 * owner's struct; destroy frees the owner. */
struct ct_run_hook {
    /* After the backend's begin_step, before the first node. */
    void (*step_begin)(ct_run_hook *hook, ct_mode mode);
    /* Around node `index` of ct_plan_runs(plan, mode); `kernel` names the
     * implementation that ran it (graph/impl.h), static; `group`: 1, or n
     * when the node's work ran for it and the n - 1 nodes after it in one
     * go (ct_impl.run_group), 0 for those n - 1, which did nothing. */
    void (*node_begin)(ct_run_hook *hook, ct_mode mode, int index);
    void (*node_end)(ct_run_hook *hook, ct_mode mode, int index, const char *kernel, int group);
    /* After the backend's synchronize; `step` is the plan's step count
     * before this step.  An error fails the step. */
    ct_status (*step_end)(ct_run_hook *hook, ct_mode mode, int64_t step);
    void (*destroy)(ct_run_hook *hook);
};

/* Installs `hook` (NULL: none), destroying the one before; the plan owns
 * it from then on and destroys it with itself. */
void ct_plan_set_hook(ct_plan *plan, ct_run_hook *hook);
ct_run_hook *ct_plan_hook(const ct_plan *plan);

/* Swaps in `hook` without destroying the plan's hook before it, which it
 * returns (a hook for one step, graph/nonfinite.c). */
ct_run_hook *ct_plan_swap_hook(ct_plan *plan, ct_run_hook *hook);
/* Copies t's bytes as the plan holds them now, kept or not (a node of a
 * step, from its hook's node_end: its memory may be reused later). */
ct_status ct_plan_peek(const ct_plan *plan, const ct_tensor *t, void *host, size_t bytes);

/* Installs a hook between backward and the optimizer of each training step
 * (graph/grad_hook.h; NULL: none), destroying the one before; the plan owns
 * it from then on, also when this fails (it is destroyed then). */
ct_status ct_plan_set_grad_hook(ct_plan *plan, ct_grad_hook *hook);
ct_grad_hook *ct_plan_grad_hook(const ct_plan *plan); /* NULL: none */
/* Swaps in `hook` (NULL: none) without destroying the one before, which it
 * returns: for a step that must not run it (graph/nonfinite.c). */
ct_grad_hook *ct_plan_swap_grad_hook(ct_plan *plan, ct_grad_hook *hook);

/* The tensor whose values tell whether running `node` made an inf or NaN:
 * its output, or, for a convolution that computes its relu's max pool
 * (graph/fuse.c ct_fuse_maxpool), the pool's output, which holds one where
 * the relu's output does (NaN wins a window, and +inf but for a NaN); the
 * convolution's own bytes are not written in evaluation and hold the
 * windows' argmax codes where ct_exec.pool_codes says so. */
const ct_tensor *ct_plan_checked_output(const ct_plan *plan, ct_mode mode,
                                        const ct_tensor *node);

/* ct_plan_set_check_numerics' check of a node that just ran, through a
 * host buffer of its bytes (nonfinite.c): CT_ERR_NUMERIC, with the message,
 * when its output holds an inf or NaN. */
ct_status ct_numerics_check(ct_plan *plan, ct_mode mode, const ct_tensor *node, void *buffer);

/* ct_plan_run, which takes the inputs staged for it (ct_plan_stage) when
 * take_staged; a step run again on the inputs it ran with takes none
 * (graph/nonfinite.c). */
ct_status ct_plan_run_taking(ct_plan *plan, ct_mode mode, bool take_staged);

ct_backend *ct_plan_backend(const ct_plan *plan);
/* How many times a kernel (re)made what it keeps between the plan's
 * inference runs (graph/prepared.h; ct_plan_kept_bytes the bytes). */
uint64_t ct_plan_kept_made(const ct_plan *plan);
/* The nodes a mode runs, in order (no views, no fused nodes). */
const ct_tensor *const *ct_plan_runs(const ct_plan *plan, ct_mode mode, int *count);
/* How many of those run a node of `op` (what a fusion left to run). */
int ct_plan_count_runs(const ct_plan *plan, ct_mode mode, ct_op op);
/* The i-th (0 or 1) batchnorm parameter gradient that training run `node`
 * computes besides its own output (graph/fuse.c ct_fuse_bn_params), or
 * NULL.  Borrowed from the plan. */
const ct_tensor *ct_plan_bn_params_of(const ct_plan *plan, const ct_tensor *node, int i);
/* Every node of a mode's step, in order: views, and the nodes whose work
 * another node's kernel does (graph/fuse.c), too. */
const ct_tensor *const *ct_plan_schedule(const ct_plan *plan, ct_mode mode, int *count);

#endif
