#!/bin/sh
# `cuttle doctor` on a machine without a usable GPU (CI, or a CPU-only
# build): exit status 3 with a plain "No usable GPU" line, and --json that
# is valid JSON saying gpu_available false.  On a machine with a GPU the
# doctor's own checks run instead (make test-gpu covers the GPU); this test
# then only checks that --json is valid.
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$cuttle" doctor --no-cpu-gemm --gemm-size 256 > "$out" 2>&1
status=$?
if [ "$status" -eq 3 ]; then
    if grep -q "^No usable GPU: " "$out"; then
        echo "PASS doctor_without_gpu_exits_3_plainly"
    else
        echo "FAIL doctor_without_gpu_exits_3_plainly"
        cat "$out" >&2
    fi
    "$cuttle" doctor --json > "$out" 2>&1
    status=$?
    if [ "$status" -eq 3 ] && /usr/bin/python3 -m json.tool "$out" > /dev/null &&
        grep -q '"gpu_available": false' "$out"; then
        echo "PASS doctor_json_is_valid"
    else
        echo "FAIL doctor_json_is_valid (exit status $status)"
        cat "$out" >&2
    fi
else
    echo "# a GPU answered (exit status $status)"
    "$cuttle" doctor --json --no-cpu-gemm --gemm-size 256 > "$out" 2>&1
    if /usr/bin/python3 -m json.tool "$out" > /dev/null; then
        echo "PASS doctor_json_is_valid"
    else
        echo "FAIL doctor_json_is_valid"
        cat "$out" >&2
    fi
fi
if "$cuttle" doctor --bogus > /dev/null 2>&1; [ $? -eq 2 ]; then
    echo "PASS doctor_bad_option_exits_2"
else
    echo "FAIL doctor_bad_option_exits_2"
fi

# OpenBLAS's kernels: on a CPU with AVX2 and FMA the command runs OpenBLAS's
# vector kernels even where OpenBLAS does not know the CPU's model (it then
# takes its SSE3 "Prescott" set; tools/cuttle.c runs the command again with
# OPENBLAS_CORETYPE).  Builds without OpenBLAS report no kernels.
"$cuttle" doctor --json --no-cpu-gemm --gemm-size 16 > "$out" 2>&1
kernels=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["build"].get("blas_kernels", ""))' "$out" 2> /dev/null)
if [ -z "$kernels" ] || ! grep -q -w avx2 /proc/cpuinfo || ! grep -q -w fma /proc/cpuinfo; then
    echo "# blas kernels: '${kernels}' (no OpenBLAS, or no AVX2 here)"
    echo "PASS doctor_blas_kernels_use_the_vector_units"
else
    case $(echo "$kernels" | tr 'A-Z' 'a-z') in
    haswell | skylakex | cooperlake | sapphirerapids | zen | excavator)
        echo "PASS doctor_blas_kernels_use_the_vector_units" ;;
    *)
        echo "FAIL doctor_blas_kernels_use_the_vector_units: OpenBLAS runs '$kernels' on a CPU with AVX2"
        cat "$out" >&2 ;;
    esac
fi
