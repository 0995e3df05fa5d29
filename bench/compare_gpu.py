"""The GPU half of bench/compare (`bench/compare --device cuda`): cuttle
against four PyTorch variants, peak device memory of both, the issue's goals
marked met or not, and cuttle's measured time per kernel beside the roofline
model's prediction, in one command that ends within 10 minutes on an H100.

The configurations (training steps; why these sizes on an H100):

  SimpleCNN 1x28x28 b64    the goals' workload: ~0.1 GFLOP a step, so a step
                           is launches and host overhead, which is what
                           CUDA Graphs and a static plan remove
  VGG-11    3x32x32 b256   the CPU table's CIFAR shapes (the models cuttle
  ResNet-18 3x32x32 b256   trains), at twice the CPU's batch so that the 4x4
                           and 2x2 late layers still give the GPU's 132 SMs
                           some work per launch
  ResNet-50 3x224x224 b128 ImageNet size: ~1.6 TFLOP a step, compute-bound,
                           big enough to keep an H100 busy in every stage,
                           small enough for an fp32 step in 80 GB (PyTorch
                           and cuttle each need roughly 15-25 GB)

The sides, run alternately (cuttle, then each variant, per repetition):
cuttle (`cuttle bench --json`) once per precision its variants need, and the
peer (bench/peers/torch_bench.py) as eager fp32 (PyTorch's defaults: TF32
in cuDNN's convolutions; beside cuttle's tf32), eager fp32 without TF32
(beside cuttle's exact fp32), eager with channels_last and autocast to
bfloat16 (the type the goal names; no GradScaler; beside cuttle's bf16), a
CUDA Graph of the whole step and torch.compile (default mode), both fp32
with PyTorch's defaults, beside cuttle's tf32.  Each variant
is one peer process per model in --serve mode: PyTorch's start and
torch.compile's compilation are paid once per model, every repetition still
runs its own warm-up.  A variant this PyTorch cannot do (exit status 2) is
reported as unavailable with the peer's reason; one that fails, as failed.

Measured on an H200 (2026-11-28): cuttle fp32 with eager, AMP and Graphs,
4 models, --budget 180: 179 s, ResNet-50 cut to 4 repetitions.
Time budget on an H100 (estimates from before that run), 5 repetitions:
  peers' start (python, import torch, CUDA context), 4 at once per model: ~40 s
  torch.compile of a training step, cold cache: ~20+30+40+80 s        ~170 s
  cuttle's 20 runs: start, CUDA context, plan, `auto` timing: ~3 s    ~60 s
  timed work per repetition, 5 sides x (warm-up + steps) x step:
    SimpleCNN 110 x <2 ms, VGG-11 35 x <15 ms, ResNet-18 35 x <40 ms,
    ResNet-50 25 x <150 ms (cuttle's fp32; PyTorch's are shorter): <30 s,
    5 repetitions                                                     <150 s
  first, the emulated prediction (SimpleCNN b64, one step on the CPU)
  ~10 s, and the GPU profile ~5 s                                     ~15 s
  total                                                        about 7 minutes
If the guesses are wrong, --budget (default 540 s) holds the end: each
configuration gets an equal share of what is left, stops repeating when the
next repetition would pass its share (after at least one), and every run is
killed at budget + 50 s; the table says which rows were cut short.
"""
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# model, input, batch, timed steps, warm-up steps
CONFIGS = [
    ("simplecnn", "1x28x28", 64, 100, 10),
    ("vgg11", "3x32x32", 256, 30, 5),
    ("resnet18", "3x32x32", 256, 30, 5),
    ("resnet50", "3x224x224", 128, 20, 5),
]
# name, what the table calls it, the peer's options
# name, label, the peer's options, and the precision of the cuttle run each
# is set beside (`cuttle bench --precision`): PyTorch's fp32 keeps its
# default, TF32 in cuDNN's convolutions, so cuttle runs tf32 beside it;
# "strict" turns TF32 off, beside cuttle's exact fp32
VARIANTS = [
    ("eager", "eager fp32", [], "tf32"),
    ("strict", "eager fp32, no TF32", ["--no-tf32"], "fp32"),
    ("amp", "eager channels_last + AMP bf16", ["--channels-last", "--amp",
                                               "--amp-dtype", "bfloat16"], "bf16"),
    ("graphs", "CUDA Graphs fp32", ["--cuda-graphs"], "tf32"),
    ("compile", "torch.compile fp32", ["--compile"], "tf32"),
]


def cuttle_side(precision):
    """The side name of cuttle's runs in `precision`: "cuttle" for fp32."""
    return "cuttle" if precision == "fp32" else f"cuttle-{precision}"


def is_cuttle(side):
    return side == "cuttle" or (side or "").startswith("cuttle-")
# what the goal says, model, "speed" (cuttle / PyTorch images per second,
# at least) or "memory" (cuttle / PyTorch peak bytes, at most), variant, bound
GOALS = [
    ("SimpleCNN training step >= 3x PyTorch eager", "simplecnn", "speed", "eager", 3.0),
    ("SimpleCNN training step >= 1.2x PyTorch with CUDA Graphs", "simplecnn", "speed",
     "graphs", 1.2),
    ("ResNet-50 bf16 >= 1.0x PyTorch AMP", "resnet50", "speed", "amp", 1.0),
] + [(f"{name} peak GPU memory <= 0.8x PyTorch eager's", model, "memory", "eager", 0.8)
     for name, model in (("SimpleCNN", "simplecnn"), ("VGG-11", "vgg11"),
                         ("ResNet-18", "resnet18"), ("ResNet-50", "resnet50"))]
PROFILE_CONFIG = ("simplecnn", "1x28x28", 64)  # the one the emulator predicts in seconds
PROFILE_STEPS = (50, 10)  # on the GPU; the emulator's counts are the same every step
DEFAULT_BUDGET_S = 540
HARD_GRACE_S = 50  # past the budget, a run still going is killed
MIB = 1048576.0


class Clock:
    """Seconds since the start, against the budget."""

    def __init__(self, budget):
        self.start, self.budget = time.monotonic(), budget

    def elapsed(self):
        return time.monotonic() - self.start

    def soft_left(self):
        return self.budget - self.elapsed()

    def hard_left(self):
        return self.budget + HARD_GRACE_S - self.elapsed()


def last_line(text, status):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {status}"


def run_json(command, timeout):
    """(the last stdout line as JSON, None) or (None, why not)."""
    if timeout <= 0:
        return None, "not run: over the time budget"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"stopped after {timeout:.0f} s: over the time budget"
    except OSError as error:
        return None, f"cannot run {command[0]}: {error}"
    if done.returncode != 0:
        return None, last_line(done.stderr, done.returncode)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, f"no JSON in the output: {done.stdout[:200]!r}"


class Peer:
    """One PyTorch variant of one model: a torch_bench.py --serve process,
    asked for one run per line written to it."""

    def __init__(self, args, common, options):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.lines = queue.Queue()
        self.error = None
        try:
            self.process = subprocess.Popen(
                [args.python, args.peer] + common + options + ["--serve"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        except OSError as error:
            self.process, self.error = None, f"cannot run {args.python}: {error}"
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the peer ended

    def _next_object(self, timeout, waiting_for):
        """The next JSON object the peer prints (lines that are not one,
        such as a library's chatter, are skipped), or None with self.error
        set: the peer ended (its reason), or was killed at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                self.process.kill()
                self.error = f"stopped after {timeout:.0f} s {waiting_for}: over the time budget"
                return None
            if line is None:
                self.error = self._reason()
                return None
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
            print(f"  peer: {line.rstrip()}", file=sys.stderr)

    def wait_ready(self, timeout):
        """Until the peer has set up (PyTorch imported, the step made), so
        that its start does not share the machine with a timed run."""
        if self.error:
            return
        ready = self._next_object(timeout, "setting up")
        if ready is not None and ready != {"ready": True}:
            self.process.kill()
            self.error = f"failed: expected its ready line, got {json.dumps(ready)[:200]}"

    def _reason(self):
        status = self.process.wait()
        self.stderr.seek(0)
        reason = last_line(self.stderr.read(), status)
        return ("unavailable: " if status == 2 else "failed: ") + reason

    def run(self, timeout):
        """(the run's JSON, None) or (None, why not); after a failure every
        later run says the same."""
        if self.error:
            return None, self.error
        if timeout <= 0:
            return None, "not run: over the time budget"
        try:
            self.process.stdin.write("run\n")
            self.process.stdin.flush()
        except OSError:  # it ended: its reason comes with the end of its output
            pass
        result = self._next_object(timeout, "running")
        if result is not None and "images_per_second" not in result:
            self.process.kill()
            self.error = f"failed: not a bench result: {json.dumps(result)[:200]}"
        return (None, self.error) if self.error else (result, None)

    def close(self):
        if not self.process:
            return
        try:
            self.process.stdin.close()
            self.process.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.stderr.close()


def config_of(args, config):
    model, shape, batch, steps, warmup = config
    if args.quick:
        steps, warmup = 10, 2
    return (model, shape, args.batch or batch, args.steps or steps,
            warmup if args.warmup < 0 else args.warmup)


def run_config(args, config, clock, configs_left, raw):
    """Every repetition of one configuration: the sides' results or reasons."""
    model, shape, batch, steps, warmup = config
    common = ["--model", model, "--input", shape, "--batch", str(batch), "--mode", "train",
              "--device", args.device, "--steps", str(steps), "--warmup", str(warmup),
              "--json"]
    row = {"model": model, "input": shape, "batch": batch, "steps": steps, "warmup": warmup,
           "results": {}, "errors": {}, "cut": None}
    cuttle = [args.cuttle, "bench"] + common + (["--kernels", args.kernels] if args.kernels
                                                else [])
    order = ["fp32", "tf32", "bf16"]
    precisions = sorted({precision for _, _, _, precision in args.variants}, key=order.index)
    share = clock.soft_left() / configs_left
    begun = clock.elapsed()
    peers = {name: Peer(args, common, options) for name, _, options, _ in args.variants}
    for peer in peers.values():
        peer.wait_ready(clock.hard_left())
    last_rep_s = 0.0
    for rep in range(args.reps):
        used = clock.elapsed() - begun
        if rep > 0 and used + last_rep_s > share:
            row["cut"] = f"{rep} of {args.reps} repetitions: the next would pass this " \
                         f"configuration's share of the budget ({share:.0f} s)"
            break
        rep_start = clock.elapsed()
        sides = [(cuttle_side(precision),
                  lambda p=precision: run_json(cuttle + ["--precision", p], clock.hard_left()))
                 for precision in precisions] + \
            [(name, lambda p=peers[name]: p.run(clock.hard_left())) for name in peers]
        for side, run in sides:
            if side in row["errors"]:
                continue
            result, error = run()
            if error:
                row["errors"][side] = error
                continue
            row["results"].setdefault(side, []).append(result)
            raw.append(dict(result, side=side, rep=rep))
            print(f"  {model} {shape} b{batch} rep {rep + 1}/{args.reps} {side}: "
                  f"{result['images_per_second']:.1f} img/s", file=sys.stderr, flush=True)
        last_rep_s = clock.elapsed() - rep_start
    for peer in peers.values():
        peer.close()
    return row


def median_of(row, side, field="images_per_second"):
    values = [r[field] for r in row["results"].get(side, []) if r.get(field) is not None]
    return statistics.median(values) if values else None


def peak_of(row, side):
    values = [r["peak_device_bytes"] for r in row["results"].get(side, [])
              if r.get("peak_device_bytes") is not None]
    return max(values) if values else None


def mib(size):
    return None if size is None else size / MIB


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(value, spec, none="-"):
    return none if value is None else format(value, spec)


def side_cell(row, side, value, spec):
    if value is not None:
        return format(value, spec)
    error = row["errors"].get(side, "")
    if error.startswith(("not run", "stopped")):
        return "over budget"
    return "unavailable" if error.startswith("unavailable") else "failed" if error else "-"


def speed_table(args, rows):
    lines = ["| model | input | batch | PyTorch variant | cuttle precision | cuttle img/s | "
             "PyTorch img/s | cuttle / PyTorch | cuttle peak MiB | PyTorch peak MiB | "
             "memory cuttle / PyTorch |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        for name, label, _, precision in args.variants:
            side = cuttle_side(precision)
            ours, our_peak = median_of(row, side), peak_of(row, side)
            theirs, their_peak = median_of(row, name), peak_of(row, name)
            speed, memory = ratio(ours, theirs), ratio(our_peak, their_peak)
            lines.append(
                f"| {row['model']} | {row['input']} | {row['batch']} | {label} | {precision} | "
                f"{side_cell(row, side, ours, ',.1f')} | "
                f"{side_cell(row, name, theirs, ',.1f')} | "
                f"{fmt(speed, '.2f') + 'x' if speed else '-'} | "
                f"{side_cell(row, side, mib(our_peak), ',.1f')} | "
                f"{side_cell(row, name, mib(their_peak), ',.1f')} | "
                f"{fmt(memory, '.2f') + 'x' if memory else '-'} |")
    return lines


def goal_table(args, rows):
    by_model = {row["model"]: row for row in rows}
    variants = {name: cuttle_side(precision) for name, _, _, precision in args.variants}
    lines = ["| goal | measured | status |", "| --- | ---: | --- |"]
    for text, model, kind, variant, bound in GOALS:
        row = by_model.get(model)
        if row is None or variant not in variants:
            lines.append(f"| {text} | - | not run (not in --models / --variants) |")
            continue
        ours = variants[variant]  # cuttle in the variant's precision
        if kind == "speed":
            value = ratio(median_of(row, ours), median_of(row, variant))
            met = value is not None and value >= bound
        else:
            value = ratio(peak_of(row, ours), peak_of(row, variant))
            met = value is not None and value <= bound
        if value is None:
            missing = [row["errors"].get(side, "no result")
                       for side in (ours, variant) if median_of(row, side) is None
                       or (kind == "memory" and peak_of(row, side) is None)]
            lines.append(f"| {text} | - | no data: {'; '.join(missing) or 'no result'} |")
            continue
        status = "**met**" if met else "not met"
        lines.append(f"| {text} | {value:.2f}x | {status} |")
    return lines


def run_notes(args, rows):
    labels = dict([(cuttle_side(precision), f"cuttle {precision}")
                   for _, _, _, precision in args.variants] +
                  [(name, label) for name, label, _, _ in args.variants])
    notes = []
    for row in rows:
        head = f"{row['model']} {row['input']} batch {row['batch']} " \
               f"({row['steps']} steps after {row['warmup']})"
        for side, label in labels.items():
            if side in row["results"]:
                runs = ", ".join(f"{r['images_per_second']:.0f}" for r in row["results"][side])
                notes.append(f"- {head}: {label} runs (img/s): {runs}")
            if side in row["errors"]:
                notes.append(f"- {head}: {label}: {row['errors'][side]}")
        if row["cut"]:
            notes.append(f"- {head}: cut short after {row['cut']}")
    return notes


# ---- predicted against measured, per kernel ----------------------------------------------

def profile_command(binary, args, steps, warmup):
    model, shape, batch = PROFILE_CONFIG
    return [binary, "profile", "--device", args.device, "--kernels", "native", "--model", model,
            "--input", shape, "--batch", str(args.batch or batch), "--mode", "train",
            "--steps", str(steps), "--warmup", str(warmup), "--json"]


def predict(args, clock):
    """The emulated profile (its counts give the prediction), or why not."""
    if not os.access(args.emu_cuttle, os.X_OK):
        return None, (f"{args.emu_cuttle} is not there: `make -j$(nproc) CUDA=emu` builds it "
                      f"(the emulated device, a few minutes), then run this again")
    result, error = run_json(profile_command(args.emu_cuttle, args, 1, 0), clock.hard_left())
    if result and not result.get("emulated"):
        return None, f"{args.emu_cuttle} is not the emulated build (its profile says " \
                     f"emulated: false): give --emu-cuttle build-emu/cuttle"
    return result, error


def measure(args, clock):
    steps, warmup = PROFILE_STEPS
    if args.quick:
        steps, warmup = 10, 2
    return run_json(profile_command(args.cuttle, args, args.steps or steps,
                                    warmup if args.warmup < 0 else args.warmup),
                    clock.hard_left())


def join_profiles(measured, predicted):
    """Rows (phase, op, kernel, calls per step, measured ms, predicted ms),
    matched by phase, op and kernel; the step's totals last."""
    def per_step(profile):
        table = {}
        for op in profile["ops"]:
            key = (op["phase"], op["op"], op["kernel"])
            predicted_ms = op["predicted"]["predicted_ms"] / profile["steps"] \
                if "predicted" in op else None
            table[key] = (op["calls"] / profile["steps"], op["total_ms"] / profile["steps"],
                          predicted_ms)
        return table
    ours, model = per_step(measured), per_step(predicted)
    rows = []
    for key in list(ours) + [k for k in model if k not in ours]:
        calls, measured_ms, _ = ours.get(key, (None, None, None))
        model_calls, _, predicted_ms = model.get(key, (None, None, None))
        rows.append(key + (calls if calls is not None else model_calls, measured_ms,
                           predicted_ms))
    predicted_step = sum(r[5] for r in rows if r[5] is not None)
    return rows, measured["step_ms"], predicted_step


def kernel_table(measured, predicted):
    rows, step_ms, predicted_step = join_profiles(measured, predicted)
    lines = ["| phase | op | kernel | calls / step | measured ms / step | "
             "predicted ms / step | measured / predicted |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for phase, op, kernel, calls, measured_ms, predicted_ms in rows:
        r = ratio(measured_ms, predicted_ms)
        lines.append(f"| {phase} | {op} | {kernel} | {fmt(calls, '.0f')} | "
                     f"{fmt(measured_ms, '.4f', 'not measured')} | "
                     f"{fmt(predicted_ms, '.4f', 'no prediction')} | "
                     f"{fmt(r, '.2f') + 'x' if r else '-'} |")
    r = ratio(step_ms, predicted_step)
    lines.append(f"| **step** | | | | {step_ms:.4f} | {predicted_step:.4f} | "
                 f"{fmt(r, '.2f') + 'x' if r else '-'} |")
    return lines


def kernel_section(args, measured, predicted, errors):
    model, shape, batch = PROFILE_CONFIG
    lines = [f"## cuttle per kernel: measured on the GPU against the roofline prediction", "",
             f"{model} {shape} batch {args.batch or batch}, training step, `--kernels native` "
             "on both sides (cuttle's own kernels; vendor calls have no prediction).  "
             "Measured: `cuttle profile --device cuda --json` (CUDA events per node).  "
             "Predicted: the emulated build's counts through the H100 model of "
             "docs/roofline.md (`predicted_ms`), a model and not a measurement.  Rows "
             "match by phase, op and kernel.", ""]
    if errors:
        return lines + [f"- {e}" for e in errors]
    if measured.get("emulated"):
        lines += ["**The measured side ran on the emulated device: its times are not GPU "
                  "times (a test of this table, not a result).**", ""]
    return lines + kernel_table(measured, predicted)


# ---- the whole run -----------------------------------------------------------------------

def parse_variants(args):
    wanted = [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants \
        else [name for name, _, _, _ in VARIANTS]
    known = {name for name, _, _, _ in VARIANTS}
    unknown = [v for v in wanted if v not in known]
    if unknown:
        sys.exit(f"compare: unknown --variants {unknown}; the variants are {sorted(known)}")
    return [v for v in VARIANTS if v[0] in wanted]


def header(args, raw, rows, machine):
    versions = sorted({r["framework"] for r in raw})
    gpus = sorted({r["backend"] for r in raw if is_cuttle(r.get("side"))})
    # the emulated profile (side profile_predicted) is the prediction, not a timed side
    emulated = any(r.get("emulated") for r in raw if is_cuttle(r.get("side")))
    lines = [f"# cuttle vs PyTorch on {args.device}", "",
             f"{time.strftime('%Y-%m-%d')}; {machine}; GPU: {', '.join(gpus) or 'none ran'}; "
             f"{args.reps} alternating repetitions per side"
             f"{' (--quick: a smoke run)' if args.quick else ''}; "
             f"{', '.join(versions) or 'nothing ran'}.",
             "Command: `bench/compare " + " ".join(sys.argv[1:]) + "`", ""]
    if emulated:
        lines += ["**cuttle ran on the emulated device: every cuttle time and ratio below is "
                  "the emulator's, not a GPU's.**", ""]
    lines += ["Images per second are medians over the repetitions; ratios are cuttle / "
              "PyTorch (above 1: cuttle is faster, or for memory: uses more).  Peak memory: "
              "cuttle's allocator (`peak_device_bytes`), PyTorch's "
              "`torch.cuda.max_memory_allocated`.  Each PyTorch variant is set beside cuttle "
              "in the precision of its row (`cuttle bench --precision`): PyTorch's fp32 "
              "variants keep its defaults (cuDNN convolutions in TF32) and meet cuttle's "
              "tf32 (its convolutions and matmuls in TF32); the \"no TF32\" variant meets "
              "cuttle's exact fp32.  cudnn.benchmark is on.", ""]
    return lines


def main(args, machine):
    args.variants = parse_variants(args)
    wanted = {m.strip() for m in args.models.split(",") if m.strip()}
    configs = [config_of(args, c) for c in CONFIGS if not wanted or c[0] in wanted]
    if not configs:
        sys.exit(f"compare: no GPU configuration has a model in {sorted(wanted)}; the models "
                 f"are {sorted(c[0] for c in CONFIGS)}")
    clock = Clock(args.budget)
    raw, rows, profile_errors = [], [], []
    predicted = measured = None
    if not args.no_profile:  # first, so that the budget cannot leave it out
        print("  predicting the kernels' times on the emulated device ...", file=sys.stderr,
              flush=True)
        predicted, error = predict(args, clock)  # on the CPU: before any GPU timing
        if error:
            profile_errors.append(f"predicted: {error}")
        print("  profiling cuttle's kernels on the device ...", file=sys.stderr, flush=True)
        measured, error = measure(args, clock)
        if error:
            profile_errors.append(f"measured: {error}")
        for kind, result in (("profile_predicted", predicted), ("profile_measured", measured)):
            if result:
                raw.append(dict(result, side=kind))
    for i, config in enumerate(configs):
        rows.append(run_config(args, config, clock, len(configs) - i, raw))
    text_lines = header(args, raw, rows, machine) + speed_table(args, rows) + [""] + \
        ["## Goals (issue 13)", ""] + goal_table(args, rows) + [""]
    if not args.no_profile:
        text_lines += kernel_section(args, measured, predicted, profile_errors) + [""]
    text_lines += ["## Every run", ""] + run_notes(args, rows) + \
        [f"- total time {clock.elapsed():.0f} s (budget {args.budget:.0f} s)"]
    return "\n".join(text_lines) + "\n", raw
