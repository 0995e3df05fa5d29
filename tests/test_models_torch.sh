#!/bin/sh
# The built-in models give PyTorch's logits: for each case, the PyTorch twin
# (bench/peers/torch_models.py, via tests/torch_model_check.py) writes its
# weights, an input and its evaluation-mode logits; test_models --torch-check
# builds the model from its built-in text, loads the weights, runs CT_EVAL
# and compares (max relative error <= 1e-4).  Skipped, with the reason, when
# /usr/bin/python3 (or $CUTTLE_PYTHON) cannot import torch and torchvision
# (scripts/setup-debian.sh installs them).
BUILD=${BUILD:-build}
python=${CUTTLE_PYTHON:-/usr/bin/python3}
if ! command -v "$python" >/dev/null 2>&1 || ! "$python" -c 'import torch, torchvision' 2>/dev/null; then
    echo "SKIP test_models_torch: $python cannot import torch and torchvision (apt-get install python3-torch python3-torchvision)"
    exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
for case in "simplecnn 3 32 32" "lenet5 3 32 32" "vgg11_bn 3 32 32" "resnet18 3 32 32" \
            "simplecnn 1 28 28" "resnet18 1 28 28" "vgg8_bn 1 28 28"; do
    set -- $case
    file="$dir/$1_$2x$3x$4.safetensors"
    if ! "$python" tests/torch_model_check.py "$1" "$2" "$3" "$4" "$file" >&2; then
        echo "FAIL torch_$1_$2x$3x$4 (the PyTorch side failed)"
        status=1
        continue
    fi
    "$BUILD/tests/test_models" --torch-check "$file" "$1" || status=1
done
exit $status
