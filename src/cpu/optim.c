/*
 * Optimizer updates, in place on the parameter and its state, following
 * torch.optim (PyTorch 1.13, single-tensor path) operation by operation:
 * per-step scalars are computed in double as Python does, then rounded to
 * float once; the per-element math is float.  Elementwise, so any thread
 * count gives the same bits.
 */
#include "core/math_shared.h"
#include "cpu/kernels.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

/* SGD without momentum: ct_sgd_element (core/math_shared.h). */
static void sgd_plain(int64_t count, float *restrict param, const float *restrict grad,
                      float grad_scale, float lr, float weight_decay)
{
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        param[i] = ct_sgd_element(param[i], grad[i] * grad_scale, lr, weight_decay);
}

/* SGD with momentum: ct_sgd_momentum_element (core/math_shared.h). */
static void sgd_momentum(int64_t count, float *restrict param, const float *restrict grad,
                         float grad_scale, float *restrict buf, float lr, float momentum,
                         float dampening, float weight_decay, bool nesterov, bool first_step)
{
    float take = (float)(1.0 - (double)dampening);
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        param[i] = ct_sgd_momentum_element(param[i], grad[i] * grad_scale, &buf[i], lr,
                                           momentum, take, weight_decay, nesterov, first_step);
}

/* See kernels.h.  momentum_buf: [count], unused (may be NULL) when momentum == 0. */
void ct_cpu_sgd_update(int64_t count, float *param, const float *grad, float grad_scale,
                       float *momentum_buf, float lr, float momentum, float dampening,
                       float weight_decay, bool nesterov, bool first_step)
{
    if (momentum == 0.0f)
        sgd_plain(count, param, grad, grad_scale, lr, weight_decay);
    else
        sgd_momentum(count, param, grad, grad_scale, momentum_buf, lr, momentum, dampening,
                     weight_decay, nesterov, first_step);
}

/* Adam or AdamW, step t >= 1: ct_adam_element (core/math_shared.h).  All arrays [count]. */
void ct_cpu_adam_update(int64_t count, float *restrict param, const float *restrict grad,
                        float grad_scale, float *restrict exp_avg, float *restrict exp_avg_sq,
                        float lr, float beta1, float beta2, float eps, float weight_decay,
                        bool decoupled, int64_t step)
{
    ct_adam_step s = ct_adam_step_of(lr, beta1, beta2, eps, weight_decay, decoupled, step);
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        param[i] = ct_adam_element(param[i], grad[i] * grad_scale, &exp_avg[i], &exp_avg_sq[i],
                                   &s);
}

bool ct_cpu_all_finite(int64_t count, const float *x)
{
    /* x - x is 0 for a finite x, NaN for an inf or NaN: no branch per element */
    float sum = 0.0f;
    for (int64_t i = 0; i < count; i++)
        sum += x[i] - x[i];
    return sum == 0.0f;
}
