/*
 * Optimizer updates, in place on the parameter and its state, following
 * torch.optim (PyTorch 1.13, single-tensor path) operation by operation:
 * per-step scalars are computed in double as Python does, then rounded to
 * float once; the per-element math is float.  Elementwise, so any thread
 * count gives the same bits.
 */
#include <math.h>

#include "cpu/kernels.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

/* p -= lr * (grad + wd*p): SGD without momentum. */
static void sgd_plain(int64_t count, float *restrict param, const float *restrict grad,
                      float lr, float weight_decay)
{
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        param[i] -= lr * (grad[i] + weight_decay * param[i]);
}

/* g = grad + wd*p;  buf = first ? g : momentum*buf + (1-dampening)*g;
 * p -= lr * (nesterov ? g + momentum*buf : buf).  On the first step buf is
 * not read: it may hold anything.  The branches are loop-invariant, so gcc
 * unswitches them out of the loop. */
static void sgd_momentum(int64_t count, float *restrict param, const float *restrict grad,
                         float *restrict buf, float lr, float momentum, float dampening,
                         float weight_decay, bool nesterov, bool first_step)
{
    float take = (float)(1.0 - (double)dampening);
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float g = grad[i] + weight_decay * param[i];
        float b = first_step ? g : momentum * buf[i] + take * g;
        buf[i] = b;
        param[i] -= lr * (nesterov ? g + momentum * b : b);
    }
}

/* See kernels.h.  momentum_buf: [count], unused (may be NULL) when momentum == 0. */
void ct_cpu_sgd_update(int64_t count, float *param, const float *grad, float *momentum_buf,
                       float lr, float momentum, float dampening, float weight_decay,
                       bool nesterov, bool first_step)
{
    if (momentum == 0.0f)
        sgd_plain(count, param, grad, lr, weight_decay);
    else
        sgd_momentum(count, param, grad, momentum_buf, lr, momentum, dampening, weight_decay,
                     nesterov, first_step);
}

/* Adam (decoupled == false: g = grad + wd*p) or AdamW (decoupled: p *= 1 - lr*wd), step t >= 1:
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 * p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps);  all arrays [count] */
void ct_cpu_adam_update(int64_t count, float *restrict param, const float *restrict grad,
                        float *restrict exp_avg, float *restrict exp_avg_sq, float lr,
                        float beta1, float beta2, float eps, float weight_decay,
                        bool decoupled, int64_t step)
{
    float step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    float bias_correction2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
    float decay = (float)(1.0 - (double)lr * weight_decay);
    float param_scale = decoupled ? decay : 1.0f;
    float coupled_wd = decoupled ? 0.0f : weight_decay;
    float take1 = (float)(1.0 - beta1), take2 = (float)(1.0 - beta2);
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float p = param[i] * param_scale;
        float g = grad[i] + coupled_wd * p;
        float m = beta1 * exp_avg[i] + take1 * g;
        float v = beta2 * exp_avg_sq[i] + take2 * g * g;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        /* addcdiv's order: (value * m) / denom */
        param[i] = p - step_size * m / (sqrtf(v) / bias_correction2_sqrt + eps);
    }
}
