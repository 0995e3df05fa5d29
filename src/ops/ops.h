/*
 * The op set.  Each op has one place that defines it: the builder in
 * src/ops/<family>.c checks its inputs and computes its output shape (the
 * shape rule), and the same file holds its backward rule.  ct_op_info()
 * names every op and points at its backward rule; backends map ops to
 * kernels in their own table.
 */
#ifndef CT_OPS_OPS_H
#define CT_OPS_OPS_H

#include <stdint.h>

#include "cuttle.h"
#include "ops/shapes.h"

typedef enum ct_op {
    CT_OP_LEAF = 0,              /* input, parameter or buffer: no computation */
    CT_OP_VIEW,                  /* another tensor's storage with a new shape */
    CT_OP_CONV2D,                /* (x, w[, b]) */
    CT_OP_CONV2D_BWD_DATA,       /* (dy, w) -> dx */
    CT_OP_CONV2D_BWD_WEIGHT,     /* (x, dy) -> dw */
    CT_OP_CHANNEL_SUM,           /* (dy) -> db: sum over all dims but 1 */
    CT_OP_LINEAR,                /* (x, w[, b]) */
    CT_OP_LINEAR_BWD_DATA,       /* (dy, w) -> dx */
    CT_OP_LINEAR_BWD_WEIGHT,     /* (x, dy) -> dw */
    CT_OP_MAXPOOL2D,             /* (x) */
    CT_OP_MAXPOOL2D_BWD,         /* (x, dy) -> dx */
    CT_OP_AVGPOOL2D,             /* (x) */
    CT_OP_AVGPOOL2D_BWD,         /* (dy) -> dx */
    CT_OP_GLOBAL_AVGPOOL,        /* (x) */
    CT_OP_GLOBAL_AVGPOOL_BWD,    /* (dy) -> dx */
    CT_OP_RELU,                  /* (x) */
    CT_OP_RELU_BWD,              /* (y, dy) -> dx */
    CT_OP_SIGMOID,
    CT_OP_SIGMOID_BWD,           /* (y, dy) -> dx */
    CT_OP_TANH,
    CT_OP_TANH_BWD,              /* (y, dy) -> dx */
    CT_OP_BN_STATS,              /* (x, running_mean, running_var[, num_batches]) -> [2,C] */
    CT_OP_BN_APPLY,              /* (x, stats, gamma, beta) */
    CT_OP_BN_BWD_PARAMS,         /* (x, dy, stats) -> [2,C] = (dgamma, dbeta) */
    CT_OP_BN_BWD_DATA,           /* (x, dy, stats, gamma, dparams) -> dx */
    CT_OP_DROPOUT,               /* (x); its backward is a dropout of dy with the same stream */
    CT_OP_ADD,                   /* (a, b) */
    CT_OP_CONCAT,                /* (x0, x1, ...) along dim 1 */
    CT_OP_SLICE_CHANNELS,        /* (x) -> channels [start, start+count) */
    CT_OP_SOFTMAX,               /* (x) */
    CT_OP_SOFTMAX_BWD,           /* (y, dy) -> dx */
    CT_OP_CROSS_ENTROPY,         /* (logits, labels) -> scalar */
    CT_OP_CROSS_ENTROPY_BWD,     /* (dloss, logits, labels) -> dlogits */
    CT_OP_FILL,                  /* () -> constant */
    CT_OP_SGD_UPDATE,            /* (param, grad[, momentum_buf]), in place on param */
    CT_OP_ADAM_UPDATE,           /* (param, grad, exp_avg, exp_avg_sq), in place */
    CT_OP_COUNT
} ct_op;

#define CT_MAX_SRC 8

typedef union ct_op_attr {
    ct_conv2d_shape conv;
    ct_pool2d_shape pool;
    struct {
        float eps, momentum;
    } bn;
    struct {
        float p;
        uint32_t stream; /* the forward node's id: forward and backward share masks */
    } dropout;
    struct {
        float smoothing;
    } ce;
    struct {
        float value;
    } fill;
    struct {
        int start, count;
    } slice;
    ct_sgd_args sgd;
    ct_adam_args adam;
} ct_op_attr;

/* Append the gradient nodes of `node` given dy = dL/d(node).  Writes
 * dsrc[i] = dL/d(src[i]) for each input whose needs_grad[i] is set, and may
 * leave the others NULL.  Returns the graph's status. */
typedef ct_status (*ct_backward_fn)(ct_graph *graph, ct_tensor *node, ct_tensor *dy,
                                    const bool *needs_grad, ct_tensor **dsrc);

typedef struct ct_op_info {
    const char *name;
    ct_backward_fn backward; /* NULL: no gradient flows through this op */
} ct_op_info;

const ct_op_info *ct_op_info_of(ct_op op);

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

#endif
