/*
 * Optimizer updates on the GPU, in place on the parameter and its state,
 * with the math of src/cpu/optim.c: the per-step scalars are computed on
 * the host in double exactly as there, then rounded to float once; the
 * per-element math is float, one thread per element.
 */
#include <math.h>

#include "cuda/common.cuh"

/* p -= lr * (grad + wd*p) */
__global__ void sgd_plain_kernel(int64_t count, float *param, const float *grad, float lr,
                                 float weight_decay)
{
    CT_CUDA_GRID_STRIDE(i, count) { param[i] -= lr * (grad[i] + weight_decay * param[i]); }
}

/* g = grad + wd*p;  buf = first ? g : momentum*buf + (1-dampening)*g;
 * p -= lr * (nesterov ? g + momentum*buf : buf) */
__global__ void sgd_momentum_kernel(int64_t count, float *param, const float *grad, float *buf,
                                    float lr, float momentum, float take, float weight_decay,
                                    bool nesterov, bool first_step)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        float g = grad[i] + weight_decay * param[i];
        float b = first_step ? g : momentum * buf[i] + take * g;
        buf[i] = b;
        param[i] -= lr * (nesterov ? g + momentum * b : b);
    }
}

/* p' = p*param_scale;  g = grad + coupled_wd*p';  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 * p = p' - step_size * m / (sqrt(v) / bias_correction2_sqrt + eps) */
__global__ void adam_kernel(int64_t count, float *param, const float *grad, float *exp_avg,
                            float *exp_avg_sq, float beta1, float beta2, float take1,
                            float take2, float eps, float step_size, float bias_correction2_sqrt,
                            float param_scale, float coupled_wd)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        float p = param[i] * param_scale;
        float g = grad[i] + coupled_wd * p;
        float m = beta1 * exp_avg[i] + take1 * g;
        float v = beta2 * exp_avg_sq[i] + take2 * g * g;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        param[i] = p - step_size * m / (sqrtf(v) / bias_correction2_sqrt + eps);
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
    float step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    float bias_correction2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
    float decay = (float)(1.0 - (double)lr * weight_decay);
    float param_scale = decoupled ? decay : 1.0f;
    float coupled_wd = decoupled ? 0.0f : weight_decay;
    float take1 = (float)(1.0 - beta1), take2 = (float)(1.0 - beta2);
    CT_CUDA_LAUNCH_ITEMS(adam_kernel, count, stream, count, param, grad, exp_avg, exp_avg_sq, beta1,
                         beta2, take1, take2, eps, step_size, bias_correction2_sqrt, param_scale,
                         coupled_wd);
    return CT_OK;
}
