/*
 * Optimizer updates on the GPU, in place on the parameter and its state,
 * with the CPU's math (core/math_shared.h): the per-step scalars computed
 * in double, then rounded to float once; the per-element math float, four
 * elements per thread with 128-bit accesses (elementwise.cuh).  The
 * learning rate and step count are read from device memory (a replayed
 * step's kernels take this step's, core/step_values.h).
 *
 * The update of every parameter in one launch (the _group kernels, what
 * PyTorch calls multi-tensor apply): the tensors' pointers travel in the
 * kernel's parameters (ct_cuda_group), each tensor gets the blocks a launch
 * of its own would have, and each block finds its tensor from the running
 * sum of blocks (group_blocks, also a parameter).  The elements go through
 * the same code as the single kernels', so the results are the same bits.
 *
 * fp16's loss scaling (graph/precision.c): the gradients are the scaled
 * loss's, so each update multiplies them by 1 / loss_scale (exact: a power
 * of two; 1 without scaling), and does nothing at all when a check_finite
 * node found an inf or NaN among them this step (found_inf; every kernel
 * reads the values with ct_step_values_load).
 */
#include "core/math_shared.h"
#include "cuda/elementwise.cuh"

/* Whether this step updates (no check_finite found an inf or NaN among the
 * gradients), and the factor that unscales them (1 / the loss scale). */
__device__ inline bool update_scale(const ct_step_values &values, float *unscale)
{
    *unscale = 1.0f / values.loss_scale;
    return !values.found_inf;
}

/* ct_sgd_element (core/math_shared.h) on {param, grad}, 128-bit accesses. */
__global__ void sgd_plain_kernel(int64_t count, float *param, const float *grad,
                                 const ct_step_values *values, float weight_decay)
{
    ct_step_values step = ct_step_values_load(values);
    float unscale;
    if (!update_scale(step, &unscale))
        return;
    float lr = step.lr;
    float *const arrays[2] = {param, (float *)grad};
    ct_map(count, arrays, 0x3u, 0x1u,
           [=](float *e) { e[0] = ct_sgd_element(e[0], e[1] * unscale, lr, weight_decay); });
}

/* ct_sgd_momentum_element on {param, grad, buf}. */
__global__ void sgd_momentum_kernel(int64_t count, float *param, const float *grad, float *buf,
                                    const ct_step_values *values, float momentum, float take,
                                    float weight_decay, bool nesterov)
{
    ct_step_values step = ct_step_values_load(values);
    float unscale;
    if (!update_scale(step, &unscale))
        return;
    float lr = step.lr;
    bool first_step = step.updates == 0;
    float *const arrays[3] = {param, (float *)grad, buf};
    unsigned reads = first_step ? 0x3u : 0x7u; /* the first step only writes buf */
    ct_map(count, arrays, reads, 0x5u, [=](float *e) {
        e[0] = ct_sgd_momentum_element(e[0], e[1] * unscale, &e[2], lr, momentum, take,
                                       weight_decay, nesterov, first_step);
    });
}

/* ct_adam_element on {param, grad, exp_avg, exp_avg_sq}.  Every thread
 * works out the step's scalars (ct_adam_step_of, in double as on the host):
 * two pow per thread against four arrays read and three written. */
__global__ void adam_kernel(int64_t count, float *param, const float *grad, float *exp_avg,
                            float *exp_avg_sq, const ct_step_values *values, float beta1,
                            float beta2, float eps, float weight_decay, bool decoupled)
{
    ct_step_values step = ct_step_values_load(values);
    float unscale;
    if (!update_scale(step, &unscale))
        return;
    ct_adam_step s = ct_adam_step_of(step.lr, beta1, beta2, eps, weight_decay, decoupled,
                                     step.updates + 1);
    float *const arrays[4] = {param, (float *)grad, exp_avg, exp_avg_sq};
    ct_map(count, arrays, 0xfu, 0xdu, [&s, unscale](float *e) {
        e[0] = ct_adam_element(e[0], e[1] * unscale, &e[2], &e[3], &s);
    });
}

/* ---- every tensor of a group in one launch ------------------------------------------ */

/* Blocks [first[t], first[t+1]) of the grid are tensor t's. */
typedef struct group_blocks {
    unsigned first[CT_CUDA_GROUP_MAX + 1];
} group_blocks;

/* The tensor of this block, and the block's place among the tensor's. */
__device__ inline int group_tensor(const ct_cuda_group &g, const group_blocks &b,
                                   unsigned *block, unsigned *blocks)
{
    int t = 0;
    while (t + 1 < g.n && blockIdx.x >= b.first[t + 1])
        t++;
    *block = blockIdx.x - b.first[t];
    *blocks = b.first[t + 1] - b.first[t];
    return t;
}

__global__ void sgd_plain_group_kernel(const __grid_constant__ ct_cuda_group g,
                                       const __grid_constant__ group_blocks b,
                                       const ct_step_values *values, float weight_decay)
{
    ct_step_values step = ct_step_values_load(values);
    float unscale;
    if (!update_scale(step, &unscale))
        return;
    unsigned block, blocks;
    int t = group_tensor(g, b, &block, &blocks);
    float lr = step.lr;
    float *const arrays[2] = {g.arrays[t][0], g.arrays[t][1]};
    ct_map_blocks(g.count[t], arrays, 0x3u, 0x1u, block, blocks,
                  [=](float *e) { e[0] = ct_sgd_element(e[0], e[1] * unscale, lr, weight_decay); });
}

__global__ void sgd_momentum_group_kernel(const __grid_constant__ ct_cuda_group g,
                                          const __grid_constant__ group_blocks b,
                                          const ct_step_values *values, float momentum,
                                          float take, float weight_decay, bool nesterov)
{
    ct_step_values step = ct_step_values_load(values);
    float unscale;
    if (!update_scale(step, &unscale))
        return;
    unsigned block, blocks;
    int t = group_tensor(g, b, &block, &blocks);
    float lr = step.lr;
    bool first_step = step.updates == 0;
    float *const arrays[3] = {g.arrays[t][0], g.arrays[t][1], g.arrays[t][2]};
    ct_map_blocks(g.count[t], arrays, first_step ? 0x3u : 0x7u, 0x5u, block, blocks,
                  [=](float *e) {
                      e[0] = ct_sgd_momentum_element(e[0], e[1] * unscale, &e[2], lr,
                                                     momentum, take, weight_decay, nesterov,
                                                     first_step);
                  });
}

__global__ void adam_group_kernel(const __grid_constant__ ct_cuda_group g,
                                  const __grid_constant__ group_blocks b,
                                  const ct_step_values *values, float beta1, float beta2,
                                  float eps, float weight_decay, bool decoupled)
{
    ct_step_values step = ct_step_values_load(values);
    float unscale;
    if (!update_scale(step, &unscale))
        return;
    unsigned block, blocks;
    int t = group_tensor(g, b, &block, &blocks);
    ct_adam_step s = ct_adam_step_of(step.lr, beta1, beta2, eps, weight_decay, decoupled,
                                     step.updates + 1);
    float *const arrays[4] = {g.arrays[t][0], g.arrays[t][1], g.arrays[t][2], g.arrays[t][3]};
    ct_map_blocks(g.count[t], arrays, 0xfu, 0xdu, block, blocks, [&s, unscale](float *e) {
        e[0] = ct_adam_element(e[0], e[1] * unscale, &e[2], &e[3], &s);
    });
}

/* Each tensor gets the grid a launch of `kernel` on it alone would get. */
static unsigned plan_group_blocks(const void *kernel, const ct_cuda_group *g, group_blocks *b)
{
    b->first[0] = 0;
    for (int t = 0; t < g->n; t++)
        b->first[t + 1] = b->first[t] + ct_cuda_grid_for(kernel, ct_vec_items(g->count[t]));
    return b->first[g->n];
}

extern "C" ct_status ct_cuda_sgd_update_group(const ct_cuda_group *group,
                                              const ct_step_values *values, float momentum,
                                              float dampening, float weight_decay,
                                              bool nesterov, cudaStream_t stream)
{
    group_blocks b;
    if (momentum == 0.0f) {
        unsigned grid = plan_group_blocks((const void *)sgd_plain_group_kernel, group, &b);
        CT_CUDA_LAUNCH(sgd_plain_group_kernel, grid, CT_CUDA_BLOCK, 0, stream, *group, b,
                       values, weight_decay);
        return CT_OK;
    }
    float take = (float)(1.0 - (double)dampening);
    unsigned grid = plan_group_blocks((const void *)sgd_momentum_group_kernel, group, &b);
    CT_CUDA_LAUNCH(sgd_momentum_group_kernel, grid, CT_CUDA_BLOCK, 0, stream, *group, b, values,
                   momentum, take, weight_decay, nesterov);
    return CT_OK;
}

extern "C" ct_status ct_cuda_adam_update_group(const ct_cuda_group *group,
                                               const ct_step_values *values, float beta1,
                                               float beta2, float eps, float weight_decay,
                                               bool decoupled, cudaStream_t stream)
{
    group_blocks b;
    unsigned grid = plan_group_blocks((const void *)adam_group_kernel, group, &b);
    CT_CUDA_LAUNCH(adam_group_kernel, grid, CT_CUDA_BLOCK, 0, stream, *group, b, values, beta1,
                   beta2, eps, weight_decay, decoupled);
    return CT_OK;
}

/* ---- finding inf and NaN ---------------------------------------------------------------- */

/* Any element of the group's arrays[t][0] not finite: *found and
 * values->found_inf set to 1 (whoever finds one writes the same value). */
__global__ void check_finite_kernel(const __grid_constant__ ct_cuda_group g, int32_t *found,
                                    ct_step_values *values)
{
    bool bad = false;
    for (int t = 0; t < g.n; t++) {
        const float *x = g.arrays[t][0];
        CT_CUDA_GRID_STRIDE(i, g.count[t])
        {
            float v = x[i];
            bad = bad || v - v != 0.0f; /* inf - inf and NaN - NaN are NaN */
        }
    }
    if (bad) {
        atomicExch(found, 1);
        if (values)
            atomicExch(&values->found_inf, 1);
    }
}

extern "C" ct_status ct_cuda_check_finite(const ct_cuda_group *group, int32_t *found,
                                          ct_step_values *values, cudaStream_t stream)
{
    int64_t most = 1;
    for (int t = 0; t < group->n; t++)
        most = group->count[t] > most ? group->count[t] : most;
    CT_CUDA_CALL(cudaMemsetAsync(found, 0, sizeof *found, stream));
    CT_CUDA_LAUNCH_ITEMS(check_finite_kernel, most, stream, *group, found, values);
    return CT_OK;
}

/* ---- one tensor ------------------------------------------------------------------------- */

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
