#!/bin/sh
# The command line on `--device cuda`, as a user runs it, against the same
# commands on the CPU: train a few hundred SimpleCNN steps on a slice of
# Fashion-MNIST (losses and accuracy must agree), eval and predict the
# checkpoint, doctor, bench and profile (labelled when the device is
# emulated), and running out of GPU memory under a cap.  Run by
# tests/run-gpu-emu.sh on the emulated device (CUDA_EMU_MEMORY sets its cap)
# and usable on a GPU machine: BUILD=build sh tests/gpu_cli.sh.
#   GPU_CLI_TRAIN=6400 GPU_CLI_EPOCHS=3: training images (batch 64) and epochs
#   GPU_CLI_TEST=1000: test images (evaluated after each epoch, by eval, predict)
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
train_images=${GPU_CLI_TRAIN:-6400}
epochs=${GPU_CLI_EPOCHS:-3}
test_images=${GPU_CLI_TEST:-1000}
python=${CUTTLE_PYTHON:-/usr/bin/python3}
fashion=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() {
    echo "FAIL $1"
    shift
    for file in "$@"; do sed 's/^/    /' "$file" >&2; done
}

# A JSON field of a one-object file.
field() {
    "$python" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"
}

if [ ! -f "$fashion/train-images-idx3-ubyte.gz" ]; then
    echo "FAIL gpu_cli_needs_fashion_mnist ($fashion: apt-get install dataset-fashion-mnist)"
    exit 1
fi
# The first $train_images training and $test_images test images, as raw IDX files.
mkdir -p "$tmp/data"
"$python" tests/fashion_slice.py "$fashion" "$tmp/data" "$train_images" "$test_images"

for device in cpu cuda; do
    "$cuttle" train --data fashion-mnist --data-dir "$tmp/data" --epochs "$epochs" \
        --device "$device" --out "$tmp/$device" --json > "$tmp/train-$device.json" \
        2> "$tmp/train-$device.err"
    echo $? > "$tmp/train-$device.status"
done
if [ "$(cat "$tmp/train-cuda.status")" -ne 0 ] || [ "$(cat "$tmp/train-cpu.status")" -ne 0 ]; then
    fail train_cuda_matches_cpu "$tmp/train-cpu.err" "$tmp/train-cuda.err"
    exit 1
fi
# The last epoch's training loss within 1%, test accuracy within 2 points.
if "$python" - "$tmp/cpu/metrics.jsonl" "$tmp/cuda/metrics.jsonl" <<'EOF'
import json, sys
cpu, cuda = (json.loads(open(path).read().splitlines()[-1]) for path in sys.argv[1:])
print(f"# cpu: loss {cpu['train_loss']:.6f} accuracy {cpu['test_accuracy']:.4f}; "
      f"cuda: loss {cuda['train_loss']:.6f} accuracy {cuda['test_accuracy']:.4f}")
ok = abs(cpu["train_loss"] - cuda["train_loss"]) <= 0.01 * cpu["train_loss"] and \
     abs(cpu["test_accuracy"] - cuda["test_accuracy"]) <= 0.02
sys.exit(0 if ok else 1)
EOF
then pass train_cuda_matches_cpu; else fail train_cuda_matches_cpu "$tmp/cuda/metrics.jsonl"; fi

weights="$tmp/cuda/model.safetensors"
for device in cpu cuda; do
    "$cuttle" eval --weights "$weights" --data-dir "$tmp/data" --device "$device" --json \
        > "$tmp/eval-$device.json" 2> "$tmp/eval-$device.err"
    "$cuttle" predict --weights "$weights" --data-dir "$tmp/data" --device "$device" --top 1 \
        fashion-mnist:test:0-19 2> "$tmp/predict-$device.err" |
        grep '^  1\. ' | awk '{print $2, $3}' > "$tmp/predict-$device.txt"
done
cpu_accuracy=$(field "$tmp/eval-cpu.json" accuracy 2> /dev/null)
cuda_accuracy=$(field "$tmp/eval-cuda.json" accuracy 2> /dev/null)
# The same weights: at most one image on a near-tie may change its class.
if [ -n "$cuda_accuracy" ] &&
    "$python" -c "import sys; sys.exit(abs($cpu_accuracy - $cuda_accuracy) > 1.5 / $test_images)"; then
    pass eval_cuda_matches_cpu
else
    fail eval_cuda_matches_cpu "$tmp/eval-cpu.err" "$tmp/eval-cuda.err"
fi
if [ -s "$tmp/predict-cuda.txt" ] && cmp -s "$tmp/predict-cpu.txt" "$tmp/predict-cuda.txt"; then
    pass predict_cuda_matches_cpu
else
    fail predict_cuda_matches_cpu "$tmp/predict-cpu.txt" "$tmp/predict-cuda.txt" \
        "$tmp/predict-cuda.err"
fi

"$cuttle" doctor --no-cpu-gemm --gemm-size 64 > "$tmp/doctor.txt" 2>&1
status=$?
emulated=false
grep -q "EMULATED" "$tmp/doctor.txt" && emulated=true
if [ "$status" -eq 0 ] && grep -q "smoke test: .*: ok" "$tmp/doctor.txt"; then
    pass doctor_on_cuda
else
    fail doctor_on_cuda "$tmp/doctor.txt"
fi

# --precision on the GPU: bf16 runs; a GPU too old for it (the emulator's
# reported compute capability set to 7.5) is refused with the device named
# and the precisions it can run.
"$cuttle" bench --device cuda --batch 8 --steps 1 --warmup 0 --precision bf16 \
    > "$tmp/bf16.txt" 2>&1
bf16_status=$?
if [ "$emulated" = true ]; then
    CUDA_EMU_CC=7.5 "$cuttle" bench --device cuda --batch 8 --steps 1 --warmup 0 \
        --precision bf16 > "$tmp/cc75.txt" 2>&1
    cc75_status=$?
    grep -q "compute capability 8.0 or later; cuda:0 .* is 7.5: use fp16 or fp32" \
        "$tmp/cc75.txt" && [ "$cc75_status" -ne 0 ]
    cc75_ok=$?
else
    cc75_ok=0
fi
if [ "$bf16_status" -eq 0 ] && grep -q "bf16" "$tmp/bf16.txt" && [ "$cc75_ok" -eq 0 ]; then
    pass precision_on_cuda
else
    fail precision_on_cuda "$tmp/bf16.txt" "$tmp/cc75.txt"
fi

# Bench and profile say plainly when their times come from the emulator.
"$cuttle" bench --device cuda --batch 8 --steps 1 --warmup 0 > "$tmp/bench.txt" 2>&1
"$cuttle" bench --device cuda --batch 8 --steps 1 --warmup 0 --json > "$tmp/bench.json" 2>&1
"$cuttle" profile --device cuda --batch 8 --steps 1 --warmup 0 > "$tmp/profile.txt" 2>&1
labelled=true
for file in "$tmp/bench.txt" "$tmp/profile.txt"; do
    grep -q "emulated device: these times" "$file"
    [ $? -eq 0 ] || [ "$emulated" = false ] || labelled=false
done
json_says=False
[ "$emulated" = true ] && json_says=True
if [ "$labelled" = true ] && [ "$(field "$tmp/bench.json" emulated)" = "$json_says" ]; then
    pass bench_and_profile_say_emulated
else
    fail bench_and_profile_say_emulated "$tmp/bench.txt" "$tmp/bench.json" "$tmp/profile.txt"
fi

# The device allocator's peak is in bench's JSON (bench/compare sets it
# beside PyTorch's torch.cuda.max_memory_allocated).
peak=$(field "$tmp/bench.json" peak_device_bytes 2> /dev/null)
if [ "${peak:-None}" != None ] && [ "$peak" -gt 0 ] && grep -q "peak device memory" "$tmp/bench.txt"; then
    pass bench_reports_peak_device_memory
else
    fail bench_reports_peak_device_memory "$tmp/bench.txt" "$tmp/bench.json"
fi

# The replayed SimpleCNN step is 18 device operations on the native kernels
# (docs/precision.md, "Device operations per training step"): a fusion
# that stops applying, or an extra launch, fails here.
"$cuttle" bench --device cuda --kernels native --batch 2 --steps 3 --warmup 2 --json \
    > "$tmp/nodes.json" 2>&1
nodes=$(field "$tmp/nodes.json" graph_nodes 2> /dev/null)
if [ "${nodes:-None}" = 18 ]; then
    pass simplecnn_step_is_18_device_operations
else
    fail simplecnn_step_is_18_device_operations "$tmp/nodes.json"
fi

# Without cuBLAS and cuDNN the GPU still runs, on cuttle's own kernels.
CUTTLE_CUBLAS=/nonexistent CUTTLE_CUDNN=/nonexistent "$cuttle" bench --device cuda --batch 8 \
    --steps 1 --warmup 0 > "$tmp/novendor.txt" 2>&1
if [ $? -eq 0 ]; then
    pass runs_without_vendor_libraries
else
    fail runs_without_vendor_libraries "$tmp/novendor.txt"
fi

# Out of GPU memory: the allocator's message with its statistics, exit 1.
if [ "$emulated" = true ]; then
    CUDA_EMU_MEMORY=4M "$cuttle" bench --model vgg11 --input 3x32x32 --device cuda --steps 1 \
        > "$tmp/oom.txt" 2>&1
    status=$?
    if [ "$status" -eq 1 ] && grep -q "out of GPU memory on cuda:0" "$tmp/oom.txt" &&
        grep -q "try a smaller --batch" "$tmp/oom.txt"; then
        pass out_of_gpu_memory_is_a_clear_error
    else
        fail out_of_gpu_memory_is_a_clear_error "$tmp/oom.txt"
    fi
fi
