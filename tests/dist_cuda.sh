#!/bin/sh
# Data-parallel training on GPUs (docs/distributed.md), run in the emulated
# GPU suite (tests/run-gpu-emu.sh: BUILD=build-emu, with CUDA_EMU_DEVICES=2,
# so each process has two emulated GPUs; the gradients go through the
# emulator's NCCL, between threads of one process or between processes):
#   - one process on --device cuda:0,1 at --batch 32 (per GPU) for 20 steps
#     ends within 1e-5 of one GPU at --batch 64, and a run resumed after 10
#     steps ends bit for bit where it does; a GPU named twice is refused;
#   - 2 ranks of --batch 32 on --device cuda (each rank the GPU of its local
#     rank: cuda:0 and cuda:1) for 20 steps end with the weights of one
#     process of --batch 64 on cuda:0, within 1e-5;
#   - --sync-bn: a batchnorm network on two GPUs of 32, in one process and
#     as two ranks, ends with the weights and running statistics of one GPU
#     of 64 (1e-5);
#   - two ranks given one GPU (--device cuda:0) are refused together before
#     training (exit status 2), rank 0 naming both ranks and the GPU;
#   - a rank whose GPU does not exist (3 ranks, 2 GPUs) ends the job,
#     naming itself;
#   - a rank killed (SIGKILL) while the job trains ends the job, never a
#     hang, and leaves whole checkpoints;
#   - doctor names the NCCL it loaded.
# PASS/FAIL lines; without MPI or NCCL in the build it says so and passes nothing.
BUILD=${BUILD:-build-emu}
cuttle="$BUILD/cuttle"
python=${CUTTLE_PYTHON:-/usr/bin/python3}
fashion=/usr/share/datasets/fashion-mnist
limit=240 # seconds for one mpirun: the emulated GPUs are slow
tmp=$(mktemp -d)
[ -n "$KEEP" ] || trap 'rm -rf "$tmp"' EXIT
. tests/mpi_job.sh
. tests/result.sh

"$cuttle" doctor --json --no-cpu-gemm --gemm-size 16 > "$tmp/doctor.json" 2> /dev/null
if ! grep -q '"nccl_loaded": "[0-9]' "$tmp/doctor.json"; then
    echo "# skipped: this build has no NCCL it can load"
    exit 0
fi
mkdir -p "$tmp/data"
# 960 images: 15 steps of 64 an epoch, so 20 steps end inside epoch 2
"$python" tests/fashion_slice.py "$fashion" "$tmp/data" 960 200
# native kernels: "auto" would time every candidate in the first step, on
# every rank (slow on the emulator)
train="train --data-dir $tmp/data --max-steps 20 --kernels native"
"$cuttle" $train --device cuda --batch 64 --out "$tmp/one" > "$tmp/one.out" 2>&1
one_status=$?

# ---- two GPUs of one process ----------------------------------------------------
[ "$one_status" -eq 0 ] &&
    "$cuttle" $train --device cuda:0,1 --batch 32 --out "$tmp/pair" > "$tmp/pair.out" 2>&1 &&
    grep -q "batch 32 per GPU, 64 in all (2 GPUs)" "$tmp/pair.out" &&
    grep -q "all-reduce (2 GPUs)" "$tmp/pair.out" &&
    "$python" tests/safetensors_diff.py "$tmp/one/model.safetensors" \
        "$tmp/pair/model.safetensors" 1e-5 > "$tmp/pair-diff.out"
result two_gpus_of_one_process_equal_one_gpu_of_twice_the_batch "$?" "$tmp/one.out" \
    "$tmp/pair.out" "$tmp/pair-diff.out"
sed 's/^/# 2 GPUs of one process vs 1 GPU: /' "$tmp/pair-diff.out"

"$cuttle" $train --device cuda:0,1 --batch 32 --max-steps 10 --out "$tmp/pair-half" \
    > "$tmp/pair-half.out" 2>&1 &&
    "$cuttle" train --resume "$tmp/pair-half" --max-steps 20 --kernels native \
        --device cuda:0,1 > "$tmp/pair-resume.out" 2>&1 &&
    cmp -s "$tmp/pair/model.safetensors" "$tmp/pair-half/model.safetensors"
result two_gpus_of_one_process_resume_exactly "$?" "$tmp/pair-half.out" "$tmp/pair-resume.out"

# Synchronized batchnorm (tests/fixtures/small_bn.model, 8 steps): two GPUs of
# 32 normalize over the 64 images together, as one GPU of 64 does.
bn="train --data-dir $tmp/data --max-steps 8 --kernels native --model tests/fixtures/small_bn.model"
"$cuttle" $bn --device cuda --batch 64 --out "$tmp/bn-one" > "$tmp/bn-one.out" 2>&1
bn_status=$?
[ "$bn_status" -eq 0 ] &&
    "$cuttle" $bn --device cuda:0,1 --batch 32 --sync-bn --out "$tmp/bn-pair" \
        > "$tmp/bn-pair.out" 2>&1 &&
    "$python" tests/safetensors_diff.py "$tmp/bn-one/model.safetensors" \
        "$tmp/bn-pair/model.safetensors" 1e-5 > "$tmp/bn-pair-diff.out"
result sync_bn_two_gpus_of_one_process_equal_one_gpu "$?" "$tmp/bn-one.out" \
    "$tmp/bn-pair.out" "$tmp/bn-pair-diff.out"
sed 's/^/# --sync-bn, 2 GPUs of one process vs 1 GPU: /' "$tmp/bn-pair-diff.out"

"$cuttle" $train --device cuda:1,1 --out "$tmp/twice" > "$tmp/twice.out" 2>&1
[ "$?" -eq 2 ] && grep -q "names cuda:1 twice" "$tmp/twice.out"
result one_gpu_named_twice_refused "$?" "$tmp/twice.out"

# ---- mpirun: one GPU per rank ---------------------------------------------------
if grep -q '"mpi": null' "$tmp/doctor.json" || ! command -v mpirun > /dev/null 2>&1; then
    echo "# skipped: this build has no MPI, or there is no mpirun"
    exit 0
fi

# ---- equality with one process --------------------------------------------------
[ "$one_status" -eq 0 ] &&
    $mpirun -np 2 "$cuttle" $train --device cuda --batch 32 --out "$tmp/two" \
        > "$tmp/two.out" 2>&1 &&
    grep -q "batch 32 per rank, 64 in all (2 ranks)" "$tmp/two.out" &&
    grep -q "in NCCL calls" "$tmp/two.out" &&
    "$python" tests/safetensors_diff.py "$tmp/one/model.safetensors" \
        "$tmp/two/model.safetensors" 1e-5 > "$tmp/diff.out"
result two_gpu_ranks_equal_one_gpu_of_twice_the_batch "$?" "$tmp/one.out" "$tmp/two.out" \
    "$tmp/diff.out"
sed 's/^/# 2 GPU ranks vs 1 GPU: /' "$tmp/diff.out"

[ "$bn_status" -eq 0 ] &&
    $mpirun -np 2 "$cuttle" $bn --device cuda --batch 32 --sync-bn --out "$tmp/bn-two" \
        > "$tmp/bn-two.out" 2>&1 &&
    "$python" tests/safetensors_diff.py "$tmp/bn-one/model.safetensors" \
        "$tmp/bn-two/model.safetensors" 1e-5 > "$tmp/bn-two-diff.out"
result sync_bn_two_gpu_ranks_equal_one_gpu "$?" "$tmp/bn-one.out" "$tmp/bn-two.out" \
    "$tmp/bn-two-diff.out"
sed 's/^/# --sync-bn, 2 GPU ranks vs 1 GPU: /' "$tmp/bn-two-diff.out"

# ---- refusals and faults --------------------------------------------------------
$mpirun -np 2 "$cuttle" $train --device cuda:0 --batch 32 --out "$tmp/same" \
    > "$tmp/same.out" 2>&1
status=$?
[ "$status" -eq 2 ] && [ "$(grep -c "ranks 0 and 1 both train on cuda:0" "$tmp/same.out")" -eq 1 ] &&
    [ ! -e "$tmp/same/model.safetensors" ]
result two_ranks_on_one_gpu_refused "$?" "$tmp/same.out"

$mpirun -np 3 "$cuttle" $train --device cuda --batch 32 --out "$tmp/three" \
    > "$tmp/three.out" 2>&1
status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && grep -q "cuda:2" "$tmp/three.out" &&
    grep -q "rank 2 of 3 failed" "$tmp/three.out"
result rank_without_a_gpu_ends_the_job "$?" "$tmp/three.out"

# A long run; once it has saved an epoch, rank 1 is killed.
$mpirun -np 2 "$cuttle" train --data-dir "$tmp/data" --kernels native --device cuda --batch 32 \
    --epochs 100000 --out "$tmp/killed" > "$tmp/killed.out" 2>&1 &
kill_after_an_epoch $! "$tmp/killed" 1200
echo "# killed GPU rank 1 (pid ${victim:-none found}): mpirun ended with $status after $seconds s"
[ -n "$victim" ] && [ "$status" -ne 0 ] && [ "$status" -ne 124 ] &&
    "$python" tests/safetensors_diff.py "$tmp/killed/state.safetensors" \
        "$tmp/killed/state.safetensors" 0 > "$tmp/killed-check.out" 2>&1
result killed_gpu_rank_ends_the_job "$?" "$tmp/killed.out" "$tmp/killed-check.out"

$mpirun -np 2 "$cuttle" doctor --json --no-cpu-gemm --gemm-size 16 > "$tmp/doctor2.out" 2>&1
grep -q '"world_size": 2' "$tmp/doctor2.out" && grep -q '"nccl_loaded": "[0-9]' "$tmp/doctor2.out"
result doctor_reports_nccl_under_mpirun "$?" "$tmp/doctor2.out"
