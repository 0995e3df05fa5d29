/*
 * Where an inf or NaN first appears in a step, two ways.  With
 * ct_plan_set_check_numerics on, ct_plan_run's loop checks every node as it
 * runs (ct_numerics_check) and stops the step at the first bad one.
 * ct_plan_find_nonfinite, after the fact:
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
#include <string.h>

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

/* How far up from a node to look for a parameter that names its layer. */
#define UPSTREAM_SEARCH 64

static bool is_float(const ct_tensor *t)
{
    return t->dtype == CT_F32 || ct_dtype_is_half(t->dtype);
}

/* The index of the first value of a float tensor's bytes that is not
 * finite, or -1; *count: how many are not, *first_value: the first. */
static int64_t first_nonfinite(const ct_tensor *t, const void *data, int64_t *count,
                               float *first_value)
{
    int64_t n = ct_tensor_numel(t), first = -1;
    const float *f = data;
    const uint16_t *h = data;
    *count = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = t->dtype == CT_F32    ? f[i]
                  : t->dtype == CT_BF16 ? ct_bf16_to_f32(h[i])
                                        : ct_f16_to_f32(h[i]);
        if (!isfinite(v)) {
            if (first < 0) {
                first = i;
                *first_value = v;
            }
            ++*count;
        }
    }
    return first;
}

static bool all_finite(const ct_tensor *t, const void *data)
{
    int64_t count = 0;
    float value = 0;
    return first_nonfinite(t, data, &count, &value) < 0;
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
    const ct_tensor *values = ct_plan_checked_output(h->plan, mode, node);
    if (h->first || h->status != CT_OK || !is_float(values))
        return;
    size_t bytes = ct_tensor_bytes(values);
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
    h->status = ct_plan_peek(h->plan, values, h->buffer, bytes);
    if (h->status == CT_OK && !all_finite(values, h->buffer))
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

/* The parameter whose gradient node is, or NULL. */
static const char *gradient_of(const ct_tensor *node)
{
    const ct_graph *graph = node->graph;
    for (int i = 0; i < graph->n_state; i++) {
        const ct_tensor *param = graph->state[i];
        if (param->grad && (param->grad == node || param->grad->view_of == node) && param->name)
            return param->name;
    }
    return NULL;
}

/* The nearest parameter upstream of node, breadth first, or NULL. */
static const char *upstream_param(const ct_tensor *node)
{
    const ct_tensor *queue[UPSTREAM_SEARCH];
    int head = 0, tail = 0;
    queue[tail++] = node;
    while (head < tail) {
        const ct_tensor *t = queue[head++];
        const char *param = named_param(t);
        if (param)
            return param;
        for (int s = 0; s < t->n_src && tail < UPSTREAM_SEARCH; s++)
            queue[tail++] = t->src[s];
    }
    return NULL;
}

/* "layer 'conv1' (it reads 'conv1.weight')" and the like, into out. */
static void describe_layer(const ct_tensor *node, char *out, size_t capacity)
{
    const char *param = named_param(node), *how = "it reads";
    if (!param && (param = gradient_of(node)))
        how = "the gradient of";
    if (!param && (param = upstream_param(node)))
        how = "after it: the nearest parameter upstream,";
    if (!param) {
        snprintf(out, capacity, "no layer (it reads no parameter, nor does anything upstream)");
        return;
    }
    const char *dot = strrchr(param, '.');
    int layer_len = dot ? (int)(dot - param) : (int)strlen(param);
    snprintf(out, capacity, "layer '%.*s' (%s '%s')", layer_len, param, how, param);
}

/* "[0,2,5,7]": the position of a flat index in t's shape. */
static void describe_index(const ct_tensor *t, int64_t flat, char *out, size_t capacity)
{
    int64_t index[CT_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        index[d] = t->shape[d] > 0 ? flat % t->shape[d] : 0;
        flat = t->shape[d] > 0 ? flat / t->shape[d] : 0;
    }
    size_t used = (size_t)snprintf(out, capacity, "[");
    for (int d = 0; d < t->ndim && used < capacity; d++)
        used += (size_t)snprintf(out + used, capacity - used, d ? ",%lld" : "%lld",
                                 (long long)index[d]);
    if (used < capacity)
        snprintf(out + used, capacity - used, "]");
}

ct_status ct_numerics_check(ct_plan *plan, ct_mode mode, const ct_tensor *node, void *buffer)
{
    /* fp16's loss scaling: an overflowing gradient is the scaler's to handle */
    const ct_tensor *values = ct_plan_checked_output(plan, mode, node);
    if (!is_float(values) || (node->graph->loss_scaling && node->phase == CT_PHASE_BACKWARD))
        return CT_OK;
    CT_TRY(ct_plan_peek(plan, values, buffer, ct_tensor_bytes(values)));
    int64_t count = 0;
    float value = 0;
    int64_t first = first_nonfinite(values, buffer, &count, &value);
    if (first < 0)
        return CT_OK;
    static const char *const phases[] = {"forward", "backward", "optimizer"};
    char desc[CT_DESCRIBE_CAPACITY], index[CT_MAX_DIMS * 24], layer[320];
    ct_tensor_describe(node, desc, sizeof desc);
    describe_index(values, first, index, sizeof index);
    describe_layer(node, layer, sizeof layer);
    return ct_set_error(CT_ERR_NUMERIC,
                        "step %lld (%s, %s pass): node %s%s%s (%s) made the step's first "
                        "non-finite value: %s at %s%s (%lld of its %lld values are inf or "
                        "NaN); %s",
                        (long long)ct_plan_step(plan), mode == CT_TRAIN ? "training" : "evaluation",
                        phases[node->phase], node->name ? node->label : "",
                        node->name ? " " : "", desc, ct_dtype_name(node->dtype),
                        isnan(value) ? "nan" : value > 0 ? "inf" : "-inf", index,
                        values != node ? " of the max pool it computes" : "", (long long)count,
                        (long long)ct_tensor_numel(values), layer);
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
    ct_status status = ct_plan_run_taking(plan, mode, false); /* the step's own inputs */
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
