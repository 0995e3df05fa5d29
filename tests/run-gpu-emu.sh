#!/bin/sh
# The GPU suite on the emulated device (make test-gpu-emu): the emulator's
# own tests, the GPU-vs-CPU test and the command line on `--device cuda`,
# in each thread order (CUDA_EMU_ORDER), then once more in the ASan + UBSan
# build.  Ends with "N passed, N failed" like tests/run.sh.  The forward
# order trains 300 SimpleCNN steps on the command line; the other orders
# train 40 (they look for races, which show in any step), the sanitized
# build (about 40 times slower) 10, on fewer test images.  Data-parallel
# training over the emulator's NCCL between mpirun's processes
# (tests/dist_cuda.sh, about 40 s) runs in the plain build's orders only.
#   EMU_BUILD=build-emu EMU_SAN_BUILD=build-emu-san (either may be empty to skip)
#   EMU_ORDERS="forward reverse shuffle"
EMU_BUILD=${EMU_BUILD-build-emu}
EMU_SAN_BUILD=${EMU_SAN_BUILD-build-emu-san}
EMU_ORDERS=${EMU_ORDERS-forward reverse shuffle}
passed=0
failed=0

# run LABEL BUILD [MORE]: every GPU test of BUILD and the scripts MORE,
# lines prefixed with the label.
run() {
    label=$1
    log=$(mktemp)
    CT_REQUIRE_GPU=1 CT_REQUIRE_GPUS=2 BUILD=$2 TESTS="$2/tests/test_emu $2/tests/test_emu_graphs $2/tests/test_emu_counters $2/tests/test_emu_half $2/tests/test_emu_nccl $2/tests/test_emu_quant $2/tests/test_replicas $2/tests/test_roofline $2/tests/test_gpu $2/tests/test_cuda_graph $2/tests/test_stage $2/tests/test_precision $2/tests/test_loss_scaling $2/tests/test_backend_ops $2/tests/test_custom_op $2/tests/test_custom_cuda $2/tests/test_cuda_divmod $2/tests/test_optimize tests/gpu_cli.sh $3" \
        sh tests/run.sh > "$log" 2>&1
    sed "s/^/[$label] /" "$log"
    p=$(tail -n 1 "$log" | awk '/passed/ {print $1}')
    f=$(tail -n 1 "$log" | awk '/passed/ {print $3}')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-1}))
    rm -f "$log"
}

if [ -n "$EMU_BUILD" ]; then
    for order in $EMU_ORDERS; do
        images=1280 epochs=2
        [ "$order" = forward ] && images=6400 epochs=3
        CUDA_EMU_ORDER=$order CUDA_EMU_SEED=7 CUDA_EMU_DEVICES=2 \
            GPU_CLI_TRAIN=$images GPU_CLI_EPOCHS=$epochs run "emu $order" "$EMU_BUILD" \
            tests/dist_cuda.sh
    done
fi
if [ -n "$EMU_SAN_BUILD" ]; then
    CUDA_EMU_ORDER=shuffle CUDA_EMU_SEED=11 CUDA_EMU_DEVICES=2 \
        GPU_CLI_TRAIN=640 GPU_CLI_EPOCHS=1 GPU_CLI_TEST=256 \
        ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        run "emu asan+ubsan" "$EMU_SAN_BUILD"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
