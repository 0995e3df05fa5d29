#!/bin/sh
# Installs ONNX Runtime for the ONNX tests and benchmarks, without root:
# the npm package onnxruntime-node (it ships libonnxruntime.so for the CPU
# and its node binding) into .deps/onnxruntime/ (gitignored), run by
# tests/onnx/ort_run.js.  Skips when it is already there.  Without node,
# npm or the network it says so and exits 0, leaving no folder: the tests
# that need ONNX Runtime then skip themselves, saying so.  node and npm are
# Debian's nodejs and npm (scripts/setup-debian.sh --torch installs them).
#   scripts/setup-onnxruntime.sh        # idempotent
# --ignore-scripts: the package's post-install step only downloads the CUDA
# and TensorRT providers, which the CPU tests do not use.
VERSION=1.30.0
cd "$(dirname "$0")/.." || exit 1
dir=.deps/onnxruntime
module="$dir/node_modules/onnxruntime-node"
if [ -f "$module/package.json" ] && command -v node >/dev/null 2>&1 &&
        (cd "$dir" && node -e 'require("onnxruntime-node")') >/dev/null 2>&1; then
    version=$(node -p "require('./$module/package.json').version")
    echo "setup-onnxruntime: onnxruntime-node $version already in $dir"
    exit 0
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "setup-onnxruntime: no $tool (apt-get install nodejs npm, or" \
             "scripts/setup-debian.sh --torch); the ONNX Runtime tests will skip"
        exit 0
    fi
done
rm -rf "$dir"
mkdir -p "$dir"
echo '{"name": "cuttle-onnxruntime", "private": true}' > "$dir/package.json"
echo "setup-onnxruntime: npm install onnxruntime-node@$VERSION into $dir"
if ! (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
        "onnxruntime-node@$VERSION") >&2 ||
        ! (cd "$dir" && node -e 'require("onnxruntime-node")') >&2; then
    rm -rf "$dir"
    rmdir .deps 2>/dev/null
    echo "setup-onnxruntime: could not install onnxruntime-node (no network or registry?);" \
         "the ONNX Runtime tests will skip"
    exit 0
fi
echo "setup-onnxruntime: onnxruntime-node $VERSION installed in $dir"
