#!/bin/bash
# The device checks of docs/gpu-verification.md in one device call, from the
# repository's root on the lent machine, after scripts/gpu-pack.sh staged
# .gpu/: the GPU tests, gpu_cli.sh, doctor, profiles, compute-sanitizer,
# cuttle's precision and graph variants, then bench/compare --device cuda
# with whatever time is left.  Everything goes to $OUT/all.log (and a few
# files beside it), a summary to stdout.  BUDGET seconds in all (default
# 540); PREBUILT=1 unpacks .gpu/bin.tar.gz first.
if [ "$1" = extras ]; then
    # cuttle's own variants, not interleaved with a peer: $2 is cuttle.
    for args in "--model resnet50 --input 3x224x224 --batch 128 --steps 20 --warmup 5 --precision bf16" \
                "--model resnet50 --input 3x224x224 --batch 128 --steps 20 --warmup 5 --precision bf16 --kernels vendor" \
                "--model resnet50 --input 3x224x224 --batch 128 --steps 20 --warmup 5 --precision tf32" \
                "--model resnet18 --input 3x32x32 --batch 256 --steps 30 --warmup 5 --precision bf16" \
                "--model vgg11 --input 3x32x32 --batch 256 --steps 30 --warmup 5 --precision bf16" \
                "--model simplecnn --batch 64 --steps 100 --warmup 10 --cuda-graph off" \
                "--model simplecnn --batch 64 --steps 100 --warmup 10 --kernels native"; do
        echo "## $args"
        timeout -k 5 40 "$2" bench $args --mode train --device cuda --json
    done
    exit
fi
BUDGET=${BUDGET:-540}
start=$(date +%s)
deadline=$((start + BUDGET))
left() { echo $((deadline - $(date +%s))); }
G=$PWD/.gpu
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/bench"
LOG=$OUT/all.log
exec 3>&1 > >(tee -a "$LOG" >/dev/null) 2>&1
say() { echo "$*"; echo "$*" >&3; }

if [ -n "$PREBUILT" ]; then
    mkdir -p "$G/bin" && tar -xzf "$G/bin.tar.gz" -C "$G/bin" || say "untar failed"
fi
B=$G/bin
export LD_LIBRARY_PATH=$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for lib in libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
    path=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    say "# $lib: ${path:-not found}"
    [ -n "$path" ] && LD_LIBRARY_PATH=$(dirname "$path"):$LD_LIBRARY_PATH
done
export LD_LIBRARY_PATH
PY=$(command -v python3)
export CUTTLE_PYTHON=$PY
say "# python3: $PY; nproc $(nproc)"
nvidia-smi -L >&3 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv >&3 2>&1
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
say "# compute-sanitizer: ${SAN:-none}"

# step NAME SECONDS CMD...: run with a limit (cut to what is left), tail on stdout.
step() {
    local name=$1 limit=$2
    shift 2
    local l=$(( $(left) - 20 ))
    [ "$limit" -gt "$l" ] && limit=$l
    if [ "$limit" -lt 10 ]; then say "=== $name: SKIPPED (no time left)"; return; fi
    echo "=== $name: $*"
    local t0=$EPOCHREALTIME
    timeout -k 5 "$limit" "$@" > "$OUT/step.log" 2>&1
    local rc=$?
    cat "$OUT/step.log"
    local dt=$(awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $t0}")
    say "=== $name: rc=$rc in ${dt}s (limit $limit)"
    grep -E "^FAIL|failed|error|Error|ERROR|passed" "$OUT/step.log" | head -n 25 >&3
}

mkdir -p /usr/share/datasets
[ -e /usr/share/datasets/fashion-mnist ] || ln -s "$G/fashion" /usr/share/datasets/fashion-mnist

step doctor 60 "$B/cuttle" doctor
tail -n 45 "$OUT/step.log" >&3
"$B/cuttle" doctor --json --no-cpu-gemm > "$OUT/doctor.json" 2>&1
export CT_REQUIRE_GPU=1
step test_gpu 120 "$B/test_gpu"
step test_backend_ops 90 "$B/test_backend_ops"
for t in test_cuda_graph test_stage test_precision test_loss_scaling test_optimize \
         test_replicas; do
    step "$t" 60 "$B/$t"
done
step gpu_cli 120 env BUILD="$G/bin" sh tests/gpu_cli.sh
step profile_resnet18 60 "$B/cuttle" profile --model resnet18 --batch 128 --input 3x32x32 \
    --device cuda
cp "$OUT/step.log" "$OUT/profile-resnet18.txt"
step profile_simplecnn 40 "$B/cuttle" profile --device cuda --kernels native --batch 64
cp "$OUT/step.log" "$OUT/profile-simplecnn.txt"
step profile_simplecnn_auto 40 "$B/cuttle" profile --device cuda --batch 64
cp "$OUT/step.log" "$OUT/profile-simplecnn-auto.txt"
step profile_resnet18_bf16 60 "$B/cuttle" profile --model resnet18 --batch 128 --input 3x32x32 \
    --device cuda --precision bf16
cp "$OUT/step.log" "$OUT/profile-resnet18-bf16.txt"
if [ -n "$SAN" ]; then
    CT_GPU_QUICK=1 step memcheck 90 "$SAN" --tool memcheck --error-exitcode 1 "$B/test_gpu"
    CT_GPU_QUICK=1 step racecheck 90 "$SAN" --tool racecheck --error-exitcode 1 "$B/test_gpu"
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$NCU" ]; then
    # why SimpleCNN's small native kernels run 4-16x the roofline's time
    # (docs/roofline.md): issue stalls, occupancy, instructions, per kernel
    step ncu_simplecnn 90 "$NCU" --clock-control none --section SpeedOfLight \
        --section LaunchStats --section Occupancy --section WarpStateStats \
        --section InstructionStats --csv --page details "$B/cuttle" bench --device cuda \
        --kernels native --batch 64 --steps 1 --warmup 1 --cuda-graph off
fi
unset CT_REQUIRE_GPU
# cuttle's own variants, not interleaved with a peer: precision and graphs.
step extras 200 bash "$0" extras "$B/cuttle"
budget=$(( $(left) - 75 ))
if [ "$budget" -gt 60 ]; then
    step compare $((budget + 60)) "$PY" bench/compare --device cuda --python "$PY" \
        --cuttle "$B/cuttle" --emu-cuttle "$B/cuttle-emu" --variants "${VARIANTS:-eager,strict,amp,graphs}" \
        --budget "$budget" --out-dir "$OUT/bench"
    tail -n 40 "$OUT/step.log" >&3
else
    say "=== compare: SKIPPED ($budget s left)"
fi
rm -f "$OUT/step.log"
say "# done in $(( $(date +%s) - start )) s"
