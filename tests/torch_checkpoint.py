#!/usr/bin/env python3
"""Check that a cuttle checkpoint is a PyTorch state_dict: load it into the
PyTorch model of the same name (bench/peers/torch_models.py) with
load_state_dict(strict=True), run the given images, and compare the logits
with the ones `cuttle predict --json` printed for the same images.

    torch_checkpoint.py dataset DIR        write a tiny random IDX dataset into DIR
    torch_checkpoint.py png IDX_DIR INDEX OUT.png
                                           write test image INDEX as a PNG file
    torch_checkpoint.py check MODEL.safetensors PREDICT.json IDX_DIR FIRST [PNG]
                                           compare; exit 1 on a mismatch

The safetensors file is read by hand (struct + json), so no package beyond
torch (and PIL for the PNG) is needed.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "peers"))
import torch_models  # noqa: E402

TOLERANCE = 1e-4
SIDE = 28
CLASSES = 10
DTYPES = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def write_idx(path, array):
    magic = 0x00000803 if array.ndim == 3 else 0x00000801
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        for d in array.shape:
            f.write(struct.pack(">I", d))
        f.write(array.astype(np.uint8).tobytes())


def make_dataset(directory):
    """Blobs whose position depends on the class, plus noise: learnable in an epoch."""
    rng = np.random.default_rng(7)
    for prefix, n in (("train", 320), ("t10k", 64)):
        labels = rng.integers(0, CLASSES, n)
        images = rng.integers(0, 60, (n, SIDE, SIDE))
        for i, label in enumerate(labels):
            r, c = 4 + 2 * (label // 5) * 5, 2 + (label % 5) * 5
            images[i, r:r + 6, c:c + 4] += 180
        write_idx(os.path.join(directory, prefix + "-images-idx3-ubyte"), images)
        write_idx(os.path.join(directory, prefix + "-labels-idx1-ubyte"), labels)


def read_idx_images(directory):
    with open(os.path.join(directory, "t10k-images-idx3-ubyte"), "rb") as f:
        data = f.read()
    n, rows, cols = struct.unpack(">III", data[4:16])
    return np.frombuffer(data[16:], dtype=np.uint8).reshape(n, rows, cols)


def write_png(directory, index, out):
    from PIL import Image
    Image.fromarray(read_idx_images(directory)[index]).save(out)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[base + begin:base + end], dtype=DTYPES[info["dtype"]])
        tensors[name] = torch.from_numpy(array.reshape(info["shape"]).copy())
    return tensors, metadata


def check(weights, predict_json, directory, first, png=None):
    state, meta = read_safetensors(weights)
    channels, height, width = json.loads(meta["input"])
    classes = json.loads(meta["classes"])
    mean, std = json.loads(meta["mean"]), json.loads(meta["std"])
    model = torch_models.build(meta["model_name"], channels, height, width, len(classes))
    model.load_state_dict(state, strict=True)
    model.eval()
    with open(predict_json) as f:
        predictions = json.load(f)["predictions"]
    png_prediction = predictions.pop() if png is not None else None
    images = read_idx_images(directory)[first:first + len(predictions)]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - mean[0]) / std[0]
    with torch.no_grad():
        expected = model(x).numpy()
    cuttle = np.array([p["logits"] for p in predictions], dtype=np.float64)
    scale = max(np.abs(expected).max(), 1e-12)
    error = np.abs(cuttle - expected).max() / scale
    print("%s: %d images, max relative logit error vs PyTorch %.3g (tolerance %g)"
          % (meta["model_name"], len(predictions), error, TOLERANCE))
    ok = error <= TOLERANCE
    if png is not None:
        png_logits = np.array(png_prediction["logits"])
        png_error = np.abs(png_logits - expected[0]).max() / scale
        print("PNG of test image %d: relative error vs PyTorch %.3g" % (first, png_error))
        ok = ok and png_error <= TOLERANCE
    return ok


def main():
    command = sys.argv[1]
    if command == "dataset":
        make_dataset(sys.argv[2])
        return 0
    if command == "png":
        write_png(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    if command == "check":
        png = sys.argv[6] if len(sys.argv) > 6 else None
        return 0 if check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), png) else 1
    print("unknown command " + command, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
