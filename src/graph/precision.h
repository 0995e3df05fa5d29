/* A plan's checks and settings for its graph's precision (graph/precision.c). */
#ifndef CT_GRAPH_PRECISION_H
#define CT_GRAPH_PRECISION_H

#include "graph/backend.h"

/* fp16's dynamic loss scaling, as torch.cuda.amp.GradScaler: the loss's
 * gradient starts at `scale` (2^16); a step whose gradients hold an inf or
 * NaN updates nothing (the check_finite nodes and the updates, ops/optim.c)
 * and halves the scale; after growth_interval (2,000) clean steps in a row
 * the scale doubles.  Off (scale 1) unless the graph scales its loss. */
typedef struct ct_loss_scaler {
    bool on;
    float scale;
    int growth_interval;
    int clean;            /* clean steps since the scale last changed */
    int64_t skipped;      /* steps skipped so far */
    bool last_skipped;
} ct_loss_scaler;

void ct_loss_scaler_init(ct_loss_scaler *scaler, const ct_graph *graph);
/* After a training step, from its ct_step_values.found_inf. */
void ct_loss_scaler_update(ct_loss_scaler *scaler, bool found_inf);
/* The values of the last training step (its found_inf), read back from the
 * backend's memory (graph/plan.c). */
ct_status ct_plan_step_values(const ct_plan *plan, ct_step_values *out);
/* The plan's scaler (graph/plan.c). */
ct_loss_scaler *ct_plan_loss_scaler(const ct_plan *plan);

/* Whether the backend computes the graph's 16-bit dtypes (an error naming
 * the device and the choices if not); a tf32 graph switches its TF32 on. */
ct_status ct_plan_precision(ct_graph *graph, ct_backend *backend);

#endif
