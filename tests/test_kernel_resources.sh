#!/bin/sh
# Known answers for scripts/kernel-resources.sh, on the kernels of
# tests/fixtures/kernel_resources.cu (whose resources are known in advance):
# a float4 copy issues 128-bit loads and stores, a kernel capped at 32
# registers reports 32 and spills, a 32 x 33 float tile is 4224 bytes of
# static shared memory; and the occupancy rule agrees with hand-worked
# cases and with CUDA's own cuda_occupancy.h.  Needs nvcc (skipped without
# it, apart from the missing-nvcc message itself); about 3 s.  Then every
# kernel of src/cuda compiled the same way: none may spill (the wide GEMM
# tiles run at 128 registers, and a change to the convolutions' staging
# that only moved where a constant is computed spilled up to 40 bytes,
# docs/kernel-resources.md); about 30 s on two cores.
python=${CUTTLE_PYTHON:-/usr/bin/python3}
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() {
    echo "FAIL $1"
    failed=$((failed + 1))
    [ -n "${2:-}" ] && sed 's/^/    /' "$2" >&2
}

if NVCC=/nonexistent/nvcc scripts/kernel-resources.sh "$tmp/none" > "$tmp/none.txt" 2>&1; then
    fail missing_nvcc_is_an_error "$tmp/none.txt"
elif grep -q "nvcc not found" "$tmp/none.txt"; then
    pass missing_nvcc_is_an_error
else
    fail missing_nvcc_is_an_error "$tmp/none.txt"
fi

nvcc=${NVCC:-$(command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))}
if [ -z "$nvcc" ]; then
    echo "SKIP test_kernel_resources: nvcc not found (the kernels cannot be compiled here)"
    exit $failed
fi

# The build folder's record of its flags (Makefile, FLAGS_STAMP), before the
# script asks make for the nvcc flags of an sm_90-only configuration.
stamp_before=$(cat "${BUILD:-build}/flags" 2> /dev/null)
if ! scripts/kernel-resources.sh "$tmp" tests/fixtures/kernel_resources.cu > "$tmp/table.txt" 2>&1; then
    fail report_runs "$tmp/table.txt"
    exit $failed
fi
pass report_runs
# Asking must not rewrite it: the next make there would rebuild everything.
if [ "$(cat "${BUILD:-build}/flags" 2> /dev/null)" = "$stamp_before" ]; then
    pass build_flags_left_alone
else
    fail build_flags_left_alone
fi
echo "# $(tail -n 1 "$tmp/table.txt")"

# check NAME KERNEL EXPRESSION: EXPRESSION (Python, over the kernel's JSON
# object k and its instruction counts c) holds.
check() {
    if "$python" - "$tmp/kernel-resources.json" "$2" "$3" > "$tmp/check.txt" 2>&1 <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["name"] == sys.argv[2]]
k = rows[0]
c = k["counts"]
if not eval(sys.argv[3]):
    print(sys.argv[2], "fails", sys.argv[3], "\n", json.dumps(k, indent=1))
    sys.exit(1)
PY
    then pass "$1"; else fail "$1" "$tmp/check.txt"; fi
}
check float4_copy_loads_128_bits copy_float4 'c.get("LDG.128") == 1 and c.get("LDG.32", 0) == 0'
check float4_copy_stores_128_bits copy_float4 'c.get("STG.128") == 1 and c.get("STG.32", 0) == 0'
check scalar_copy_loads_32_bits transpose_tile 'c.get("LDG.32") == 1 and c.get("LDG.128", 0) == 0'
check capped_kernel_reports_32_registers spill_under_32_registers 'k["registers"] == 32'
check capped_kernel_spills spill_under_32_registers \
    'k["spill_store_bytes"] > 0 and k["spill_load_bytes"] > 0'
check unspilled_kernel_reports_no_spill copy_float4 \
    'k["spill_store_bytes"] == 0 and k["spill_load_bytes"] == 0 and k["stack_bytes"] == 0'
check padded_tile_is_4224_shared_bytes transpose_tile 'k["static_shared_bytes"] == 4224'
check kernel_parameters_in_constant_bank copy_float4 'k["constant_bytes"] > 0'
check capped_kernel_occupancy spill_under_32_registers \
    'k["occupancy"]["256"]["occupancy"] == 1.0 and k["occupancy"]["128"]["blocks_per_sm"] == 16'

# Occupancy worked by hand from the sm_90 rules (65536 registers per SM
# in four sub-partitions, allocated per warp in units of 256; 64 warps,
# 32 blocks and 228 KiB of shared memory per SM, 1 KiB more per block):
#   32 regs x 256 threads: 1024 regs/warp, 16 warps per sub-partition,
#     64 warps: 8 blocks of 8 warps, 100%
#   128 x 256: 4096 regs/warp, 4 per sub-partition, 16 warps: 2 blocks, 25%
#   64 x 256: 2048, 8 per sub-partition, 32 warps: 4 blocks, 50%
#   40 x 256: 1280, 12 per sub-partition (16384 / 1280 = 12.8), 48 warps: 6 blocks, 75%
#   56 x 128: 1792, 9 per sub-partition, 36 warps: 9 blocks of 4 warps, 56.25%
#   255 x 128: 8160 -> 8192 regs/warp, 2 per sub-partition, 8 warps: 2 blocks, 12.5%
#   32 x 128, 32 KiB static shared: 33 KiB per block, 233472 / 33792 = 6 blocks
#     of 4 warps, 37.5%
#   16 x 64: 512 regs/warp leaves 128 warps; the 32-block limit binds: 64 warps, 100%
#   16 x 32: one warp per block, 32 blocks: 32 warps, 50%
occupancy_ok=1
while read -r regs block shared expected; do
    got=$("$python" scripts/kernel-resources.py occupancy "$regs" "$block" "$shared" | cut -d' ' -f1)
    if [ "$got" != "$expected" ]; then
        echo "    $regs registers x $block threads, $shared shared bytes: $got, expected $expected" >&2
        occupancy_ok=0
    fi
done <<'EOF'
32 256 0 100.0%
128 256 0 25.0%
64 256 0 50.0%
40 256 0 75.0%
56 128 0 56.2%
255 128 0 12.5%
32 128 32768 37.5%
16 64 0 100.0%
16 32 0 50.0%
EOF
if [ "$occupancy_ok" = 1 ]; then pass occupancy_by_hand; else fail occupancy_by_hand; fi

# The same rule against CUDA's cuda_occupancy.h (header only, so the host
# compiler runs it) over every register count and a range of blocks and
# shared sizes.
header=$(dirname "$(dirname "$(realpath "$nvcc")")")/include/cuda_occupancy.h
if [ -f "$header" ] && command -v c++ > /dev/null; then
    cat > "$tmp/occ.cpp" <<'EOF'
#include <cstdio>
#include "cuda_occupancy.h"
/* Reads "registers block shared" lines; writes each with the blocks per SM
 * that CUDA's calculator gives for one H100 SM. */
int main(void)
{
    cudaOccDeviceProp prop;
    prop.computeMajor = 9;
    prop.computeMinor = 0;
    prop.maxThreadsPerBlock = 1024;
    prop.maxThreadsPerMultiprocessor = 2048;
    prop.regsPerBlock = 65536;
    prop.regsPerMultiprocessor = 65536;
    prop.warpSize = 32;
    prop.sharedMemPerBlock = 48 * 1024;
    prop.sharedMemPerMultiprocessor = 228 * 1024;
    prop.numSms = 132;
    prop.sharedMemPerBlockOptin = 227 * 1024;
    prop.reservedSharedMemPerBlock = 1024;
    int registers, block, shared;
    while (scanf("%d %d %d", &registers, &block, &shared) == 3) {
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = 1024;
        attr.numRegs = registers;
        attr.sharedSizeBytes = (size_t)shared;
        cudaOccDeviceState state;
        cudaOccResult result;
        if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, block, 0) !=
            CUDA_OCC_SUCCESS)
            return 1;
        printf("%d %d %d %d\n", registers, block, shared, result.activeBlocksPerMultiprocessor);
    }
    return 0;
}
EOF
    "$python" - > "$tmp/cases.txt" <<'PY'
for registers in range(1, 256):
    for block in (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024):
        for shared in (0, 264, 4224, 8448, 20000, 40000, 49152):
            print(registers, block, shared)
PY
    if c++ -I"$(dirname "$header")" "$tmp/occ.cpp" -o "$tmp/occ" > "$tmp/occ.log" 2>&1 &&
        "$tmp/occ" < "$tmp/cases.txt" > "$tmp/cuda.txt" &&
        "$python" - "$tmp/cuda.txt" > "$tmp/occ.log" 2>&1 <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("kr", "scripts/kernel-resources.py")
kr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kr)
wrong = 0
lines = open(sys.argv[1]).read().split("\n")[:-1]
for line in lines:
    registers, block, shared, blocks = map(int, line.split())
    ours = kr.occupancy(registers, block, shared)["blocks_per_sm"]
    if ours != blocks:
        wrong += 1
        if wrong <= 10:
            print(registers, block, shared, "cuda_occupancy.h:", blocks, "ours:", ours)
print(len(lines), "cases,", wrong, "differ")
sys.exit(1 if wrong or len(lines) < 17850 else 0)
PY
    then
        pass occupancy_matches_cuda_occupancy_h
    else
        fail occupancy_matches_cuda_occupancy_h "$tmp/occ.log"
    fi
else
    echo "# no cuda_occupancy.h beside nvcc or no c++: the cross-check is skipped"
fi

# No kernel of src/cuda spills registers to local memory.
if scripts/kernel-resources.sh "$tmp/all" > "$tmp/all.txt" 2>&1 &&
    "$python" - "$tmp/all/kernel-resources.json" > "$tmp/spills.txt" 2>&1 <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
spilled = [r for r in rows if r["spill_store_bytes"] or r["spill_load_bytes"]]
for r in spilled:
    print(r["name"], "spills", r["spill_store_bytes"], "/", r["spill_load_bytes"], "bytes")
print(len(rows), "kernels,", len(spilled), "spill")
sys.exit(1 if spilled or len(rows) < 100 else 0)
PY
then
    pass no_kernel_spills
    echo "# $(tail -n 1 "$tmp/spills.txt")"
else
    cat "$tmp/all.txt" >> "$tmp/spills.txt"
    fail no_kernel_spills "$tmp/spills.txt"
fi
exit $failed
