#!/usr/bin/env python3
"""ONNX files that PyTorch 1.13 writes, with inputs and PyTorch's outputs,
for tests/test_onnx_torch.sh (cuttle's importer and ONNX Runtime on each):

    /usr/bin/python3 tests/onnx/torch_export.py OUTDIR [--only CASE,...] [--light]

For each case: CASE.onnx (torch.onnx.export of the evaluation-mode model,
input "input" [batch, C, H, W] with a dynamic batch axis, output "logits"),
CASE.input.npy (seeded randn [2, C, H, W], float32) and CASE.expected.npy
(PyTorch's logits on it), and OUTDIR/manifest.json listing every case:
name, file, input, expected, model (the cuttle built-in of the same
architecture and state_dict names at that input size, or null), input
shape, opset, variant, notes.  Weights are seeded (torch.manual_seed(0)
before each model is built: PyTorch's default initialization), and
batchnorm layers get random affine parameters and running statistics as in
tests/torch_model_check.py, so that evaluation mode does more than divide
by sqrt(1 + eps).

Variants: "folded" is torch.onnx.export's default (do_constant_folding and
evaluation mode: each BatchNormalization is folded into the Conv before
it); "bn" keeps BatchNormalization nodes in their inference form
(training=TrainingMode.PRESERVE with the model in eval mode; note that
do_constant_folding=False does not keep them: PyTorch 1.13 folds
conv+batchnorm in evaluation mode either way); "external" is the folded
file saved again by onnx.save_model(save_as_external_data=True) with its
weights in CASE.onnx.data; "view" is SimpleCNN flattening with
x.view(x.size(0), -1), which exports as Shape, Gather, Unsqueeze, Concat and
Reshape.  --light leaves out the 500 MB VGG-11 at 224x224 (the cases marked
heavy).  Run with /usr/bin/python3 (Debian's python3-torch,
python3-torchvision, python3-onnx).
"""
import argparse
import io
import json
import os
import sys
import warnings

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "peers"))
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402
import torch_models  # noqa: E402

BATCH = 2
CLASSES = 10
WEIGHT_SEED = 0
INPUT_SEED = 1
EXTERNAL_THRESHOLD = 1024  # bytes: tensors at least this big go to the .data file


class ViewCNN(torch_models.SimpleCNN):
    """SimpleCNN with the flatten of older code, x.view(x.size(0), -1):
    exported as Shape -> Gather -> Unsqueeze -> Concat(-1) -> Reshape."""

    def forward(self, x):
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        x = nn.functional.relu(self.fc1(x))
        x = nn.functional.relu(self.fc2(x))
        return self.fc3(x)


def torchvision_model(name):
    return lambda c, h, w: getattr(torchvision.models, name)(weights=None, num_classes=CLASSES)


def twin(name):
    return lambda c, h, w: torch_models.build(name, c, h, w, CLASSES)


# name, builder(c, h, w), input CxHxW, the cuttle built-in with the same
# architecture and names at that input (or None), opsets, variants, heavy, notes.
# ResNets are torchvision's (ImageNet stem: 7x7/2 conv, 3x3/2 max pool with
# padding) at 64x64, the smallest input where cuttle's built-in ResNets take
# that stem too.  VGG: torchvision's AdaptiveAvgPool2d((7, 7)) exports only
# when the feature map's side is a multiple of 7 (PyTorch 1.13 refuses
# "output size that are not factor of input size"), so the real VGG needs
# 224x224 (7x7 features; at 32x32 they are 1x1) and its 25088x4096
# classifier makes the file 500 MB: vgg11 is exported that way once, at
# opset 13, and marked heavy.  vgg11_bn is cuttle's small-input VGG
# (torchvision's feature layers, then 512 -> 512 -> 512 -> classes on the
# 1x1 features: bench/peers/torch_models.py) at 32x32: 37 MB a file.
# ResNet-34 and -50 only at opset 13: their opset 14 files have the same
# nodes (180 MB and ~10 s of the test for nothing new; the ops that change at
# 14, BatchNormalization and Reshape, are in the "bn" variants and
# simplecnn_view at 14).
CASES = [
    ("simplecnn", twin("simplecnn"), (3, 32, 32), "simplecnn", (13, 14), ("folded",), False,
     "torch_models.SimpleCNN; flatten(1) exports as Flatten"),
    ("simplecnn_view", lambda c, h, w: ViewCNN(c, h, w, CLASSES), (3, 32, 32), "simplecnn",
     (13, 14), ("view",), False, "SimpleCNN with x.view(x.size(0), -1)"),
    ("lenet5", twin("lenet5"), (1, 28, 28), "lenet5", (13, 14), ("folded",), False,
     "tanh, avg_pool2d, conv1 padding 2 (28x28 inputs)"),
    ("vgg11", torchvision_model("vgg11"), (3, 224, 224), "vgg11", (13,), ("folded",), True,
     "torchvision vgg11 at 224x224: AdaptiveAvgPool2d((7,7)) on 7x7 features; 500 MB"),
    ("vgg11_bn", twin("vgg11_bn"), (3, 32, 32), "vgg11_bn", (13, 14), ("folded", "bn"), False,
     "torchvision vgg11_bn features with cuttle's small-input classifier"),
    ("resnet18", torchvision_model("resnet18"), (3, 64, 64), "resnet18", (13, 14),
     ("folded", "bn", "external"), False, "torchvision resnet18"),
    ("resnet18_32", torchvision_model("resnet18"), (3, 32, 32), None, (13,), ("folded",), False,
     "torchvision resnet18 at 32x32 (its ImageNet stem; 1x1 features in layer4): a fourth "
     "of the 64x64 work, for the emulated GPU"),
    ("resnet34", torchvision_model("resnet34"), (3, 64, 64), "resnet34", (13,), ("folded",),
     False, "torchvision resnet34"),
    ("resnet50", torchvision_model("resnet50"), (3, 64, 64), "resnet50", (13,), ("folded",),
     False, "torchvision resnet50 (bottleneck blocks)"),
]

VARIANT_NOTES = {
    "folded": "default export: batchnorm folded into conv",
    "bn": "BatchNormalization nodes kept (TrainingMode.PRESERVE, eval mode)",
    "external": "weights in external data (CASE.onnx.data)",
    "view": "x.view(x.size(0), -1): Shape/Gather/Unsqueeze/Concat/Reshape",
}


def export_bytes(model, x, opset, variant):
    training = torch.onnx.TrainingMode.PRESERVE if variant == "bn" else \
        torch.onnx.TrainingMode.EVAL
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, f, opset_version=opset, training=training,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    return f.getvalue()


def check_variant(proto, variant, name):
    """Fail if the file is not what the variant promises."""
    ops = {node.op_type for node in proto.graph.node}
    if variant == "bn":
        bn = [n for n in proto.graph.node if n.op_type == "BatchNormalization"]
        if not bn or any(a.name == "training_mode" and a.i for n in bn for a in n.attribute):
            raise RuntimeError(f"{name}: expected BatchNormalization nodes in inference form")
    elif "BatchNormalization" in ops:
        raise RuntimeError(f"{name}: expected batchnorm folded into conv, found {sorted(ops)}")
    if variant == "view" and not {"Shape", "Gather", "Reshape"} <= ops:
        raise RuntimeError(f"{name}: expected Shape/Gather/Reshape, found {sorted(ops)}")


def write_case(out_dir, base, model, x, logits, opset, variant):
    data = export_bytes(model, x, opset, variant)
    proto = onnx.load_from_string(data)
    check_variant(proto, variant, base)
    path = os.path.join(out_dir, base + ".onnx")
    if variant == "external":
        onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=base + ".onnx.data", size_threshold=EXTERNAL_THRESHOLD)
    else:
        with open(path, "wb") as f:
            f.write(data)
    numpy.save(os.path.join(out_dir, base + ".input.npy"), x.numpy())
    numpy.save(os.path.join(out_dir, base + ".expected.npy"), logits.numpy())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--only", default="", help="comma-separated model names (default all)")
    parser.add_argument("--light", action="store_true", help="leave out the heavy cases")
    args = parser.parse_args()
    wanted = {n for n in args.only.split(",") if n}
    unknown = wanted - {c[0] for c in CASES}
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {[c[0] for c in CASES]}")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    manifest = []
    for name, build, shape, builtin, opsets, variants, heavy, notes in CASES:
        if (wanted and name not in wanted) or (heavy and args.light):
            continue
        torch.manual_seed(WEIGHT_SEED)
        model = build(*shape)
        torch_models.randomize_batchnorm(model)
        model.eval()
        torch.manual_seed(INPUT_SEED)
        x = torch.randn(BATCH, *shape)
        with torch.no_grad():
            logits = model(x)
        for opset in opsets:
            for variant in variants:
                if variant == "external" and opset != opsets[0]:
                    continue  # one external-data file is enough
                base = f"{name}_op{opset}" + ("" if variant in ("folded", "view")
                                              else "_" + variant)
                write_case(args.out_dir, base, model, x, logits, opset, variant)
                manifest.append({
                    "name": base, "file": base + ".onnx", "input": base + ".input.npy",
                    "expected": base + ".expected.npy", "model": builtin,
                    "input_shape": "x".join(map(str, shape)), "batch": BATCH,
                    "classes": CLASSES, "opset": opset, "variant": variant, "heavy": heavy,
                    "notes": f"{notes}; {VARIANT_NOTES[variant]}"})
                print(f"torch_export: {base}.onnx", file=sys.stderr, flush=True)
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
