#!/bin/sh
# bench/compare --device cuda without a GPU: the plumbing of its GPU half
# (bench/compare_gpu.py) with cuttle on the emulated device (build-emu,
# `make CUDA=emu`) and a fake PyTorch peer written below, whose variants
# answer fixed times and memory, fail in their second run (amp) or are
# unavailable (compile).  Checks the speed and memory table and its ratios,
# the goals, the predicted-vs-measured join per kernel, the notes, the
# "unavailable" and "failed" reports, the budget's cut, a peer that hangs,
# the message when the emulated build is missing, that the Markdown tables
# are well formed, and that every JSON line parses; then the real peer's
# reasons where PyTorch has no GPU, and that the CPU path still writes its
# table.  Runs no GPU; every time in it is the emulator's.  Prints PASS/FAIL
# lines.
EMU_BUILD=${EMU_BUILD:-build-emu}
python=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

result() { # name, status
    if [ "$2" -eq 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi
}

if [ ! -x "$EMU_BUILD/cuttle" ]; then
    if [ -n "$CT_REQUIRE_EMU" ]; then # make check: the emulated build must be there
        echo "FAIL test_bench_compare_cuda: $EMU_BUILD/cuttle is not built, and CT_REQUIRE_EMU is set"
        exit 1
    fi
    echo "SKIP test_bench_compare_cuda: $EMU_BUILD/cuttle is not built (make CUDA=emu)"
    exit 0
fi

# The fake peer: torch_bench.py's command line and --serve protocol.
# eager: 4 ms a step, 4 MiB; strict (--no-tf32): 5 ms, 5 MiB; graphs: 1 ms,
# 2 MiB; amp: one run, then a failure; compile: unavailable (exit status 2).  Each says one line on
# stdout that is not JSON, as a library may.
cat > "$tmp/peer.py" <<'PY'
import argparse, json, sys
parser = argparse.ArgumentParser()
for flag in ("--json", "--serve", "--compile", "--channels-last", "--amp", "--cuda-graphs",
             "--no-tf32"):
    parser.add_argument(flag, action="store_true")
for option in ("--model", "--input", "--device", "--mode", "--amp-dtype"):
    parser.add_argument(option)
for option in ("--batch", "--steps", "--warmup"):
    parser.add_argument(option, type=int)
args = parser.parse_args()
if not (args.serve and args.json and args.device == "cuda" and args.mode == "train"):
    sys.exit(f"fake peer: unexpected command line {sys.argv}")
if args.compile:
    print("fake: torch.compile is not in this PyTorch", file=sys.stderr)
    sys.exit(2)
ms, mib = (1.0, 2) if args.cuda_graphs else (2.0, 3) if args.amp else \
    (5.0, 5) if args.no_tf32 else (4.0, 4)
print("a library's chatter on stdout", flush=True)
print(json.dumps({"ready": True}), flush=True)
runs = 0
while sys.stdin.readline():
    runs += 1
    if args.amp and runs == 2:
        print("fake: CUDA out of memory in the second run", file=sys.stderr)
        sys.exit(1)
    fields = dict(framework="pytorch fake", model=args.model, batch=args.batch,
                  input=args.input, device=args.device, backend="fake GPU", mode=args.mode,
                  steps=args.steps, warmup=args.warmup, median_ms=ms,
                  images_per_second=args.batch / (ms / 1e3), peak_device_bytes=mib << 20,
                  emulated=False)
    print(json.dumps(fields), flush=True)
PY

common="--device cuda --cuttle $EMU_BUILD/cuttle --emu-cuttle $EMU_BUILD/cuttle --batch 8 \
--steps 2 --warmup 0 --kernels native --models simplecnn --python $python --peer $tmp/peer.py"

bench/compare $common --reps 2 --out-dir "$tmp/a" > "$tmp/a.out" 2> "$tmp/a.err"
status=$?
[ "$status" -eq 0 ] && [ -s "$tmp/a/compare-cuda.md" ] && [ -s "$tmp/a/compare-cuda.jsonl" ] &&
    head -n "$(wc -l < "$tmp/a/compare-cuda.md")" "$tmp/a.out" | cmp -s - "$tmp/a/compare-cuda.md"
result compare_cuda_runs_and_writes_md_and_jsonl $?
[ "$status" -eq 0 ] || sed 's/^/  /' "$tmp/a.err" >&2

# The checks on the tables read them as a user would: by their headers.
cat > "$tmp/tables.py" <<'PY'
import json, sys

def tables(path):
    """{first header cell: [row dicts]}, failing on a row whose cell count is not its header's."""
    found, header, rows = {}, None, None
    for line in open(path).read().splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header, rows = cells, []
            elif set(line.replace("|", "").split()) <= {"---", "---:"}:
                continue
            else:
                assert len(cells) == len(header), f"{len(cells)} cells under {header}: {line}"
                rows.append(dict(zip(header, cells)))
        elif header is not None:
            found[header[0]] = (header, rows)
            header = None
    return found

def number(text):
    return float(text.replace(",", "").rstrip("x").strip("*"))

def lines(path):
    return [json.loads(line) for line in open(path)]
PY

# Speed and memory: one row per variant; each ratio is the medians'; cuttle's
# peak is its allocator's; the failed and unavailable variants say so.
"$python" - "$tmp/a" "$tmp/tables.py" <<'PY'
import statistics, sys
exec(open(sys.argv[2]).read())
out = sys.argv[1]
header, rows = tables(out + "/compare-cuda.md")["model"]
assert [r["PyTorch variant"] for r in rows] == ["eager fp32", "eager fp32, no TF32",
                                                "eager channels_last + AMP bf16",
                                                "CUDA Graphs fp32", "torch.compile fp32"], rows
assert [r["cuttle precision"] for r in rows] == ["tf32", "fp32", "bf16", "tf32", "tf32"], rows
raw = lines(out + "/compare-cuda.jsonl")
medians, peaks = {}, {}
for side, precision in (("cuttle", "fp32"), ("cuttle-tf32", "tf32"), ("cuttle-bf16", "bf16")):
    ours = [r for r in raw if r["side"] == side]
    assert len(ours) == 2 and all(r["emulated"] and r["batch"] == 8 and
                                  r["precision"] == precision for r in ours), ours
    medians[side] = statistics.median(r["images_per_second"] for r in ours)
    peaks[side] = max(r["peak_device_bytes"] for r in ours) / 1048576
    assert peaks[side] > 0, ours
eager, strict, amp, graphs, compiled = rows
for row, img_s, mib, side in ((eager, 2000, 4, "cuttle-tf32"), (strict, 1600, 5, "cuttle"),
                              (amp, 4000, 3, "cuttle-bf16"), (graphs, 8000, 2, "cuttle-tf32")):
    median, peak = medians[side], peaks[side]
    assert abs(number(row["cuttle img/s"]) - median) <= 0.1, row
    assert number(row["PyTorch img/s"]) == img_s, row
    assert abs(number(row["cuttle / PyTorch"]) - median / img_s) <= 0.01, row
    assert abs(number(row["cuttle peak MiB"]) - peak) <= 0.1, row
    assert number(row["PyTorch peak MiB"]) == mib, row
    assert abs(number(row["memory cuttle / PyTorch"]) - peak / mib) <= 0.01, row
assert compiled["PyTorch img/s"] == "unavailable" and compiled["cuttle / PyTorch"] == "-"
assert compiled["PyTorch peak MiB"] == "unavailable", compiled
sides = [r["side"] for r in raw]
assert sides.count("eager") == 2 and sides.count("graphs") == 2 and sides.count("amp") == 1
assert sides.count("strict") == 2, sides
assert "compile" not in sides and sides.count("profile_predicted") == 1, sides
text = open(out + "/compare-cuda.md").read()
for note in ("torch.compile fp32: unavailable: fake: torch.compile is not in this PyTorch",
             "eager channels_last + AMP bf16: failed: fake: CUDA out of memory in the second run",
             "cuttle ran on the emulated device", "eager fp32 runs (img/s): 2000, 2000"):
    assert note in text, note
PY
result speed_and_memory_ratios_and_reasons $?

# Goals: measured against their bounds; ResNet-50's are named as not run.
"$python" - "$tmp/a" "$tmp/tables.py" <<'PY'
import sys
exec(open(sys.argv[2]).read())
header, rows = tables(sys.argv[1] + "/compare-cuda.md")["goal"]
goals = {r["goal"]: r for r in rows}
assert len(goals) == 7, goals
fast = goals["SimpleCNN training step >= 3x PyTorch eager"]
assert fast["status"] == ("**met**" if number(fast["measured"]) >= 3 else "not met"), fast
graphs = goals["SimpleCNN training step >= 1.2x PyTorch with CUDA Graphs"]
assert graphs["status"] in ("**met**", "not met") and number(graphs["measured"]) > 0, graphs
memory = goals["SimpleCNN peak GPU memory <= 0.8x PyTorch eager's"]
assert memory["status"] == ("**met**" if number(memory["measured"]) <= 0.8 else "not met")
for name in ("ResNet-50 bf16 >= 1.0x PyTorch AMP", "VGG-11 peak GPU memory <= 0.8x PyTorch eager's"):
    assert goals[name]["status"].startswith("not run"), goals[name]
PY
result goals_marked_met_or_not $?

# Per kernel: every measured row of cuttle's profile is matched by name with
# the emulated prediction; the ratios and the step's totals add up.
"$python" - "$tmp/a" "$tmp/tables.py" <<'PY'
import sys
exec(open(sys.argv[2]).read())
raw = lines(sys.argv[1] + "/compare-cuda.jsonl")
measured, = [r for r in raw if r["side"] == "profile_measured"]
predicted, = [r for r in raw if r["side"] == "profile_predicted"]
assert predicted["emulated"] and predicted["batch"] == measured["batch"] == 8
header, rows = tables(sys.argv[1] + "/compare-cuda.md")["phase"]
step = rows.pop()
assert step["phase"] == "**step**", step
assert len(rows) == len(measured["ops"]) >= 10, (len(rows), len(measured["ops"]))
assert measured["steps"] == 2 and predicted["steps"] == 1, (measured["steps"], predicted["steps"])
expected = {(op["phase"], op["op"], op["kernel"]): op for op in predicted["ops"]}
ran = {(op["phase"], op["op"], op["kernel"]): op for op in measured["ops"]}
total = 0.0
for row in rows:
    key = (row["phase"], row["op"], row["kernel"])
    op = expected[key]
    p = op["predicted"]["predicted_ms"] / predicted["steps"]
    m = number(row["measured ms / step"])
    assert abs(m - ran[key]["total_ms"] / measured["steps"]) <= 1e-4, (row, ran[key])
    assert abs(number(row["predicted ms / step"]) - p) <= 1e-4, (row, p)
    if p == 0:  # a node run by its pair's first (a weight gradient): no kernel of its own
        assert row["measured / predicted"] == "-", row
    else:
        assert abs(number(row["measured / predicted"]) - m / p) <= 0.01 * m / p + 0.01, row
    assert number(row["calls / step"]) == op["calls"] / predicted["steps"], row
    total += p
assert abs(number(step["predicted ms / step"]) - total) <= 1e-3, (step, total)
assert abs(number(step["measured ms / step"]) - measured["step_ms"]) <= 1e-3, step
text = open(sys.argv[1] + "/compare-cuda.md").read()
assert "The measured side ran on the emulated device" in text
PY
result predicted_vs_measured_join $?

# The budget: with almost none, one repetition of three and a note; without
# the emulated build, the command that builds it.
bench/compare $common --reps 3 --budget 0.01 --emu-cuttle "$tmp/none" --variants eager \
    --out-dir "$tmp/b" > "$tmp/b.out" 2> "$tmp/b.err" &&
    "$python" - "$tmp/b" "$tmp/tables.py" <<'PY'
import sys
exec(open(sys.argv[2]).read())
raw = lines(sys.argv[1] + "/compare-cuda.jsonl")
assert [r["side"] for r in raw] == ["profile_measured", "cuttle-tf32", "eager"], raw
text = open(sys.argv[1] + "/compare-cuda.md").read()
assert "cut short after 1 of 3 repetitions" in text, text
assert "is not there: `make -j$(nproc) CUDA=emu` builds it" in text, text
header, rows = tables(sys.argv[1] + "/compare-cuda.md")["model"]
assert len(rows) == 1 and rows[0]["PyTorch variant"] == "eager fp32", rows
PY
result budget_cut_and_missing_emulated_build $?

# A peer that stops answering is killed at its timeout, and its cells say
# "over budget".
cat > "$tmp/hang.py" <<'PY'
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
time.sleep(60)
PY
PYTHONDONTWRITEBYTECODE=1 "$python" - "$tmp/hang.py" <<'PY'
import argparse, sys, time
sys.path.insert(0, "bench")
import compare_gpu
args = argparse.Namespace(python=sys.executable, peer=sys.argv[1])
peer = compare_gpu.Peer(args, [], [])
peer.wait_ready(30)
start = time.monotonic()
result, error = peer.run(1.0)
assert result is None and error == "stopped after 1 s running: over the time budget", error
assert time.monotonic() - start < 5 and peer.process.wait(timeout=5) != 0
assert peer.run(30) == (None, error)
row = {"errors": {"eager": error}}
assert compare_gpu.side_cell(row, "eager", None, ".1f") == "over budget"
peer.close()
PY
result hung_peer_is_stopped $?

# The real peer where PyTorch sees no GPU (or is not there): every variant is
# reported with its reason, nothing crashes.
if "$python" -c 'import torch' 2> /dev/null; then
    bench/compare --device cuda --cuttle "$EMU_BUILD/cuttle" --batch 8 --steps 1 --warmup 0 \
        --kernels native --models simplecnn --reps 1 --no-profile --out-dir "$tmp/c" \
        > "$tmp/c.out" 2> "$tmp/c.err" &&
        "$python" - "$tmp/c" "$tmp/tables.py" <<'PY'
import sys, torch
exec(open(sys.argv[2]).read())
header, rows = tables(sys.argv[1] + "/compare-cuda.md")["model"]
text = open(sys.argv[1] + "/compare-cuda.md").read()
if not torch.cuda.is_available():
    assert all(r["PyTorch img/s"] in ("failed", "unavailable") for r in rows), rows
    assert "sees no CUDA device" in text, text
if not hasattr(torch, "compile"):
    compiled, = [r for r in rows if r["PyTorch variant"] == "torch.compile fp32"]
    assert compiled["PyTorch img/s"] == "unavailable", compiled
    assert "torch.compile fp32: unavailable: torch_bench: --compile needs torch.compile" in text
assert "## cuttle per kernel" not in text
PY
    result real_peer_reports_why $?
fi

# The CPU path is the one it was: one table, cuttle against one peer.
if "$python" -c 'import torch' 2> /dev/null && [ -x "${BUILD:-build}/cuttle" ]; then
    bench/compare --cuttle "${BUILD:-build}/cuttle" --models lenet5 --reps 1 --steps 2 \
        --warmup 0 --threads 1 --out-dir "$tmp/d" > "$tmp/d.out" 2> "$tmp/d.err" &&
        grep -q '^| model | input | batch | mode | device | cuttle img/s (median) | torch img/s (median) | ratio cuttle/torch |$' "$tmp/d/compare-cpu.md" &&
        grep -q '^| lenet5 | 3x32x32 | 128 | train | cpu | [0-9,.]* | [0-9,.]* | \*\*[0-9.]*x\*\* |$' "$tmp/d/compare-cpu.md" &&
        [ "$(wc -l < "$tmp/d/compare-cpu.jsonl")" -eq 2 ]
    result cpu_path_unchanged $?
fi

exit "$failed"
