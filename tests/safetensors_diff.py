#!/usr/bin/env python3
"""The largest difference between the tensors of two safetensors files:

    safetensors_diff.py A.safetensors B.safetensors TOLERANCE

prints "max |a - b| X over N tensors (at NAME)" and exits 1 if X is above
TOLERANCE or the files hold different tensor names or shapes.  numpy only.
"""
import json
import struct
import sys

import numpy as np

KINDS = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def tensors(path):
    blob = open(path, "rb").read()
    (size,) = struct.unpack("<Q", blob[:8])
    entries = json.loads(blob[8:8 + size])
    entries.pop("__metadata__", None)
    body = memoryview(blob)[8 + size:]
    return {name: np.frombuffer(body[e["data_offsets"][0]:e["data_offsets"][1]],
                                dtype=KINDS[e["dtype"]]).reshape(e["shape"])
            for name, e in entries.items()}


def main():
    a, b, tolerance = tensors(sys.argv[1]), tensors(sys.argv[2]), float(sys.argv[3])
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        print(f"different tensors: {sorted(a)} vs {sorted(b)}")
        return 1
    worst, where = 0.0, "-"
    for name in sorted(a):
        diff = float(np.max(np.abs(a[name].astype(np.float64) - b[name]), initial=0.0))
        if diff > worst or np.isnan(diff):
            worst, where = diff, name
    print(f"max |a - b| {worst:.3g} over {len(a)} tensors (at {where})")
    return 0 if worst <= tolerance else 1


sys.exit(main())
