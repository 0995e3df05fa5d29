#!/bin/sh
# cuttle quantize as a user runs it: SimpleCNN trained for one epoch on a
# slice of Fashion-MNIST, then quantized with each calibration method: the
# per-layer table (conv2 int8; conv1, shallow, and fc3 kept f32 and said so), int8 accuracy
# within 2 points of f32 on the slice's test images, nothing written; and
# what it refuses (-o, an unknown method, more calibration images than the split
# holds, no --calib), each with a message and exit status 2.  PASS/FAIL lines.
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
sqnr = [float(v) for v in re.findall(r"^  \S+ +yes .* ([0-9.]+)$", text, re.M)]
assert abs(f32 - int8) <= 2.0, (f32, int8)
assert f32 > 30, f32  # one epoch on 1280 images: far above chance (10 %)
assert len(sqnr) == 3 and min(sqnr) > 20, sqnr
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
refused output "not implemented yet" --weights "$weights" $calib -o "$tmp/out"
refused method "choose one of: minmax percentile entropy" --weights "$weights" $calib --method kl
refused too_many "fewer than --calib-batches 100" --weights "$weights" $calib --calib-batches 100
refused no_calib "are required" --weights "$weights"
