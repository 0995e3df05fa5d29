/*
 * Learning-rate schedules, evaluated per training step from the step number
 * alone (so a resumed run gets the same rates).
 */
#ifndef CUTTLE_TOOLS_SCHEDULE_H
#define CUTTLE_TOOLS_SCHEDULE_H

#include <stdint.h>

extern const char *const schedule_names[]; /* NULL-terminated */

/* The rate at `step` (0-based) of `total_steps` for a schedule named in
 * schedule_names, peaking at (or holding) `lr`. */
double schedule_lr(const char *schedule, double lr, int64_t step, int64_t total_steps);

#endif
