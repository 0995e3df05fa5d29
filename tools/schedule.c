/*
 * Learning-rate schedules (schedule.h):
 *   constant  lr throughout
 *   step      lr, then lr/10 from half of the steps, lr/100 from three quarters
 *   cosine    lr * (1 + cos(pi t/T)) / 2, from lr down to 0
 *   onecycle  PyTorch's OneCycleLR with linear warm-up: from lr/25 up to lr
 *             over the first 30% of the steps, then a cosine down to lr/25/1e4
 */
#include "schedule.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846
#define STEP_FIRST_MILESTONE 0.5
#define STEP_SECOND_MILESTONE 0.75
#define STEP_FACTOR 0.1
#define WARMUP_FRACTION 0.3
#define ONE_CYCLE_START_DIV 25.0 /* the first rate is lr / 25 */
#define ONE_CYCLE_FINAL_DIV 1e4  /* the last is the first / 1e4 */

const char *const schedule_names[] = {"constant", "step", "cosine", "onecycle", NULL};

static double one_cycle(double peak, double step, double total)
{
    double start = peak / ONE_CYCLE_START_DIV, final = start / ONE_CYCLE_FINAL_DIV;
    double warmup = WARMUP_FRACTION * total;
    if (step < warmup)
        return start + (peak - start) * step / warmup;
    double progress = (step - warmup) / (total - warmup);
    return final + (peak - final) * 0.5 * (1.0 + cos(PI * progress));
}

double schedule_lr(const char *schedule, double lr, int64_t step, int64_t total_steps)
{
    double t = (double)step, total = total_steps > 0 ? (double)total_steps : 1.0;
    if (strcmp(schedule, "step") == 0) {
        if (t >= STEP_SECOND_MILESTONE * total)
            return lr * STEP_FACTOR * STEP_FACTOR;
        return t >= STEP_FIRST_MILESTONE * total ? lr * STEP_FACTOR : lr;
    }
    if (strcmp(schedule, "cosine") == 0)
        return lr * 0.5 * (1.0 + cos(PI * t / total));
    if (strcmp(schedule, "onecycle") == 0)
        return one_cycle(lr, t, total);
    return lr;
}
