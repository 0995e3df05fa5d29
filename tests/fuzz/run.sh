#!/bin/sh
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c) against the library
# compiled by clang with AddressSanitizer and UndefinedBehaviorSanitizer (in
# build-fuzz/; without OpenMP: clang outlines a parallel loop's body into a
# function without the AVX2 kernels' target attribute, and refuses their
# vector types there), then runs each for FUZZ_SECONDS (default 30) from its seed
# corpus tests/fuzz/corpus/<name>/ (with tests/fuzz/<name>.dict when there
# is one, and the libFuzzer options in tests/fuzz/<name>.flags), on a copy
# of the corpus so that the repository's stays as it is.
# Prints "PASS fuzz_<name>" or "FAIL fuzz_<name>" (a crash, a leak, a
# sanitizer report: the input is kept in build-fuzz/crashes/<name>/).
# Without clang's libFuzzer: "SKIP ..." and status 0.
#   tests/fuzz/run.sh              # every target, FUZZ_SECONDS each
#   FUZZ_SECONDS=600 tests/fuzz/run.sh onnx
cd "$(dirname "$0")/../.." || exit 1
CLANG=${CLANG:-$(command -v clang-14 || command -v clang)}
SECONDS_EACH=${FUZZ_SECONDS:-30}
probe=$(mktemp -d)
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > "$probe/probe.c"
if [ -z "$CLANG" ] || ! "$CLANG" -fsanitize=fuzzer "$probe/probe.c" -o "$probe/probe" 2>/dev/null; then
    echo "SKIP fuzz: no clang with libFuzzer (apt-get install clang)"
    rm -rf "$probe"
    exit 0
fi
rm -rf "$probe"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
env -u MAKEFLAGS -u MFLAGS make -j2 --no-print-directory CC="$CLANG" CUDA=0 BLAS=0 OPENMP=0 BUILD=build-fuzz \
    OPTFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link $SAN" \
    build-fuzz/libcuttle.a > build-fuzz.log 2>&1 || { cat build-fuzz.log; echo "FAIL fuzz_build"; exit 1; }
rm -f build-fuzz.log
targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's|tests/fuzz/fuzz_||; s|\.c$||')}
status=0
for name in $targets; do
    bin=build-fuzz/fuzz/fuzz_$name
    mkdir -p build-fuzz/fuzz build-fuzz/crashes/$name
    # fuzz_cli takes the command-line program along, its main() renamed (and
    # MPI, which the library may have been built with, though parsing never
    # starts it).
    tools=""
    [ "$name" = cli ] && tools="-D_POSIX_C_SOURCE=200809L -Itools -Dmain=cuttle_main
        $(ls tools/*.c) $(mpicc --showme:link 2>/dev/null)"
    if ! "$CLANG" -std=c11 -g -O1 -fsanitize=fuzzer $SAN -Iinclude -Isrc \
            "tests/fuzz/fuzz_$name.c" $tools build-fuzz/libcuttle.a -lm -lz -lpng -ljpeg \
            -pthread -o "$bin"; then
        echo "FAIL fuzz_$name (does not build)"
        status=1
        continue
    fi
    work=$(mktemp -d)
    cp -r "tests/fuzz/corpus/$name/." "$work/" 2>/dev/null
    dict=""
    [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
    [ -f "tests/fuzz/$name.flags" ] && dict="$dict $(cat "tests/fuzz/$name.flags")"
    if ASAN_OPTIONS=detect_leaks=1 "$bin" "$work" $dict -max_total_time="$SECONDS_EACH" \
            -rss_limit_mb=2048 -artifact_prefix="build-fuzz/crashes/$name/" \
            -print_final_stats=1 > "build-fuzz/fuzz_$name.log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/fuzz_$name.log" |
               grep -o '[0-9]*$')
        echo "PASS fuzz_$name ($runs runs in $SECONDS_EACH s, no crash)"
    else
        echo "FAIL fuzz_$name (build-fuzz/fuzz_$name.log; input in build-fuzz/crashes/$name/)"
        tail -n 30 "build-fuzz/fuzz_$name.log" >&2
        status=1
    fi
    rm -rf "$work"
done
exit $status
