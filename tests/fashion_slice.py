"""The first TRAIN training and TEST test images of Fashion-MNIST, as raw IDX
files: python3 tests/fashion_slice.py SRC DST TRAIN TEST (SRC holds the
.gz files; used by tests/gpu_cli.sh and tests/test_precision_cli.sh)."""
import gzip
import struct
import sys

src, dst = sys.argv[1], sys.argv[2]
counts = {"train": int(sys.argv[3]), "t10k": int(sys.argv[4])}
for prefix, n in counts.items():
    for kind, header in (("images-idx3", ">IIII"), ("labels-idx1", ">II")):
        with gzip.open(f"{src}/{prefix}-{kind}-ubyte.gz") as f:
            fields = list(struct.unpack(header, f.read(struct.calcsize(header))))
            item = 1 if len(fields) == 2 else fields[2] * fields[3]
            fields[1] = n
            body = f.read(n * item)
        with open(f"{dst}/{prefix}-{kind}-ubyte", "wb") as f:
            f.write(struct.pack(header, *fields) + body)
