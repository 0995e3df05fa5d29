/*
 * Optimizer updates on the GPU, in place on the parameter and its state,
 * with the CPU's math (core/math_shared.h): the per-step scalars computed
 * on the host in double, then rounded to float once; the per-element math
 * float, four elements per thread with 128-bit accesses (elementwise.cuh).
 */
#include "core/math_shared.h"
#include "cuda/elementwise.cuh"

/* ct_sgd_element (core/math_shared.h) on {param, grad}, 128-bit accesses. */
__global__ void sgd_plain_kernel(int64_t count, float *param, const float *grad, float lr,
                                 float weight_decay)
{
    float *const arrays[2] = {param, (float *)grad};
    ct_map(count, arrays, 0x3u, 0x1u,
           [=](float *e) { e[0] = ct_sgd_element(e[0], e[1], lr, weight_decay); });
}

/* ct_sgd_momentum_element on {param, grad, buf}. */
__global__ void sgd_momentum_kernel(int64_t count, float *param, const float *grad, float *buf,
                                    float lr, float momentum, float take, float weight_decay,
                                    bool nesterov, bool first_step)
{
    float *const arrays[3] = {param, (float *)grad, buf};
    unsigned reads = first_step ? 0x3u : 0x7u; /* the first step only writes buf */
    ct_map(count, arrays, reads, 0x5u, [=](float *e) {
        e[0] = ct_sgd_momentum_element(e[0], e[1], &e[2], lr, momentum, take, weight_decay,
                                       nesterov, first_step);
    });
}

/* ct_adam_element on {param, grad, exp_avg, exp_avg_sq}. */
__global__ void adam_kernel(int64_t count, float *param, const float *grad, float *exp_avg,
                            float *exp_avg_sq, ct_adam_step s)
{
    float *const arrays[4] = {param, (float *)grad, exp_avg, exp_avg_sq};
    ct_map(count, arrays, 0xfu, 0xdu,
           [&s](float *e) { e[0] = ct_adam_element(e[0], e[1], &e[2], &e[3], &s); });
}

extern "C" ct_status ct_cuda_sgd_update(int64_t count, float *param, const float *grad,
                                        float *momentum_buf, float lr, float momentum,
                                        float dampening, float weight_decay, bool nesterov,
                                        bool first_step, cudaStream_t stream)
{
    if (momentum == 0.0f) {
        CT_CUDA_LAUNCH_MAP(sgd_plain_kernel, count, stream, count, param, grad, lr, weight_decay);
        return CT_OK;
    }
    float take = (float)(1.0 - (double)dampening);
    CT_CUDA_LAUNCH_MAP(sgd_momentum_kernel, count, stream, count, param, grad, momentum_buf, lr,
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
    CT_CUDA_LAUNCH_MAP(adam_kernel, count, stream, count, param, grad, exp_avg, exp_avg_sq, s);
    return CT_OK;
}
