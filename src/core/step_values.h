/*
 * The settings that change from step to step, as kernels that a backend
 * replays read them (a CUDA Graph records kernel arguments by value, so a
 * learning rate passed as an argument would stay the recorded step's): in
 * the backend's memory, written by the plan before every training step
 * (graph/plan.c, graph/replay.h).  Shared by C and CUDA C++.
 */
#ifndef CT_CORE_STEP_VALUES_H
#define CT_CORE_STEP_VALUES_H

#include <stdint.h>

typedef struct ct_step_values {
    float lr;
    /* what the loss was multiplied by before backward (fp16's dynamic loss
     * scaling, graph/precision.c; 1 otherwise): the updates divide by it */
    float loss_scale;
    int64_t step;      /* training steps completed before this one (8-byte offset) */
    /* the optimizer's updates before this one: `step` less the steps fp16's
     * loss scaling skipped, which PyTorch's optimizers do not count either
     * (GradScaler does not call their step); SGD's first momentum and
     * Adam's bias correction go by it */
    int64_t updates;
    /* written 0 by the plan, set by a check_finite node that finds a
     * gradient inf or NaN: the updates of this step then do nothing */
    int32_t found_inf;
    int32_t reserved;
} ct_step_values;

#endif
