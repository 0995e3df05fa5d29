# The start that the ONNX test scripts share (sourced, with $NAME set to the
# script's name): $python and $cuttle; exit 0 with a SKIP line when python
# cannot import torch, torchvision, onnx and numpy; $dir, a temporary
# directory removed on exit; result NAME STATUS FILE, which prints PASS or
# FAIL (then FILE, indented, on stderr) and sets failed=1; ort=yes when node
# and ONNX Runtime (scripts/setup-onnxruntime.sh) are there, else ort=no and
# $why_no_ort.
BUILD=${BUILD:-build}
python=${CUTTLE_PYTHON:-/usr/bin/python3}
cuttle="$BUILD/cuttle"
if ! command -v "$python" >/dev/null 2>&1 ||
        ! "$python" -c 'import torch, torchvision, onnx, numpy' 2>/dev/null; then
    echo "SKIP $NAME: $python cannot import torch, torchvision, onnx and numpy" \
         "(apt-get install python3-torch python3-torchvision python3-onnx)"
    exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0

result() { # name, status, file with the reason
    if [ "$2" -eq 0 ]; then
        echo "PASS $1"
    else
        echo "FAIL $1"
        failed=1
        [ -s "$3" ] && sed "s/^/  $1: /" "$3" >&2
    fi
}

ort=yes
why_no_ort=""
if ! command -v node >/dev/null 2>&1; then
    ort=no why_no_ort="no node (apt-get install nodejs npm)"
elif [ -z "$ONNXRUNTIME_NODE_MODULES" ] && ! node -e 'require(process.argv[1])' \
        "$PWD/.deps/onnxruntime/node_modules/onnxruntime-node" >/dev/null 2>&1; then
    ort=no why_no_ort="ONNX Runtime is not in .deps/onnxruntime (run scripts/setup-onnxruntime.sh)"
fi
