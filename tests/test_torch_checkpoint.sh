#!/bin/sh
# A cuttle checkpoint is a PyTorch state_dict: train briefly with cuttle,
# load model.safetensors into the same model in PyTorch (strict
# load_state_dict), and compare PyTorch's logits with `cuttle predict` on
# the same images, given as dataset items and as a PNG file.
# Needs /usr/bin/python3 with torch, torchvision and PIL (scripts/setup-debian.sh
# installs them); without them it says so and passes nothing.
BUILD=${BUILD:-build}
PYTHON=/usr/bin/python3
cuttle="$BUILD/cuttle"
if ! "$PYTHON" -c "import torch, torchvision, PIL" 2>/dev/null; then
    echo "SKIP test_torch_checkpoint: $PYTHON cannot import torch, torchvision and PIL" >&2
    echo "(install python3-torch python3-torchvision python3-pil)" >&2
    exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$PYTHON" tests/torch_checkpoint.py dataset "$dir" || { echo "FAIL torch_dataset"; exit 1; }
"$PYTHON" tests/torch_checkpoint.py png "$dir" 3 "$dir/item3.png" || { echo "FAIL torch_png"; exit 1; }
status=0
for model in simplecnn resnet18; do
    if ! "$cuttle" train --model "$model" --data mnist --data-dir "$dir" --epochs 1 --batch 32 \
            --out "$dir/$model" > "$dir/$model.log" 2>&1; then
        cat "$dir/$model.log" >&2
        echo "FAIL torch_checkpoint_$model (training)"
        status=1
        continue
    fi
    if ! "$cuttle" predict --weights "$dir/$model/model.safetensors" --data-dir "$dir" --json \
            mnist:test:3-10 "$dir/item3.png" > "$dir/$model.json" 2> "$dir/$model.err"; then
        cat "$dir/$model.err" >&2
        echo "FAIL torch_checkpoint_$model (predict)"
        status=1
        continue
    fi
    if "$PYTHON" tests/torch_checkpoint.py check "$dir/$model/model.safetensors" \
            "$dir/$model.json" "$dir" 3 png >&2; then
        echo "PASS torch_checkpoint_$model"
    else
        echo "FAIL torch_checkpoint_$model"
        status=1
    fi
done
exit $status
