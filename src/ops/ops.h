/*
 * The op set.  Each op has one place that defines it: the builder in
 * src/ops/<family>.c checks its inputs and computes its output shape (the
 * shape rule), and the same file holds its backward rule, which
 * ct_op_backward() finds.  The op kinds and their names are the shared
 * vocabulary of core/op_kinds.h; backends map ops to kernels in their own
 * table.
 */
#ifndef CT_OPS_OPS_H
#define CT_OPS_OPS_H

#include <stdint.h>

#include "core/op_kinds.h"
#include "cuttle.h"



/* Append the gradient nodes of `node` given dy = dL/d(node).  Writes
 * dsrc[i] = dL/d(src[i]) for each input whose needs_grad[i] is set, and may
 * leave the others NULL.  Returns the graph's status. */
typedef ct_status (*ct_backward_fn)(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                    const bool *needs_grad, ct_tensor **dsrc);

/* The op's backward rule; NULL: no gradient flows through it. */
ct_backward_fn ct_op_backward(ct_op op);

/* ct_batchnorm2d that also counts batches in an i64 scalar buffer (may be
 * NULL), like PyTorch's num_batches_tracked. */
ct_tensor *ct_batchnorm2d_tracked(ct_graph *graph, ct_tensor *x, ct_tensor *gamma,
                                  ct_tensor *beta, ct_tensor *running_mean,
                                  ct_tensor *running_var, ct_tensor *num_batches_tracked,
                                  float eps, float momentum);

/* A scalar-or-any-shape constant node (the seed gradient of a loss). */
ct_tensor *ct_fill(ct_graph *graph, const ct_tensor *like, float value);

/* Backward rules, one per differentiable forward op (src/ops/<family>.c). */
ct_status ct_conv2d_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_linear_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_maxpool2d_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *,
                                ct_tensor **);
ct_status ct_avgpool2d_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *,
                                ct_tensor **);
ct_status ct_global_avgpool_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *,
                                     ct_tensor **);
ct_status ct_activation_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *,
                                 ct_tensor **);
ct_status ct_bn_apply_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *,
                               ct_tensor **);
ct_status ct_dropout_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_add_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_view_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_concat_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_softmax_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_cross_entropy_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *,
                                    ct_tensor **);
ct_status ct_cast_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);
ct_status ct_custom_backward(ct_graph *, ct_tensor *, ct_tensor *, const bool *, ct_tensor **);

/* The node's op name: ct_op_name, but a custom op's registered name ("mish",
 * "mish_bwd") for its nodes. */
const char *ct_node_op_name(const ct_tensor *node);

/* The registered op a CT_OP_CUSTOM or CT_OP_CUSTOM_BWD node runs (ops/custom.c). */
const ct_custom_op *ct_custom_op_of(const ct_tensor *node);
/* Whether such a node has a CUDA kernel (else a GPU backend leaves it to
 * its CPU fallback). */
bool ct_custom_has_cuda(const ct_tensor *node);
/* Runs such a node's CPU kernel or (cuda) its CUDA kernel on `stream`, its
 * tensors resolved by `data` (ct_exec_data on the backend that runs it); a
 * kernel's failure becomes an error naming the op. */
ct_status ct_custom_run(const ct_tensor *node, void *(*data)(const void *ctx, const ct_tensor *t),
                        const void *ctx, bool cuda, void *stream);

#endif
