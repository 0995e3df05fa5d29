#!/bin/sh
# Runs every test binary in $BUILD/tests and adds up their PASS/FAIL lines.
# A binary that crashes or exits non-zero without a FAIL line counts as one
# failure.  Ends with "N passed, N failed" and a non-zero status on failure.
BUILD=${BUILD:-build}
passed=0
failed=0
log=$(mktemp)
for test_bin in "$BUILD"/tests/test_*; do
    [ -x "$test_bin" ] || continue
    name=$(basename "$test_bin")
    start=$(date +%s)
    "$test_bin" > "$log" 2> "$log.err"
    status=$?
    end=$(date +%s)
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    sed "s/^/  $name: /" "$log"
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "  $name: FAIL (exit status $status without a FAIL line)"
        f=1
    fi
    if [ "$f" -ne 0 ]; then
        sed "s/^/    /" "$log.err"
    fi
    echo "$name: $p passed, $f failed ($((end - start)) s)"
    passed=$((passed + p))
    failed=$((failed + f))
done
rm -f "$log" "$log.err"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
