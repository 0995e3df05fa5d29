#!/usr/bin/env python3
"""The onnx package's own checks on .onnx files:

    /usr/bin/python3 tests/onnx/check.py MODEL.onnx...
    /usr/bin/python3 tests/onnx/check.py --ops MODEL.onnx...   # and list the ops

For each file: onnx.checker on the file's path (the whole file: weights, and
the external data files it names), then onnx.checker.check_model(model,
full_check=True) and onnx.shape_inference.infer_shapes(check_type=True,
strict_mode=True) (onnx 1.12's API; strict mode makes a shape or type that
inference cannot reconcile an error instead of a silent skip) on the graph
with its initializers made inputs of the same type and shape (the same
checks without copying the weights again).  Every initializer's data must
have the size its dims say (onnx 1.12's checker does not look), and the
graph must have one input and one output, both float32.  Prints "ok FILE"
per file, or the file and the reason, and exits 1 when any file fails (2: a
bad command line).
--ops also prints each file's opset imports, its ops with their attributes
(tests/onnx/EXPORTED_OPS.md was written with it) and initializer count.
"""
import os
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


def without_weights(model):
    """A copy of `model` whose initializers are graph inputs of the same type
    and shape: the same graph to check and to infer shapes on, without
    copying the weights (the full check copies a model six times: seconds
    of page faults for a 500 MB one)."""
    light = onnx.ModelProto()
    for field, value in model.ListFields():
        if field.name != "graph":
            target = getattr(light, field.name)
            if field.label == field.LABEL_REPEATED:
                target.extend(value)
            elif field.type == field.TYPE_MESSAGE:
                target.CopyFrom(value)
            else:
                setattr(light, field.name, value)
    for field, value in model.graph.ListFields():
        target = getattr(light.graph, field.name)
        if field.name == "initializer":
            continue
        if field.label == field.LABEL_REPEATED:
            target.extend(value)
        elif field.type == field.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(light.graph, field.name, value)
    light.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                             for t in model.graph.initializer)
    return light


def numpy_type(data_type):
    """onnx 1.12 has only onnx.mapping; later versions deprecate it for helpers."""
    if hasattr(onnx.helper, "tensor_dtype_to_np_dtype"):
        return onnx.helper.tensor_dtype_to_np_dtype(data_type)
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[data_type]


def storage_field(data_type):
    if hasattr(onnx.helper, "tensor_dtype_to_field"):
        return onnx.helper.tensor_dtype_to_field(data_type)
    return onnx.mapping.STORAGE_TENSOR_TYPE_TO_FIELD[
        onnx.mapping.TENSOR_TYPE_TO_STORAGE_TENSOR_TYPE[data_type]]


def tensor_size_problem(tensor, model_dir):
    """None, or why `tensor`'s data does not have the size its dims say
    (the checker of onnx 1.12 does not look)."""
    count = 1
    for d in tensor.dims:
        count *= d
    itemsize = numpy_type(tensor.data_type).itemsize
    if tensor.data_location == TensorProto.EXTERNAL:
        info = {e.key: e.value for e in tensor.external_data}
        offset, length = int(info.get("offset", 0)), int(info.get("length", count * itemsize))
        file = os.path.join(model_dir, info["location"])
        if length != count * itemsize or os.path.getsize(file) < offset + length:
            return "%s: dims %s need %d bytes; external data has length %d at offset %d in " \
                "a file of %d bytes" % (tensor.name, list(tensor.dims), count * itemsize, length,
                                        offset, os.path.getsize(file))
        return None
    if tensor.HasField("raw_data"):
        found = len(tensor.raw_data)
    else:
        found = len(getattr(tensor, storage_field(tensor.data_type))) * itemsize
    if found != count * itemsize:
        return "%s: dims %s need %d bytes of data, found %d" % (
            tensor.name, list(tensor.dims), count * itemsize, found)
    return None


def check(path):
    """None, or the reason `path` fails."""
    try:
        # the path form checks the whole file, weights and external data included
        onnx.checker.check_model(path)
        model = onnx.load(path, load_external_data=False)
        light = without_weights(model)
        onnx.checker.check_model(light, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(light, check_type=True, strict_mode=True)
    except Exception as e:  # onnx raises several types; each is a failure here
        return "%s: %s" % (type(e).__name__, str(e).strip())
    for tensor in model.graph.initializer:
        problem = tensor_size_problem(tensor, os.path.dirname(os.path.abspath(path)))
        if problem:
            return problem
    initializers = {t.name for t in model.graph.initializer}
    graph = inferred.graph
    inputs = [i for i in model.graph.input if i.name not in initializers]
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
