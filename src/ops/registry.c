/* Names and backward rules of every op, in the order of enum ct_op. */
#include "ops/ops.h"

#include "core/error.h"

static const ct_op_info op_infos[CT_OP_COUNT] = {
    [CT_OP_LEAF] = {"leaf", NULL},
    [CT_OP_VIEW] = {"view", ct_view_backward},
    [CT_OP_CONV2D] = {"conv2d", ct_conv2d_backward},
    [CT_OP_CONV2D_BWD_DATA] = {"conv2d_bwd_data", NULL},
    [CT_OP_CONV2D_BWD_WEIGHT] = {"conv2d_bwd_weight", NULL},
    [CT_OP_CHANNEL_SUM] = {"channel_sum", NULL},
    [CT_OP_LINEAR] = {"linear", ct_linear_backward},
    [CT_OP_LINEAR_BWD_DATA] = {"linear_bwd_data", NULL},
    [CT_OP_LINEAR_BWD_WEIGHT] = {"linear_bwd_weight", NULL},
    [CT_OP_MAXPOOL2D] = {"maxpool2d", ct_maxpool2d_backward},
    [CT_OP_MAXPOOL2D_BWD] = {"maxpool2d_bwd", NULL},
    [CT_OP_AVGPOOL2D] = {"avgpool2d", ct_avgpool2d_backward},
    [CT_OP_AVGPOOL2D_BWD] = {"avgpool2d_bwd", NULL},
    [CT_OP_GLOBAL_AVGPOOL] = {"global_avgpool", ct_global_avgpool_backward},
    [CT_OP_GLOBAL_AVGPOOL_BWD] = {"global_avgpool_bwd", NULL},
    [CT_OP_RELU] = {"relu", ct_activation_backward},
    [CT_OP_RELU_BWD] = {"relu_bwd", NULL},
    [CT_OP_SIGMOID] = {"sigmoid", ct_activation_backward},
    [CT_OP_SIGMOID_BWD] = {"sigmoid_bwd", NULL},
    [CT_OP_TANH] = {"tanh", ct_activation_backward},
    [CT_OP_TANH_BWD] = {"tanh_bwd", NULL},
    [CT_OP_BN_STATS] = {"bn_stats", NULL},
    [CT_OP_BN_APPLY] = {"batchnorm2d", ct_bn_apply_backward},
    [CT_OP_BN_BWD_PARAMS] = {"bn_bwd_params", NULL},
    [CT_OP_BN_BWD_DATA] = {"bn_bwd_data", NULL},
    [CT_OP_DROPOUT] = {"dropout", ct_dropout_backward},
    [CT_OP_ADD] = {"add", ct_add_backward},
    [CT_OP_CONCAT] = {"concat", ct_concat_backward},
    [CT_OP_SLICE_CHANNELS] = {"slice_channels", NULL},
    [CT_OP_SOFTMAX] = {"softmax", ct_softmax_backward},
    [CT_OP_SOFTMAX_BWD] = {"softmax_bwd", NULL},
    [CT_OP_CROSS_ENTROPY] = {"cross_entropy", ct_cross_entropy_backward},
    [CT_OP_CROSS_ENTROPY_BWD] = {"cross_entropy_bwd", NULL},
    [CT_OP_FILL] = {"fill", NULL},
    [CT_OP_SGD_UPDATE] = {"sgd_update", NULL},
    [CT_OP_ADAM_UPDATE] = {"adam_update", NULL},
};

const ct_op_info *ct_op_info_of(ct_op op)
{
    CT_ASSERT((int)op >= 0 && op < CT_OP_COUNT && op_infos[op].name);
    return &op_infos[op];
}
