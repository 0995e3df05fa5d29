/*
 * Optimizer updates on the GPU, in place on the parameter and its state,
 * with the CPU's math (core/math_shared.h): the per-step scalars computed
 * on the host in double, then rounded to float once; the per-element math
 * float, one thread per element.
 */
#include "core/math_shared.h"
#include "cuda/common.cuh"

/* ct_sgd_element (core/math_shared.h), one thread per element. */
__global__ void sgd_plain_kernel(int64_t count, float *param, const float *grad, float lr,
                                 float weight_decay)
{
    CT_CUDA_GRID_STRIDE(i, count) { param[i] = ct_sgd_element(param[i], grad[i], lr, weight_decay); }
}

/* ct_sgd_momentum_element (core/math_shared.h), one thread per element. */
__global__ void sgd_momentum_kernel(int64_t count, float *param, const float *grad, float *buf,
                                    float lr, float momentum, float take, float weight_decay,
                                    bool nesterov, bool first_step)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        param[i] = ct_sgd_momentum_element(param[i], grad[i], &buf[i], lr, momentum, take,
                                           weight_decay, nesterov, first_step);
    }
}

/* ct_adam_element (core/math_shared.h), one thread per element. */
__global__ void adam_kernel(int64_t count, float *param, const float *grad, float *exp_avg,
                            float *exp_avg_sq, ct_adam_step s)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        param[i] = ct_adam_element(param[i], grad[i], &exp_avg[i], &exp_avg_sq[i], &s);
    }
}

extern "C" ct_status ct_cuda_sgd_update(int64_t count, float *param, const float *grad,
                                        float *momentum_buf, float lr, float momentum,
                                        float dampening, float weight_decay, bool nesterov,
                                        bool first_step, cudaStream_t stream)
{
    if (momentum == 0.0f) {
        CT_CUDA_LAUNCH_ITEMS(sgd_plain_kernel, count, stream, count, param, grad, lr, weight_decay);
        return CT_OK;
    }
    float take = (float)(1.0 - (double)dampening);
    CT_CUDA_LAUNCH_ITEMS(sgd_momentum_kernel, count, stream, count, param, grad, momentum_buf, lr,
                         momentum, take, weight_decay, nesterov, first_step);
    return CT_OK;
}

extern "C" ct_status ct_cuda_adam_update(int64_t count, float *param, const float *grad,
                                         float *exp_avg, float *exp_avg_sq, float lr,
                                         float beta1, float beta2, float eps,
                                         float weight_decay, bool decoupled, int64_t step,
                                         cudaStream_t stream)
{
    ct_adam_step s = ct_adam_step_of(lr, beta1, beta2, eps, weight_decay, decoupled, step);
    CT_CUDA_LAUNCH_ITEMS(adam_kernel, count, stream, count, param, grad, exp_avg, exp_avg_sq, s);
    return CT_OK;
}
