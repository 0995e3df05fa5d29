/* A plan's settings, hooks and sizes (the plan itself: plan.c). */
#include <stdlib.h>

#include "core/error.h"
#include "graph/plan_impl.h"
#include "graph/prepared.h"

size_t ct_plan_kept_bytes(const ct_plan *plan)
{
    return plan ? ct_prepared_bytes(plan->prepared) : 0;
}

uint64_t ct_plan_kept_made(const ct_plan *plan)
{
    return plan && plan->prepared ? plan->prepared->made : 0;
}

void ct_plan_set_lr(ct_plan *plan, float lr)
{
    if (plan)
        plan->lr = lr;
}

float ct_plan_lr(const ct_plan *plan)
{
    return plan ? plan->lr : 0.0f;
}

int64_t ct_plan_step(const ct_plan *plan)
{
    return plan ? plan->step : 0;
}

void ct_plan_set_step(ct_plan *plan, int64_t step)
{
    if (plan && step >= 0)
        plan->step = step;
}

ct_graph *ct_plan_graph(const ct_plan *plan)
{
    return plan ? plan->graph : NULL;
}

size_t ct_plan_arena_bytes(const ct_plan *plan)
{
    return plan ? plan->arena_bytes : 0;
}

size_t ct_plan_state_bytes(const ct_plan *plan)
{
    return plan ? plan->state_bytes : 0;
}

int ct_plan_n_nodes(const ct_plan *plan, ct_mode mode)
{
    if (!plan || (mode != CT_TRAIN && mode != CT_EVAL))
        return 0;
    return plan->n_schedule[mode];
}

void ct_plan_set_hook(ct_plan *plan, ct_run_hook *hook)
{
    if (plan->hook && plan->hook != hook)
        plan->hook->destroy(plan->hook);
    plan->hook = hook;
}

ct_status ct_plan_set_grad_hook(ct_plan *plan, ct_grad_hook *hook)
{
    ct_grad_points_free(&plan->grad);
    if (!hook)
        return CT_OK;
    ct_status status = ct_grad_points_build(&plan->grad, plan->graph, plan->runs[CT_TRAIN],
                                            plan->n_runs[CT_TRAIN], plan->alias_of,
                                            plan->written_by);
    if (status != CT_OK) {
        hook->destroy(hook);
        return status;
    }
    plan->grad.hook = hook;
    return CT_OK;
}

ct_grad_hook *ct_plan_grad_hook(const ct_plan *plan)
{
    return plan->grad.hook;
}

ct_grad_hook *ct_plan_swap_grad_hook(ct_plan *plan, ct_grad_hook *hook)
{
    ct_grad_hook *before = plan->grad.hook;
    plan->grad.hook = hook;
    return before;
}

ct_run_hook *ct_plan_swap_hook(ct_plan *plan, ct_run_hook *hook)
{
    ct_run_hook *before = plan->hook;
    plan->hook = hook;
    return before;
}

ct_status ct_plan_set_check_numerics(ct_plan *plan, bool on)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_set_check_numerics: plan is NULL");
    if (on && !plan->numerics_buffer) {
        size_t largest = 1;
        for (int mode = 0; mode < CT_MODE_COUNT; mode++)
            for (int i = 0; i < plan->n_runs[mode]; i++) {
                size_t bytes = ct_tensor_bytes(plan->runs[mode][i]);
                largest = bytes > largest ? bytes : largest;
            }
        if (!(plan->numerics_buffer = malloc(largest)))
            return ct_set_error(CT_ERR_MEMORY, "ct_plan_set_check_numerics: out of host memory "
                                "for %zu bytes", largest);
    }
    plan->check_numerics = on;
    return CT_OK;
}

const ct_tensor *ct_plan_checked_output(const ct_plan *plan, ct_mode mode,
                                        const ct_tensor *node)
{
    const ct_tensor *pool = plan->pool_into[mode][node->id];
    return pool ? pool : node;
}

ct_status ct_plan_peek(const ct_plan *plan, const ct_tensor *t, void *host, size_t bytes)
{
    ct_exec exec = ct_plan_exec(plan, CT_TRAIN);
    return plan->backend->iface->read(plan->backend, host, ct_exec_data(&exec, t), bytes);
}

ct_run_hook *ct_plan_hook(const ct_plan *plan)
{
    return plan->hook;
}

ct_backend *ct_plan_backend(const ct_plan *plan)
{
    return plan->backend;
}

const ct_tensor *const *ct_plan_runs(const ct_plan *plan, ct_mode mode, int *count)
{
    *count = plan->n_runs[mode];
    return plan->runs[mode];
}

int ct_plan_count_runs(const ct_plan *plan, ct_mode mode, ct_op op)
{
    int count = 0;
    for (int i = 0; i < plan->n_runs[mode]; i++)
        count += plan->runs[mode][i]->op == op;
    return count;
}

const ct_tensor *ct_plan_bn_params_of(const ct_plan *plan, const ct_tensor *node, int i)
{
    return plan->bn_params_into[node->id][i];
}

const ct_tensor *const *ct_plan_schedule(const ct_plan *plan, ct_mode mode, int *count)
{
    *count = plan->n_schedule[mode];
    return plan->schedule[mode];
}
