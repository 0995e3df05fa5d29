#!/usr/bin/env python3
"""The PyTorch and file halves of tests/test_prune_cli.sh:

    /usr/bin/python3 tests/prune_check.py torch NAME CxHxW PRUNED.safetensors INPUT.npy LOGITS.json
        the PyTorch twin of built-in model NAME (bench/peers/torch_models.py)
        with every conv, batchnorm and linear layer rebuilt at the shapes the
        pruned checkpoint holds (its channel counts), loads the checkpoint with
        load_state_dict(strict=True) and computes the logits of INPUT.npy in
        evaluation mode; they must equal cuttle predict's (LOGITS.json) within
        1e-4 of the largest
    /usr/bin/python3 tests/prune_check.py smaller BEFORE.safetensors AFTER.safetensors
        the same tensor names; every conv weight of AFTER has fewer output
        channels than in BEFORE, none more
    /usr/bin/python3 tests/prune_check.py zeros PRUNED.safetensors MIN_SPARSITY
        the conv and linear weights (4-D and 2-D ".weight") of the checkpoint
        are at least MIN_SPARSITY zeros in all
    /usr/bin/python3 tests/prune_check.py same_zeros A.safetensors B.safetensors
        every weight that is 0 in A is 0 in B (the masks held in fine-tuning)

Each prints what it found and exits 1 when it is not what was asked.
"""
import json
import os
import struct
import sys

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 1e-4
KINDS = {"F32": numpy.float32, "I64": numpy.int64}


def tensors(path):
    """A safetensors file's tensors by name (numpy only)."""
    blob = open(path, "rb").read()
    (size,) = struct.unpack("<Q", blob[:8])
    entries = json.loads(blob[8:8 + size])
    entries.pop("__metadata__", None)
    body = memoryview(blob)[8 + size:]
    return {name: numpy.frombuffer(body[e["data_offsets"][0]:e["data_offsets"][1]],
                                   dtype=KINDS[e["dtype"]]).reshape(e["shape"])
            for name, e in entries.items()}


def rebuild(model, state):
    """Each conv, batchnorm and linear module made again at the state's shapes."""
    import torch.nn as nn
    for name, module in list(model.named_modules()):
        key = name + ".weight"
        if key not in state:
            continue
        shape = state[key].shape
        if isinstance(module, nn.Conv2d):
            new = nn.Conv2d(shape[1] * module.groups, shape[0], module.kernel_size,
                            module.stride, module.padding, module.dilation, module.groups,
                            module.bias is not None)
        elif isinstance(module, nn.BatchNorm2d):
            new = nn.BatchNorm2d(shape[0], module.eps, module.momentum)
        elif isinstance(module, nn.Linear):
            new = nn.Linear(shape[1], shape[0], module.bias is not None)
        else:
            continue
        parent = model
        *path, last = name.split(".")
        for part in path:
            parent = getattr(parent, part)
        setattr(parent, last, new)
    return model


def check_torch(name, shape, checkpoint, input_npy, logits_json):
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "bench", "peers"))
    sys.path.insert(0, os.path.join(HERE, "onnx"))
    import torch_models
    from compare import load
    torch.set_num_threads(min(2, torch.get_num_threads()))
    channels, height, width = map(int, shape.split("x"))
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors(checkpoint).items()}
    classes = state[[k for k in state if k.endswith(".weight")][-1]].shape[0]
    model = rebuild(torch_models.build(name, channels, height, width, classes), state)
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        expected = model(torch.from_numpy(numpy.load(input_npy))).double().numpy()
    actual = load(logits_json)
    error = float(numpy.max(numpy.abs(actual - expected)))
    bound = TOLERANCE * max(1.0, float(numpy.max(numpy.abs(expected))))
    print("%s: PyTorch loaded %d tensors strictly; max |cuttle - torch| %.3g (bound %.3g)"
          % (name, len(state), error, bound))
    return 0 if actual.shape == expected.shape and error <= bound else 1


def check_smaller(before_path, after_path):
    before, after = tensors(before_path), tensors(after_path)
    if before.keys() != after.keys():
        print("different names: %s" % sorted(set(before) ^ set(after)))
        return 1
    convs = [k for k in before if before[k].ndim == 4]
    fewer = [k for k in convs if after[k].shape[0] < before[k].shape[0]]
    more = [k for k in before if any(a > b for a, b in zip(after[k].shape, before[k].shape))]
    print("%d of %d conv weights have fewer output channels; larger: %s"
          % (len(fewer), len(convs), more or "none"))
    return 0 if len(fewer) == len(convs) and not more else 1


def weights(state):
    return {k: v for k, v in state.items() if k.endswith(".weight") and v.ndim in (2, 4)}


def check_zeros(path, minimum):
    w = weights(tensors(path))
    zeros = sum(int(numpy.sum(v == 0)) for v in w.values())
    total = sum(v.size for v in w.values())
    print("%d of %d weights are 0 (%.3f; at least %s asked)" % (zeros, total, zeros / total,
                                                                 minimum))
    return 0 if zeros >= int(total * float(minimum) + 1e-6) - 1 else 1  # floor(N R), rounded


def check_same_zeros(a_path, b_path):
    a, b = weights(tensors(a_path)), weights(tensors(b_path))
    lost = sum(int(numpy.sum((a[k] == 0) & (b[k] != 0))) for k in a)
    print("%d weights that were 0 after pruning are not 0 after fine-tuning" % lost)
    return 0 if lost == 0 and a.keys() == b.keys() else 1


def main(argv):
    if len(argv) == 7 and argv[1] == "torch":
        return check_torch(*argv[2:])
    if len(argv) == 4 and argv[1] == "smaller":
        return check_smaller(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "zeros":
        return check_zeros(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "same_zeros":
        return check_same_zeros(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
