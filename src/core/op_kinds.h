/*
 * What a graph node can be: the op kinds, their attributes and their names.
 * This is the vocabulary that the graph, the ops and the backends share; it
 * sits below all of them.  What each op means (its shape rule, its
 * backward rule) is src/ops/'s; how it runs, each backend's.
 */
#ifndef CT_CORE_OP_KINDS_H
#define CT_CORE_OP_KINDS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/shapes.h"
#include "cuttle.h"

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
    CT_OP_CUSTOM,                /* (x0, x1, ...): an op registered by the user (ops/custom.c) */
    CT_OP_CUSTOM_BWD,            /* (x0, x1, ..., y, dy) -> d(x_wrt) */
    CT_OP_CAST,                  /* (x) -> x in another float dtype (ops/autocast.c) */
    CT_OP_CHECK_FINITE,          /* (g0, g1, ...) -> i32 scalar: any inf or NaN (ops/optim.c) */
    CT_OP_QCONV2D,               /* (x[, b]): int8 conv2d, weights packed (quant/model.c) */
    CT_OP_QLINEAR,               /* (x[, b]): int8 linear, weights packed (quant/model.c) */
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
        bool scaled; /* times the step's loss scale (ct_step_values): the seed of backward */
    } fill;
    struct {
        int start, count;
    } slice;
    ct_sgd_args sgd;
    ct_adam_args adam;
    struct {
        int id, wrt; /* the registered op; CUSTOM_BWD: the input differentiated */
        int n_attrs;
        float attrs[CT_CUSTOM_MAX_ATTRS];
    } custom;
    /* QCONV2D, QLINEAR: x (f32, quantized here, or u8 already) is u8 with
     * (x_scale, x_zero_point), multiplied by the int8 weights; the epilogue
     * adds the bias, applies relu when `relu` (or a relu the planner fused)
     * and writes f32, or u8 with (out_scale, out_zero_point) when the node
     * is CT_U8: the next int8 layer's input grid (quant/int8.h,
     * quant/model.c). */
    struct {
        ct_conv2d_shape conv; /* QCONV2D */
        float x_scale;
        int32_t x_zero_point;
        bool relu;
        float out_scale;        /* a CT_U8 node */
        int32_t out_zero_point;
        const struct ct_int8_weights *weights; /* borrowed: the ct_quantized owns them */
        const char *weight_name; /* the f32 weight's ("conv2.weight"), borrowed likewise:
                                    the names a saved model and an ONNX export use */
    } quant;
} ct_op_attr;

/* "conv2d", "relu_bwd", ... */
const char *ct_op_name(ct_op op);

#endif
