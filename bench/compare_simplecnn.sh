#!/bin/sh
# SimpleCNN training throughput, cuttle vs PyTorch, alternating A B A B in
# one run on one machine.  Usage: bench/compare_simplecnn.sh [reps] [batch]
# EVAL=1 times inference instead of training; THREADS=n sets the threads.
# Needs `make` (build/bench/simplecnn_train) and Debian's python3-torch.
set -e
reps=${1:-5}
batch=${2:-64}
threads=${THREADS:-$(nproc)}
eval_mode=${EVAL:-0}
cd "$(dirname "$0")/.."
make -s build/bench/simplecnn_train >/dev/null
out=$(mktemp)
i=0
while [ "$i" -lt "$reps" ]; do
    build/bench/simplecnn_train --batch "$batch" --threads "$threads" --eval "$eval_mode" >> "$out"
    /usr/bin/python3 bench/peers/torch_simplecnn.py --batch "$batch" --threads "$threads" \
        --eval "$eval_mode" >> "$out"
    i=$((i + 1))
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def med(prefix):
    vals = [r["images_per_second"] for r in rows if r["framework"].startswith(prefix)]
    return statistics.median(vals), vals
c, cv = med("cuttle"); t, tv = med("pytorch")
print(f"SimpleCNN {rows[0]['mode']}, batch {rows[0]['batch']}, input {rows[0]['input']}, {len(cv)} reps each")
print(f"  cuttle : {c:9.1f} images/s  (runs: {', '.join(f'{v:.0f}' for v in cv)})  [{rows[0]['backend']}]")
print(f"  pytorch: {t:9.1f} images/s  (runs: {', '.join(f'{v:.0f}' for v in tv)})  [{rows[1]['framework']}, {rows[1]['backend']}]")
print(f"  ratio cuttle/pytorch: {c / t:.2f}x")
PY
rm -f "$out"
