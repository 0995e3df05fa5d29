#!/bin/sh
# One binary for CPU-only and GPU machines: the command line and the shared
# library need no CUDA library to start (cuBLAS and cuDNN are loaded when
# the GPU first needs them, src/cuda/vendor_api.c; cudart is linked
# statically and asks for the driver itself), `cuttle version` stays light,
# and a vendor library that cannot be loaded is named, with what runs
# instead.  Meaningful in a CUDA build; in a CPU-only build the first two
# checks hold trivially and the third is skipped.
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
python=${CUTTLE_PYTHON:-/usr/bin/python3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if readelf -d "$cuttle" "$BUILD/libcuttle.so" > "$out" 2>&1 &&
    ! grep NEEDED "$out" | grep -E 'libcuda|libcudart|libcublas|libcudnn|libnccl' >&2; then
    echo "PASS no_cuda_library_needed_to_start"
else
    echo "FAIL no_cuda_library_needed_to_start"
fi

# Resident memory of `cuttle version`: mapping cuBLAS and cuDNN cost
# about 220 MB (docs/architecture.md); the goal is under 20 MB.
rss_kb=$("$python" - "$cuttle" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "version"], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
)
if [ -n "$rss_kb" ] && [ "$rss_kb" -lt 20480 ]; then
    echo "PASS version_is_light ($rss_kb KB resident)"
else
    echo "FAIL version_is_light (${rss_kb:-?} KB resident, limit 20480)"
fi

# A missing library, as a user without cuBLAS or cuDNN installed would
# meet it (CUTTLE_CUBLAS/CUTTLE_CUDNN name the files to load).
CUTTLE_CUBLAS=/nonexistent/libcublas.so CUTTLE_CUDNN=/nonexistent/libcudnn.so \
    "$cuttle" doctor --no-cpu-gemm --gemm-size 64 > "$out" 2>&1
if ! grep -q "^cuBLAS:" "$out"; then
    echo "# no CUDA in this build: the missing-library check is skipped"
elif grep -q "cuBLAS could not be loaded (/nonexistent/libcublas.so" "$out" &&
    grep -q "cuDNN could not be loaded (/nonexistent/libcudnn.so" "$out" &&
    grep -q "linear layers run cuttle's own kernels" "$out"; then
    echo "PASS missing_vendor_library_is_named"
else
    echo "FAIL missing_vendor_library_is_named"
    sed 's/^/    /' "$out" >&2
fi
