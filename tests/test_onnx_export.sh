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
# --opset 17, --softmax (the file outputs probabilities); and small model
# files with the ops and options that no built-in model has (export_probe_*).
# Skipped, with the reason, when /usr/bin/python3 (or $CUTTLE_PYTHON) cannot
# import torch, torchvision, onnx and numpy; the ONNX Runtime checks (and the
# comparisons against it) when node or ONNX Runtime is missing
# (scripts/setup-onnxruntime.sh); then cuttle's two predictions are compared
# with PyTorch's logits instead.
NAME=test_onnx_export
. tests/onnx/common.sh
SHAPE=3x32x32
[ "$ort" = yes ] || echo "SKIP export_ort_*: $why_no_ort; cuttle is compared with PyTorch"

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

# Ops and options that no built-in model has, in small model files
# (3x16x16, random weights): exported, checked, and the same predictions
# from the checkpoint, from the file, and from ONNX Runtime on the file.
cat > "$dir/probes" <<'EOF'
sigmoid|sigmoid
avgpool_pad|avgpool 3 stride=2 pad=1
avgpool_exclude_pad|avgpool 3 stride=2 pad=1 count_include_pad=false
maxpool_pad|maxpool 3 stride=2 pad=1
conv_dilated|c2: conv 4 3 dilation=2 pad=2
conv_grouped|c2: conv 6 3 groups=3 pad=1
conv_rect|c2: conv 4 (1, 3) stride=(2, 1) pad=(0, 1) bias=false
conv_bn|c2: conv 4 3 pad=1 bias=false; bn2: bn; relu
EOF
probe() { # label, layers: the steps of the probe, each appending to $dir/why
    base="$dir/probe_$1"
    printf 'model %s\nc1: conv 3 3 pad=1\n%s\nflatten\nfc: linear classes\n' "$1" "$2" \
        > "$base.model"
    "$cuttle" bench --model "$base.model" --input 3x16x16 --classes 4 --param-shapes \
        > "$base.shapes.json" 2> "$dir/why" || return
    "$python" tests/onnx/export_case.py random "$base.shapes.json" "$base.safetensors" \
        "$base.input.npy" 3x16x16 >> "$dir/why" 2>&1 || return
    "$cuttle" export --weights "$base.safetensors" --model "$base.model" --input 3x16x16 \
        --classes 4 --onnx "$base.onnx" >> "$dir/why" 2>&1 || return
    "$python" tests/onnx/check.py "$base.onnx" >> "$dir/why" 2>&1 || return
    "$cuttle" predict --weights "$base.safetensors" --model "$base.model" --input 3x16x16 \
        --classes 4 --json --top 1 "$base.input.npy" > "$base.weights.json" 2>> "$dir/why" ||
        return
    "$cuttle" predict --model "$base.onnx" --json --top 1 "$base.input.npy" \
        > "$base.onnx.json" 2>> "$dir/why" || return
    "$python" tests/onnx/compare.py "$base.weights.json" "$base.onnx.json" >> "$dir/why" 2>&1 ||
        return
    [ "$ort" = yes ] || return 0
    node tests/onnx/ort_run.js "$base.onnx" "$base.input.npy" "$base.ort.npy" --threads 2 \
        >> "$dir/why" 2>&1 || return
    "$python" tests/onnx/compare.py "$base.ort.npy" "$base.weights.json" >> "$dir/why" 2>&1
}
while IFS='|' read -r label layers <&3; do # fd 3: the commands may read stdin
    probe "$label" "$layers"
    result "export_probe_$label" $? "$dir/why"
done 3< "$dir/probes"
exit $failed
