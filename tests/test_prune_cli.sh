#!/bin/sh
# cuttle prune as a user runs it, on a slice of Fashion-MNIST
# (docs/pruning.md):
#   prune_cli_structured_M   simplecnn (--rank l1) and vgg8_bn (--rank bn),
#                            trained one epoch, lose half of every conv's
#                            channels and fine-tune one epoch: every conv
#                            weight has fewer output channels, the report
#                            lists them, cuttle eval gives the accuracy the
#                            report gave, bench runs model.model
#   prune_cli_torch_M        PyTorch's twin rebuilt at the pruned shapes loads
#                            model.safetensors with strict=True and its logits
#                            equal cuttle predict's within 1e-4
#   prune_cli_resnet18_*     the same for resnet18 (random weights of its
#                            PyTorch twin, no fine-tuning): the residual
#                            streams are pruned as tied sets
#   prune_cli_unstructured   70% of simplecnn's weights zeroed, one epoch of
#                            fine-tuning: still >= 70% zeros, and every zero
#                            of the unfine-tuned result is still 0
#   prune_cli_json           --json: the report as one JSON object
#   prune_cli_refuses_*      a ratio outside (0, 1), both or neither of
#                            --structured/--unstructured, --rank bn without
#                            batchnorm, missing or corrupt weights, a model
#                            with no prunable conv: a message, nothing written
# The slicing of each consumer is tested in tests/test_prune.c.
# Without numpy the script is skipped; without torch and torchvision, the
# PyTorch and resnet18 checks (SKIP lines).
NAME=prune_cli TRAIN=384 TEST=100
. tests/fashion_cli.sh
if ! "$python" -c 'import numpy' 2>/dev/null; then
    echo "SKIP $NAME: $python cannot import numpy"
    exit 0
fi
torch=yes
if ! "$python" -c 'import torch, torchvision' 2>/dev/null; then
    torch=no
    echo "SKIP prune_cli_torch_*, prune_cli_resnet18_*: $python cannot import torch and torchvision"
fi
failed=0
check() { # name, status, files
    [ "$2" -eq 0 ] || failed=1
    result "$@"
}
data="--data-dir $tmp/data --threads 2"
"$python" -c 'import numpy; numpy.random.seed(1); numpy.save("'"$tmp"'/in.npy", numpy.random.randn(2, 1, 28, 28).astype(numpy.float32))'

for spec in simplecnn:l1 vgg8_bn:bn; do
    m=${spec%:*} rank=${spec#*:}
    "$cuttle" train --model "$m" $data --epochs 1 --out "$tmp/run_$m" > "$tmp/train_$m" 2>&1
    check "prune_cli_trains_$m" $? "$tmp/train_$m"
    "$cuttle" prune --weights "$tmp/run_$m/model.safetensors" $data --structured 0.5 \
        --rank "$rank" --finetune 1 -o "$tmp/p_$m" > "$tmp/$m.out" 2>&1 &&
        "$python" tests/prune_check.py smaller "$tmp/run_$m/model.safetensors" \
            "$tmp/p_$m/model.safetensors" >> "$tmp/$m.out" 2>&1 &&
        grep -q "conv2  *16 -> 8 \|features.17  *128 -> 64 " "$tmp/$m.out" &&
        grep -q "after 1 epoch of fine-tuning" "$tmp/$m.out" &&
        "$cuttle" eval --weights "$tmp/p_$m/model.safetensors" $data > "$tmp/$m.eval" 2>&1 &&
        after=$(sed -n 's/.*, \([0-9.]*%\) after 1 epoch.*/\1/p' "$tmp/$m.out") &&
        grep -q "accuracy $after " "$tmp/$m.eval" &&
        "$cuttle" bench --model "$tmp/p_$m/model.model" --mode infer --batch 2 --steps 2 \
            --warmup 1 --threads 2 > "$tmp/$m.bench" 2>&1 ||
        cat "$tmp/$m.eval" "$tmp/$m.bench" >> "$tmp/$m.out" 2> /dev/null
    check "prune_cli_structured_$m" $? "$tmp/$m.out"
    [ "$torch" = yes ] || continue
    "$cuttle" predict --weights "$tmp/p_$m/model.safetensors" --json --top 1 "$tmp/in.npy" \
        > "$tmp/$m.json" 2> "$tmp/why" &&
        "$python" tests/prune_check.py torch "$m" 1x28x28 "$tmp/p_$m/model.safetensors" \
            "$tmp/in.npy" "$tmp/$m.json" >> "$tmp/why" 2>&1
    check "prune_cli_torch_$m" $? "$tmp/why"
done

# resnet18: its PyTorch twin's random weights (a plain state_dict)
if [ "$torch" = no ]; then
    :
elif "$python" tests/onnx/export_case.py make "$tmp" resnet18:1x28x28 > "$tmp/why" 2>&1; then
    "$cuttle" prune --weights "$tmp/resnet18.safetensors" --model resnet18 --data fashion-mnist \
        $data --structured 0.5 --finetune 0 -o "$tmp/p_resnet18" > "$tmp/r.out" 2>&1 &&
        grep -q "^  conv1  *64 -> 32 .*residual set 1" "$tmp/r.out" &&
        grep -q "^  layer1.0.conv2  *64 -> 32 .*residual set 1" "$tmp/r.out" &&
        grep -q "^  layer4.1.conv2  *512 -> 256 .*residual set 4" "$tmp/r.out" &&
        "$python" tests/prune_check.py smaller "$tmp/resnet18.safetensors" \
            "$tmp/p_resnet18/model.safetensors" >> "$tmp/r.out" 2>&1
    check prune_cli_resnet18_ties $? "$tmp/r.out"
    "$cuttle" predict --weights "$tmp/p_resnet18/model.safetensors" --json --top 1 \
        "$tmp/in.npy" > "$tmp/r.json" 2> "$tmp/why" &&
        "$python" tests/prune_check.py torch resnet18 1x28x28 \
            "$tmp/p_resnet18/model.safetensors" "$tmp/in.npy" "$tmp/r.json" >> "$tmp/why" 2>&1
    check prune_cli_resnet18_torch $? "$tmp/why"
else
    check prune_cli_resnet18_twin 1 "$tmp/why"
fi

# unstructured: the zeros stay through fine-tuning
weights="$tmp/run_simplecnn/model.safetensors"
"$cuttle" prune --weights "$weights" $data --unstructured 0.7 --finetune 0 -o "$tmp/u0" \
    > "$tmp/u0.out" 2>&1 &&
    "$cuttle" prune --weights "$weights" $data --unstructured 0.7 --finetune 1 -o "$tmp/u1" \
        > "$tmp/u1.out" 2>&1 &&
    "$python" tests/prune_check.py zeros "$tmp/u1/model.safetensors" 0.7 >> "$tmp/u1.out" 2>&1 &&
    "$python" tests/prune_check.py same_zeros "$tmp/u0/model.safetensors" \
        "$tmp/u1/model.safetensors" >> "$tmp/u1.out" 2>&1 &&
    grep -q "^  conv2.weight  *2400 " "$tmp/u1.out" &&
    "$cuttle" eval --weights "$tmp/u1/model.safetensors" $data > /dev/null 2>> "$tmp/u1.out"
check prune_cli_unstructured $? "$tmp/u0.out" "$tmp/u1.out"

# --json: the report as one object, progress on stderr
"$cuttle" prune --weights "$weights" $data --structured 0.5 --finetune 0 --json -o "$tmp/j" \
    > "$tmp/j.json" 2> "$tmp/why" &&
    "$python" - "$tmp/j.json" >> "$tmp/why" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["method"] == "structured" and r["accuracy_finetuned"] is None, r
assert [(l["name"], l["channels_after"]) for l in r["layers"]] == [("conv1", 3), ("conv2", 8)], r
assert r["params_after"] < r["params_before"] and r["flops_after"] < r["flops_before"], r
PY
check prune_cli_json $? "$tmp/why" "$tmp/j.json"

refused() { # name, exit status, expected text, arguments...
    name=$1 want=$2 text=$3
    shift 3
    "$cuttle" prune "$@" -o "$tmp/never" > "$tmp/$name.out" 2>&1
    status=$?
    ok=0
    [ "$status" -eq "$want" ] || ok=1
    grep -q -- "$text" "$tmp/$name.out" || ok=1
    [ ! -e "$tmp/never" ] || ok=1
    check "prune_cli_refuses_$name" $ok "$tmp/$name.out"
}
refused ratio_high 2 "strictly between 0 and 1" --weights "$weights" $data --structured 1.5 \
    --finetune 0
refused ratio_zero 2 "strictly between 0 and 1" --weights "$weights" $data --unstructured 0 \
    --finetune 0
refused both 2 "not both" --weights "$weights" $data --structured 0.5 --unstructured 0.5 \
    --finetune 0
refused neither 2 "neither was given" --weights "$weights" $data --finetune 0
refused rank_bn 1 "needs a batchnorm .* conv1.weight has none" --weights "$weights" $data \
    --structured 0.5 --rank bn --finetune 0
refused missing 1 "missing.safetensors" --weights "$tmp/missing.safetensors" $data \
    --structured 0.5 --finetune 0
head -c 300 /dev/urandom > "$tmp/corrupt.safetensors"
refused corrupt 1 "corrupt.safetensors" --weights "$tmp/corrupt.safetensors" $data \
    --structured 0.5 --finetune 0
printf 'model convout\nc: conv classes 28\nflatten\n' > "$tmp/convout.model"
"$cuttle" train --model "$tmp/convout.model" $data --epochs 1 --out "$tmp/run_convout" \
    > "$tmp/train_convout" 2>&1
refused no_prunable_conv 1 "no convolution can be pruned: its channels are the model's output" \
    --weights "$tmp/run_convout/model.safetensors" $data --structured 0.5 --finetune 0
exit $failed
