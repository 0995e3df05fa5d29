"""Learning-rate schedules per step, as cuttle train's (tools/schedule.c),
in the same double arithmetic so that a run gets the same rates:
  constant  lr throughout
  step      lr, then lr/10 from half of the steps, lr/100 from three quarters
  cosine    lr * (1 + cos(pi t/T)) / 2, from lr down to 0
  onecycle  PyTorch's OneCycleLR with linear warm-up: from lr/25 up to lr over
            the first 30% of the steps, then a cosine down to lr/25/1e4
"""
import math

NAMES = ("constant", "step", "cosine", "onecycle")
STEP_FIRST_MILESTONE, STEP_SECOND_MILESTONE, STEP_FACTOR = 0.5, 0.75, 0.1
WARMUP_FRACTION = 0.3
ONE_CYCLE_START_DIV, ONE_CYCLE_FINAL_DIV = 25.0, 1e4


def _one_cycle(peak, step, total):
    start = peak / ONE_CYCLE_START_DIV
    final = start / ONE_CYCLE_FINAL_DIV
    warmup = WARMUP_FRACTION * total
    if step < warmup:
        return start + (peak - start) * step / warmup
    progress = (step - warmup) / (total - warmup)
    return final + (peak - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


def learning_rate(schedule, lr, step, total_steps):
    """The rate at `step` (0-based) of `total_steps`, peaking at (or holding) lr."""
    t, total = float(step), float(total_steps) if total_steps > 0 else 1.0
    if schedule == "step":
        if t >= STEP_SECOND_MILESTONE * total:
            return lr * STEP_FACTOR * STEP_FACTOR
        return lr * STEP_FACTOR if t >= STEP_FIRST_MILESTONE * total else lr
    if schedule == "cosine":
        return lr * 0.5 * (1.0 + math.cos(math.pi * t / total))
    if schedule == "onecycle":
        return _one_cycle(lr, t, total)
    return lr
