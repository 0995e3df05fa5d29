#!/bin/sh
# Runs every test binary in $BUILD/tests, every example in $BUILD/examples
# (each must exit 0), and, for the plain build, tests/test_*.sh; adds up
# their PASS/FAIL lines.  TESTS="a b ..." runs those instead.
# A binary that crashes or exits non-zero without a FAIL line counts as one
# failure.  Ends with "N passed, N failed" and a non-zero status on failure.
BUILD=${BUILD:-build}
passed=0
failed=0
log=$(mktemp)
scripts=""
if [ "$BUILD" = build ]; then
    scripts=$(ls tests/test_*.sh 2>/dev/null)
fi
if [ -n "$TESTS" ]; then
    set -- $TESTS
else
    set -- "$BUILD"/tests/test_* "$BUILD"/examples/* $scripts
fi
for test_bin in "$@"; do
    [ -x "$test_bin" ] || [ "${test_bin%.sh}" != "$test_bin" ] || continue
    [ -e "$test_bin" ] || continue
    name=$(basename "$test_bin")
    start=$(date +%s)
    case "$test_bin" in
    *.sh) BUILD="$BUILD" sh "$test_bin" > "$log" 2> "$log.err" ;;
    */examples/*)
        "$test_bin" > "$log.out" 2> "$log.err"
        status=$?
        if [ "$status" -eq 0 ]; then echo "PASS example_$name"; else echo "FAIL example_$name"; fi > "$log"
        cat "$log.out" >> "$log.err"
        rm -f "$log.out"
        (exit "$status") ;;
    *) "$test_bin" > "$log" 2> "$log.err" ;;
    esac
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
