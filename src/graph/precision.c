/*
 * What a plan does about its graph's precision (ct_graph_set_precision):
 * the backend must be able to compute the 16-bit dtypes the graph holds,
 * and a tf32 graph switches its backend's TF32 math on.  Also the reading of
 * 16-bit outputs as floats (ct_plan_read_f32).
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/half.h"
#include "graph/graph.h"
#include "graph/precision.h"

static ct_status check(ct_backend *backend, ct_precision precision)
{
    if (!backend->iface->check_precision)
        return CT_OK;
    return backend->iface->check_precision(backend, (int)precision);
}

ct_status ct_plan_precision(ct_graph *graph, ct_backend *backend)
{
    bool bf16 = false, fp16 = false;
    for (int i = 0; i < graph->n_nodes; i++) {
        bf16 = bf16 || graph->nodes[i]->dtype == CT_BF16;
        fp16 = fp16 || graph->nodes[i]->dtype == CT_F16;
    }
    if (bf16)
        CT_TRY(check(backend, CT_PRECISION_BF16));
    if (fp16)
        CT_TRY(check(backend, CT_PRECISION_FP16));
    if (graph->precision != CT_PRECISION_TF32)
        return CT_OK;
    CT_TRY(check(backend, CT_PRECISION_TF32));
    if (!backend->iface->set_tf32)
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "precision tf32 on %s: TF32 is a GPU tensor-core math and this "
                            "backend computes f32 only; use fp32 (the same results), bf16 or "
                            "fp16",
                            backend->name);
    return backend->iface->set_tf32(backend, true);
}

enum { SCALE_START = 65536, SCALE_GROWTH_INTERVAL = 2000 };

void ct_loss_scaler_init(ct_loss_scaler *scaler, const ct_graph *graph)
{
    *scaler = (ct_loss_scaler){.on = graph->loss_scaling,
                               .scale = graph->loss_scaling ? (float)SCALE_START : 1.0f,
                               .growth_interval = SCALE_GROWTH_INTERVAL};
}

void ct_loss_scaler_update(ct_loss_scaler *scaler, bool found_inf)
{
    scaler->last_skipped = found_inf;
    if (found_inf) {
        scaler->skipped++;
        scaler->clean = 0;
        scaler->scale *= 0.5f;
        return;
    }
    if (++scaler->clean >= scaler->growth_interval) {
        scaler->clean = 0;
        if (isfinite(scaler->scale * 2.0f))
            scaler->scale *= 2.0f;
    }
}

float ct_plan_loss_scale(const ct_plan *plan)
{
    return plan ? ct_plan_loss_scaler(plan)->scale : 1.0f;
}

int64_t ct_plan_skipped_steps(const ct_plan *plan)
{
    return plan ? ct_plan_loss_scaler(plan)->skipped : 0;
}

bool ct_plan_step_skipped(const ct_plan *plan)
{
    if (!plan)
        return false;
    if (ct_plan_loss_scaler(plan)->on)
        return ct_plan_loss_scaler(plan)->last_skipped;
    ct_step_values values = {.found_inf = 0};
    return ct_plan_step_values(plan, &values) == CT_OK && values.found_inf != 0;
}

/* The plan's scaler into *out; CT_ERR_STATE when it has none. */
static ct_status scaler_of(const ct_plan *plan, const char *function, ct_loss_scaler **out)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "%s: plan is NULL", function);
    *out = ct_plan_loss_scaler(plan);
    if (!(*out)->on)
        return ct_set_error(CT_ERR_STATE,
                            "%s: this plan's graph does not scale its loss (only fp16 training "
                            "does: ct_graph_set_precision, then ct_graph_backward)",
                            function);
    return CT_OK;
}

ct_status ct_plan_loss_scale_state(const ct_plan *plan, ct_loss_scale_state *out)
{
    ct_loss_scaler *scaler = NULL;
    ct_status status = scaler_of(plan, "ct_plan_loss_scale_state", &scaler);
    if (status != CT_OK)
        return status;
    *out = (ct_loss_scale_state){.scale = scaler->scale,
                                 .growth_interval = scaler->growth_interval,
                                 .clean_steps = scaler->clean,
                                 .skipped_steps = scaler->skipped};
    return CT_OK;
}

ct_status ct_plan_set_loss_scale_state(ct_plan *plan, const ct_loss_scale_state *state)
{
    ct_loss_scaler *scaler = NULL;
    ct_status status = scaler_of(plan, "ct_plan_set_loss_scale_state", &scaler);
    if (status != CT_OK)
        return status;
    if (!state || !(state->scale > 0) || !isfinite(state->scale) || state->growth_interval < 1 ||
        state->clean_steps < 0 || state->clean_steps >= state->growth_interval ||
        state->skipped_steps < 0)
        return ct_set_error(CT_ERR_ARG,
                            "ct_plan_set_loss_scale_state: needs a finite scale > 0, a growth "
                            "interval >= 1, clean steps from 0 to below it and skipped steps "
                            ">= 0");
    scaler->scale = state->scale;
    scaler->growth_interval = state->growth_interval;
    scaler->clean = state->clean_steps;
    scaler->skipped = state->skipped_steps;
    return CT_OK;
}

ct_status ct_plan_set_loss_scale(ct_plan *plan, float scale, int growth_interval)
{
    ct_loss_scaler *scaler = NULL;
    ct_status status = scaler_of(plan, "ct_plan_set_loss_scale", &scaler);
    if (status != CT_OK)
        return status;
    if (!(scale > 0) || !isfinite(scale) || growth_interval < 1)
        return ct_set_error(CT_ERR_ARG,
                            "ct_plan_set_loss_scale: scale %g must be finite and > 0 (a power "
                            "of two keeps the unscaling exact), growth interval %d >= 1",
                            scale, growth_interval);
    scaler->scale = scale;
    scaler->growth_interval = growth_interval;
    scaler->clean = 0;
    return CT_OK;
}

ct_status ct_plan_read_f32(ct_plan *plan, const ct_tensor *t, float *host, int64_t count)
{
    if (!t || !host)
        return ct_set_error(CT_ERR_ARG, "ct_plan_read_f32: tensor and host buffer are required");
    if (count != ct_tensor_numel(t) ||
        (t->dtype != CT_F32 && !ct_dtype_is_half(t->dtype))) {
        char desc[CT_DESCRIBE_CAPACITY];
        return ct_set_error(CT_ERR_ARG,
                            "ct_plan_read_f32: %s is %s with %lld elements, asked for %lld "
                            "floats (it reads f32, f16 and bf16 tensors whole)",
                            ct_tensor_describe(t, desc, sizeof desc), ct_dtype_name(t->dtype),
                            (long long)ct_tensor_numel(t), (long long)count);
    }
    CT_TRY(ct_plan_read(plan, t, host, ct_tensor_bytes(t)));
    if (t->dtype == CT_F32)
        return CT_OK;
    /* the 16-bit values fill the first half of the buffer: widened in place */
    ct_widen_16(t->dtype == CT_BF16, (const uint16_t *)host, host, count);
    return CT_OK;
}
