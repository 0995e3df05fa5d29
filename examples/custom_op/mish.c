/* Mish's CPU kernels and its registration. */
#include <math.h>

#include "mish.h"

static float softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

/* y = x * tanh(softplus(x)) */
static ct_status mish_forward(const ct_custom_call *call)
{
    const float *x = call->inputs[0];
    for (int64_t i = 0; i < call->out_numel; i++)
        call->out[i] = x[i] * tanhf(softplus(x[i]));
    return CT_OK;
}

/* dx = dy * (t + x * (1 - t^2) * sigmoid(x)),  t = tanh(softplus(x)) */
static ct_status mish_backward(const ct_custom_call *call)
{
    const float *x = call->inputs[0];
    for (int64_t i = 0; i < call->out_numel; i++) {
        float t = tanhf(softplus(x[i])), sigmoid = 1.0f / (1.0f + expf(-x[i]));
        call->out[i] = call->dy[i] * (t + x[i] * (1.0f - t * t) * sigmoid);
    }
    return CT_OK;
}

ct_status mish_register(void)
{
    ct_custom_op op = {.name = "mish", .n_inputs = 1, .forward = mish_forward,
                       .backward = mish_backward};
#ifdef MISH_CUDA
    op.cuda_forward = mish_cuda_forward;
    op.cuda_backward = mish_cuda_backward;
#endif
    return ct_custom_op_register(&op);
}
