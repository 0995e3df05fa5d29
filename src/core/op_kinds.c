/* The name of every op, in the order of enum ct_op (core/op_kinds.h). */
#include "core/op_kinds.h"

#include "core/error.h"

static const char *const op_names[CT_OP_COUNT] = {
    [CT_OP_LEAF] = "leaf",
    [CT_OP_VIEW] = "view",
    [CT_OP_CONV2D] = "conv2d",
    [CT_OP_CONV2D_BWD_DATA] = "conv2d_bwd_data",
    [CT_OP_CONV2D_BWD_WEIGHT] = "conv2d_bwd_weight",
    [CT_OP_CHANNEL_SUM] = "channel_sum",
    [CT_OP_LINEAR] = "linear",
    [CT_OP_LINEAR_BWD_DATA] = "linear_bwd_data",
    [CT_OP_LINEAR_BWD_WEIGHT] = "linear_bwd_weight",
    [CT_OP_MAXPOOL2D] = "maxpool2d",
    [CT_OP_MAXPOOL2D_BWD] = "maxpool2d_bwd",
    [CT_OP_AVGPOOL2D] = "avgpool2d",
    [CT_OP_AVGPOOL2D_BWD] = "avgpool2d_bwd",
    [CT_OP_GLOBAL_AVGPOOL] = "global_avgpool",
    [CT_OP_GLOBAL_AVGPOOL_BWD] = "global_avgpool_bwd",
    [CT_OP_RELU] = "relu",
    [CT_OP_RELU_BWD] = "relu_bwd",
    [CT_OP_SIGMOID] = "sigmoid",
    [CT_OP_SIGMOID_BWD] = "sigmoid_bwd",
    [CT_OP_TANH] = "tanh",
    [CT_OP_TANH_BWD] = "tanh_bwd",
    [CT_OP_BN_STATS] = "bn_stats",
    [CT_OP_BN_APPLY] = "batchnorm2d",
    [CT_OP_BN_BWD_PARAMS] = "bn_bwd_params",
    [CT_OP_BN_BWD_DATA] = "bn_bwd_data",
    [CT_OP_DROPOUT] = "dropout",
    [CT_OP_ADD] = "add",
    [CT_OP_CONCAT] = "concat",
    [CT_OP_SLICE_CHANNELS] = "slice_channels",
    [CT_OP_SOFTMAX] = "softmax",
    [CT_OP_SOFTMAX_BWD] = "softmax_bwd",
    [CT_OP_CROSS_ENTROPY] = "cross_entropy",
    [CT_OP_CROSS_ENTROPY_BWD] = "cross_entropy_bwd",
    [CT_OP_FILL] = "fill",
    [CT_OP_SGD_UPDATE] = "sgd_update",
    [CT_OP_ADAM_UPDATE] = "adam_update",
    [CT_OP_CUSTOM] = "custom",
    [CT_OP_CUSTOM_BWD] = "custom_bwd",
    [CT_OP_CAST] = "cast",
    [CT_OP_CHECK_FINITE] = "check_finite",
    [CT_OP_QCONV2D] = "qconv2d",
    [CT_OP_QLINEAR] = "qlinear",
};

const char *ct_op_name(ct_op op)
{
    CT_ASSERT((int)op >= 0 && op < CT_OP_COUNT && op_names[op]);
    return op_names[op];
}
