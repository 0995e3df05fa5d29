#!/bin/sh
# One process against two MPI ranks of `cuttle train` on this machine
# (docs/perf.md, "Data parallel (MPI)"): one epoch of MODEL at a global
# batch of 64, each configuration RUNS times, interleaved; prints the
# median images/s and, for two ranks, what the all-reduces cost per step.
#   sh bench/dist_scaling.sh [MODEL [TRAIN_IMAGES [RUNS [SMALL_BUCKET_MB]]]]
#   (defaults: simplecnn, 60000, 5, 0.05; BUILD=build)
# Configurations: 1 rank x 2 threads, 1 rank x 1 thread, 2 ranks x 1 thread
# with the default 25 MB buckets (one bucket, started after backward) and
# with SMALL_BUCKET_MB buckets (started during backward).
BUILD=${BUILD:-build}
model=${1:-simplecnn}
images=${2:-60000}
runs=${3:-5}
small=${4:-0.05}
python=${CUTTLE_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$tmp/data"
"$python" tests/fashion_slice.py /usr/share/datasets/fashion-mnist "$tmp/data" "$images" 500
train="$BUILD/cuttle train --model $model --data-dir $tmp/data --epochs 1 --json --out $tmp/run"

run() { # label, command...: appends "label images/s [mpi wait step]" to results
    label=$1
    shift
    "$@" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    "$python" - "$label" "$tmp/out" "$tmp/err" >> "$tmp/results" <<'PY'
import json, re, sys
label, out, err = sys.argv[1:]
ips = json.load(open(out))["images_per_second"]
m = re.search(r"per step ([0-9.]+) ms in MPI calls, ([0-9.]+) ms of it waiting before the "
              r"optimizer, of a ([0-9.]+) ms step", open(err).read())
print(label, ips, *(m.groups() if m else ()))
PY
}

for i in $(seq "$runs"); do
    run "1x2" $train --batch 64 --threads 2
    run "1x1" $train --batch 64 --threads 1
    run "2x1" mpirun --oversubscribe -np 2 $train --batch 32 --threads 1
    run "2x1-small" mpirun --oversubscribe -np 2 $train --batch 32 --threads 1 --bucket-mb "$small"
done
"$python" - "$tmp/results" "$model" "$small" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, *values = line.split()
    rows.setdefault(label, []).append([float(v) for v in values])
names = {"1x2": "1 rank x 2 threads, batch 64", "1x1": "1 rank x 1 thread, batch 64",
         "2x1": "2 ranks x 1 thread, batch 32 each, 25 MB buckets",
         "2x1-small": f"2 ranks x 1 thread, batch 32 each, {sys.argv[3]} MB buckets"}
print(f"{sys.argv[2]}, median of {len(rows['1x2'])} runs")
print("| configuration | images/s | runs | all-reduce ms/step (in MPI) | waited before "
      "optimizer ms/step | step ms | all-reduce share of step |")
print("|---|---|---|---|---|---|---|")
for label, runs in rows.items():
    med = [statistics.median(column) for column in zip(*runs)]
    each = ", ".join(f"{run[0]:.0f}" for run in runs)
    if len(med) == 4:
        print(f"| {names[label]} | {med[0]:.0f} | {each} | {med[1]:.3f} | {med[2]:.3f} | "
              f"{med[3]:.2f} | {100 * med[1] / med[3]:.1f}% |")
    else:
        print(f"| {names[label]} | {med[0]:.0f} | {each} | | | | |")
PY
