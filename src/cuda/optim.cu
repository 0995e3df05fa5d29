/*
 * Optimizer updates on the GPU, in place on the parameter and its state,
 * with the CPU's math (core/math_shared.h): the per-step scalars computed
 * in double, then rounded to float once; the per-element math float, four
 * elements per thread with 128-bit accesses (elementwise.cuh).  The
 * learning rate and step count are read from device memory (a replayed
 * step's kernels take this step's, core/step_values.h).
 */
#include "core/math_shared.h"
#include "cuda/elementwise.cuh"

/* ct_sgd_element (core/math_shared.h) on {param, grad}, 128-bit accesses. */
__global__ void sgd_plain_kernel(int64_t count, float *param, const float *grad,
                                 const ct_step_values *values, float weight_decay)
{
    float lr = values->lr;
    float *const arrays[2] = {param, (float *)grad};
    ct_map(count, arrays, 0x3u, 0x1u,
           [=](float *e) { e[0] = ct_sgd_element(e[0], e[1], lr, weight_decay); });
}

/* ct_sgd_momentum_element on {param, grad, buf}. */
__global__ void sgd_momentum_kernel(int64_t count, float *param, const float *grad, float *buf,
                                    const ct_step_values *values, float momentum, float take,
                                    float weight_decay, bool nesterov)
{
    float lr = values->lr;
    bool first_step = values->step == 0;
    float *const arrays[3] = {param, (float *)grad, buf};
    unsigned reads = first_step ? 0x3u : 0x7u; /* the first step only writes buf */
    ct_map(count, arrays, reads, 0x5u, [=](float *e) {
        e[0] = ct_sgd_momentum_element(e[0], e[1], &e[2], lr, momentum, take, weight_decay,
                                       nesterov, first_step);
    });
}

/* ct_adam_element on {param, grad, exp_avg, exp_avg_sq}.  Every thread
 * works out the step's scalars (ct_adam_step_of, in double as on the host):
 * two pow per thread against four arrays read and three written. */
__global__ void adam_kernel(int64_t count, float *param, const float *grad, float *exp_avg,
                            float *exp_avg_sq, const ct_step_values *values, float beta1,
                            float beta2, float eps, float weight_decay, bool decoupled)
{
    ct_adam_step s = ct_adam_step_of(values->lr, beta1, beta2, eps, weight_decay, decoupled,
                                     values->step + 1);
    float *const arrays[4] = {param, (float *)grad, exp_avg, exp_avg_sq};
    ct_map(count, arrays, 0xfu, 0xdu,
           [&s](float *e) { e[0] = ct_adam_element(e[0], e[1], &e[2], &e[3], &s); });
}

extern "C" ct_status ct_cuda_sgd_update(int64_t count, float *param, const float *grad,
                                        float *momentum_buf, const ct_step_values *values,
                                        float momentum, float dampening, float weight_decay,
                                        bool nesterov, cudaStream_t stream)
{
    if (momentum == 0.0f) {
        CT_CUDA_LAUNCH_MAP(sgd_plain_kernel, count, stream, count, param, grad, values,
                           weight_decay);
        return CT_OK;
    }
    float take = (float)(1.0 - (double)dampening);
    CT_CUDA_LAUNCH_MAP(sgd_momentum_kernel, count, stream, count, param, grad, momentum_buf,
                       values, momentum, take, weight_decay, nesterov);
    return CT_OK;
}

extern "C" ct_status ct_cuda_adam_update(int64_t count, float *param, const float *grad,
                                         float *exp_avg, float *exp_avg_sq,
                                         const ct_step_values *values, float beta1,
                                         float beta2, float eps, float weight_decay,
                                         bool decoupled, cudaStream_t stream)
{
    CT_CUDA_LAUNCH_MAP(adam_kernel, count, stream, count, param, grad, exp_avg, exp_avg_sq,
                       values, beta1, beta2, eps, weight_decay, decoupled);
    return CT_OK;
}
