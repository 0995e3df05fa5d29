/*
 * The math that the CPU kernels and the CUDA kernels share, in one place so
 * the two cannot drift apart: the activations, batch normalization's
 * per-channel math, softmax's and cross-entropy's per-element and per-row
 * formulas (the callers keep their loops: a CUDA kernel reduces a row across
 * threads), max pooling's rule, and the optimizer updates (PyTorch's
 * torch.optim.SGD and Adam/AdamW, element by element).  The windows of
 * convolution and pooling are core/window_math.h's.
 * Plain C that nvcc compiles for the device too (CT_HD); the emulated build
 * compiles it as host C++ like every kernel.
 *
 * The tests' references (tests/ref.c) are deliberately not built on these:
 * they derive the same math again in double precision, an independent
 * oracle, so a wrong formula here fails the tests instead of passing on
 * both backends at once.
 */
#ifndef CT_CORE_MATH_SHARED_H
#define CT_CORE_MATH_SHARED_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"

/* ---- activations (backward rules take the forward output y) ------------------------ */

/* max(x, 0); NaN passes through, as in torch.relu. */
static inline CT_HD float ct_relu(float x)
{
    return x < 0.0f ? 0.0f : x;
}

/* PyTorch's threshold_backward on the output.  dy is a value, read whatever
 * y is, so a loop over this compiles to a vector blend, not a branch. */
static inline CT_HD float ct_relu_grad(float y, float dy)
{
    return y <= 0.0f ? 0.0f : dy;
}

/* 1 / (1 + exp(-x)) from e = exp(-|x|) <= 1, so nothing overflows:
 * x >= 0: 1/(1+e);  x < 0: e/(1+e). */
static inline CT_HD float ct_sigmoid(float x)
{
    float e = expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

static inline CT_HD float ct_sigmoid_grad(float y, float dy)
{
    return dy * y * (1.0f - y);
}

/* dy * (1 - y^2), as (1-y)(1+y): 1-y is exact near |y| = 1, where 1 - y*y
 * would lose most of its bits to the rounding of y*y. */
static inline CT_HD float ct_tanh_grad(float y, float dy)
{
    return dy * ((1.0f - y) * (1.0f + y));
}

/* ---- batch normalization (stats: [2, c] = (mean, invstd)) ------------------------ */

/* 1/sqrt(var + eps), in double as PyTorch's evaluation path rounds it. */
static inline CT_HD float ct_bn_invstd(double var, float eps)
{
    return (float)(1.0 / sqrt(var + eps));
}

/* A channel's training statistics from its mean and its sum of squared
 * deviations over m elements (biased variance), and its running statistics
 * moved by momentum toward the mean and the unbiased variance (PyTorch's
 * BatchNorm2d). */
static inline CT_HD void ct_bn_channel_stats(double mean, double sq_dev, int64_t m, float eps,
                                             float momentum, float *stat_mean,
                                             float *stat_invstd, float *running_mean,
                                             float *running_var)
{
    double var_unbiased = m > 1 ? sq_dev / (double)(m - 1) : sq_dev;
    *stat_mean = (float)mean;
    *stat_invstd = ct_bn_invstd(sq_dev / (double)m, eps);
    *running_mean = (float)((1.0 - momentum) * *running_mean + (double)momentum * mean);
    *running_var = (float)((1.0 - momentum) * *running_var + (double)momentum * var_unbiased);
}

/* y = x*scale + shift for a channel: scale = invstd*gamma, shift = beta - mean*scale. */
static inline CT_HD void ct_bn_scale_shift(float mean, float invstd, float gamma, float beta,
                                           float *scale, float *shift)
{
    *scale = invstd * gamma;
    *shift = beta - mean * *scale;
}

/* dx = (dy - dy_mean - (x - mean) * projection) * scale for a channel, with
 * dy_mean = dbeta/M, projection = invstd*dgamma/M, scale = invstd*gamma. */
typedef struct ct_bn_grad {
    float mean, dy_mean, projection, scale;
} ct_bn_grad;

static inline CT_HD ct_bn_grad ct_bn_grad_of(float mean, float invstd, float gamma,
                                             float dgamma, float dbeta, double m)
{
    ct_bn_grad g;
    g.mean = mean;
    g.dy_mean = (float)(dbeta / m);
    g.projection = (float)((double)dgamma * invstd / m);
    g.scale = invstd * gamma;
    return g;
}

static inline CT_HD float ct_bn_dx(const ct_bn_grad *g, float x, float dy)
{
    return (dy - g->dy_mean - (x - g->mean) * g->projection) * g->scale;
}

/* ---- softmax and cross-entropy (one row of logits x; the callers reduce) ---- */

/* A softmax numerator exp(x - max_j x_j): subtracting the row's maximum
 * keeps exp from overflowing and leaves the ratio unchanged. */
static inline CT_HD float ct_softmax_exp(float x, float row_max)
{
    return expf(x - row_max);
}

/* y_j = e_j / sum_k e_k, the sum (taken in double) rounded to float once. */
static inline CT_HD float ct_softmax_normalize(float e, double row_sum)
{
    return e / (float)row_sum;
}

/* dx_j = y_j * (dy_j - sum_k dy_k y_k), the sum (taken in double) rounded to float. */
static inline CT_HD float ct_softmax_grad(float y, float dy, double dot)
{
    return y * (dy - (float)dot);
}

/* A term exp(x - max) of the log-sum-exp, in double. */
static inline CT_HD double ct_lse_term(float x, double row_max)
{
    return exp(x - row_max);
}

/* log sum_j exp(x_j) = max + log sum_j exp(x_j - max). */
static inline CT_HD double ct_logsumexp(double row_max, double sum_terms)
{
    return row_max + log(sum_terms);
}

/* log softmax: log p_j = x_j - lse, in double. */
static inline CT_HD double ct_log_softmax(float x, double lse)
{
    return x - lse;
}

/* A row's label-smoothed loss, PyTorch's CrossEntropyLoss(label_smoothing=s):
 * -(1-s) log p[label] - (s/c) sum_j log p[j]. */
static inline CT_HD double ct_cross_entropy_row(double log_p_label, double sum_log_p,
                                                double smoothing, int c)
{
    return -(1.0 - smoothing) * log_p_label - smoothing / c * sum_log_p;
}

/* dlogits_j = scale * (p_j - target_j) over a batch of n rows of c classes:
 * scale = dloss/n (the loss is a mean), target_j = (1-s)[j == label] + s/c. */
typedef struct ct_ce_grad {
    float scale, on_target, off_target;
} ct_ce_grad;

static inline CT_HD ct_ce_grad ct_ce_grad_of(float dloss, int n, float smoothing, int c)
{
    ct_ce_grad g;
    g.scale = dloss / (float)n;
    g.off_target = smoothing / (float)c;
    g.on_target = (1.0f - smoothing) + g.off_target;
    return g;
}

/* p_j = exp(x_j - lse) in double, rounded to float before the subtraction. */
static inline CT_HD float ct_ce_dlogit(const ct_ce_grad *g, float x, double lse, bool is_label)
{
    float p = (float)exp(x - lse);
    return g->scale * (p - (is_label ? g->on_target : g->off_target));
}

/* ---- pooling ------------------------------------------------------------------ */

/* Max pooling's step, PyTorch's: NaN always replaces the running maximum,
 * otherwise only a strictly larger value, so the first maximum wins a tie. */
static inline CT_HD bool ct_max_replaces(float candidate, float current)
{
    return (candidate > current) | (bool)isnan(candidate); /* | : no branch */
}

/* A 2x2 window's argmax (its four values in row order): the index that
 * ct_max_replaces leaves last, the max in *max. */
static inline CT_HD int ct_argmax4(const float window[4], float *max)
{
    int best = 0;
    float m = -INFINITY;
    for (int i = 0; i < 4; i++)
        if (ct_max_replaces(window[i], m)) {
            m = window[i];
            best = i;
        }
    *max = m;
    return best;
}

/* ---- optimizers -------------------------------------------------------------- */

/* SGD without momentum: p -= lr * (grad + wd*p).  Returns the new p. */
static inline CT_HD float ct_sgd_element(float p, float grad, float lr, float weight_decay)
{
    return p - lr * (grad + weight_decay * p);
}

/* SGD with momentum (PyTorch's order of operations):
 *   g = grad + wd*p;  buf = first ? g : momentum*buf + take*g  (take = 1 - dampening);
 *   p -= lr * (nesterov ? g + momentum*buf : buf).
 * On the first step buf starts as g, as PyTorch's does.  Returns the new p. */
static inline CT_HD float ct_sgd_momentum_element(float p, float grad, float *buf, float lr,
                                                  float momentum, float take,
                                                  float weight_decay, bool nesterov,
                                                  bool first_step)
{
    float g = grad + weight_decay * p;
    float b = first_step ? g : momentum * *buf + take * g;
    *buf = b;
    return p - lr * (nesterov ? g + momentum * b : b);
}

/* What Adam's element update needs that does not change within a step, in
 * double where PyTorch does: once per step on the CPU, by every thread on a
 * GPU (which reads the step from device memory). */
typedef struct ct_adam_step {
    float beta1, beta2, take1, take2, eps;
    float step_size;             /* lr / (1 - beta1^t) */
    float bias_correction2_sqrt; /* sqrt(1 - beta2^t) */
    float param_scale;           /* AdamW: 1 - lr*wd (decoupled decay); Adam: 1 */
    float coupled_wd;            /* Adam: wd (added to the gradient); AdamW: 0 */
} ct_adam_step;

static inline CT_HD ct_adam_step ct_adam_step_of(float lr, float beta1, float beta2,
                                                 float eps, float weight_decay, bool decoupled,
                                                 int64_t step)
{
    ct_adam_step s;
    s.beta1 = beta1;
    s.beta2 = beta2;
    s.take1 = (float)(1.0 - beta1);
    s.take2 = (float)(1.0 - beta2);
    s.eps = eps;
    s.step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    s.bias_correction2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
    s.param_scale = decoupled ? (float)(1.0 - (double)lr * weight_decay) : 1.0f;
    s.coupled_wd = decoupled ? 0.0f : weight_decay;
    return s;
}

/* Adam/AdamW, one element:  p' = p*param_scale;  g = grad + coupled_wd*p';
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 * p = p' - step_size * m / (sqrt(v) / bias_correction2_sqrt + eps)
 * (addcdiv's order: (value * m) / denom).  Returns the new p. */
static inline CT_HD float ct_adam_element(float p, float grad, float *exp_avg,
                                          float *exp_avg_sq, const ct_adam_step *s)
{
    p *= s->param_scale;
    float g = grad + s->coupled_wd * p;
    float m = s->beta1 * *exp_avg + s->take1 * g;
    float v = s->beta2 * *exp_avg_sq + s->take2 * g * g;
    *exp_avg = m;
    *exp_avg_sq = v;
    return p - s->step_size * m / (sqrtf(v) / s->bias_correction2_sqrt + s->eps);
}

#endif
