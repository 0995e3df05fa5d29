#!/bin/sh
# The Python package (python/, docs/python.md) from this build: pytest runs
# python/tests with the package on PYTHONPATH and CUTTLE_LIBRARY naming
# $BUILD/libcuttle.so, and each test's outcome becomes a PASS or FAIL line
# (python_<test name without test_>); pytest's own output goes to stderr.
# Without pytest or NumPy it says so and passes nothing; the PyTorch tests
# skip themselves without torch.  Then `make install-python` into a
# temporary folder: the installed package must load the library it carries.
BUILD=${BUILD:-build}
PYTHON=/usr/bin/python3
if ! "$PYTHON" -c "import pytest, numpy" 2>/dev/null; then
    echo "# skipped: $PYTHON cannot import pytest and numpy (apt-get install python3-pytest python3-numpy)"
    exit 0
fi
log=$(mktemp)
site=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$site"' EXIT
BUILD="$BUILD" CUTTLE_LIBRARY="$(pwd)/$BUILD/libcuttle.so" PYTHONPATH="$(pwd)/python" \
    PYTHONDONTWRITEBYTECODE=1 \
    "$PYTHON" -m pytest -v -p no:cacheprovider -p no:hypothesispytest --rootdir python \
    python/tests > "$log" 2>&1
status=$?
cat "$log" >&2
# "python/tests/test_x.py::test_name[param] PASSED  [ 10%]" -> "PASS python_name_param"
awk -v status="$status" '$1 ~ /::/ && ($2 == "PASSED" || $2 == "FAILED" || $2 == "ERROR" || $2 == "SKIPPED") {
    name = $1; sub(/.*::(test_)?/, "", name); gsub(/[][]/, "_", name); sub(/_$/, "", name)
    if ($2 == "PASSED") print "PASS python_" name
    else if ($2 == "SKIPPED") print "# skipped: python_" name
    else { print "FAIL python_" name; failed = 1 }
}
END { if (status != 0 && !failed) print "FAIL python_pytest (exit status " status ": see its output)" }' "$log"

if ! "$PYTHON" -m pip --version > /dev/null 2>&1; then
    echo "# skipped: python_install_python ($PYTHON has no pip: apt-get install python3-pip)"
    exit "$status"
fi
make -s --no-print-directory BUILD="$BUILD" PYTHON="$PYTHON" \
    PIP_FLAGS="--quiet --no-deps --target $site" install-python > "$log" 2>&1 &&
    (cd / && env -u CUTTLE_LIBRARY PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -c "
import os, numpy, cuttle
assert cuttle._lib.lib._name == os.path.join('$site', 'cuttle', 'libcuttle.so'), cuttle._lib.lib._name
assert cuttle.Model().predict(numpy.zeros((2, 1, 28, 28), numpy.float32)).shape == (2, 10)
") >> "$log" 2>&1
install_status=$?
[ "$install_status" -eq 0 ] || cat "$log" >&2
if [ "$install_status" -eq 0 ]; then echo "PASS python_install_python"; else echo "FAIL python_install_python"; fi
[ "$status" -eq 0 ] && [ "$install_status" -eq 0 ]
