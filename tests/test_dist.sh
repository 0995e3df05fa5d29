#!/bin/sh
# Data-parallel training under mpirun (docs/distributed.md), as a user runs
# it, on a slice of Fashion-MNIST (SimpleCNN: no batchnorm, so nothing is
# per rank but the data; and a small batchnorm network for --sync-bn):
#   - 2 ranks of --batch 32 for 20 steps end with the weights of one process
#     of --batch 64 (within 1e-5), whatever the bucket size;
#   - a run resumed inside an epoch with the same number of ranks ends bit
#     for bit as the uninterrupted one; another number of ranks is refused;
#   - ranks that disagree (MPMD: `mpirun -np 1 A : -np 1 B`) are refused,
#     the difference named; a rank that fails (a bad --data-dir on rank 1)
#     or is killed (SIGKILL) ends the job with a non-zero status, never a
#     hang (every mpirun runs under `timeout`), and no half-written
#     checkpoint is left;
#   - --sync-bn: 2 ranks of a batchnorm network at --batch 32 end with the
#     weights and running statistics of one process at --batch 64 (1e-5);
#     without it they differ (each rank normalizes its own batch);
#   - doctor reports the world size.
# Without MPI in the build (or without mpirun) it says so and checks only
# that a process started as one of several refuses to train alone.
# PASS/FAIL lines.  Also under ASan + UBSan (BUILD=build-san sh
# tests/test_dist.sh): LeakSanitizer then skips what Open MPI keeps until
# exit (tests/lsan-mpi.supp), for which Open MPI must keep its plugins
# loaded and LSan unwind whole stacks (tests/mpi_job.sh sets both).
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
python=${CUTTLE_PYTHON:-/usr/bin/python3}
fashion=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
[ -n "$KEEP" ] || trap 'rm -rf "$tmp"' EXIT
. tests/mpi_job.sh

. tests/result.sh

"$cuttle" doctor --json --no-cpu-gemm --gemm-size 16 > "$tmp/doctor.json" 2> /dev/null
if grep -q '"mpi": null' "$tmp/doctor.json"; then
    echo "# skipped: this build has no MPI (apt-get install libopenmpi-dev openmpi-bin; make)"
    OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$cuttle" train --max-steps 1 \
        --out "$tmp/alone" > "$tmp/alone.out" 2>&1
    status=$?
    [ "$status" -eq 1 ] && grep -q "one of 2 that a launcher (mpirun) started" "$tmp/alone.out"
    result build_without_mpi_refuses_to_train_alone "$?" "$tmp/alone.out"
    exit 0
fi
if ! command -v mpirun > /dev/null 2>&1; then
    echo "# skipped: the build has MPI but there is no mpirun (apt-get install openmpi-bin)"
    exit 0
fi
if [ ! -f "$fashion/train-images-idx3-ubyte.gz" ]; then
    echo "FAIL dist_needs_fashion_mnist ($fashion: apt-get install dataset-fashion-mnist)"
    exit 1
fi
mkdir -p "$tmp/data"
# 960 images: 15 steps of 64 an epoch, so 20 steps end inside epoch 2
"$python" tests/fashion_slice.py "$fashion" "$tmp/data" 960 200
train="train --data-dir $tmp/data --threads 1"

# ---- equality with one process --------------------------------------------------
"$cuttle" $train --batch 64 --max-steps 20 --out "$tmp/one" > "$tmp/one.out" 2>&1
$mpirun -np 2 "$cuttle" $train --batch 32 --max-steps 20 --out "$tmp/two" \
    > "$tmp/two.out" 2>&1
status=$?
[ "$status" -eq 0 ] && grep -q "batch 32 per rank, 64 in all (2 ranks)" "$tmp/two.out" &&
    [ "$(grep -c '^train simplecnn' "$tmp/two.out")" -eq 1 ] &&
    "$python" tests/safetensors_diff.py "$tmp/one/model.safetensors" \
        "$tmp/two/model.safetensors" 1e-5 > "$tmp/diff.out"
result two_ranks_equal_one_process_of_twice_the_batch "$?" "$tmp/two.out" "$tmp/diff.out"
sed 's/^/# 2 ranks vs 1 process: /' "$tmp/diff.out"

# three buckets instead of one: for 2 ranks a sum is exact in any grouping
$mpirun -np 2 "$cuttle" $train --batch 32 --max-steps 20 --bucket-mb 0.05 \
    --out "$tmp/buckets" > "$tmp/buckets.out" 2>&1
status=$?
[ "$status" -eq 0 ] && grep -q "3 buckets" "$tmp/buckets.out" &&
    cmp -s "$tmp/two/model.safetensors" "$tmp/buckets/model.safetensors"
result bucket_size_changes_nothing "$?" "$tmp/buckets.out"

# ---- resume ---------------------------------------------------------------------
$mpirun -np 2 "$cuttle" $train --batch 32 --max-steps 10 --out "$tmp/half" \
    > "$tmp/half.out" 2>&1 &&
    $mpirun -np 2 "$cuttle" $train --resume "$tmp/half" --max-steps 20 > "$tmp/resume.out" 2>&1 &&
    cmp -s "$tmp/two/model.safetensors" "$tmp/half/model.safetensors" &&
    "$python" tests/safetensors_diff.py "$tmp/two/state.safetensors" \
        "$tmp/half/state.safetensors" 0 > "$tmp/resume-diff.out"
result resume_with_same_ranks_is_exact "$?" "$tmp/half.out" "$tmp/resume.out" \
    "$tmp/resume-diff.out"

"$cuttle" $train --resume "$tmp/half" --max-steps 30 > "$tmp/other.out" 2>&1
status=$?
$mpirun -np 2 "$cuttle" $train --resume "$tmp/one" --max-steps 30 > "$tmp/other2.out" 2>&1
status2=$?
[ "$status" -eq 2 ] && grep -q "was trained by 2 processes and this is 1" "$tmp/other.out" &&
    [ "$status2" -ne 0 ] && [ "$status2" -ne 124 ] &&
    grep -q "was trained by 1 process and this is 2" "$tmp/other2.out"
result resume_with_other_ranks_refused "$?" "$tmp/other.out" "$tmp/other2.out"

# ---- refusals and faults --------------------------------------------------------
$mpirun -np 1 "$cuttle" $train --batch 32 --out "$tmp/x" : \
    -np 1 "$cuttle" $train --batch 16 --out "$tmp/x" > "$tmp/disagree.out" 2>&1
status=$?
[ "$status" -eq 2 ] && grep -q "rank 1 has --batch 16, rank 0 has --batch 32" "$tmp/disagree.out"
result ranks_that_disagree_are_refused "$?" "$tmp/disagree.out"

$mpirun -np 1 "$cuttle" $train --batch 32 --out "$tmp/y" : \
    -np 1 "$cuttle" $train --batch 32 --data-dir "$tmp/nowhere" --out "$tmp/y" \
    > "$tmp/fail.out" 2>&1
status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && grep -q "$tmp/nowhere" "$tmp/fail.out" &&
    grep -q "rank 1 of 2 failed" "$tmp/fail.out"
result failing_rank_ends_the_job "$?" "$tmp/fail.out"

# A long run; once it has saved an epoch, rank 1 is killed.
$mpirun -np 2 "$cuttle" $train --batch 32 --epochs 100000 --out "$tmp/killed" \
    > "$tmp/killed.out" 2>&1 &
kill_after_an_epoch $! "$tmp/killed" 100
echo "# killed rank 1 (pid ${victim:-none found}): mpirun ended with $status after $seconds s"
# the checkpoints are whole (each replaced atomically): eval and a reader take them
[ -n "$victim" ] && [ "$status" -ne 0 ] && [ "$status" -ne 124 ] &&
    "$cuttle" eval --weights "$tmp/killed/model.safetensors" --data-dir "$tmp/data" \
        > "$tmp/killed-eval.out" 2>&1 &&
    "$python" tests/safetensors_diff.py "$tmp/killed/state.safetensors" \
        "$tmp/killed/state.safetensors" 0 >> "$tmp/killed-eval.out" 2>&1
result killed_rank_ends_the_job "$?" "$tmp/killed.out" "$tmp/killed-eval.out"

$mpirun -np 2 "$cuttle" doctor --json --no-cpu-gemm --gemm-size 16 > "$tmp/doctor2.out" 2>&1
grep -q '"world_size": 2' "$tmp/doctor2.out"
result doctor_reports_world_size "$?" "$tmp/doctor2.out"

# ---- synchronized batchnorm --------------------------------------------------------
# A small network with batchnorm after each conv and in the classifier
# (tests/fixtures/small_bn.model):
# with --sync-bn, 2 ranks of 32 normalize over the 64 images together, so
# they end with the weights and running statistics of one process of 64;
# without it each rank normalizes its own 32 and they end elsewhere.
bn="$train --model tests/fixtures/small_bn.model --max-steps 20"
"$cuttle" $bn --batch 64 --out "$tmp/bn-one" > "$tmp/bn-one.out" 2>&1 &&
    $mpirun -np 2 "$cuttle" $bn --batch 32 --sync-bn --out "$tmp/bn-sync" \
        > "$tmp/bn-sync.out" 2>&1 &&
    "$python" tests/safetensors_diff.py "$tmp/bn-one/model.safetensors" \
        "$tmp/bn-sync/model.safetensors" 1e-5 > "$tmp/bn-diff.out" 2>&1
result sync_bn_two_ranks_equal_one_process "$?" "$tmp/bn-one.out" "$tmp/bn-sync.out" \
    "$tmp/bn-diff.out"
sed 's/^/# --sync-bn, 2 ranks vs 1 process: /' "$tmp/bn-diff.out"
$mpirun -np 2 "$cuttle" $bn --batch 32 --out "$tmp/bn-local" > "$tmp/bn-local.out" 2>&1 &&
    ! "$python" tests/safetensors_diff.py "$tmp/bn-one/model.safetensors" \
        "$tmp/bn-local/model.safetensors" 1e-3 > "$tmp/bn-local-diff.out" 2>&1
result batchnorm_without_sync_bn_is_per_rank "$?" "$tmp/bn-local.out" "$tmp/bn-local-diff.out"
sed 's/^/# without --sync-bn: /' "$tmp/bn-local-diff.out"
