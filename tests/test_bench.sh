#!/bin/sh
# cuttle bench and cuttle profile, run as a user runs them: the JSON of
# bench has every agreed field; profile's per-op times add up to the
# measured step (within 10%); its --trace is a Chrome trace; bad options
# exit with status 2.  When PyTorch is importable by /usr/bin/python3 and
# bench/peers/torch_models.py is there, the peer prints the same fields and
# the same state_dict names and shapes.  Prints PASS/FAIL lines.
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
python=/usr/bin/python3
peer=bench/peers/torch_bench.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

result() { # name, status
    if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi
}

if [ ! -x "$python" ]; then
    echo "FAIL python3_present (the tests check JSON with $python: apt-get install python3)"
    exit 1
fi

# The fields that cuttle bench and the peer both print (docs/bench.md).
fields="model batch input device mode steps median_ms p10_ms p90_ms min_ms max_ms \
images_per_second peak_host_bytes peak_device_bytes params threads"

check_bench_json() { # file
    "$python" - "$1" $fields <<'PY'
import json, sys
text = open(sys.argv[1]).read()
result = json.loads(text)
missing = [f for f in sys.argv[2:] if f not in result]
assert not missing, f"missing fields {missing} in {text}"
assert result["model"] == "simplecnn" and result["batch"] == 8, result
assert result["input"] == "1x28x28" and result["mode"] == "train" and result["steps"] == 3
for f in ("median_ms", "p10_ms", "p90_ms", "min_ms", "max_ms", "images_per_second"):
    assert isinstance(result[f], (int, float)) and result[f] > 0, (f, result[f])
assert result["min_ms"] <= result["p10_ms"] <= result["median_ms"] <= result["p90_ms"] \
    <= result["max_ms"], result
assert abs(result["images_per_second"] - 8 / (result["median_ms"] / 1e3)) < \
    0.01 * result["images_per_second"], result
assert result["peak_host_bytes"] > 0 and result["params"] == 44426, result
assert result["peak_device_bytes"] is None or result["peak_device_bytes"] > 0
assert isinstance(result["threads"], int) and result["threads"] >= 1
PY
}

args="--model simplecnn --batch 8 --input 1x28x28 --mode train --steps 3 --warmup 1"
"$cuttle" bench $args --json > "$tmp/bench.json" 2> "$tmp/err" &&
    check_bench_json "$tmp/bench.json"
result bench_json_has_every_field $?

# The step's arithmetic: SimpleCNN at batch 8, forward 2 x (conv1 6x24x24x25 +
# conv2 16x8x8x150 + fc1 120x256 + fc2 84x120 + fc3 10x84) per image; the
# training step adds the backward's two products per layer but conv1's
# (no gradient for the input) and the elementwise ops: 2.5 to 4 times the
# forward; achieved = FLOPs / median; a CPU share of its measured peak.
"$python" - "$tmp/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
forward = 8 * 2 * (6*24*24*25 + 16*8*8*150 + 120*256 + 84*120 + 10*84)
assert 2.5 * forward < r["gflop_per_step"] * 1e9 < 4 * forward, (r["gflop_per_step"], forward)
achieved = r["gflop_per_step"] / (r["median_ms"] / 1000)
assert abs(r["gflops_per_second"] - achieved) <= 0.01 * achieved + 1e-3, r
assert r["peak_gflops"] > 0 and 0 < r["share_of_peak"] < 1.5, r
# the peak is measured: FMAs on the widest vectors, at least the AVX2 ones
assert r["peak_isa"] in ("AVX-512", "AVX2", "SSE"), r
assert r["peak_gflops"] >= r["avx2_peak_gflops"] >= 0, r
PY
result bench_reports_gflops_and_share_of_peak $?

"$cuttle" bench --batch 16 --steps 2 --warmup 0 > "$tmp/out" 2>&1 &&
    grep -q "images/s" "$tmp/out"
result bench_text_output $?

"$cuttle" bench --mode infer --batch 32 --steps 2 --json > "$tmp/infer.json" 2>&1 &&
    "$python" -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["mode"] == "infer" and r["images_per_second"] > 0, r' "$tmp/infer.json"
result bench_infer_mode $?

check_profile_json() { # file, mode
    "$python" - "$1" "$2" <<'PY'
import json, sys
profile = json.load(open(sys.argv[1]))
mode = sys.argv[2]
ops = profile["ops"]
nodes_ms = sum(op["total_ms"] for op in ops) / profile["steps"]
step_ms = profile["step_ms"]
assert abs(nodes_ms - step_ms) <= 0.10 * step_ms, \
    f"the ops add up to {nodes_ms:.3f} ms per step, the measured step is {step_ms:.3f} ms"
phases = {op["phase"] for op in ops}
expected = {"forward", "backward", "optimizer"} if mode == "train" else {"forward"}
assert phases == expected, phases
for op in ops:
    assert op["calls"] % profile["steps"] == 0 and op["total_ms"] >= 0, op
    assert op["flops"] >= 0 and op["bytes"] > 0 and 0 <= op["share"] <= 1.0, op
conv = [op for op in ops if op["op"] == "conv2d"]
# conv1 + conv2 of SimpleCNN at batch 16, weights and biases, per step
flops = 16 * (2 * 6 * 24 * 24 * 25 + 6 * 24 * 24 + 2 * 16 * 8 * 8 * 150 + 16 * 8 * 8)
assert conv and sum(op["flops"] for op in conv) == flops * profile["steps"], (conv, flops)
# each row names the implementation that ran it: one of the CPU's conv paths
kernels = {"direct", "winograd", "im2col"} if "cuda" not in profile["device"] else \
    {"direct", "implicit_gemm", "cudnn"}
assert all(op["kernel"] in kernels for op in conv), conv
assert all(op["kernel"] for op in ops), ops
PY
}

"$cuttle" profile --batch 16 --steps 4 --warmup 1 --json > "$tmp/profile.json" 2> "$tmp/err" &&
    check_profile_json "$tmp/profile.json" train
result profile_ops_add_up_to_the_step $?

"$cuttle" profile --mode infer --batch 16 --steps 3 --warmup 1 --json \
    > "$tmp/profile_infer.json" 2> "$tmp/err" &&
    check_profile_json "$tmp/profile_infer.json" infer
result profile_infer_is_forward_only $?

"$cuttle" profile --batch 16 --steps 2 --warmup 0 > "$tmp/out" 2>&1 &&
    grep -q "^forward" "$tmp/out" && grep -q "^backward" "$tmp/out" &&
    grep -q "^optimizer" "$tmp/out" && grep -q "measured step" "$tmp/out"
result profile_table $?

"$cuttle" profile --batch 16 --steps 2 --warmup 0 --trace "$tmp/trace.json" > /dev/null 2>&1 &&
    "$python" - "$tmp/trace.json" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
assert isinstance(events, list), type(events)
complete = [e for e in events if e.get("ph") == "X"]
for e in events:
    assert isinstance(e, dict) and isinstance(e.get("ph"), str), e
for e in complete:
    assert isinstance(e["name"], str) and e["name"], e
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
    assert isinstance(e["args"], dict), e
steps = [e for e in complete if e["cat"] == "step"]
nodes = [e for e in complete if e["cat"] in ("forward", "backward", "optimizer")]
assert len(steps) == 2, len(steps)
assert any("flops" in e["args"] and "shapes" in e["args"] for e in nodes), nodes[:3]
for s in steps:  # every node of a step lies inside it
    inside = [n for n in nodes if s["ts"] <= n["ts"] and n["ts"] + n["dur"] <= s["ts"] + s["dur"] + 1e-3]
    assert len(inside) == s["args"]["nodes"], (len(inside), s)
PY
result profile_trace_is_chrome_json $?

# --layers: one row per node in run order, named, with its kernel, time,
# FLOPs and the share of the CPU's measured peak; the rows add up to the nodes.
"$cuttle" profile --mode infer --batch 16 --steps 3 --warmup 1 --layers --json \
    > "$tmp/layers.json" 2> "$tmp/err" &&
    "$cuttle" profile --mode infer --batch 16 --steps 2 --warmup 0 --layers > "$tmp/layers.txt" \
        2>> "$tmp/err" &&
    grep -q "^per layer, in run order" "$tmp/layers.txt" &&
    grep -q "% of peak: of the measured" "$tmp/layers.txt" &&
    grep -Eq "^%[0-9]+ \(conv2d\) +forward +[a-z0-9]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+%" \
        "$tmp/layers.txt" &&
    "$python" - "$tmp/layers.json" <<'PY'
import json, math, sys
profile = json.load(open(sys.argv[1]))
layers, ops = profile["layers"], profile["ops"]
assert profile["peak_gflops"] > 0, profile["peak_gflops"]
assert len(layers) == sum(op["calls"] for op in ops) // profile["steps"], (len(layers), ops)
conv = [l for l in layers if l["op"] == "conv2d"]
assert len(conv) == 2 and all(l["flops"] > 0 and l["shapes"] for l in conv), conv
for l in layers:
    assert l["layer"] and l["kernel"] and l["phase"] == "forward", l
    assert l["gflops_per_s"] >= 0 and 0 <= l["share_of_peak"] < 10, l
    # the share is written to 4 decimals: a slow layer's is mostly rounding
    assert math.isclose(l["share_of_peak"] * profile["peak_gflops"], l["gflops_per_s"],
                        rel_tol=0.02, abs_tol=0.5e-4 * profile["peak_gflops"] + 1e-3), l
# the layers' times add up to the nodes' time per step
assert math.isclose(sum(l["mean_ms"] for l in layers), profile["nodes_ms"], rel_tol=0.01), \
    (sum(l["mean_ms"] for l in layers), profile["nodes_ms"])
PY
result profile_layers_names_each_node $?

# --kernels NAME runs that implementation where it can: every conv2d row says im2col.
"$cuttle" profile --kernels im2col --batch 8 --steps 1 --warmup 0 --json \
    > "$tmp/im2col.json" 2> "$tmp/err" &&
    "$python" - "$tmp/im2col.json" <<'PY'
import json, sys
ops = json.load(open(sys.argv[1]))["ops"]
conv = [op for op in ops if op["op"].startswith("conv2d")]
assert conv and all(op["kernel"] == "im2col" for op in conv), conv
PY
result profile_kernels_forces_an_implementation $?

# Bad command lines: exit status 2 and a message, for both commands.
bad=0
for command in bench profile; do
    for options in "--batch 0" "--input 3x32" "--input 3x32x0" "--mode fly" "--model nope" \
        "--steps -1" "--unknown" "--threads 2 --device cpu:3" "--device tpu" "--json=1" "--kernels magic"; do
        "$cuttle" $command $options > /dev/null 2> "$tmp/err"
        status=$?
        if [ "$status" -ne 2 ] || [ ! -s "$tmp/err" ]; then
            echo "  cuttle $command $options: exit status $status (expected 2)" >&2
            bad=1
        fi
    done
done
result bad_options_exit_2 $bad

# CUDA: runs where the build has a CUDA backend and a GPU, else says why.
"$cuttle" bench --device cuda --steps 1 --warmup 0 > /dev/null 2> "$tmp/err"
status=$?
[ "$status" -eq 0 ] || { [ "$status" -eq 1 ] && grep -qi "cuda" "$tmp/err"; }
result bench_cuda_runs_or_says_why $?

# The PyTorch peer, when there is one.
if "$python" -c 'import torch' 2> /dev/null && [ -f bench/peers/torch_models.py ]; then
    "$python" "$peer" $args --threads 1 --json > "$tmp/peer.json" 2> "$tmp/err" &&
        check_bench_json "$tmp/peer.json" &&
        "$python" - "$tmp/bench.json" "$tmp/peer.json" <<'PY'
import json, sys
ours, theirs = (set(json.load(open(p))) for p in sys.argv[1:])
assert ours == theirs, f"only cuttle: {ours - theirs}, only the peer: {theirs - ours}"
PY
    result peer_prints_the_same_fields $?

    "$cuttle" bench --param-shapes > "$tmp/ours.json" 2> "$tmp/err" &&
        "$python" "$peer" --param-shapes > "$tmp/theirs.json" 2>> "$tmp/err" &&
        "$python" - "$tmp/ours.json" "$tmp/theirs.json" <<'PY'
import json, sys
ours, theirs = (json.load(open(p)) for p in sys.argv[1:])
assert ours == theirs, f"cuttle {ours}\npytorch {theirs}"
PY
    result param_shapes_agree_with_pytorch $?

    bad=0
    for options in "--batch 0" "--input 3x32" "--mode fly" "--unknown" "--compile" \
        "--device tpu"; do
        "$python" "$peer" $options --steps 1 > /dev/null 2> "$tmp/err"
        status=$?
        expected=2
        [ "$options" = "--compile" ] && [ "$status" -eq 0 ] && expected=0 # PyTorch 2.x runs it
        if [ "$status" -ne "$expected" ] || { [ "$status" -eq 2 ] && [ ! -s "$tmp/err" ]; }; then
            echo "  torch_bench.py $options: exit status $status (expected 2)" >&2
            bad=1
        fi
    done
    result peer_bad_options_exit_2 $bad
else
    echo "  (no PyTorch or no bench/peers/torch_models.py: the peer's checks are skipped)" >&2
fi
exit $failed
