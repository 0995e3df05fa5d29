#!/bin/sh
# --precision on the command line, as a user runs it (CPU build): SimpleCNN
# trained on a slice of Fashion-MNIST in bf16 and fp16 (the CPU's rounding
# reference) ends near the fp32 run's loss and accuracy, fp16 logging its
# loss scale (in metrics.jsonl too) and resuming with it exactly, and eval takes
# --precision too; an unknown name lists the choices; tf32 on the CPU says
# why not and what to use.  On CUDA see tests/gpu_cli.sh.  PASS/FAIL lines.
NAME=precision_cli TRAIN=6400 TEST=1000
. tests/fashion_cli.sh

for precision in fp32 bf16 fp16; do
    "$cuttle" train --data-dir "$tmp/data" --epochs 3 --precision "$precision" \
        --out "$tmp/$precision" > "$tmp/train-$precision.out" 2> "$tmp/train-$precision.err"
    echo $? > "$tmp/$precision.status"
done
ok=0
for precision in fp32 bf16 fp16; do
    [ "$(cat "$tmp/$precision.status")" -eq 0 ] || ok=1
done
grep -q "precision bf16" "$tmp/train-bf16.out" || ok=1
grep -q "fp16 loss scale" "$tmp/train-fp16.out" || ok=1
[ "$ok" -eq 0 ] && "$python" - "$tmp" <<'PY'
import json, sys
last = {p: json.loads(open(f"{sys.argv[1]}/{p}/metrics.jsonl").read().splitlines()[-1])
        for p in ("fp32", "bf16", "fp16")}
for p, m in last.items():
    print(f"# {p}: train loss {m['train_loss']:.4f}, test accuracy {m['test_accuracy']:.4f}")
# fp16 scales its loss: the scale and the skipped steps in its metrics only
assert last["fp16"]["loss_scale"] > 0 and last["fp16"]["skipped_steps"] >= 0, last["fp16"]
assert "loss_scale" not in last["bf16"] and "loss_scale" not in last["fp32"]
print(f"# fp16 loss scale {last['fp16']['loss_scale']:g}, {last['fp16']['skipped_steps']} skipped")
for p in ("bf16", "fp16"):
    assert abs(last[p]["train_loss"] - last["fp32"]["train_loss"]) <= 0.05 + 0.1 * last["fp32"]["train_loss"], p
    assert abs(last[p]["test_accuracy"] - last["fp32"]["test_accuracy"]) <= 0.04, p
PY
ok=$((ok + $?))
result train_bf16_fp16_track_fp32 "$ok" "$tmp/train-bf16.err" "$tmp/train-fp16.err"

# fp16 resumed after epoch 1 (whose two skipped steps left the scale at
# 16384) goes on with the saved scaler state: its weights, optimizer state,
# scale and skipped steps equal the uninterrupted run's bit for bit.
"$cuttle" train --data-dir "$tmp/data" --epochs 3 --precision fp16 --stop-after 1 \
    --out "$tmp/fp16-resumed" > "$tmp/resume.out" 2> "$tmp/resume.err" &&
    "$python" - "$tmp/fp16-resumed/state.safetensors" >> "$tmp/resume.err" 2>&1 <<'PY' &&
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
print(f"saved after epoch 1: scale {meta['loss_scale']}, clean {meta['loss_scale_clean_steps']},"
      f" skipped {meta['loss_scale_skipped_steps']}")
assert float(meta["loss_scale"]) < 65536 and int(meta["loss_scale_skipped_steps"]) > 0, meta
PY
    "$cuttle" train --resume "$tmp/fp16-resumed" --data-dir "$tmp/data" \
        >> "$tmp/resume.out" 2>> "$tmp/resume.err" &&
    "$python" tests/safetensors_diff.py "$tmp/fp16/state.safetensors" \
        "$tmp/fp16-resumed/state.safetensors" 0 >> "$tmp/resume.err" 2>&1 &&
    [ "$(tail -n 1 "$tmp/fp16/metrics.jsonl" | sed 's/.*"loss_scale"//')" = \
      "$(tail -n 1 "$tmp/fp16-resumed/metrics.jsonl" | sed 's/.*"loss_scale"//')" ]
result fp16_resume_keeps_the_loss_scale "$?" "$tmp/resume.err"

"$cuttle" eval --weights "$tmp/fp32/model.safetensors" --data-dir "$tmp/data" \
    --precision bf16 --json > "$tmp/eval.json" 2> "$tmp/eval.err"
status=$?
[ "$status" -eq 0 ] && "$python" -c "
import json, sys
a = json.load(open('$tmp/eval.json'))['accuracy']
b = [json.loads(l) for l in open('$tmp/fp32/metrics.jsonl')][-1]['test_accuracy']
sys.exit(abs(a - b) > 0.02)"
result eval_bf16_weights_from_fp32 "$?" "$tmp/eval.err"

"$cuttle" bench --precision half > "$tmp/bad.out" 2> "$tmp/bad.err"
status=$?
[ "$status" -eq 2 ] && grep -q "fp32 tf32 bf16 fp16" "$tmp/bad.err"
result unknown_precision_lists_choices "$?" "$tmp/bad.err"

"$cuttle" bench --precision tf32 --steps 1 > "$tmp/tf32.out" 2> "$tmp/tf32.err"
status=$?
[ "$status" -ne 0 ] && grep -q "TF32 is a GPU" "$tmp/tf32.err" && grep -q "use fp32" "$tmp/tf32.err"
result tf32_on_cpu_says_why "$?" "$tmp/tf32.err"

# A diverging run stops at the step whose loss is not finite and names the
# first op of that step that produced an inf or NaN (the step updated
# nothing, so it ran again, checked node by node).
"$python" tests/fashion_slice.py "$fashion" "$tmp/data" 640 100
"$cuttle" train --data-dir "$tmp/data" --epochs 2 --lr 10 --momentum 0.99 --out "$tmp/nan" \
    > "$tmp/nan.out" 2> "$tmp/nan.err"
status=$?
[ "$status" -eq 1 ] && grep -q "the loss is .* at step [0-9]*: training diverged; the first inf or NaN of that step: %[0-9]* (.*) \[.*\] (f32)" "$tmp/nan.err"
result nan_loss_names_the_first_op "$?" "$tmp/nan.err"

# With --check-numerics the same run stops at the first op whose output
# holds an inf or NaN, naming the step, the node and its op, and the layer.
"$cuttle" train --data-dir "$tmp/data" --epochs 2 --lr 10 --momentum 0.99 --check-numerics \
    --out "$tmp/checked" > "$tmp/checked.out" 2> "$tmp/checked.err"
status=$?
[ "$status" -eq 1 ] && grep -q "check-numerics stopped training at step [0-9]* (training, [a-z]* pass): node %[0-9]* ([a-z0-9_]*) \[.*\] (f32) made the step's first non-finite value: -*[infa]* at \[[0-9,]*\] .*; layer '[a-z0-9_.]*' (.*'[a-z0-9_.]*')" "$tmp/checked.err"
result check_numerics_names_op_node_layer_step "$?" "$tmp/checked.err"
