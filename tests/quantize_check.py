#!/usr/bin/env python3
"""Helpers of tests/test_quantize_cli.sh for the int8 file (numpy only):

    quantize_check.py accuracy PREDICT.json
        the share of cuttle predict --json's predictions whose top class is
        the item's label, as "NN.NN%" (how cuttle eval prints it)
    quantize_check.py input MODEL.safetensors IMAGES-idx3-ubyte N OUT.npy
        the first N images of an IDX file normalized with the mean and std
        of the checkpoint's metadata, as float32 [N, C, H, W]
    quantize_check.py break IN.safetensors OUT.safetensors HOW
        a copy of an int8 file with one thing broken: nan_scale (a weight
        scale NaN), zero_input_scale, drop_zero_point (a tensor left out),
        truncate (the last 100 bytes cut)
    quantize_check.py qdq ORT.npy PREDICT.json
        ONNX Runtime's logits on the QDQ export against cuttle's int8 ones:
        max |a - b| <= QDQ_TOL * max(1, max |ort|), at least QDQ_ROWS of the
        rows within 1e-5 of it, the same top class in at least QDQ_TOP1 of
        them (docs/quantization.md says why they are not bit-equal).

Exit status 0 when the check holds, 1 when not.
"""
import gzip
import json
import struct
import sys

import numpy

# Measured on the 500-image Fashion-MNIST slice (docs/quantization.md):
# SimpleCNN as the test quantizes it 1.0e-3, 99 % of rows within 1e-5, top-1
# 100 %; SimpleCNN all int8 3.8e-3, 91.2 %, 100 %; vgg8_bn 0.9e-3 to 1.1e-3,
# but only 3 to 12 % of rows within 1e-5 (the deeper the model, the more
# values cross a rounding boundary): QDQ_ROWS fits the test's SimpleCNN.
QDQ_TOL = 1e-2
QDQ_ROWS = 0.90
QDQ_TOP1 = 0.99
CLOSE = 1e-5


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header, tensors):
    """tensors: name -> bytes, in header order; offsets are rewritten."""
    offset, body = 0, b""
    for name, info in header.items():
        if name == "__metadata__":
            continue
        info["data_offsets"] = [offset, offset + len(tensors[name])]
        offset += len(tensors[name])
        body += tensors[name]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def predictions(path):
    return json.load(open(path))["predictions"]


def accuracy(path):
    items = predictions(path)
    right = sum(p["top"][0]["index"] == p["label"] for p in items)
    print("%.2f%%" % (100.0 * right / len(items)))
    return 0


def make_input(model, images, n, out):
    header, _ = read_safetensors(model)
    meta = header["__metadata__"]
    mean = numpy.array(json.loads(meta["mean"]), dtype=numpy.float32)
    std = numpy.array(json.loads(meta["std"]), dtype=numpy.float32)
    c, h, w = json.loads(meta["input"])
    raw = open(images, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    pixels = numpy.frombuffer(raw, dtype=numpy.uint8, offset=16)[:n * c * h * w]
    x = pixels.reshape(n, c, h, w).astype(numpy.float32) / numpy.float32(255)
    x = (x - mean.reshape(1, c, 1, 1)) / std.reshape(1, c, 1, 1)
    numpy.save(out, x.astype(numpy.float32))
    return 0


def break_file(src, dst, how):
    header, data = read_safetensors(src)
    tensors = {name: bytearray(data[info["data_offsets"][0]:info["data_offsets"][1]])
               for name, info in header.items() if name != "__metadata__"}
    scales = [n for n in tensors if n.endswith(".weight_scale")]
    if how == "nan_scale":
        tensors[scales[0]][0:4] = struct.pack("<f", float("nan"))
    elif how == "zero_input_scale":
        name = [n for n in tensors if n.endswith(".input_scale")][-1]
        tensors[name][0:4] = struct.pack("<f", 0.0)
    elif how == "drop_zero_point":
        name = [n for n in tensors if n.endswith(".input_zero_point")][0]
        del tensors[name], header[name]
    elif how != "truncate":
        print("unknown way to break a file: %s" % how)
        return 1
    # A file edited by hand, as a tool that knows no checksum would write it:
    # without the key, so that the loader's own checks of the int8 tensors
    # are what refuses it (a kept checksum would refuse it first).
    header.get("__metadata__", {}).pop("cuttle_checksum", None)
    write_safetensors(dst, header, {k: bytes(v) for k, v in tensors.items()})
    if how == "truncate":
        whole = open(dst, "rb").read()
        open(dst, "wb").write(whole[:-100])
    return 0


def qdq(ort_path, predict_path):
    ort = numpy.load(ort_path).astype(numpy.float64)
    mine = numpy.array([p["logits"] for p in predictions(predict_path)], dtype=numpy.float64)
    if ort.shape != mine.shape:
        print("shape %s, ONNX Runtime %s" % (mine.shape, ort.shape))
        return 1
    scale = max(1.0, float(numpy.abs(ort).max()))
    rows = numpy.abs(ort - mine).max(axis=1) / scale
    close = float(numpy.mean(rows <= CLOSE))
    top1 = float(numpy.mean(ort.argmax(axis=1) == mine.argmax(axis=1)))
    ok = rows.max() <= QDQ_TOL and close >= QDQ_ROWS and top1 >= QDQ_TOP1
    print("%s: max error %.3g of max(1, |logit|) = %.4g (bound %g); %.1f%% of %d rows within "
          "%g (bound %g%%); top-1 agreement %.1f%% (bound %g%%)" % (
              "agree" if ok else "DIFFER", rows.max(), scale, QDQ_TOL, 100 * close, len(rows),
              CLOSE, 100 * QDQ_ROWS, 100 * top1, 100 * QDQ_TOP1))
    return 0 if ok else 1


def main(argv):
    commands = {"accuracy": (accuracy, 1), "input": (make_input, 4), "break": (break_file, 3),
                "qdq": (qdq, 2)}
    if not argv or argv[0] not in commands or len(argv) - 1 != commands[argv[0]][1]:
        print(__doc__.strip())
        return 2
    fn, _ = commands[argv[0]]
    args = argv[1:]
    if argv[0] == "input":
        args[2] = int(args[2])
    return fn(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
