/*
 * The profiler behind ct_plan_set_profiling: records made once for the
 * schedules of both modes, with what does not change between steps (op,
 * label, shapes, phase, estimated cost) filled in then; a step only writes
 * times into them.
 */
#ifndef CT_PROF_PROFILER_H
#define CT_PROF_PROFILER_H

#include "graph/backend.h"

typedef struct ct_profiler ct_profiler;

#define CT_PROF_MODE_COUNT 2

/* Records for schedules[mode][0..n_schedule[mode]) (views get none). */
ct_status ct_profiler_new(ct_backend *backend, const ct_tensor **const schedules[],
                          const int n_schedule[], ct_profiler **out);
void ct_profiler_free(ct_profiler *prof);

/* One step, as ct_plan_run runs it (begin_step, the nodes, synchronize),
 * timing every node.  `step` is the plan's step count before it. */
ct_status ct_profiler_run(ct_profiler *prof, const ct_exec *exec, ct_mode mode,
                          const ct_tensor *const *schedule, int n_schedule, int64_t step);

/* The last step run; CT_ERR_STATE if none. */
ct_status ct_profiler_last(const ct_profiler *prof, ct_profile *out);

/* Nanoseconds on the host's monotonic clock. */
int64_t ct_prof_now_ns(void);

#endif
