/*
 * Optimizer updates, in place on the parameter and its state, following
 * torch.optim (PyTorch 1.13, single-tensor path) operation by operation:
 * per-step scalars are computed in double as Python does, then rounded to
 * float once; the per-element math is float.  Elementwise, so any thread
 * count gives the same bits.
 */
#include <string.h>

#include "core/math_shared.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

/* Below this many elements (all a group's tensors together) a parallel
 * region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768
/* Elements a block of the AVX-512 update (update_slice_avx512). */
#define PREFETCH_BLOCK 256

/* One optimizer step's settings, the same for every tensor of a group. */
typedef struct optim_args {
    enum { SGD_PLAIN, SGD_MOMENTUM, ADAM } kind;
    float grad_scale, lr, momentum, take, weight_decay;
    bool nesterov, first_step;
    ct_adam_step adam;
} optim_args;

/* SGD without momentum: ct_sgd_element (core/math_shared.h). */
static inline __attribute__((always_inline)) void
sgd_plain(const optim_args *a, int64_t count, float *restrict param, const float *restrict grad)
{
    for (int64_t i = 0; i < count; i++)
        param[i] = ct_sgd_element(param[i], grad[i] * a->grad_scale, a->lr, a->weight_decay);
}

/* SGD with momentum: ct_sgd_momentum_element (core/math_shared.h). */
static inline __attribute__((always_inline)) void
sgd_momentum(const optim_args *a, int64_t count, float *restrict param, const float *restrict grad,
             float *restrict buf)
{
    for (int64_t i = 0; i < count; i++)
        param[i] = ct_sgd_momentum_element(param[i], grad[i] * a->grad_scale, &buf[i], a->lr,
                                           a->momentum, a->take, a->weight_decay, a->nesterov,
                                           a->first_step);
}

/* Adam or AdamW: ct_adam_element (core/math_shared.h). */
static inline __attribute__((always_inline)) void
adam(const optim_args *a, int64_t count, float *restrict param, const float *restrict grad,
     float *restrict exp_avg, float *restrict exp_avg_sq)
{
    for (int64_t i = 0; i < count; i++)
        param[i] = ct_adam_element(param[i], grad[i] * a->grad_scale, &exp_avg[i],
                                   &exp_avg_sq[i], &a->adam);
}

/* Elements [lo, hi) of one tensor; inlined into the portable and the
 * AVX-512 copy, each compiled for its own instructions. */
static inline __attribute__((always_inline)) void
update_slice_body(const optim_args *a, const ct_cpu_update_tensor *t, int64_t lo, int64_t hi)
{
    float *s0 = t->state[0] ? t->state[0] + lo : NULL, *s1 = t->state[1] ? t->state[1] + lo : NULL;
    if (a->kind == SGD_PLAIN)
        sgd_plain(a, hi - lo, t->param + lo, t->grad + lo);
    else if (a->kind == SGD_MOMENTUM)
        sgd_momentum(a, hi - lo, t->param + lo, t->grad + lo, s0);
    else
        adam(a, hi - lo, t->param + lo, t->grad + lo, s0, s1);
}

static void update_slice_portable(const optim_args *a, const ct_cpu_update_tensor *t, int64_t lo,
                                  int64_t hi)
{
    update_slice_body(a, t, lo, hi);
}

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* The same loops compiled for AVX-512: 16 elements an instruction where
 * the baseline build's vectors are SSE's 4 (SimpleCNN's 44 K parameters
 * took 4-6 % of a training step's samples in `perf`).  The same operations
 * on each element in the same order (ISO C: no contraction into FMAs; the
 * vector sqrt and division round as the scalar ones), so the same bits.
 * Adam's sqrtf vectorizes because the Makefile builds this file without
 * errno. */
__attribute__((target("avx2,avx512f"))) static void
update_slice_avx512(const optim_args *a, const ct_cpu_update_tensor *t, int64_t lo, int64_t hi)
{
    /* Blocks of PREFETCH_BLOCK, each first asking for the next block's
     * parameters for writing: the forward and backward passes leave every
     * weight in both cores' caches, and each store must first take the
     * other core's copy (a round trip between the cores took 0.43 us on
     * the 2-core AVX-512 VM).  SimpleCNN's update in its training step:
     * 24.2 -> 16.0 us (docs/perf.md, 2026-12-07). */
    for (int64_t start = lo; start < hi; start += PREFETCH_BLOCK) {
        int64_t end = hi - start < PREFETCH_BLOCK ? hi : start + PREFETCH_BLOCK;
        int64_t ahead = hi - end < PREFETCH_BLOCK ? hi : end + PREFETCH_BLOCK;
        for (int64_t k = end; k < ahead; k += 16)
            __builtin_prefetch(t->param + k, 1, 3);
        update_slice_body(a, t, start, end);
    }
}
#endif

static void update_slice(const optim_args *a, const ct_cpu_update_tensor *t, int64_t lo,
                         int64_t hi)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx512()) {
        update_slice_avx512(a, t, lo, hi);
        return;
    }
#endif
    update_slice_portable(a, t, lo, hi);
}

typedef struct update_job {
    const optim_args *a;
    int n;
    const ct_cpu_update_tensor *tensors;
    int64_t total;
} update_job;

/* One thread's share of update_group's elements. */
static void update_part(void *arg)
{
    const update_job *j = arg;
    int64_t lo, hi, base = 0;
    ct_cpu_split(j->total, &lo, &hi);
    for (int k = 0; k < j->n && base < hi; base += j->tensors[k].count, k++) {
        int64_t from = lo > base ? lo - base : 0;
        int64_t to = hi - base < j->tensors[k].count ? hi - base : j->tensors[k].count;
        if (from < to)
            update_slice(j->a, &j->tensors[k], from, to);
    }
}

/* Every tensor of the group, in one parallel region (ct_cpu_parallel): the threads split the
 * elements of all of them evenly, as if they were one array (a few small
 * tensors, such as biases, no longer run one after another on one thread). */
static void update_group(const optim_args *a, int n, const ct_cpu_update_tensor *tensors)
{
    update_job job = {a, n, tensors, 0};
    for (int k = 0; k < n; k++)
        job.total += tensors[k].count;
    ct_cpu_parallel(job.total >= PARALLEL_MIN_ELEMENTS ? ct_cpu_max_threads() : 1, update_part,
                    &job);
}

void ct_cpu_sgd_update_group(int n, const ct_cpu_update_tensor *tensors, float grad_scale,
                             float lr, float momentum, float dampening, float weight_decay,
                             bool nesterov, bool first_step)
{
    optim_args a = {.kind = momentum == 0.0f ? SGD_PLAIN : SGD_MOMENTUM,
                    .grad_scale = grad_scale, .lr = lr, .momentum = momentum,
                    .take = (float)(1.0 - (double)dampening), .weight_decay = weight_decay,
                    .nesterov = nesterov, .first_step = first_step};
    update_group(&a, n, tensors);
}

void ct_cpu_sgd_update(int64_t count, float *param, const float *grad, float grad_scale,
                       float *momentum_buf, float lr, float momentum, float dampening,
                       float weight_decay, bool nesterov, bool first_step)
{
    ct_cpu_update_tensor t = {count, param, grad, {momentum_buf, NULL}};
    ct_cpu_sgd_update_group(1, &t, grad_scale, lr, momentum, dampening, weight_decay, nesterov,
                            first_step);
}

void ct_cpu_adam_update_group(int n, const ct_cpu_update_tensor *tensors, float grad_scale,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              bool decoupled, int64_t step)
{
    optim_args a = {.kind = ADAM, .grad_scale = grad_scale,
                    .adam = ct_adam_step_of(lr, beta1, beta2, eps, weight_decay, decoupled, step)};
    update_group(&a, n, tensors);
}

/* Adam or AdamW, step t >= 1.  All arrays [count]. */
void ct_cpu_adam_update(int64_t count, float *param, const float *grad, float grad_scale,
                        float *exp_avg, float *exp_avg_sq, float lr, float beta1, float beta2,
                        float eps, float weight_decay, bool decoupled, int64_t step)
{
    ct_cpu_update_tensor t = {count, param, grad, {exp_avg, exp_avg_sq}};
    ct_cpu_adam_update_group(1, &t, grad_scale, lr, beta1, beta2, eps, weight_decay, decoupled,
                             step);
}

bool ct_cpu_all_finite(int64_t count, const float *x)
{
    /* An inf or NaN has every exponent bit set.  Integer tests OR-ed
     * together vectorize; the float sum of x - x this was could not (its
     * adds are a chain in order): 11.2 M floats, ResNet-18's gradients,
     * 7.5-8.6 -> 2.4-3.1 ms on this machine. */
    uint32_t bad = 0;
    for (int64_t i = 0; i < count; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, sizeof bits);
        bad |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    return bad == 0;
}
