#!/usr/bin/env python3
"""Write one PyTorch reference for tests/test_models_torch.sh:

    /usr/bin/python3 tests/torch_model_check.py MODEL C H W OUT.safetensors

builds MODEL with bench/peers/torch_models.py (seed 0, 10 classes), gives its
batchnorm layers random affine parameters and running statistics (so that
evaluation mode does more than divide by sqrt(1 + eps)), and writes its
state_dict, an input "input" [2, C, H, W] and the logits "logits" of an
evaluation-mode forward pass, as safetensors (written by hand: no package).
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "peers"))
import torch  # noqa: E402
import torch_models  # noqa: E402

BATCH = 2
CLASSES = 10
DTYPE_NAMES = {torch.float32: "F32", torch.int64: "I64"}
HEADER_ALIGN = 8


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors:
        blob = tensor.detach().contiguous().numpy().tobytes()  # little-endian on x86/arm64
        header[name] = {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % HEADER_ALIGN)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    name, channels, height, width, out = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch_models.build(name, channels, height, width, CLASSES)
    torch_models.randomize_batchnorm(model)
    model.eval()
    x = torch.randn(BATCH, channels, height, width)
    with torch.no_grad():
        logits = model(x)
    save(out, list(model.state_dict().items()) + [("input", x), ("logits", logits)])


if __name__ == "__main__":
    main()
