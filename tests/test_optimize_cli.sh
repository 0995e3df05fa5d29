#!/bin/sh
# cuttle optimize, and the optimization predict and bench apply by default
# (docs/optimize.md).  From the PyTorch twins' state_dicts (random
# batchnorm statistics, tests/onnx/export_case.py):
#   optimize_M            cuttle optimize writes DIR/model.onnx and reports
#                         the batchnorms it folded (vgg8_bn 6, resnet18 20)
#   optimize_check_M      the onnx checker accepts the file; its initializers
#                         are the state_dict's names less the folded layers'
#   optimize_ort_M        ONNX Runtime on the optimized file == PyTorch
#   optimize_predict_M    cuttle predict on the optimized file == PyTorch
# each within max |a - b| <= 1e-5 * max(1, max |reference|)
# (tests/onnx/compare.py); predict --no-optimize == PyTorch too; bench
# says what it optimized, and not with --no-optimize; an ONNX model
# optimizes; bad input (no -o, a missing checkpoint, -o naming a file) is
# refused with the reason and writes nothing.  Skipped like
# tests/test_onnx_export.sh without torch, onnx and numpy; the ONNX Runtime
# checks without node and ONNX Runtime.
NAME=test_optimize_cli
. tests/onnx/common.sh
SHAPE=3x32x32
[ "$ort" = yes ] || echo "SKIP optimize_ort_*: $why_no_ort"

if ! "$python" tests/onnx/export_case.py make "$dir" simplecnn:$SHAPE vgg8_bn:$SHAPE \
        resnet18:$SHAPE > "$dir/make.log" 2>&1; then
    result optimize_torch_twins 1 "$dir/make.log"
    exit 1
fi

for spec in simplecnn:0 vgg8_bn:6 resnet18:20; do
    m=${spec%:*} folds=${spec#*:}
    out="$dir/opt_$m"
    "$cuttle" optimize --weights "$dir/$m.safetensors" --model "$m" --input "$SHAPE" \
        --classes 10 -o "$out" > "$dir/$m.report" 2> "$dir/why" &&
        grep -q "batchnorms folded   $folds " "$dir/$m.report" ||
        { cat "$dir/$m.report" >> "$dir/why"; false; }
    result "optimize_$m" $? "$dir/why"
    [ -s "$out/model.onnx" ] || continue
    "$python" tests/onnx/check.py "$out/model.onnx" > "$dir/why" 2>&1 &&
        "$python" tests/onnx/export_case.py names "$out/model.onnx" "$dir/$m.safetensors" \
            >> "$dir/why" 2>&1
    result "optimize_check_$m" $? "$dir/why"
    if [ "$ort" = yes ]; then
        node tests/onnx/ort_run.js "$out/model.onnx" "$dir/$m.input.npy" "$dir/$m.ort.npy" \
            --threads 2 > "$dir/why" 2>&1 &&
            "$python" tests/onnx/compare.py "$dir/$m.expected.npy" "$dir/$m.ort.npy" \
                >> "$dir/why" 2>&1
        result "optimize_ort_$m" $? "$dir/why"
    fi
    "$cuttle" predict --model "$out/model.onnx" --json --top 1 "$dir/$m.input.npy" \
        > "$dir/$m.json" 2> "$dir/why" &&
        "$python" tests/onnx/compare.py "$dir/$m.expected.npy" "$dir/$m.json" >> "$dir/why" 2>&1
    result "optimize_predict_$m" $? "$dir/why"
done

# predict runs the model as built with --no-optimize, and agrees
"$cuttle" predict --weights "$dir/vgg8_bn.safetensors" --model vgg8_bn --input "$SHAPE" \
    --classes 10 --json --top 1 --no-optimize "$dir/vgg8_bn.input.npy" > "$dir/noopt.json" \
    2> "$dir/why" &&
    "$python" tests/onnx/compare.py "$dir/vgg8_bn.expected.npy" "$dir/noopt.json" >> "$dir/why" 2>&1
result optimize_predict_no_optimize $? "$dir/why"

# bench in infer mode says what it optimized; --no-optimize runs the graph as built
"$cuttle" bench --model vgg8_bn --mode infer --batch 2 --steps 2 --warmup 1 > "$dir/bench" \
    2> "$dir/why" && grep -q "optimized for inference: 6 batchnorm(s) folded, 2 dropout(s)" \
    "$dir/bench" || cat "$dir/bench" >> "$dir/why"
result optimize_bench_reports $? "$dir/why"
"$cuttle" bench --model vgg8_bn --mode infer --batch 2 --steps 2 --warmup 1 --no-optimize \
    --json > "$dir/bench.json" 2> "$dir/why" &&
    "$python" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r["optimized"] is not None)' \
        "$dir/bench.json" >> "$dir/why" 2>&1 || cat "$dir/bench.json" >> "$dir/why"
result optimize_bench_no_optimize $? "$dir/why"

# an ONNX file optimizes too (the exported vgg8_bn still has its batchnorms)
"$cuttle" export --weights "$dir/vgg8_bn.safetensors" --model vgg8_bn --input "$SHAPE" \
    --classes 10 --onnx "$dir/vgg8_bn.onnx" > "$dir/why" 2>&1 &&
    "$cuttle" optimize --model "$dir/vgg8_bn.onnx" -o "$dir/opt_onnx" --json \
        > "$dir/onnx.json" 2>> "$dir/why" &&
    "$python" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(not (r["folded"] == 6 and r["max_relative_error"] <= 1e-5))' \
        "$dir/onnx.json" >> "$dir/why" 2>&1 || cat "$dir/onnx.json" >> "$dir/why"
result optimize_onnx_model $? "$dir/why"

# bad input: the reason, exit 2 (usage) or 1, and nothing written
"$cuttle" optimize --weights "$dir/vgg8_bn.safetensors" > /dev/null 2> "$dir/err"
status=$?
[ "$status" -eq 2 ] && grep -q -- "-o DIR are required" "$dir/err"
result optimize_refuses_no_out $? "$dir/err"
"$cuttle" optimize --weights "$dir/missing.safetensors" -o "$dir/never" > /dev/null 2> "$dir/err"
status=$?
[ "$status" -ne 0 ] && grep -q "missing.safetensors" "$dir/err" && [ ! -e "$dir/never" ]
result optimize_refuses_missing_weights $? "$dir/err"
: > "$dir/a_file"
"$cuttle" optimize --weights "$dir/vgg8_bn.safetensors" --model vgg8_bn --input "$SHAPE" \
    --classes 10 -o "$dir/a_file" > /dev/null 2> "$dir/err"
status=$?
[ "$status" -eq 1 ] && grep -q "not a directory" "$dir/err" && [ ! -s "$dir/a_file" ]
result optimize_refuses_file_as_dir $? "$dir/err"
exit $failed
