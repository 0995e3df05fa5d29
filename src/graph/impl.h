/*
 * A backend's implementations of the ops, and the one function that chooses
 * among them.
 *
 * Each backend lists, per op, the ways it can run that op (ct_impl), in its
 * order of preference: cuttle's own kernels, special-case kernels (the CPU's
 * direct and Winograd convolutions) and a vendor library's call (cuDNN,
 * cuBLAS).  Every question of the form "can this backend run this node, with
 * how much workspace, fused with what, by which kernel" is answered from
 * that table, here: by the plan (support and the CPU fallback, fusion,
 * workspace), by the run loop and the autotuner (ct_impl_run), by the
 * profiler (the name of what ran) and by the tests (each implementation
 * forced in turn, and a check that every one of them ran).
 *
 * The choice for a node (ct_backend_set_kernels):
 *   "native"  the first native implementation that supports the node;
 *   "vendor"  the first vendor one that does, else as native;
 *   "auto"    where several could run it, each is timed at the first run
 *             of the node's shape (a warm-up and AUTO_REPS timed runs, on
 *             the backend's device clock where it has one) and the fastest
 *             is kept for that shape;
 *   a name    ("im2col", "cudnn", ...): that implementation wherever it
 *             supports the node, the native choice elsewhere.
 * A vendor implementation that fails on a shape (no algorithm, an error it
 * returns) is never tried again on that shape; the next choice runs in its
 * place at once.
 */
#ifndef CT_GRAPH_IMPL_H
#define CT_GRAPH_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/backend.h"

typedef enum ct_impl_kind {
    CT_IMPL_NATIVE = 0, /* cuttle's own kernel */
    CT_IMPL_VENDOR      /* a vendor library's call (may fail per shape, see above) */
} ct_impl_kind;

/* Epilogues an implementation applies as it stores its output (graph/fuse.c):
 * a relu (ct_exec.epilogue), a relu then a 2x2 stride-2 unpadded max pool
 * written to the pool's output (ct_exec.pool_into), (a max pool's
 * backward, a linear or convolution backward data, an add, a global
 * average pool's backward) the backward of the relu whose output is
 * ct_exec.epilogue_src, (a convolution's or linear
 * layer's weight gradient) its bias gradient too, (a cross-entropy)
 * the gradient of its logits too (ct_exec.grad_into), and (an add) the
 * batchnorm that is one of its inputs, and (a convolution's weight
 * gradient) the max pool's backward that makes its dy (ct_exec.computed_in). */
enum {
    CT_FUSES_RELU = 1u << 0,
    /* in training (ct_exec.training) the conv's own output is written too */
    CT_FUSES_RELU_MAXPOOL2X2 = 1u << 1,
    CT_FUSES_RELU_BWD = 1u << 2,
    /* (a weight gradient) the bias gradient of the same dy: ct_exec.bias_into */
    CT_FUSES_BIAS_GRAD = 1u << 3,
    /* (a cross-entropy that is the loss) its backward, seeded by the fill
     * that starts the gradient: ct_exec.grad_into */
    CT_FUSES_LOSS_GRAD = 1u << 4,
    /* (an add) a batchnorm's apply that is one of its inputs, computed as
     * the add reads it: ct_exec.computed_in */
    CT_FUSES_BN_INPUT = 1u << 5,
    /* (a convolution's weight gradient) the max pool's backward that makes
     * its dy, with the relu's backward fused in it: ct_exec.computed_in */
    CT_FUSES_POOL_BWD = 1u << 6,
    /* (a convolution that computes its relu's max pool) in training, the
     * windows' argmax codes in place of its output's values, where only a
     * pool backward that a weight gradient computes reads them:
     * ct_exec.pool_codes */
    CT_FUSES_POOL_CODES = 1u << 7,
    /* (an add or a max pool's backward, in the backward pass) the
     * parameter gradients of the batchnorms whose dy it makes:
     * ct_exec.bn_params_into */
    CT_FUSES_BN_PARAMS = 1u << 8
};

struct ct_impl {
    const char *name; /* "native", "winograd", "cudnn", ...: the profile shows it */
    ct_impl_kind kind;
    unsigned fuses;   /* CT_FUSES_* */
    /* Takes f16 and bf16 tensors too (reading and writing 16 bits, computing
     * in f32).  One that does not runs f32 nodes only, unless its backend
     * widens 16-bit tensors around every kernel (ct_backend.widens_half). */
    bool half;
    /* Whether it can run the node, on this backend as built (the shape, the
     * vendor library's presence).  NULL: every node of its op. */
    bool (*supports)(const ct_backend *backend, const ct_tensor *node);
    /* Whether it applies `fusion` (one of .fuses) to this node with `other`
     * (the max pool, the cross-entropy's backward, the batchnorm's apply;
     * NULL for a relu).
     * NULL: to every node it supports. */
    bool (*fuses_with)(const ct_tensor *node, unsigned fusion, const ct_tensor *other);
    /* Whether it can run now (CPU features switched on); a plan sizes its
     * workspace for the implementations that are not ready too, so that the
     * choice may change after planning.  NULL: always. */
    bool (*ready)(const ct_backend *backend);
    size_t (*workspace)(const ct_backend *backend, const ct_tensor *node); /* NULL: none */
    ct_status (*run)(ct_backend *backend, const ct_exec *exec, const ct_tensor *node);
    /* Optional, for an op's only implementation: runs n >= 2 nodes of the
     * op that follow each other in the plan in one go (the optimizer's
     * update of every parameter in one launch), where groups(a, b) says
     * that two nodes may share it (the same settings).  NULL: one by one. */
    bool (*groups)(const ct_tensor *a, const ct_tensor *b);
    ct_status (*run_group)(ct_backend *backend, const ct_exec *exec,
                           const ct_tensor *const *nodes, int n);
    /* Optional: runs the node (a layer's backward data) and `partner`, the
     * next node of the plan (the layer's weight gradient from the same
     * dy), in one launch, with the workspace split as
     * ct_impl_pair_workspace says.  pairs_with(node, partner, NULL) says
     * whether it ever can (the plan then starts the partner's outputs'
     * lifetimes at the node and sizes the workspace for both);
     * pairs_with(node, partner, impl) whether it can now, with `impl`
     * chosen for the partner.  NULL: never paired. */
    bool (*pairs_with)(const ct_tensor *node, const ct_tensor *partner,
                       const ct_impl *partner_impl);
    ct_status (*run_pair)(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                          const ct_tensor *partner);
};

/* A backend's table: for each op, up to CT_MAX_IMPLS implementations in
 * order of preference, NULL after the last. */
typedef const ct_impl *const ct_impl_table[CT_OP_COUNT][CT_MAX_IMPLS];

/* Whether the backend runs `node` (some implementation supports it and
 * ct_backend_refuse has not taken the op away). */
bool ct_impl_supported(const ct_backend *backend, const ct_tensor *node);
/* The workspace `node` needs: the most that any implementation supporting it
 * needs, ready or not, so that whichever is chosen fits. */
size_t ct_impl_workspace(const ct_backend *backend, const ct_tensor *node);
/* Whether every implementation that supports `producer` applies `fusion`
 * (CT_FUSES_*), so the fusion holds whichever one is chosen; `other` is the
 * max pool of CT_FUSES_RELU_MAXPOOL2X2 or the backward node of
 * CT_FUSES_LOSS_GRAD, NULL for the others. */
bool ct_impl_fuses(const ct_backend *backend, const ct_tensor *producer, unsigned fusion,
                   const ct_tensor *other);
/* Whether some implementation of `node`'s op can run it paired with
 * `partner` (ct_impl.pairs_with), for the plan's lifetimes and workspace. */
bool ct_impl_pairs(const ct_backend *backend, const ct_tensor *node, const ct_tensor *partner);
/* The workspace a pair needs: the node's, rounded up to 256 bytes, then
 * the partner's (which starts there: ct_impl_pair_offset). */
size_t ct_impl_pair_workspace(const ct_backend *backend, const ct_tensor *node,
                              const ct_tensor *partner);
size_t ct_impl_pair_offset(const ct_backend *backend, const ct_tensor *node);
/* Chooses the implementation for `node` (see the top) and runs it through
 * the backend's run_node; *ran (may be NULL) is what ran. */
ct_status ct_impl_run(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                      const ct_impl **ran);
/* Runs nodes[0], and with it as one group the nodes after it (of n) that
 * its implementation runs in one go (ct_impl.run_group), or nodes[0] and
 * nodes[1] as a pair where the plan prepared one (ct_exec.pair_next) and
 * the implementations chosen for both pair (ct_impl.run_pair); *done: how
 * many ran (1 or more), *ran (may be NULL): what ran them.  The run loops
 * of the plan and of a recorded step (graph/replay.c) go through it. */
ct_status ct_impl_run_next(ct_backend *backend, const ct_exec *exec,
                           const ct_tensor *const *nodes, int n, int *done,
                           const ct_impl **ran);
/* ct_impl.groups for the optimizer's updates: the same settings (and, for
 * SGD, the same state), so one kernel call can update both parameters. */
bool ct_sgd_nodes_group(const ct_tensor *a, const ct_tensor *b);
bool ct_adam_nodes_group(const ct_tensor *a, const ct_tensor *b);
/* A layer node of a bf16 or fp16 graph as autocast makes it (ops/autocast.c):
 * every input of the node's 16-bit dtype but a forward pass's bias (a conv
 * or linear node's third input), f32.  What the 16-bit implementations of
 * convolution and linear take (tensor cores, cuDNN, cuBLAS). */
bool ct_half_layer_inputs(const ct_tensor *node);
/* The backend's implementations of `op`, in order; returns how many. */
int ct_impl_list(const ct_backend *backend, ct_op op, const ct_impl *const **out);
/* Whether implementation `index` of `op` has run on this backend (tests). */
bool ct_impl_has_run(const ct_backend *backend, ct_op op, int index);
/* Parses and applies a kernels setting (ct_backend_set_kernels). */
ct_status ct_impl_set_choice(ct_backend *backend, const char *kernels);
/* Forgets what was timed and what failed (the backend's math changed: TF32). */
void ct_impl_forget(ct_backend *backend);
/* Test hook: the backend claims not to run `op`, so that plans run it on
 * the CPU fallback (graph/plan.c). */
ct_status ct_backend_refuse(ct_backend *backend, ct_op op);
/* Frees the backend's memory of choices (ct_backend_free). */
void ct_impl_memo_free(ct_backend *backend);

#endif
