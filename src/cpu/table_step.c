/*
 * The CPU's ops of the training step itself (graph/impl.h tables; the
 * others are in table.c): the loss gradient's fill (scaled by fp16's loss
 * scale), the finite check of the gradients, and the optimizer's updates,
 * which run every parameter's update in one parallel region (a group:
 * ct_impl.run_group) where the settings are the same.
 */
#include "cpu/backend.h"
#include "cpu/kernels.h"
#include "graph/graph.h"
#include "graph/impl.h"
#include "graph/node_args.h"

/* The step's loss scale (1 outside training and without fp16's scaling). */
static float loss_scale(const ct_exec *exec)
{
    return exec->step_values ? exec->step_values->loss_scale : 1.0f;
}

float ct_cpu_fill_value(const ct_exec *exec, const ct_tensor *fill)
{
    return fill->attr.fill.value * (fill->attr.fill.scaled ? loss_scale(exec) : 1.0f);
}

static ct_status run_fill(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    (void)backend;
    ct_cpu_fill(ct_tensor_numel(node), ct_cpu_fill_value(exec, node), ct_out(exec, node));
    return CT_OK;
}

/* Any inf or NaN among the sources (f32 gradients, an i32 check before):
 * the output, and ct_step_values.found_inf for the step's updates. */
static ct_status run_check_finite(ct_backend *backend, const ct_exec *exec,
                                  const ct_tensor *node)
{
    (void)backend;
    int32_t found = 0;
    for (int s = 0; s < node->n_src; s++) {
        const ct_tensor *g = node->src[s];
        if (g->dtype == CT_F32)
            found |= !ct_cpu_all_finite(ct_tensor_numel(g), ct_exec_data(exec, g));
    }
    *(int32_t *)ct_exec_data(exec, node) = found;
    if (found && exec->step_values)
        ((ct_step_values *)exec->step_values)->found_inf = 1;
    return CT_OK;
}

/* An update of a step whose gradients hold an inf or NaN does nothing. */
static bool skip_update(const ct_exec *exec)
{
    return exec->step_values && exec->step_values->found_inf;
}

/* ---- the optimizer: every parameter's update in one parallel region ---------- */

/* Tensors of a group handed to the kernels at a time. */
enum { GROUP_CHUNK = 64 };

/* nodes[first..] (at most GROUP_CHUNK) as the kernels take them: each
 * parameter (updated in place, src[0]), its gradient (src[1]) and, with
 * `state`, its state buffers; returns how many. */
static int chunk_of(const ct_exec *exec, const ct_tensor *const *nodes, int n, int first,
                    bool state, ct_cpu_update_tensor *tensors)
{
    int count = n - first < GROUP_CHUNK ? n - first : GROUP_CHUNK;
    for (int k = 0; k < count; k++) {
        const ct_tensor *node = nodes[first + k];
        tensors[k] = (ct_cpu_update_tensor){ct_tensor_numel(node), ct_exec_data(exec, node->src[0]),
                                            ct_in(exec, node, 1), {NULL, NULL}};
        for (int s = 2; state && s < node->n_src && s < 4; s++)
            tensors[k].state[s - 2] = ct_exec_data(exec, node->src[s]);
    }
    return count;
}

/* nodes[0..n) (the same settings: ct_sgd_nodes_group) as one update. */
static ct_status run_sgd_group(ct_backend *backend, const ct_exec *exec,
                               const ct_tensor *const *nodes, int n)
{
    (void)backend;
    const ct_sgd_args *a = &nodes[0]->attr.sgd;
    if (skip_update(exec))
        return CT_OK;
    for (int first = 0; first < n; first += GROUP_CHUNK) {
        ct_cpu_update_tensor tensors[GROUP_CHUNK];
        int count = chunk_of(exec, nodes, n, first, a->momentum != 0, tensors);
        ct_cpu_sgd_update_group(count, tensors, 1.0f / loss_scale(exec), exec->lr, a->momentum,
                                a->dampening, a->weight_decay, a->nesterov, exec->updates == 0);
    }
    return CT_OK;
}

static ct_status run_adam_group(ct_backend *backend, const ct_exec *exec,
                                const ct_tensor *const *nodes, int n)
{
    (void)backend;
    const ct_adam_args *a = &nodes[0]->attr.adam;
    if (skip_update(exec))
        return CT_OK;
    for (int first = 0; first < n; first += GROUP_CHUNK) {
        ct_cpu_update_tensor tensors[GROUP_CHUNK];
        int count = chunk_of(exec, nodes, n, first, true, tensors);
        ct_cpu_adam_update_group(count, tensors, 1.0f / loss_scale(exec), exec->lr, a->beta1,
                                 a->beta2, a->eps, a->weight_decay, a->decoupled,
                                 exec->updates + 1);
    }
    return CT_OK;
}

static ct_status run_sgd_update(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    return run_sgd_group(backend, exec, &node, 1);
}

static ct_status run_adam_update(ct_backend *backend, const ct_exec *exec,
                                 const ct_tensor *node)
{
    return run_adam_group(backend, exec, &node, 1);
}

/* A group runs the kernels on its nodes' own f32 data: a node with 16-bit
 * tensors runs alone, widened by the backend (cpu/backend.c). */
static bool sgd_groups(const ct_tensor *a, const ct_tensor *b)
{
    return !ct_node_touches_half(a) && !ct_node_touches_half(b) && ct_sgd_nodes_group(a, b);
}

static bool adam_groups(const ct_tensor *a, const ct_tensor *b)
{
    return !ct_node_touches_half(a) && !ct_node_touches_half(b) && ct_adam_nodes_group(a, b);
}

const ct_impl ct_cpu_fill_impl = {.name = "native", .run = run_fill};
const ct_impl ct_cpu_check_finite_impl = {.name = "native", .run = run_check_finite};
const ct_impl ct_cpu_sgd_update_impl = {.name = "native", .run = run_sgd_update,
                                        .groups = sgd_groups, .run_group = run_sgd_group};
const ct_impl ct_cpu_adam_update_impl = {.name = "native", .run = run_adam_update,
                                         .groups = adam_groups, .run_group = run_adam_group};

