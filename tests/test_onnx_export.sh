#!/bin/sh
# cuttle export: every built-in model, from a plain PyTorch state_dict (the
# PyTorch twin's, seeded, tests/onnx/export_case.py) to an .onnx file that
# the onnx checker accepts (export_check_M), whose initializers carry the
# state_dict's names (export_names_M), and that ONNX Runtime, cuttle predict
# on the file and cuttle predict on the checkpoint all run alike:
#   export_ort_M           ONNX Runtime on the file == PyTorch's logits
#   export_cuttle_onnx_M   cuttle predict --model M.onnx == ONNX Runtime
#   export_cuttle_weights_M cuttle predict --weights M.safetensors == ONNX Runtime
# each within max |a - b| <= 1e-5 * max(1, max |reference|)
# (tests/onnx/compare.py).  Then the options: --batch 2 (a fixed batch),
# --opset 17, --softmax (the file outputs probabilities).
# Skipped, with the reason, when /usr/bin/python3 (or $CUTTLE_PYTHON) cannot
# import torch, torchvision, onnx and numpy; the ONNX Runtime checks (and the
# comparisons against it) when node or ONNX Runtime is missing
# (scripts/setup-onnxruntime.sh); then cuttle's two predictions are compared
# with PyTorch's logits instead.
BUILD=${BUILD:-build}
python=${CUTTLE_PYTHON:-/usr/bin/python3}
cuttle="$BUILD/cuttle"
if ! command -v "$python" >/dev/null 2>&1 ||
        ! "$python" -c 'import torch, torchvision, onnx, numpy' 2>/dev/null; then
    echo "SKIP test_onnx_export: $python cannot import torch, torchvision, onnx and numpy" \
         "(apt-get install python3-torch python3-torchvision python3-onnx)"
    exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
SHAPE=3x32x32

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
if ! command -v node >/dev/null 2>&1; then
    ort=no
    echo "SKIP export_ort_*: no node (apt-get install nodejs npm); cuttle is compared with PyTorch"
elif [ -z "$ONNXRUNTIME_NODE_MODULES" ] && ! node -e 'require(process.argv[1])' \
        "$PWD/.deps/onnxruntime/node_modules/onnxruntime-node" >/dev/null 2>&1; then
    ort=no
    echo "SKIP export_ort_*: ONNX Runtime is not in .deps/onnxruntime" \
         "(scripts/setup-onnxruntime.sh); cuttle is compared with PyTorch"
fi

models="simplecnn lenet5 vgg8_bn vgg11 vgg11_bn vgg16 vgg16_bn resnet18 resnet34 resnet50"
specs=""
for m in $models; do specs="$specs $m:$SHAPE"; done
if ! "$python" tests/onnx/export_case.py make "$dir" $specs > "$dir/make.log" 2>&1; then
    result export_torch_twins 1 "$dir/make.log"
    exit 1
fi

# export_one NAME LABEL OPTIONS...: export, check, names; then the
# predictions (the reference is ONNX Runtime's output, PyTorch's without it).
# EXPECTED (the PyTorch file the ONNX Runtime run is held to) defaults to
# NAME.expected.npy.
export_one() {
    name=$1 label=$2
    shift 2
    onnx="$dir/$label.onnx"
    "$cuttle" export --weights "$dir/$name.safetensors" --model "$name" --input "$SHAPE" \
        --classes 10 --onnx "$onnx" "$@" > "$dir/why" 2>&1
    result "export_$label" $? "$dir/why"
    [ -s "$onnx" ] || return
    "$python" tests/onnx/check.py "$onnx" > "$dir/why" 2>&1
    result "export_check_$label" $? "$dir/why"
    "$python" tests/onnx/export_case.py names "$onnx" "$dir/$name.safetensors" > "$dir/why" 2>&1
    result "export_names_$label" $? "$dir/why"
    reference="$dir/${EXPECTED:-$name.expected.npy}"
    if [ "$ort" = yes ]; then
        node tests/onnx/ort_run.js "$onnx" "$dir/$name.input.npy" "$dir/$label.ort.npy" \
            --threads 2 > "$dir/why" 2>&1 &&
            "$python" tests/onnx/compare.py "$reference" "$dir/$label.ort.npy" >> "$dir/why" 2>&1
        result "export_ort_$label" $? "$dir/why"
        reference="$dir/$label.ort.npy"
    fi
    "$cuttle" predict --model "$onnx" --json --top 1 "$dir/$name.input.npy" \
        > "$dir/$label.onnx.json" 2> "$dir/why" &&
        "$python" tests/onnx/compare.py "$reference" "$dir/$label.onnx.json" >> "$dir/why" 2>&1
    result "export_cuttle_onnx_$label" $? "$dir/why"
}

for m in $models; do
    export_one "$m" "$m"
    # the checkpoint itself (no --softmax: the model's logits)
    reference="$dir/$m.expected.npy"
    [ "$ort" = yes ] && [ -s "$dir/$m.ort.npy" ] && reference="$dir/$m.ort.npy"
    "$cuttle" predict --weights "$dir/$m.safetensors" --model "$m" --input "$SHAPE" \
        --classes 10 --json --top 1 "$dir/$m.input.npy" > "$dir/$m.weights.json" 2> "$dir/why" &&
        "$python" tests/onnx/compare.py "$reference" "$dir/$m.weights.json" >> "$dir/why" 2>&1
    result "export_cuttle_weights_$m" $? "$dir/why"
done

# the options: each file says what was asked
props() { # label, property=value...
    label=$1
    shift
    [ -s "$dir/$label.onnx" ] || return
    "$python" tests/onnx/export_case.py props "$dir/$label.onnx" "$@" > "$dir/why" 2>&1
    result "export_props_$label" $? "$dir/why"
}
props simplecnn batch=dynamic softmax=no
export_one simplecnn simplecnn_batch2 --batch 2
props simplecnn_batch2 batch=2
export_one resnet18 resnet18_opset17 --opset 17
props resnet18_opset17 opset=17 batch=dynamic
EXPECTED=simplecnn.softmax.npy
export_one simplecnn simplecnn_softmax --softmax
EXPECTED=
props simplecnn_softmax softmax=yes
exit $failed
