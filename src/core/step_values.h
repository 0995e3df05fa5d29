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
    int32_t reserved; /* step at an 8-byte offset, the same on host and device */
    int64_t step;     /* training steps completed before this one */
} ct_step_values;

#endif
