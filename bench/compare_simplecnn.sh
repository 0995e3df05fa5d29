#!/bin/sh
# SimpleCNN throughput, cuttle vs PyTorch, alternating A B A B in one run on
# one machine.  Usage: bench/compare_simplecnn.sh [reps] [batch]
#   EVAL=1          time inference (CT_EVAL / no_grad) instead of training
#   THREADS=n       threads for both (default: all cores)
#   BASELINE=path   also run another simplecnn_train binary (an older build)
#                   in each round, reported as "baseline"
#   IDLE=1          before each round, wait (up to ~2 min) until vmstat shows
#                   the CPUs >= 90% idle: on a shared machine other work makes
#                   single runs 3-30x slower
# Needs `make` (build/bench/simplecnn_train) and Debian's python3-torch.
set -e
reps=${1:-5}
batch=${2:-64}
threads=${THREADS:-$(nproc)}
eval_mode=${EVAL:-0}
cd "$(dirname "$0")/.."
make -s build/bench/simplecnn_train >/dev/null
out=$(mktemp)

wait_idle() {
    tries=0
    while [ "$tries" -lt 30 ]; do
        if vmstat 2 2 | tail -n 1 | awk '{exit !($15 >= 90)}'; then return; fi
        tries=$((tries + 1))
    done
    echo "compare_simplecnn: the machine stayed busy; measuring anyway" >&2
}

i=0
while [ "$i" -lt "$reps" ]; do
    [ "${IDLE:-0}" = 1 ] && wait_idle
    if [ -n "${BASELINE:-}" ]; then
        "$BASELINE" --batch "$batch" --threads "$threads" --eval "$eval_mode" |
            sed 's/"framework": "cuttle"/"framework": "baseline"/' >> "$out"
    fi
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
    return (statistics.median(vals) if vals else 0.0), vals
first = next(r for r in rows if r["framework"] == "cuttle")
torch_row = next(r for r in rows if r["framework"].startswith("pytorch"))
c, cv = med("cuttle"); t, tv = med("pytorch"); b, bv = med("baseline")
print(f"SimpleCNN {first['mode']}, batch {first['batch']}, input {first['input']}, {len(cv)} reps each")
if bv:
    print(f"  baseline: {b:9.1f} images/s  (runs: {', '.join(f'{v:.0f}' for v in bv)})")
print(f"  cuttle  : {c:9.1f} images/s  (runs: {', '.join(f'{v:.0f}' for v in cv)})  [{first['backend']}]")
print(f"  pytorch : {t:9.1f} images/s  (runs: {', '.join(f'{v:.0f}' for v in tv)})  [{torch_row['framework']}, {torch_row['backend']}]")
print(f"  ratio cuttle/pytorch: {c / t:.2f}x (against pytorch's best run: {c / max(tv):.2f}x)")
if bv:
    print(f"  ratio baseline/pytorch: {b / t:.2f}x")
PY
rm -f "$out"
