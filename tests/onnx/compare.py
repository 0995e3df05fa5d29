#!/usr/bin/env python3
"""Compare logits with a reference, for the ONNX tests:

    /usr/bin/python3 tests/onnx/compare.py EXPECTED ACTUAL [--tol 1e-5]

EXPECTED and ACTUAL are each a float32 .npy [N, classes] or the JSON that
`cuttle predict --json` prints (its predictions' "logits", in order).
They agree when the shapes are equal, every value is finite and

    max |actual - expected| <= tol * max(1, max |expected|)

that is, an error relative to the largest logit (a per-element relative
error would fail on logits near zero, where float32 rounding in a long sum
is relative to the sum's terms, not to its result); the 1 keeps tiny
logits from asking for more than absolute 1e-5.  Prints one line with the
error and the bound; exits 0 when they agree, 1 when not (or a file is
unreadable), 2 on a bad command line.
"""
import argparse
import json
import sys

import numpy

DEFAULT_TOL = 1e-5


def load(path):
    if path.endswith(".npy"):
        return numpy.load(path).astype(numpy.float64)
    with open(path) as f:
        text = f.read()
    try:
        result = json.loads(text)
        return numpy.array([p["logits"] for p in result["predictions"]], dtype=numpy.float64)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError("%s is not cuttle predict's JSON (%s): %r" % (path, e, text[:200]))


def compare(expected, actual, tol):
    """(True or False, the line that says why)."""
    if expected.shape != actual.shape:
        return False, "shape %s, expected %s" % (list(actual.shape), list(expected.shape))
    if not numpy.all(numpy.isfinite(actual)):
        return False, "%d values are not finite" % numpy.sum(~numpy.isfinite(actual))
    scale = max(1.0, float(numpy.max(numpy.abs(expected))))
    error = float(numpy.max(numpy.abs(actual - expected))) if actual.size else 0.0
    bound = tol * scale
    where = numpy.unravel_index(numpy.argmax(numpy.abs(actual - expected)), actual.shape) \
        if actual.size else ()
    text = "max abs error %.3g at %s (%.9g vs %.9g), bound %.3g = %g x max(1, %.4g)" % (
        error, list(map(int, where)), actual[where] if actual.size else 0,
        expected[where] if actual.size else 0, bound, tol, scale)
    return error <= bound, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("expected")
    parser.add_argument("actual")
    parser.add_argument("--tol", type=float, default=DEFAULT_TOL)
    args = parser.parse_args()
    try:
        expected, actual = load(args.expected), load(args.actual)
    except (OSError, ValueError) as e:
        print("compare: %s" % e)
        return 1
    ok, text = compare(expected, actual, args.tol)
    print(("agree: " if ok else "DIFFER: ") + text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
