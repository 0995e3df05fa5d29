#!/usr/bin/env python3
"""PyTorch peer of bench/simplecnn_train.c: the same SimpleCNN, batch, input
shape, optimizer and timing rule (median step time after warm-up), printing
the same JSON fields.  Run with Debian's python3-torch: /usr/bin/python3."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import torch_models  # the same directory: SimpleCNN as in models/simplecnn.model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--eval", type=int, default=0, help="1: time inference (no_grad, eval mode)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = torch_models.build("simplecnn", args.channels, args.size, args.size, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.rand(args.batch, args.channels, args.size, args.size) - 0.5
    labels = torch.arange(args.batch) % 10
    times = []
    if args.eval:
        model.eval()
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        if args.eval:
            with torch.no_grad():
                model(images)
        else:
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "framework": "pytorch " + torch.__version__, "model": "simplecnn",
        "mode": "eval" if args.eval else "train",
        "batch": args.batch, "input": f"{args.channels}x{args.size}x{args.size}",
        "backend": f"cpu ({torch.get_num_threads()} threads)",
        "median_step_ms": round(1e3 * median, 3), "min_step_ms": round(1e3 * times[0], 3),
        "max_step_ms": round(1e3 * times[-1], 3),
        "images_per_second": round(args.batch / median, 1)}))


if __name__ == "__main__":
    main()
