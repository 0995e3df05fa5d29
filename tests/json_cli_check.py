"""Every --json output of the command line, and metrics.jsonl, with names
full of quotes, backslashes, control characters and a byte that is not
UTF-8: each must be strict JSON (valid UTF-8, no bare control characters,
no NaN or Infinity) and carry the names back.  Training refuses a path
that is not UTF-8 up front (its checkpoints keep the arguments as text),
so the run uses the same name without that byte.  Run by tests/test_json_cli.sh:
python3 tests/json_cli_check.py CUTTLE DATA_DIR TMP; prints PASS/FAIL lines."""
import json
import os
import shutil
import struct
import subprocess
import sys

cuttle, data, tmp = (os.fsencode(a) for a in sys.argv[1:4])
HOSTILE = b'q"uote \\back\tslash\nnew\x01ctl \xff \xc3\xa9'
# What a JSON reader gets back: the byte that is not UTF-8 as U+FFFD.
HOSTILE_TEXT = HOSTILE.decode("utf-8", "replace")
HOSTILE_UTF8 = HOSTILE.replace(b"\xff", b"")
failed = 0


def strict(text):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text.decode("utf-8"), parse_constant=refuse)


def check(name, args, expect=(), exit_ok=(0,)):
    """Run cuttle with args; stdout must be one strict JSON value whose
    strings include each of expect."""
    global failed
    run = subprocess.run([cuttle] + args, capture_output=True)
    why = None
    value = None
    if run.returncode not in exit_ok:
        why = f"exit status {run.returncode}: {run.stderr.decode(errors='replace')[-2000:]}"
    else:
        try:
            value = strict(run.stdout)
        except ValueError as e:
            why = f"not strict JSON ({e}): {run.stdout[:2000]!r}"
    if why is None:
        strings = []
        collect(value, strings)
        missing = [e for e in expect if not any(e in s for s in strings)]
        if missing:
            why = f"no string holds {missing!r}; strings: {strings[:20]!r}"
    print(("PASS " if why is None else "FAIL ") + name, flush=True)
    if why is not None:
        failed += 1
        print("    " + why, file=sys.stderr)
    return value


def collect(value, out):
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            out.append(k)
            collect(v, out)
    elif isinstance(value, list):
        for v in value:
            collect(v, out)


def write_npy(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join(f"{d}, " for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(values)}f", *values))


def set_metadata(path, changes):
    """Rewrite a safetensors file's __metadata__ strings."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["__metadata__"].update(changes)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + n:])


model = os.path.join(tmp, HOSTILE + b".model")
shutil.copy(b"models/simplecnn.model", model)
common = [b"--threads", b"1"]
train = [b"train", b"--data-dir", data, b"--epochs", b"1", b"--max-steps", b"3", b"--batch",
         b"32", b"--json"] + common

refused = subprocess.run([cuttle] + train + [b"--model", model, b"--out", os.path.join(tmp, b"r")],
                         capture_output=True)
ok = (refused.returncode == 2 and b"is not UTF-8" in refused.stderr and not refused.stdout
      and not os.path.exists(os.path.join(tmp, b"r")))
print(("PASS " if ok else "FAIL ") + "json_train_refuses_a_path_that_is_not_utf8")
if not ok:
    failed += 1
    print(f"    exit status {refused.returncode}: {refused.stderr[-2000:]!r}", file=sys.stderr)

model_utf8 = os.path.join(tmp, HOSTILE_UTF8 + b".model")
shutil.copy(b"models/simplecnn.model", model_utf8)
run_dir = os.path.join(tmp, b"run " + HOSTILE_UTF8)
check("json_train", train + [b"--model", model_utf8, b"--out", run_dir],
      expect=[HOSTILE_UTF8.decode()])

metrics = os.path.join(run_dir, b"metrics.jsonl")
try:
    with open(metrics, "rb") as f:
        lines = f.read().splitlines()
    for line in lines:
        strict(line)
    ok = len(lines) >= 1
except (OSError, ValueError) as e:
    ok = False
    print(f"    {metrics!r}: {e}", file=sys.stderr)
print(("PASS " if ok else "FAIL ") + "json_metrics_lines")
failed += not ok

# A checkpoint whose model and class names are hostile (metadata must be
# UTF-8, so U+FFFD stands in for the byte that is not).
# Copied under a name that is not UTF-8.
classes = [f"{HOSTILE_TEXT} {i}" for i in range(10)]
weights = os.path.join(tmp, HOSTILE + b".safetensors")
if os.path.exists(os.path.join(run_dir, b"model.safetensors")):
    shutil.copy(os.path.join(run_dir, b"model.safetensors"), weights)
    set_metadata(weights, {"model_name": HOSTILE_TEXT, "classes": json.dumps(classes)})

check("json_eval", [b"eval", b"--weights", weights, b"--data-dir", data, b"--json"] + common,
      expect=[HOSTILE_TEXT])
images = os.path.join(tmp, HOSTILE + b".npy")
write_npy(images, (2, 1, 28, 28), [((i * 37) % 255) / 255.0 for i in range(2 * 28 * 28)])
check("json_predict", [b"predict", b"--weights", weights, b"--top", b"3", b"--json", images]
      + common, expect=[HOSTILE_TEXT + " ", f"{HOSTILE_TEXT}.npy"])
check("json_optimize", [b"optimize", b"--weights", weights, b"-o",
                        os.path.join(tmp, b"opt " + HOSTILE), b"--json"] + common,
      expect=[HOSTILE_TEXT])
bench = [b"--model", model, b"--batch", b"4", b"--steps", b"2", b"--warmup", b"1"]
check("json_bench", [b"bench"] + bench + [b"--json"] + common, expect=[HOSTILE_TEXT])
check("json_bench_param_shapes", [b"bench", b"--model", model, b"--param-shapes"],
      expect=["conv1.weight"])
check("json_profile", [b"profile"] + bench + [b"--json"] + common, expect=[HOSTILE_TEXT])
check("json_doctor", [b"doctor", b"--json"], expect=["blas"], exit_ok=(0, 3))
sys.exit(1 if failed else 0)
