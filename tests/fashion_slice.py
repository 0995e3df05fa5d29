"""The first TRAIN training and TEST test images of Fashion-MNIST, as raw IDX
files: python3 tests/fashion_slice.py [--gzip] SRC DST TRAIN TEST (SRC holds
the .gz files; used by tests/gpu_cli.sh and tests/test_precision_cli.sh).
--gzip writes them as .gz files like SRC's (scripts/gpu-pack.sh: a small
stand-in for the dataset where it is not installed)."""
import gzip
import struct
import sys

args = sys.argv[1:]
packed = args[:1] == ["--gzip"]
if packed:
    args = args[1:]
src, dst = args[0], args[1]
counts = {"train": int(args[2]), "t10k": int(args[3])}
for prefix, n in counts.items():
    for kind, header in (("images-idx3", ">IIII"), ("labels-idx1", ">II")):
        with gzip.open(f"{src}/{prefix}-{kind}-ubyte.gz") as f:
            fields = list(struct.unpack(header, f.read(struct.calcsize(header))))
            item = 1 if len(fields) == 2 else fields[2] * fields[3]
            fields[1] = n
            body = f.read(n * item)
        name = f"{dst}/{prefix}-{kind}-ubyte"
        with (gzip.open(name + ".gz", "wb") if packed else open(name, "wb")) as f:
            f.write(struct.pack(header, *fields) + body)
