#!/usr/bin/env python3
"""The onnx package's own checks on .onnx files:

    /usr/bin/python3 tests/onnx/check.py MODEL.onnx...
    /usr/bin/python3 tests/onnx/check.py --ops MODEL.onnx...   # and list the ops

For each file: onnx.checker on the file's path (which also checks that the
external data files it names are there), then on the loaded model with
full_check=True, and onnx.shape_inference.infer_shapes(check_type=True,
strict_mode=True) (onnx 1.12's API; strict mode makes a shape or type that
inference cannot reconcile an error instead of a silent skip).  The graph
must have one input and one output, both float32.  Prints "ok FILE" per file, or the file
and the reason, and exits 1 when any file fails (2: a bad command line).
--ops also prints each file's opset imports, its ops with their attributes
(tests/onnx/EXPORTED_OPS.md was written with it) and initializer count.
"""
import sys

import onnx
import onnx.checker
import onnx.helper
import onnx.numpy_helper
import onnx.shape_inference
from onnx import TensorProto


def dims(value_info):
    shape = value_info.type.tensor_type.shape
    return [d.dim_param if d.HasField("dim_param") else d.dim_value if
            d.HasField("dim_value") else "?" for d in shape.dim]


def attribute_text(attribute):
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, TensorProto):
        array = onnx.numpy_helper.to_array(value)
        value = "tensor %s %s" % (TensorProto.DataType.Name(value.data_type),
                                  array.tolist() if array.size <= 16 else list(array.shape))
    elif isinstance(value, bytes):
        value = value.decode()
    return "%s=%s" % (attribute.name, value)


def check(path):
    """None, or the reason `path` fails."""
    try:
        onnx.checker.check_model(path)  # the path form checks external data locations
        model = onnx.load(path, load_external_data=False)
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # onnx raises several types; each is a failure here
        return "%s: %s" % (type(e).__name__, str(e).strip())
    graph = inferred.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1 or len(graph.output) != 1:
        return "expected one input and one output, found inputs %s and outputs %s" % (
            [i.name for i in inputs], [o.name for o in graph.output])
    for value in (inputs[0], graph.output[0]):
        if value.type.tensor_type.elem_type != TensorProto.FLOAT:
            return "%s is %s, expected FLOAT" % (value.name, TensorProto.DataType.Name(
                value.type.tensor_type.elem_type))
    return None


def list_ops(path):
    model = onnx.load(path, load_external_data=False)
    print("%s: ir_version %d, opsets %s, producer %s %s" % (
        path, model.ir_version, ", ".join("%s:%d" % (o.domain or "ai.onnx", o.version)
                                          for o in model.opset_import),
        model.producer_name, model.producer_version))
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    for value in list(graph.input) + list(graph.output):
        kind = "initializer-input" if value.name in initializers else "io"
        print("  %s %s %s" % (kind, value.name, dims(value)))
    seen = {}
    for node in graph.node:
        seen.setdefault(node.op_type, set()).add(
            ", ".join(attribute_text(a) for a in node.attribute))
    for op, attributes in seen.items():
        print("  %s (%d): %s" % (op, sum(n.op_type == op for n in graph.node),
                                 " | ".join(sorted(attributes)) or "no attributes"))
    external = sum(t.data_location == TensorProto.EXTERNAL for t in graph.initializer)
    print("  %d initializers (%d external)" % (len(graph.initializer), external))


def main(argv):
    show_ops = "--ops" in argv
    paths = [a for a in argv if a != "--ops"]
    if not paths or any(p.startswith("--") for p in paths):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        reason = check(path)
        if reason:
            print("FAILED %s: %s" % (path, reason))
            failed += 1
        else:
            print("ok %s" % path)
        if show_ops:
            list_ops(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
