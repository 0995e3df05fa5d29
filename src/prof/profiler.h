/*
 * The profiler (profiler.c) is reached through the public API
 * (ct_plan_set_profiling, ct_plan_profile) and hooks the plan's run loop
 * (graph/plan.h).  What is left here is its clock, shared with the tests.
 */
#ifndef CT_PROF_PROFILER_H
#define CT_PROF_PROFILER_H

#include <stdint.h>

/* Nanoseconds on the host's monotonic clock. */
int64_t ct_prof_now_ns(void);

#endif
