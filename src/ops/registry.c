/* The backward rule of every differentiable op (ops.h); the others have none. */
#include "ops/ops.h"

#include "core/error.h"

static const ct_backward_fn backward_rules[CT_OP_COUNT] = {
    [CT_OP_VIEW] = ct_view_backward,
    [CT_OP_CONV2D] = ct_conv2d_backward,
    [CT_OP_LINEAR] = ct_linear_backward,
    [CT_OP_MAXPOOL2D] = ct_maxpool2d_backward,
    [CT_OP_AVGPOOL2D] = ct_avgpool2d_backward,
    [CT_OP_GLOBAL_AVGPOOL] = ct_global_avgpool_backward,
    [CT_OP_RELU] = ct_activation_backward,
    [CT_OP_SIGMOID] = ct_activation_backward,
    [CT_OP_TANH] = ct_activation_backward,
    [CT_OP_BN_APPLY] = ct_bn_apply_backward,
    [CT_OP_DROPOUT] = ct_dropout_backward,
    [CT_OP_ADD] = ct_add_backward,
    [CT_OP_CONCAT] = ct_concat_backward,
    [CT_OP_SOFTMAX] = ct_softmax_backward,
    [CT_OP_CROSS_ENTROPY] = ct_cross_entropy_backward,
    [CT_OP_CUSTOM] = ct_custom_backward,
    [CT_OP_CAST] = ct_cast_backward,
};

ct_backward_fn ct_op_backward(ct_op op)
{
    CT_ASSERT((int)op >= 0 && op < CT_OP_COUNT);
    return backward_rules[op];
}
