#!/bin/sh
# cuttle quantize as a user runs it: SimpleCNN trained for one epoch on a
# slice of Fashion-MNIST, then quantized with each calibration method: the
# per-layer table (conv2 int8; conv1, shallow, and fc3 kept f32 and said so), int8 accuracy
# within 2 points of f32 on the slice's test images, nothing written without
# -o; and what it refuses (an unknown method, more calibration images than the
# split holds, no --calib), each with a message and exit status 2.
# The int8 file (-o DIR): eval (at quantize's batch and at its own) and
# predict on DIR/model.safetensors give the int8 accuracy quantize reported
# (--device auto takes the CPU for it);
# bench and profile --weights run it (infer mode only); --precision,
# --no-optimize and --mode train are refused with exit status 2; a corrupt
# file (NaN scale, zero input scale, a zero point missing, truncated) is
# refused with exit status 1 and a message naming the problem.  cuttle
# export writes it in QDQ form: the onnx checker accepts it (skipped without
# python3-onnx) and ONNX Runtime's logits on it agree with cuttle's within
# tests/quantize_check.py's bounds (skipped without node and ONNX Runtime,
# scripts/setup-onnxruntime.sh).  PASS/FAIL lines.
NAME=quantize_cli TRAIN=1280 TEST=500
. tests/fashion_cli.sh
"$cuttle" train --data-dir "$tmp/data" --epochs 1 --out "$tmp/run" > "$tmp/train.out" 2>&1
weights="$tmp/run/model.safetensors"
result quantize_cli_trains $? "$tmp/train.out"

for method in minmax percentile entropy; do
    "$cuttle" quantize --weights "$weights" --calib fashion-mnist --data-dir "$tmp/data" \
        --calib-batches 4 --method "$method" --threads 1 > "$tmp/$method.out" 2>&1
    ok=$?
    grep -q "^  conv1 *f32 .*shallow" "$tmp/$method.out" || ok=1
    grep -q "^  conv2 *yes" "$tmp/$method.out" || ok=1
    grep -q "^  fc3 *f32 .*the last layer (the classifier) stays f32" "$tmp/$method.out" || ok=1
    grep -q "nothing written" "$tmp/$method.out" || ok=1
    grep -q "$method calibration" "$tmp/$method.out" || ok=1
    [ "$ok" -eq 0 ] && "$python" - "$tmp/$method.out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
f32, int8 = map(float, re.search(r"f32 ([0-9.]+)%, int8 ([0-9.]+)%", text).groups())
rows = re.findall(r"^  (\S+) +yes .* ([0-9.]+)(  \(writes u8\))?$", text, re.M)
sqnr = [float(r[1]) for r in rows]
assert abs(f32 - int8) <= 2.0, (f32, int8)
assert f32 > 30, f32  # one epoch on 1280 images: far above chance (10 %)
assert len(sqnr) == 3 and min(sqnr) > 20, sqnr
# conv2 -> relu -> pool -> flatten -> fc1 -> relu -> fc2: u8 between them;
# fc2 feeds the f32 classifier
assert [r[0] for r in rows if r[2]] == ["conv2", "fc1"], rows
assert "2 of 3 int8 layers write u8" in text, text
PY
    result "quantize_cli_$method" $? "$tmp/$method.out"
done

refused() { # name, expected text, arguments...
    name=$1
    text=$2
    shift 2
    "$cuttle" quantize "$@" > "$tmp/$name.out" 2>&1
    status=$?
    ok=0
    [ "$status" -eq 2 ] || ok=1
    grep -q "$text" "$tmp/$name.out" || ok=1
    [ ! -e "$tmp/out" ] || ok=1
    result "quantize_cli_refuses_$name" $ok "$tmp/$name.out"
}
calib="--calib fashion-mnist --data-dir $tmp/data"
refused method "choose one of: minmax percentile entropy" --weights "$weights" $calib --method kl
refused too_many "fewer than --calib-batches 100" --weights "$weights" $calib --calib-batches 100
refused no_calib "are required" --weights "$weights"

# ---- the int8 file ----------------------------------------------------------------
int8="$tmp/int8/model.safetensors"
"$cuttle" quantize --weights "$weights" $calib --calib-batches 4 --threads 1 -o "$tmp/int8" \
    > "$tmp/save.out" 2>&1
ok=$?
grep -q "saved the int8 model to $int8 (3 int8 layers, 2 f32)" "$tmp/save.out" || ok=1
[ -s "$int8" ] || ok=1
result quantize_cli_saves $ok "$tmp/save.out"
reported=$(sed -n 's/.*, int8 \([0-9.]*%\).*/\1/p' "$tmp/save.out")

for batch in 64 500; do
    "$cuttle" eval --weights "$int8" --data-dir "$tmp/data" --batch "$batch" --threads 1 \
        > "$tmp/eval$batch.out" 2>&1
    ok=$?
    grep -q "accuracy $reported " "$tmp/eval$batch.out" || ok=1
    grep -q "int8 model (percentile calibration): 3 of 5" "$tmp/eval$batch.out" || ok=1
    echo "quantize reported $reported" >> "$tmp/eval$batch.out"
    result "quantize_cli_eval_int8_batch$batch" $ok "$tmp/eval$batch.out"
done

"$cuttle" eval --weights "$int8" --data-dir "$tmp/data" --device auto --threads 1 \
    > "$tmp/auto.out" 2>&1 &&
    grep -q "device auto: cpu .*(an int8 model: its int8 kernels run on the CPU)" "$tmp/auto.out"
result quantize_cli_int8_auto_is_cpu $? "$tmp/auto.out"

"$cuttle" predict --weights "$int8" --data-dir "$tmp/data" --json --top 1 --threads 1 \
    "fashion-mnist:test:0-$((TEST - 1))" > "$tmp/predict.json" 2> "$tmp/predict.err"
ok=$?
predicted=$("$python" tests/quantize_check.py accuracy "$tmp/predict.json" 2>> "$tmp/predict.err")
[ "$predicted" = "$reported" ] || ok=1
echo "predict: $predicted, quantize reported $reported" >> "$tmp/predict.err"
result quantize_cli_predict_int8 $ok "$tmp/predict.err"

"$cuttle" bench --weights "$int8" --mode infer --steps 3 --warmup 1 --threads 1 \
    > "$tmp/bench.out" 2>&1 &&
    grep -q "bench simplecnn infer, batch 64, input 1x28x28, 10 classes" "$tmp/bench.out" &&
    grep -q "int8 model (percentile calibration): 3 of 5 conv and linear layers int8" \
        "$tmp/bench.out" &&
    "$cuttle" profile --weights "$int8" --mode infer --steps 2 --threads 1 \
        > "$tmp/profile.out" 2>&1 && grep -q "qconv2d" "$tmp/profile.out"
result quantize_cli_bench_int8 $? "$tmp/bench.out" "$tmp/profile.out"

refused_int8() { # name, exit status, expected text, command and arguments...
    name=$1
    want=$2
    text=$3
    shift 3
    "$cuttle" "$@" > "$tmp/$name.out" 2>&1
    status=$?
    ok=0
    [ "$status" -eq "$want" ] || ok=1
    grep -q "$text" "$tmp/$name.out" || ok=1
    echo "exit status $status (expected $want)" >> "$tmp/$name.out"
    result "quantize_cli_int8_refuses_$name" $ok "$tmp/$name.out"
}
refused_int8 train_mode 2 "runs inference only: give --mode infer" bench --weights "$int8"
refused_int8 precision 2 "leave --precision out" eval --weights "$int8" --data-dir "$tmp/data" \
    --precision bf16
refused_int8 no_optimize 2 "built from the optimized graph" predict --weights "$int8" \
    --data-dir "$tmp/data" --no-optimize "fashion-mnist:test:0"
for how in nan_scale zero_input_scale drop_zero_point truncate; do
    "$python" tests/quantize_check.py break "$int8" "$tmp/$how.safetensors" "$how"
done
refused_int8 nan_scale 1 "weight_scale' holds nan at 0: a scale must be finite and positive" \
    eval --weights "$tmp/nan_scale.safetensors" --data-dir "$tmp/data"
refused_int8 zero_input_scale 1 "fc2.input_scale' holds 0 at 0" \
    predict --weights "$tmp/zero_input_scale.safetensors" "fashion-mnist:test:0" --data-dir "$tmp/data"
refused_int8 missing 1 "missing: 'conv2.input_zero_point' (u8)" \
    bench --weights "$tmp/drop_zero_point.safetensors" --mode infer --steps 1
refused_int8 truncated 1 "truncated" eval --weights "$tmp/truncate.safetensors" --data-dir "$tmp/data"

# ---- the QDQ export ------------------------------------------------------------------
"$cuttle" export --weights "$int8" --onnx "$tmp/int8.onnx" > "$tmp/export.out" 2>&1 &&
    grep -q "exported the int8 model of simplecnn" "$tmp/export.out"
result quantize_cli_export_qdq $? "$tmp/export.out"
if ! "$python" -c 'import onnx' 2>/dev/null; then
    echo "SKIP quantize_cli_qdq_check: $python cannot import onnx (apt-get install python3-onnx)"
else
    "$python" tests/onnx/check.py --ops "$tmp/int8.onnx" > "$tmp/check.out" 2>&1 &&
        grep -q "QuantizeLinear (3)" "$tmp/check.out" &&
        grep -q "DequantizeLinear (6):  | axis=0" "$tmp/check.out"
    result quantize_cli_qdq_check $? "$tmp/check.out"
fi
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP quantize_cli_qdq_ort: no node (apt-get install nodejs npm)"
elif [ -z "$ONNXRUNTIME_NODE_MODULES" ] && ! node -e 'require(process.argv[1])' \
        "$PWD/.deps/onnxruntime/node_modules/onnxruntime-node" >/dev/null 2>&1; then
    echo "SKIP quantize_cli_qdq_ort: ONNX Runtime is not in .deps/onnxruntime (run" \
         "scripts/setup-onnxruntime.sh)"
else
    "$python" tests/quantize_check.py input "$int8" "$tmp/data/t10k-images-idx3-ubyte" "$TEST" \
        "$tmp/input.npy" > "$tmp/qdq.out" 2>&1 &&
        node tests/onnx/ort_run.js "$tmp/int8.onnx" "$tmp/input.npy" "$tmp/ort.npy" \
            --threads 1 >> "$tmp/qdq.out" 2>&1 &&
        "$cuttle" predict --weights "$int8" --json --top 1 --threads 1 "$tmp/input.npy" \
            > "$tmp/qdq.json" 2>> "$tmp/qdq.out" &&
        "$python" tests/quantize_check.py qdq "$tmp/ort.npy" "$tmp/qdq.json" >> "$tmp/qdq.out" 2>&1
    status=$?
    sed 's/^/  /' "$tmp/qdq.out" | grep "agree\|DIFFER"
    result quantize_cli_qdq_ort $status "$tmp/qdq.out"
fi
