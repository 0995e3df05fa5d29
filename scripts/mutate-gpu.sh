#!/bin/sh
# Mutation test of the GPU suite on the emulated device (issue 11): plants
# the small bugs of scripts/gpu-mutations.txt one at a time in a scratch
# copy of the tree and checks that the suite fails for each.
#
#   sh scripts/mutate-gpu.sh            every mutant (several minutes)
#   sh scripts/mutate-gpu.sh --list     the mutants, each checked against this tree
#   MUTANTS=3,7 sh scripts/mutate-gpu.sh    a subset, by number
#   JOBS=2 (make -j), MUTATE_KEEP=1 (keep the scratch copy, for a look),
#   MUTATE_ALL_ORDERS=1 (run every order, to see which ones kill each mutant)
#
# The copy (git's tracked and untracked, not ignored, files) is built once
# with `make CUDA=emu`, and the unmutated suite must pass there first.  Then
# per mutant: edit the file (its `old` text must occur exactly once, else the
# mutant is INVALID: the table cannot rot silently as the code changes),
# rebuild incrementally (a mutant that does not compile is INVALID), run
# test_gpu and test_emu under CUDA_EMU_ORDER=reverse, shuffle, then forward,
# stopping at the first failure (a timeout or a crash counts as a failure),
# and restore the file.  KILLED: some run failed; SURVIVED: all passed.
# Ends with "mutation: K of N killed (S survived, I invalid)"; exits 1 if
# any mutant survived or was invalid, 2 if the unmutated tree fails.
# The real tree is only read.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
table=${MUTATIONS:-$here/gpu-mutations.txt}
jobs=${JOBS:-2}
run_limit=120 # seconds per test run

# The table's reader, the edit and the copy, in Python (exact, multi-line
# text replacement is not sh's strength).
#   list TABLE ROOT | count TABLE | field TABLE N NAME | apply TABLE N TREE | copy ROOT TREE
helper='
import os, shutil, subprocess, sys

def mutants(table):
    records, record = [], {}
    for line in open(table, encoding="utf-8").read().split("\n") + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if record:
                records.append(record)
            record = {}
            continue
        key, sep, value = line.partition(":")
        if not sep or key not in ("kind", "file", "what", "old", "new") or key in record:
            sys.exit("%s: bad line %r" % (table, line))
        record[key] = value[1:] if value.startswith(" ") else value
    for number, r in enumerate(records, 1):
        missing = [k for k in ("kind", "file", "what", "old", "new") if k not in r]
        if missing:
            sys.exit("%s: mutant %d lacks %s" % (table, number, ", ".join(missing)))
        for k in ("old", "new"):
            r[k] = unescape(r[k])
    return records

def unescape(text):
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "n\\":
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)

def problem(tree, m):
    """Why the mutant cannot be applied to tree, or None."""
    path = os.path.join(tree, m["file"])
    if not os.path.isfile(path):
        return "no file %s" % m["file"]
    count = open(path, encoding="utf-8").read().count(m["old"])
    if count != 1:
        return "the original text occurs %d times in %s, not once" % (count, m["file"])
    if m["old"] == m["new"]:
        return "the replacement is the original"
    return None

command, args = sys.argv[1], sys.argv[2:]
if command == "copy":
    root, tree = args
    names = subprocess.run(["git", "-C", root, "ls-files", "-z", "-co", "--exclude-standard"],
                           check=True, stdout=subprocess.PIPE).stdout.decode().split("\0")
    for name in filter(None, names):
        source = os.path.join(root, name)
        if not os.path.lexists(source):
            continue  # deleted in the working tree
        os.makedirs(os.path.dirname(os.path.join(tree, name)), exist_ok=True)
        shutil.copy2(source, os.path.join(tree, name), follow_symlinks=False)
    sys.exit(0)
table = mutants(args[0])
if command == "count":
    print(len(table))
elif command == "field":
    print(table[int(args[1]) - 1][args[2]])
elif command == "list":
    for number, m in enumerate(table, 1):
        why = problem(args[1], m)
        print("%3d  %-12s %-28s %s%s" % (number, m["kind"], m["file"], m["what"],
                                          "  [INVALID: %s]" % why if why else ""))
elif command == "apply":
    m = table[int(args[1]) - 1]
    why = problem(args[2], m)
    if why:
        sys.exit(why)
    path = os.path.join(args[2], m["file"])
    text = open(path, encoding="utf-8").read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(m["old"], m["new"]))
else:
    sys.exit("unknown command " + command)
'
py() { python3 -c "$helper" "$@"; }

if [ "${1:-}" = --list ]; then
    py list "$table" "$root"
    exit $?
fi
if [ $# -gt 0 ]; then
    echo "usage: sh scripts/mutate-gpu.sh [--list]   (MUTANTS=3,7 for a subset)" >&2
    exit 2
fi
total=$(py count "$table") || exit 2
selected=$(echo "${MUTANTS:-$(seq -s, 1 "$total")}" | tr ',' ' ')
for n in $selected; do
    case $n in
    *[!0-9]* | '') echo "MUTANTS: '$n' is not a mutant number" >&2; exit 2 ;;
    esac
    if [ "$n" -lt 1 ] || [ "$n" -gt "$total" ]; then
        echo "MUTANTS: no mutant $n (there are $total)" >&2
        exit 2
    fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/cuttle-mutate.XXXXXX") || exit 2
tree=$work/tree
if [ "${MUTATE_KEEP:-0}" = 1 ]; then
    trap 'echo "scratch copy kept in $work"' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi
trap 'exit 130' INT TERM
started=$(date +%s)

build() {
    make -C "$tree" --no-print-directory CUDA=emu -j"$jobs" \
        build-emu/tests/test_gpu build-emu/tests/test_emu > "$work/build.log" 2>&1
}

# suite: runs test_gpu and test_emu in the three orders, stopping at the
# first failure (with MUTATE_ALL_ORDERS=1, at the first failure of each
# order); sets $failed_at ("" when all pass: else "ORDER TEST, ...") and
# $detail (what the first failing run said).
suite() {
    failed_at=
    detail=
    for order in reverse shuffle forward; do
        for test in test_gpu test_emu; do
            CT_REQUIRE_GPU=1 CUDA_EMU_ORDER=$order CUDA_EMU_SEED=7 CUDA_EMU_DEVICES=2 \
                timeout "$run_limit" "$tree/build-emu/tests/$test" > "$work/run.log" 2>&1
            rc=$?
            [ "$rc" -eq 0 ] && continue
            failed_at="${failed_at:+$failed_at, }$order $test"
            if [ -n "$detail" ]; then
                :
            elif [ "$rc" -eq 124 ]; then
                detail="timed out after ${run_limit}s"
            elif [ "$rc" -gt 128 ]; then
                detail="crashed (signal $((rc - 128)))"
            else
                detail=$(grep -m 1 '^FAIL' "$work/run.log")
                count=$(grep -c '^FAIL' "$work/run.log")
                [ "$count" -gt 1 ] && detail="$detail (+$((count - 1)) more)"
            fi
            [ "${MUTATE_ALL_ORDERS:-0}" = 1 ] || return
            break
        done
    done
}

echo "mutate-gpu: copying the tree to $tree and building it (make CUDA=emu)"
mkdir -p "$tree" && py copy "$root" "$tree" || exit 2
if ! build; then
    tail -n 20 "$work/build.log"
    echo "mutate-gpu: the unmutated tree does not build" >&2
    exit 2
fi
suite
if [ -n "$failed_at" ]; then
    tail -n 20 "$work/run.log"
    echo "mutate-gpu: the unmutated suite fails ($failed_at: $detail): no mutant can be judged" >&2
    exit 2
fi
echo "mutate-gpu: unmutated suite passes in all three orders ($(($(date +%s) - started)) s)"

killed=0
survived=0
invalid=0
for n in $selected; do
    kind=$(py field "$table" "$n" kind)
    file=$(py field "$table" "$n" file)
    what=$(py field "$table" "$n" what)
    line=$(printf '%3d  %-12s %-28s %s' "$n" "$kind" "$file" "$what")
    if [ -f "$tree/$file" ]; then
        cp "$tree/$file" "$work/original"
    fi
    if ! py apply "$table" "$n" "$tree" 2> "$work/why"; then
        echo "$line: INVALID ($(tail -n 1 "$work/why"))"
        invalid=$((invalid + 1))
        continue
    fi
    if ! build; then
        echo "$line: INVALID (does not compile: $(grep -m 1 'error' "$work/build.log"))"
        invalid=$((invalid + 1))
    else
        suite
        if [ -n "$failed_at" ]; then
            echo "$line: KILLED by $failed_at: $detail"
            killed=$((killed + 1))
        else
            echo "$line: SURVIVED (all three orders pass)"
            survived=$((survived + 1))
        fi
    fi
    # A plain copy: the file is newer than its mutated object, so the next build redoes it.
    cp "$work/original" "$tree/$file"
done

n_run=$((killed + survived + invalid))
echo "mutation: $killed of $n_run killed ($survived survived, $invalid invalid) in $(($(date +%s) - started)) s"
[ "$survived" -eq 0 ] && [ "$invalid" -eq 0 ]
