#!/usr/bin/env python3
"""The PyTorch and onnx halves of tests/test_onnx_export.sh:

    /usr/bin/python3 tests/onnx/export_case.py make DIR NAME:CxHxW...
        for each built-in model NAME, its PyTorch twin (bench/peers/torch_models.py,
        seed 0, 10 classes, batchnorm with random affine parameters and running
        statistics as in tests/torch_model_check.py) in evaluation mode:
        DIR/NAME.safetensors (its state_dict, a plain checkpoint),
        DIR/NAME.input.npy (seeded randn [2, C, H, W]), DIR/NAME.expected.npy
        (its logits) and DIR/NAME.softmax.npy (their softmax over classes)
    /usr/bin/python3 tests/onnx/export_case.py names FILE.onnx CHECKPOINT.safetensors
        the float initializers of FILE.onnx carry the checkpoint's state_dict
        names (num_batches_tracked aside): all of them when the graph has
        BatchNormalization nodes; when batchnorm was folded into the convs,
        every name but the batchnorm layers', plus at most a bias for a conv
        that had none (named CONV.bias)
    /usr/bin/python3 tests/onnx/export_case.py random SHAPES.json OUT.safetensors INPUT.npy CxHxW
        seeded random weights for the names and shapes in SHAPES.json (what
        `cuttle bench --param-shapes` prints; running variances positive) and a
        seeded randn input [2, C, H, W], for model files that have no PyTorch twin
    /usr/bin/python3 tests/onnx/export_case.py props FILE.onnx [batch=dynamic|N]
        [opset=N] [softmax=yes|no]
        the exported graph's input batch dimension (symbolic or N), its
        ai.onnx opset and whether it ends in Softmax

Each check prints what it found and exits 1 when it is not what was asked.
"""
import json
import os
import struct
import sys

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 2
CLASSES = 10
WEIGHT_SEED = 0
INPUT_SEED = 1
FLOAT_TYPES = (1, 10, 11, 16)  # onnx FLOAT, FLOAT16, DOUBLE, BFLOAT16


def make(out_dir, specs):
    sys.path.insert(0, os.path.join(HERE, ".."))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "peers"))
    import torch
    import torch_model_check  # its safetensors writer (no package needed)
    import torch_models
    torch.set_num_threads(min(2, torch.get_num_threads()))
    for spec in specs:
        name, shape = spec.split(":")
        channels, height, width = map(int, shape.split("x"))
        torch.manual_seed(WEIGHT_SEED)
        model = torch_models.build(name, channels, height, width, CLASSES)
        torch_models.randomize_batchnorm(model)
        model.eval()
        torch.manual_seed(INPUT_SEED)
        x = torch.randn(BATCH, channels, height, width)
        with torch.no_grad():
            logits = model(x)
        base = os.path.join(out_dir, name)
        torch_model_check.save(base + ".safetensors", list(model.state_dict().items()))
        numpy.save(base + ".input.npy", x.numpy())
        numpy.save(base + ".expected.npy", logits.numpy())
        numpy.save(base + ".softmax.npy", torch.softmax(logits, 1).numpy())
    return 0


def random_weights(shapes_json, out, input_npy, shape):
    with open(shapes_json) as f:
        shapes = json.load(f)
    rng = numpy.random.default_rng(WEIGHT_SEED)
    header, blobs, offset = {}, [], 0
    for name, dims in shapes.items():
        values = rng.standard_normal(dims).astype(numpy.float32) * numpy.float32(0.3)
        if name.endswith("running_var"):
            values = numpy.abs(values) + numpy.float32(0.5)
        if name.endswith("num_batches_tracked"):  # an int64 count, as in PyTorch
            values = numpy.full(dims, 3, dtype=numpy.int64)
        blob = values.tobytes()
        header[name] = {"dtype": "I64" if values.dtype == numpy.int64 else "F32",
                        "shape": list(dims), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)  # safetensors: the data starts 8-aligned
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    channels, height, width = map(int, shape.split("x"))
    x = numpy.random.default_rng(INPUT_SEED).standard_normal((BATCH, channels, height, width))
    numpy.save(input_npy, x.astype(numpy.float32))
    return 0


def safetensors_names(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return {n for n in header if n != "__metadata__"}


def names(onnx_path, checkpoint):
    import onnx
    model = onnx.load(onnx_path, load_external_data=False)
    found = {t.name for t in model.graph.initializer if t.data_type in FLOAT_TYPES}
    state = {n for n in safetensors_names(checkpoint) if not n.endswith(".num_batches_tracked")}
    bn_layers = {n[:-len(".running_mean")] for n in state if n.endswith(".running_mean")}
    has_bn = any(node.op_type == "BatchNormalization" for node in model.graph.node)
    if has_bn or not bn_layers:
        expected, allowed = state, state
        rule = "the state_dict's names"
    else:
        expected = {n for n in state if n.rsplit(".", 1)[0] not in bn_layers}
        conv_biases = {n[:-len(".weight")] + ".bias" for n in expected if n.endswith(".weight")}
        allowed = expected | conv_biases
        rule = "the state_dict's names less the folded batchnorm layers' (and conv biases)"
    missing, extra = sorted(expected - found), sorted(found - allowed)
    if missing or extra:
        print("initializer names are not %s: missing %s; not in the state_dict %s" % (
            rule, missing[:8] + (["..."] if len(missing) > 8 else []),
            extra[:8] + (["..."] if len(extra) > 8 else [])))
        return 1
    print("%d float initializers, named as %s" % (len(found), rule))
    return 0


def props(onnx_path, wanted):
    import onnx
    model = onnx.load(onnx_path, load_external_data=False)
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    first = inputs[0].type.tensor_type.shape.dim[0] if inputs else None
    found = {
        "batch": "dynamic" if first is not None and first.HasField("dim_param") else
        str(first.dim_value) if first is not None and first.HasField("dim_value") else "none",
        "opset": str(max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")],
                         default=0)),
        "softmax": "yes" if graph.node and graph.node[-1].op_type == "Softmax" and
        graph.node[-1].output[0] == graph.output[0].name else "no",
    }
    status = 0
    for item in wanted:
        key, value = item.split("=", 1)
        if key not in found:
            print("unknown property %r (known: %s)" % (key, ", ".join(found)))
            return 2
        if found[key] != value:
            print("%s is %s, expected %s" % (key, found[key], value))
            status = 1
    if status == 0:
        print("as expected: %s" % ", ".join("%s=%s" % (k, v) for k, v in found.items()))
    return status


def main(argv):
    if len(argv) >= 2 and argv[0] == "make":
        return make(argv[1], argv[2:])
    if len(argv) == 3 and argv[0] == "names":
        return names(argv[1], argv[2])
    if len(argv) == 5 and argv[0] == "random":
        return random_weights(*argv[1:])
    if len(argv) >= 2 and argv[0] == "props":
        return props(argv[1], argv[2:])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
