#!/bin/bash
# What each CUDA kernel costs the GPU, read from the compiled sm_90 code
# without a GPU: registers per thread, spill and stack bytes, static shared
# and constant memory (ptxas --resource-usage and the cubin's sections),
# the loads, stores and math it issues (the SASS from cuobjdump, or the PTX
# where no cuobjdump can read the cubin), and the theoretical occupancy on
# an H100 for blocks of 128 and 256 threads.
#
# Usage: scripts/kernel-resources.sh [BUILD_DIR [SOURCE.cu ...]]
#   BUILD_DIR  default build; writes BUILD_DIR/kernel-resources.json and
#              keeps the cubins and listings in BUILD_DIR/kernel-resources/
#   SOURCE.cu  default src/cuda/*.cu
# Environment: NVCC (the compiler, found as the Makefile finds it),
#   CUOBJDUMP (the disassembler; default: beside nvcc, then on PATH),
#   KERNEL_RESOURCES_BLOCKS (block sizes for occupancy, default "128 256").
# The kernels compile with the Makefile's own nvcc flags (asked from make,
# so they cannot drift), for sm_90 only.  Prints a table; docs/kernel-resources.md
# says how to read it.
set -u
cd "$(dirname "$0")/.." || exit 1

build=${1:-build}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
    set -- src/cuda/*.cu
fi
python=${CUTTLE_PYTHON:-/usr/bin/python3}
arch=90

nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))}
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
    echo "kernel-resources: nvcc not found (not on PATH, nor /usr/local/cuda/bin/nvcc);" \
        "install the CUDA toolkit or set NVCC=/path/to/nvcc" >&2
    exit 2
fi
cuobjdump=${CUOBJDUMP:-}
if [ -z "$cuobjdump" ]; then
    if [ -x "$(dirname "$nvcc")/cuobjdump" ]; then
        cuobjdump=$(dirname "$nvcc")/cuobjdump
    else
        cuobjdump=$(command -v cuobjdump 2>/dev/null)
    fi
fi

out="$build/kernel-resources"
mkdir -p "$out" || exit 2

# The Makefile's nvcc flags for sm_90 alone, one word a line; the -gencode
# pairs are replaced by one cubin target below.  make is given a BUILD of
# its own: it records a configuration's flags in $(BUILD)/flags as it
# reads the Makefile, and this one (sm_90 only) written into the real build
# folder made the next `make` there rebuild every object (4 minutes of the
# suite, 2026-12-06).
# shellcheck disable=SC2016 # $(...) here is make's, expanded by make
flags=$(printf 'ct-print-nvcc-flags:\n\t@printf "%%s\\n" $(NVCCFLAGS_BASE) $(NVCCFLAGS)\n' |
    make -s --no-print-directory CUDA=auto CUDA_ARCHS=$arch NVCC="$nvcc" BUILD="$out/make" \
        -f Makefile -f - ct-print-nvcc-flags) || {
    echo "kernel-resources: could not read the nvcc flags from the Makefile" >&2
    exit 2
}
nvcc_flags=()
skip_next=0
while IFS= read -r word; do
    if [ "$skip_next" = 1 ]; then skip_next=0; continue; fi
    case "$word" in
    -gencode) skip_next=1 ;;
    '') ;;
    *) nvcc_flags+=("$word") ;;
    esac
done <<< "$flags"

inputs=()
for source in "$@"; do
    stem=$(basename "$source" .cu)
    keep="$out/$stem.keep"
    rm -rf "$keep" && mkdir -p "$keep"
    # -keep leaves the PTX beside the cubin: the fallback listing, no second compile.
    if ! "$nvcc" "${nvcc_flags[@]}" -gencode "arch=compute_$arch,code=sm_$arch" \
        --resource-usage -keep -keep-dir "$keep" -cubin "$source" -o "$out/$stem.cubin" \
        > "$out/$stem.ptxas.txt" 2>&1; then
        cat "$out/$stem.ptxas.txt" >&2
        echo "kernel-resources: nvcc failed on $source" >&2
        exit 1
    fi
    ptx=$(find "$keep" -name '*.ptx' | head -n 1)
    if [ -z "$ptx" ]; then
        echo "kernel-resources: nvcc -keep left no PTX for $source in $keep" >&2
        exit 1
    fi
    mv "$ptx" "$out/$stem.ptx" && rm -rf "$keep"
    inputs+=("$source")
done

exec "$python" scripts/kernel-resources.py --out "$out" --json "$build/kernel-resources.json" \
    --cuobjdump "${cuobjdump:-}" --blocks "${KERNEL_RESOURCES_BLOCKS:-128 256}" "${inputs[@]}"
