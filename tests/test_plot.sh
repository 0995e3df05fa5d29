#!/bin/sh
# SVG charts (tools/plot.h): cuttle plot on runs' metrics.jsonl, one and
# several runs, hostile directory names, values that are not finite, one
# epoch, constant values; its errors on bad input; curves.svg written by
# cuttle train; the bar chart of cuttle profile.  Every SVG must be valid
# XML (xmllint where installed; tests/plot_check.py always parses it) and
# its points, mapped back through the axes it states, must be the metrics'
# values (tests/plot_check.py).  PASS/FAIL lines.
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
python=/usr/bin/python3
fashion=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
[ -n "$KEEP" ] || trap 'rm -rf "$tmp"' EXIT

. tests/result.sh

# valid SVG: xmllint when there is one; plot_check.py parses it in any case
valid() {
    if command -v xmllint > /dev/null; then
        xmllint --noout "$1" || return 1
    fi
    "$python" -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$1"
}

# curves SVG RUN_DIR...: valid, and its points are the runs' metrics
curves() {
    valid "$1" && "$python" tests/plot_check.py curves "$@"
}

# a run directory with the metrics lines given on stdin
run_dir() {
    mkdir -p "$1" && cat > "$1/metrics.jsonl"
}

metrics_line() { # epoch train_loss test_loss train_accuracy test_accuracy lr
    printf '{"epoch": %s, "train_loss": %s, "train_accuracy": %s, "test_loss": %s, ' \
        "$1" "$2" "$4" "$3"
    printf '"test_accuracy": %s, "seconds": 1.5, "images_per_second": 900.0, "lr": %s}\n' \
        "$5" "$6"
}

# ---- one run, several runs ------------------------------------------------------

{
    metrics_line 1 1.9 1.6 0.41 0.52 0.0312
    metrics_line 2 1.2 1.05 0.63 0.66 0.05
    metrics_line 3 0.81 0.77 0.74 0.725 0.0401
    metrics_line 4 0.62 0.64 0.79 0.768 0.021
    metrics_line 5 0.51 0.585 0.823 0.791 0.0052
    metrics_line 6 0.47 0.566 0.838 0.801 0.000245671
} | run_dir "$tmp/one"
"$cuttle" plot "$tmp/one" > "$tmp/one.out" 2>&1 &&
    grep -q "wrote $tmp/one/curves.svg" "$tmp/one.out" &&
    curves "$tmp/one/curves.svg" "$tmp/one" >> "$tmp/one.out" 2>&1
result plot_one_run_points_match_metrics "$?" "$tmp/one.out"

{
    metrics_line 1 2.1 1.8 0.3 0.41 0.1
    metrics_line 2 1.4 1.3 0.55 0.6 0.1
    metrics_line 3 1.0 1.1 0.66 0.64 0.01
} | run_dir "$tmp/two"
{
    metrics_line 2 0.9 0.95 0.7 0.69 0.002
    metrics_line 4 0.7 0.8 0.75 0.73 0.001
} | run_dir "$tmp/three/"
"$cuttle" plot "$tmp/one" "$tmp/two" "$tmp/three/" -o "$tmp/all.svg" > "$tmp/all.out" 2>&1 &&
    curves "$tmp/all.svg" "$tmp/one" "$tmp/two" "$tmp/three/" >> "$tmp/all.out" 2>&1
result plot_several_runs_on_one_chart "$?" "$tmp/all.out"

"$cuttle" plot "$tmp/one" "$tmp/two" > "$tmp/no-o.out" 2>&1
status=$?
[ "$status" -eq 2 ] && grep -q -- "-o FILE" "$tmp/no-o.out"
result plot_several_runs_need_o "$?" "$tmp/no-o.out"

# ---- hostile names --------------------------------------------------------------

hostile="$tmp/a&b <c> \"q\" 'x' ]]> &amp;"
metrics_line 1 1.0 1.1 0.5 0.45 0.01 | run_dir "$hostile"
metrics_line 2 0.8 0.9 0.6 0.55 0.005 >> "$hostile/metrics.jsonl"
"$cuttle" plot "$hostile" > "$tmp/hostile.out" 2>&1 &&
    curves "$hostile/curves.svg" "$hostile" >> "$tmp/hostile.out" 2>&1 &&
    "$cuttle" plot "$hostile" "$tmp/two" --out "$tmp/hostile.svg" >> "$tmp/hostile.out" 2>&1 &&
    curves "$tmp/hostile.svg" "$hostile" "$tmp/two" >> "$tmp/hostile.out" 2>&1
result plot_escapes_hostile_run_names "$?" "$tmp/hostile.out"

# not UTF-8, and a control character: still valid XML
bytes="$tmp/$(printf 'latin1-\351-tab\t-bell\007')"
metrics_line 1 1.0 1.1 0.5 0.45 0.01 | run_dir "$bytes"
"$cuttle" plot "$bytes" > "$tmp/bytes.out" 2>&1 && valid "$bytes/curves.svg" >> "$tmp/bytes.out" 2>&1
result plot_names_not_utf8_stay_valid_xml "$?" "$tmp/bytes.out"

# ---- values: not finite, one epoch, constant ------------------------------------

{
    metrics_line 1 2.0 1.9 0.3 0.31 0.01
    metrics_line 2 nan 1.5 0.4 -nan 0.02
    metrics_line 3 1.2 inf 0.5 0.52 null
    metrics_line 4 NaN -Infinity 0.6 0.61 0.04
    metrics_line 5 0.8 1.0 -inf 0.7 Infinity
    metrics_line 6 0.7 0.9 0.75 0.71 0.02
} | run_dir "$tmp/nonfinite"
"$cuttle" plot "$tmp/nonfinite" > "$tmp/nonfinite.out" 2>&1 &&
    curves "$tmp/nonfinite/curves.svg" "$tmp/nonfinite" >> "$tmp/nonfinite.out" 2>&1
result plot_skips_nan_and_inf "$?" "$tmp/nonfinite.out"

metrics_line 1 0.9 0.8 0.7 0.72 0.05 | run_dir "$tmp/single"
"$cuttle" plot "$tmp/single" > "$tmp/single.out" 2>&1 &&
    curves "$tmp/single/curves.svg" "$tmp/single" >> "$tmp/single.out" 2>&1 &&
    [ "$(grep -c '<circle class="series-point"' "$tmp/single/curves.svg")" -eq 5 ]
result plot_single_epoch_is_a_dot "$?" "$tmp/single.out"

{
    metrics_line 1 0.5 0.5 1 1 0.01
    metrics_line 2 0.5 0.5 1 1 0.01
    metrics_line 3 0.5 0.5 1 1 0.01
} | run_dir "$tmp/constant"
{
    metrics_line 1 0 0 0 0 0.01
    metrics_line 2 0 0 0 0 0.01
} | run_dir "$tmp/zero"
"$cuttle" plot "$tmp/constant" > "$tmp/constant.out" 2>&1 &&
    curves "$tmp/constant/curves.svg" "$tmp/constant" >> "$tmp/constant.out" 2>&1 &&
    "$cuttle" plot "$tmp/zero" >> "$tmp/constant.out" 2>&1 &&
    curves "$tmp/zero/curves.svg" "$tmp/zero" >> "$tmp/constant.out" 2>&1
result plot_constant_values_get_a_range "$?" "$tmp/constant.out"

# ---- bad input: exit status and message ------------------------------------------

# expect_error NAME STATUS MESSAGE ARGS...: cuttle plot ARGS exits STATUS saying MESSAGE
expect_error() {
    name=$1 expected=$2 message=$3
    shift 3
    "$cuttle" plot "$@" > "$tmp/$name.out" 2>&1
    status=$?
    [ "$status" -eq "$expected" ] && grep -qF -- "$message" "$tmp/$name.out"
    ok=$?
    [ "$ok" -eq 0 ] || echo "exit status $status, expected $expected and: $message" >> "$tmp/$name.out"
    result "$name" "$ok" "$tmp/$name.out"
}

mkdir -p "$tmp/nometrics"
: > "$tmp/empty.jsonl"
run_dir "$tmp/empty" < "$tmp/empty.jsonl"
{
    metrics_line 1 1.0 1.1 0.5 0.45 0.01
    metrics_line 2 0.9 1.0 0.55 0.5 0.01
    echo '{"epoch": 3, "train_loss": 0.8, "test_loss": '
    metrics_line 4 0.7 0.9 0.6 0.55 0.01
} | run_dir "$tmp/corrupt"
metrics_line 1 '"low"' 1.1 0.5 0.45 0.01 | run_dir "$tmp/badtype"
echo '{"train_loss": 1.0}' | run_dir "$tmp/noepoch"
expect_error plot_missing_dir_fails 1 "no run directory $tmp/missing" "$tmp/missing"
expect_error plot_missing_metrics_fails 1 "cannot read $tmp/nometrics/metrics.jsonl" \
    "$tmp/nometrics"
expect_error plot_empty_metrics_fails 1 "$tmp/empty/metrics.jsonl has no epochs" "$tmp/empty"
expect_error plot_corrupt_line_named 1 "$tmp/corrupt/metrics.jsonl line 3 is not valid JSON" \
    "$tmp/corrupt"
expect_error plot_wrong_type_named 1 "line 1 has \"train_loss\" that is a string" "$tmp/badtype"
expect_error plot_line_without_epoch_named 1 "line 1 has no \"epoch\" number" "$tmp/noepoch"
expect_error plot_without_run_fails 2 "name a run directory"
expect_error plot_bad_option_fails 2 "unknown option '--bogus'" --bogus "$tmp/one"
[ ! -e "$tmp/corrupt/curves.svg" ] && [ ! -e "$tmp/corrupt/curves.svg.tmp" ]
result plot_failure_leaves_no_svg "$?"

# ---- cuttle train writes curves.svg; cuttle profile its bars ---------------------

if [ -f "$fashion/train-images-idx3-ubyte.gz" ]; then
    mkdir -p "$tmp/data"
    "$python" tests/fashion_slice.py "$fashion" "$tmp/data" 1024 256
    "$cuttle" train --data-dir "$tmp/data" --epochs 3 --threads 1 --out "$tmp/trained" \
        > "$tmp/train.out" 2>&1 &&
        [ "$(grep -c . "$tmp/trained/metrics.jsonl")" -eq 3 ] &&
        curves "$tmp/trained/curves.svg" "$tmp/trained" >> "$tmp/train.out" 2>&1
    result train_writes_curves_svg "$?" "$tmp/train.out"
else
    echo "FAIL train_writes_curves_svg_needs_fashion_mnist ($fashion: apt-get install dataset-fashion-mnist)"
fi

"$cuttle" profile --threads 1 --steps 2 --warmup 1 --trace "$tmp/trace.json" --json \
    > "$tmp/profile.json" 2> "$tmp/profile.err" &&
    valid "$tmp/trace.svg" >> "$tmp/profile.err" 2>&1 &&
    "$python" tests/plot_check.py bars "$tmp/trace.svg" "$tmp/profile.json" >> "$tmp/profile.err" 2>&1
result profile_writes_bars_beside_trace "$?" "$tmp/profile.err"

"$cuttle" profile --threads 1 --steps 2 --warmup 1 --mode infer --svg "$tmp/infer.svg" --json \
    > "$tmp/infer.json" 2> "$tmp/infer.err" &&
    valid "$tmp/infer.svg" >> "$tmp/infer.err" 2>&1 &&
    "$python" tests/plot_check.py bars "$tmp/infer.svg" "$tmp/infer.json" >> "$tmp/infer.err" 2>&1
result profile_svg_without_trace "$?" "$tmp/infer.err"
