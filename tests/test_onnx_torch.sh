#!/bin/sh
# cuttle's ONNX importer on the files PyTorch writes: tests/onnx/torch_export.py
# exports SimpleCNN, LeNet-5, VGG-11 (and _bn) and ResNet-18/34/50 at opsets 13
# and 14 (batchnorm folded and kept, weights in external data, a view-flatten)
# with an input and PyTorch's logits for each (its manifest.json lists them).
# For every case: the onnx checker and strict shape inference (check_NAME),
# ONNX Runtime on the file against PyTorch (ort_NAME), and `cuttle predict
# --model NAME.onnx --json` on the same input against PyTorch (cuttle_NAME):
# max |a - b| <= 1e-5 * max(1, max |PyTorch's logits|) (tests/onnx/compare.py
# says why that bound).  When $BUILD-emu/cuttle (the emulated GPU build, make
# CUDA=emu) is there, SimpleCNN and ResNet-18 also run with --device cuda on
# one image (cuda_emu_NAME); ResNet-18 at 32x32, about 20 s emulated (mostly
# the `auto` kernel choice timing each convolution; 30 s at 64x64).
# Skipped, with the reason, when /usr/bin/python3 (or $CUTTLE_PYTHON) cannot
# import torch, torchvision, onnx and numpy; the ONNX Runtime checks alone are
# skipped when node or ONNX Runtime is missing (scripts/setup-onnxruntime.sh).
# ONNX_TEST_LIGHT=1 leaves out the 500 MB VGG-11 at 224x224.
NAME=test_onnx_torch
. tests/onnx/common.sh
emu="${BUILD}-emu/cuttle"
[ "$ort" = yes ] || echo "SKIP onnx_ort_*: $why_no_ort"

light=""
[ -n "$ONNX_TEST_LIGHT" ] && light=--light
if ! "$python" tests/onnx/torch_export.py "$dir" $light > "$dir/export.log" 2>&1; then
    result torch_export 1 "$dir/export.log"
    exit 1
fi

# the onnx package's checks, one process for every file
"$python" tests/onnx/check.py "$dir"/*.onnx > "$dir/check.log" 2>&1
"$python" -c '
import json, sys
for case in json.load(open(sys.argv[1])):
    print(case["name"], case["file"], case["input"], case["expected"])
' "$dir/manifest.json" > "$dir/cases"
while read -r name file input expected <&3; do # fd 3: the commands may read stdin
    grep "^FAILED $dir/$file:" "$dir/check.log" > "$dir/why"
    grep -q "^ok $dir/$file\$" "$dir/check.log"
    result "onnx_check_$name" $? "$dir/why"

    if [ "$ort" = yes ]; then
        node tests/onnx/ort_run.js "$dir/$file" "$dir/$input" "$dir/$name.ort.npy" --threads 2 \
            > "$dir/why" 2>&1 &&
            "$python" tests/onnx/compare.py "$dir/$expected" "$dir/$name.ort.npy" >> "$dir/why" 2>&1
        result "onnx_ort_$name" $? "$dir/why"
    fi

    "$cuttle" predict --model "$dir/$file" --json --top 1 "$dir/$input" \
        > "$dir/$name.json" 2> "$dir/why" &&
        "$python" tests/onnx/compare.py "$dir/$expected" "$dir/$name.json" >> "$dir/why" 2>&1
    result "onnx_cuttle_$name" $? "$dir/why"
done 3< "$dir/cases"

# the emulated GPU: one image each (the emulator runs a kernel at a time)
if [ -x "$emu" ]; then
    for name in simplecnn_op13 resnet18_32_op13; do
        grep -q "^$name " "$dir/cases" || continue
        "$python" -c '
import numpy, sys
d, name = sys.argv[1], sys.argv[2]
numpy.save(f"{d}/{name}.one.input.npy", numpy.load(f"{d}/{name}.input.npy")[:1])
numpy.save(f"{d}/{name}.one.expected.npy", numpy.load(f"{d}/{name}.expected.npy")[:1])
' "$dir" "$name" &&
            "$emu" predict --model "$dir/$name.onnx" --device cuda --json --top 1 \
                "$dir/$name.one.input.npy" > "$dir/$name.emu.json" 2> "$dir/why" &&
            "$python" tests/onnx/compare.py "$dir/$name.one.expected.npy" "$dir/$name.emu.json" \
                >> "$dir/why" 2>&1
        result "onnx_cuda_emu_$name" $? "$dir/why"
    done
elif [ -n "$CT_REQUIRE_EMU" ]; then # make check: the emulated build must be there
    echo "FAIL onnx_cuda_emu: no $emu, and CT_REQUIRE_EMU is set (make CUDA=emu builds it)"
    failed=1
else
    echo "SKIP onnx_cuda_emu_*: no $emu (make CUDA=emu builds it)"
fi
exit $failed
