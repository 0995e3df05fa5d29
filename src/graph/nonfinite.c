/*
 * Where an inf or NaN first appears in a step (ct_plan_find_nonfinite):
 * the step runs once more node by node under a hook that copies each
 * node's output to the host as soon as it is written and checks it, as
 * torch.autograd's anomaly mode does for the forward pass.  Slow (a copy
 * and a synchronization per node): for the step that went wrong, not for
 * every step.  A step whose loss is not finite updates nothing (the
 * cross-entropy sets ct_step_values.found_inf, as fp16's gradient check
 * does), so running it again sees the same parameters.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/half.h"
#include "graph/plan.h"
#include "graph/precision.h"

typedef struct nonfinite_hook {
    ct_run_hook hook; /* first: the plan calls through it */
    ct_plan *plan;
    const ct_tensor *first; /* the first node with an inf or NaN, or NULL */
    ct_status status;
    void *buffer;
    size_t capacity;
} nonfinite_hook;

static bool all_finite(const ct_tensor *t, const void *data)
{
    int64_t n = ct_tensor_numel(t);
    const float *f = data;
    const uint16_t *h = data;
    for (int64_t i = 0; i < n; i++) {
        float v = t->dtype == CT_F32    ? f[i]
                  : t->dtype == CT_BF16 ? ct_bf16_to_f32(h[i])
                                        : ct_f16_to_f32(h[i]);
        if (!isfinite(v))
            return false;
    }
    return true;
}

static void step_begin(ct_run_hook *hook, ct_mode mode)
{
    (void)hook, (void)mode;
}

static void node_begin(ct_run_hook *hook, ct_mode mode, int index)
{
    (void)hook, (void)mode, (void)index;
}

static void node_end(ct_run_hook *hook, ct_mode mode, int index, const char *kernel, int group)
{
    (void)kernel, (void)group;
    nonfinite_hook *h = (nonfinite_hook *)hook;
    int count = 0;
    const ct_tensor *node = ct_plan_runs(h->plan, mode, &count)[index];
    if (h->first || h->status != CT_OK ||
        (node->dtype != CT_F32 && !ct_dtype_is_half(node->dtype)))
        return;
    size_t bytes = ct_tensor_bytes(node);
    if (bytes > h->capacity) {
        void *grown = realloc(h->buffer, bytes);
        if (!grown) {
            h->status = ct_set_error(CT_ERR_MEMORY, "out of host memory checking %s",
                                     node->label);
            return;
        }
        h->buffer = grown;
        h->capacity = bytes;
    }
    h->status = ct_plan_peek(h->plan, node, h->buffer, bytes);
    if (h->status == CT_OK && !all_finite(node, h->buffer))
        h->first = node;
}

/* The parameter a node reads (directly or through a cast), to name its layer. */
static const char *named_param(const ct_tensor *node)
{
    for (int s = 0; s < node->n_src; s++) {
        const ct_tensor *src = node->src[s];
        if (src->op == CT_OP_CAST)
            src = src->src[0];
        if (src->role == CT_ROLE_PARAM && src->name)
            return src->name;
    }
    return NULL;
}

static ct_status step_end(ct_run_hook *hook, ct_mode mode, int64_t step)
{
    (void)hook, (void)mode, (void)step;
    return CT_OK;
}

static void destroy(ct_run_hook *hook)
{
    (void)hook; /* on ct_plan_find_nonfinite's stack */
}

ct_status ct_plan_find_nonfinite(ct_plan *plan, ct_mode mode, char *what, size_t capacity)
{
    if (!plan || !what || capacity == 0)
        return ct_set_error(CT_ERR_ARG, "ct_plan_find_nonfinite: plan and what are required");
    nonfinite_hook h = {
        .hook = {step_begin, node_begin, node_end, step_end, destroy},
        .plan = plan,
        .status = CT_OK,
    };
    /* without the gradient hook: on its own, a rank of a data-parallel job
     * must not start collectives that the others do not */
    ct_run_hook *before = ct_plan_swap_hook(plan, &h.hook);
    ct_grad_hook *grad_before = ct_plan_swap_grad_hook(plan, NULL);
    ct_status status = ct_plan_run(plan, mode);
    ct_plan_swap_grad_hook(plan, grad_before);
    ct_plan_swap_hook(plan, before);
    free(h.buffer);
    CT_TRY(status);
    CT_TRY(h.status);
    what[0] = '\0';
    if (h.first) {
        char desc[CT_DESCRIBE_CAPACITY];
        const char *param = named_param(h.first);
        snprintf(what, capacity, "%s (%s)%s%s%s", ct_tensor_describe(h.first, desc, sizeof desc),
                 ct_dtype_name(h.first->dtype), param ? ", reading '" : "", param ? param : "",
                 param ? "'" : "");
    }
    return CT_OK;
}
