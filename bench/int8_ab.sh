#!/bin/sh
# Interleaved int8 against f32 inference (docs/perf.md, "INT8 at batch 64"):
# per repetition, `cuttle bench --mode infer` on the int8 file with an
# older build (OLD, optional: a worktree's build/cuttle), on the int8 file
# with this build, and on the f32 checkpoint with this build; images/s.
#   bench/int8_ab.sh F32.safetensors INT8.safetensors [REPS] [STEPS]
#   OLD=/tmp/old/build/cuttle BATCH=64 bench/int8_ab.sh ...
set -u
f32=$1 int8=$2 reps=${3:-5} steps=${4:-20}
new=$(dirname "$0")/../build/cuttle
batch=${BATCH:-64}
rate() {
    "$1" bench --weights "$2" --mode infer --batch "$batch" --steps "$steps" 2>&1 |
        awk '/images\/s/ { print $1 }'
}
for r in $(seq "$reps"); do
    old=-
    [ -n "${OLD:-}" ] && old=$(rate "$OLD" "$int8")
    echo "rep $r old_int8 $old int8 $(rate "$new" "$int8") f32 $(rate "$new" "$f32")"
done
