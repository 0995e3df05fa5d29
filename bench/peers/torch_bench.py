#!/usr/bin/env python3
"""PyTorch peer of `cuttle bench`: the same options, the same step and the
same JSON fields, so that bench/compare can put the two side by side.

  /usr/bin/python3 bench/peers/torch_bench.py --model simplecnn --batch 64 \\
      --input 1x28x28 --device cpu --mode train --steps 50 --warmup 5 --json

Train mode is one training step as cuttle's: forward, mean cross-entropy,
backward, and SGD (lr 0.01, momentum 0.9, Nesterov, weight decay 5e-4).
Infer mode is a forward pass in eval mode under torch.inference_mode().
The batch (seeded random images in [-1, 1) and labels) is made once on the
device; each timed step ends with a synchronization on a GPU.  The step
time statistics use the same quantile rule as cuttle (linear interpolation
between order statistics).  Models come from torch_models.build(name,
channels, height, width, classes) beside this file.

On CUDA, cudnn.benchmark is on (each convolution shape's algorithm is
timed at its first run, as cuttle's default `auto` kernel choice does) and
PyTorch's TF32 defaults are kept (cuDNN convolutions may use TF32, matmuls
do not); the "backend" field says both.

--serve (with --json) is for bench/compare on a GPU: the model, the batch
and the step (compiled or captured) are made once and {"ready": true} is
printed; then each line read on stdin runs --warmup untimed and --steps
timed steps and prints one JSON line, until stdin ends.  A run ends with
torch.cuda.empty_cache(), so that an idle peer does not hold the memory
that the next program needs; the peak (torch.cuda.max_memory_allocated) is
the process's.

Exit status: 0 success, 1 failure (PyTorch or the model missing, a step
that failed), 2 a bad command line or an option that this PyTorch cannot do.
"""
import argparse
import json
import os
import resource
import sys
import time

LR = 0.01
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
CUDA_GRAPH_WARMUP = 3


def fail(message, status=1):
    print(f"torch_bench: {message}", file=sys.stderr)
    sys.exit(status)


def parse_input(text):
    parts = text.split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 3 or min(values) < 1:
        fail(f"--input expects CxHxW, three whole numbers such as 3x32x32, got '{text}'", 2)
    return values


def parse_device(device, threads):
    """('cpu' or 'cuda[:N]', threads) from --device and --threads."""
    if device == "cpu" or device.startswith("cpu:"):
        if device.startswith("cpu:"):
            try:
                n = int(device[4:])
            except ValueError:
                n = 0
            if n < 1:
                fail(f"--device {device}: expected cpu:N with N a thread count", 2)
            if threads and threads != n:
                fail(f"--device {device} and --threads {threads} disagree; give one of them", 2)
            threads = n
        return "cpu", threads
    if device == "cuda" or device.startswith("cuda:"):
        return device, threads
    fail(f"unknown device '{device}': use cpu, cpu:N or cuda[:N]", 2)


def quantile(sorted_values, q):
    """numpy's default (linear) quantile, as cuttle's workload_quantile."""
    n = len(sorted_values)
    position = q * (n - 1)
    below = int(position)
    if below >= n - 1:
        return sorted_values[-1]
    fraction = position - below
    return sorted_values[below] + fraction * (sorted_values[below + 1] - sorted_values[below])


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="simplecnn")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--input", default="1x28x28", help="CxHxW")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--device", default="cpu", help="cpu, cpu:N or cuda[:N]")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads, 0: all cores")
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--param-shapes", action="store_true",
                        help="print the state_dict names and shapes as JSON, and run nothing")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--channels-last", action="store_true", help="NHWC memory format")
    parser.add_argument("--amp", action="store_true",
                        help="autocast: float16 on CUDA (with a GradScaler), bfloat16 on the "
                             "CPU, unless --amp-dtype says")
    parser.add_argument("--amp-dtype", choices=["float16", "bfloat16"],
                        help="the autocast type of --amp (bfloat16 needs no GradScaler)")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="capture the step in a CUDA graph and replay it")
    parser.add_argument("--no-tf32", action="store_true",
                        help="exact fp32 on a GPU: no TF32 in cuDNN's convolutions or in "
                             "matmuls (PyTorch's default allows it in convolutions)")
    parser.add_argument("--serve", action="store_true",
                        help="set up once, then one run per line read on stdin (needs --json)")
    args = parser.parse_args()  # exits 2 on a bad option
    if args.serve and not args.json:
        fail("--serve prints JSON lines: give --json too", 2)
    if args.batch < 1 or args.steps < 1 or args.warmup < 0 or args.classes < 2 or \
            args.threads < 0:
        fail("--batch and --steps must be at least 1, --warmup and --threads at least 0, "
             "--classes at least 2", 2)
    return args


def check_features(torch, args, device):
    """Refuse, with exit status 2, what this PyTorch or device cannot do."""
    if args.compile and not hasattr(torch, "compile"):
        fail(f"--compile needs torch.compile (PyTorch 2.0 or later); this is PyTorch "
             f"{torch.__version__}", 2)
    if args.cuda_graphs and (device == "cpu" or not hasattr(torch.cuda, "CUDAGraph")):
        fail("--cuda-graphs needs a CUDA device and torch.cuda.CUDAGraph", 2)
    if device != "cpu" and not torch.cuda.is_available():
        fail(f"--device {args.device}: this PyTorch ({torch.__version__}) sees no CUDA device")
    if args.amp and device == "cpu" and not hasattr(torch, "autocast"):
        fail("--amp on the CPU needs torch.autocast (PyTorch 1.10 or later)", 2)


def make_step(torch, args, model, images, labels, device):
    """The function that runs one step (without synchronizing)."""
    F = torch.nn.functional
    amp_dtype = getattr(torch, args.amp_dtype) if args.amp_dtype else \
        torch.float16 if device != "cpu" else torch.bfloat16
    autocast_device = "cuda" if device != "cpu" else "cpu"

    def forward():
        with torch.autocast(autocast_device, dtype=amp_dtype, enabled=args.amp):
            return model(images)

    if args.mode == "infer":
        model.eval()

        def infer_step():
            with torch.inference_mode():
                return forward()
        return infer_step

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM,
                                weight_decay=WEIGHT_DECAY, nesterov=True)
    scaler = torch.cuda.amp.GradScaler(
        enabled=args.amp and device != "cpu" and amp_dtype == torch.float16)

    def train_step():
        optimizer.zero_grad(set_to_none=not args.cuda_graphs)
        loss = F.cross_entropy(forward().float(), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    if not args.cuda_graphs:
        return train_step
    # PyTorch's whole-network capture recipe: warm up on a side stream, then
    # capture one step; replaying it reruns forward, backward and update.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(CUDA_GRAPH_WARMUP):
            train_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        train_step()
    return graph.replay


def main():
    args = parse_args()
    channels, height, width = parse_input(args.input)
    device, threads = parse_device(args.device, args.threads)
    try:
        import torch
    except ImportError:
        fail("PyTorch is not importable by this python; run /usr/bin/python3 (Debian's "
             "python3-torch: scripts/setup-debian.sh --torch)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import torch_models
    except ImportError as error:
        fail(f"bench/peers/torch_models.py is missing or broken: {error}")
    check_features(torch, args, device)
    if device == "cpu":  # 0 means every core, as in cuttle
        torch.set_num_threads(threads or len(os.sched_getaffinity(0)))
    else:  # as cuttle's `auto`: each shape's fastest algorithm, timed at its first run
        torch.backends.cudnn.benchmark = True
        if args.no_tf32:
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(args.seed)
    try:
        model = torch_models.build(args.model, channels, height, width, args.classes)
    except Exception as error:  # an unknown name, a size the model cannot take
        fail(f"cannot build the model '{args.model}': {error}")
    if args.param_shapes:
        print(json.dumps({name: list(t.shape) for name, t in model.state_dict().items()}))
        return
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(device=device, memory_format=memory_format)
    if args.compile:
        model = torch.compile(model)
    images = (torch.rand(args.batch, channels, height, width) * 2 - 1)
    images = images.to(device=device, memory_format=memory_format)
    labels = torch.randint(0, args.classes, (args.batch,)).to(device)
    step = guarded(make_step, torch, args, model, images, labels, device)
    if not args.serve:
        report(torch, args, model, device, guarded(time_steps, torch, args, step, device))
        return
    print(json.dumps({"ready": True}), flush=True)  # set up: the caller may time others now
    first = True
    while sys.stdin.readline():
        # A captured step is captured again for every run after the first: on
        # an H200 (PyTorch 2.11, 2026-11-28) the first run's 35 replays of
        # VGG-11, ResNet-18 and ResNet-50 ran, and the next run's first
        # replay, after other processes had used the GPU, hit an illegal
        # address (SimpleCNN's did not); cause not found.  A fresh capture is
        # what ran.
        if args.cuda_graphs and not first:
            step = None
            torch.cuda.synchronize()
            step = guarded(make_step, torch, args, model, images, labels, device)
        first = False
        report(torch, args, model, device, guarded(time_steps, torch, args, step, device))
        sys.stdout.flush()
        if device != "cpu":
            torch.cuda.empty_cache()


def guarded(function, *arguments):
    """function(*arguments), with a failure (torch.compile without a compiler,
    out of memory, ...) turned into one line on stderr and exit status 1."""
    try:
        return function(*arguments)
    except Exception as error:  # the reason is what the caller reports
        text = " ".join(str(error).split())
        fail(f"{type(error).__name__}: {text[:300]}")


def time_steps(torch, args, step, device):
    """--warmup untimed then --steps timed steps, in ms, each synchronized."""
    synchronize = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        step()
        synchronize()
        if i >= args.warmup:
            times.append(1e3 * (time.perf_counter() - start))
    return times


def tf32_flags(torch):
    """Where this PyTorch lets float32 use TF32 tensor cores (its defaults)."""
    try:
        return [name for name, allowed in
                (("tf32 convolutions", torch.backends.cudnn.allow_tf32),
                 ("tf32 matmuls", torch.backends.cuda.matmul.allow_tf32)) if allowed]
    except (AttributeError, RuntimeError):  # a PyTorch without the old switches
        return ["tf32 settings unknown"]


def report(torch, args, model, device, times):
    mean = sum(times) / len(times)
    times.sort()
    median = quantile(times, 0.5)
    backend = f"cpu ({torch.get_num_threads()} threads)" if device == "cpu" else \
        torch.cuda.get_device_name(torch.device(device))
    flags = [name for name in ("compile", "channels_last", "amp", "cuda_graphs")
             if getattr(args, name)]
    if args.amp and args.amp_dtype:
        flags[flags.index("amp")] = f"amp {args.amp_dtype}"
    if device != "cpu":
        flags += ["cudnn.benchmark"] + tf32_flags(torch)
    result = {
        "framework": f"pytorch {torch.__version__}", "model": args.model,
        "batch": args.batch, "input": args.input, "classes": args.classes,
        "device": args.device, "backend": backend + "".join(f", {f}" for f in flags),
        "mode": args.mode, "steps": args.steps, "warmup": args.warmup,
        "median_ms": round(median, 4), "p10_ms": round(quantile(times, 0.1), 4),
        "p90_ms": round(quantile(times, 0.9), 4), "min_ms": round(times[0], 4),
        "max_ms": round(times[-1], 4), "mean_ms": round(mean, 4),
        "images_per_second": round(args.batch / (median / 1e3), 1),
        "peak_host_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_device_bytes": torch.cuda.max_memory_allocated(torch.device(device))
        if device != "cpu" else None,
        "params": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
        "arena_bytes": None, "state_bytes": None, "kept_bytes": None,
        # cuttle's arithmetic fields (its ops' FLOP formulas): not counted here
        "gflop_per_step": None, "gflops_per_second": None, "peak_gflops": None,
        "share_of_peak": None, "peak_isa": None, "avx2_peak_gflops": None,
        "cuda_graph": None, "graph_nodes": None,
        "optimized": None,  # cuttle's inference optimization (docs/optimize.md)
        "emulated": False,  # cuttle's field: timings from its emulated GPU are not GPU speed
        # cuttle's --precision names: autocast's type, else fp32
        "precision": ("fp16" if (args.amp_dtype or ("float16" if device != "cpu" else
                                                    "bfloat16")) == "float16" else "bf16")
        if args.amp else "fp32",
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"bench {args.model} {args.mode}, batch {args.batch}, input {args.input}, "
          f"{args.classes} classes, on {result['backend']} ({result['framework']})")
    print(f"  {args.steps} steps after {args.warmup} warm-up: median {median:.3f} ms  "
          f"(p10 {result['p10_ms']:.3f}, p90 {result['p90_ms']:.3f}, min {times[0]:.3f}, "
          f"max {times[-1]:.3f})")
    print(f"  {result['images_per_second']:.1f} images/s")
    print(f"  {result['params']} parameters; peak host memory "
          f"{result['peak_host_bytes'] / 1048576:.1f} MiB")


if __name__ == "__main__":
    main()
