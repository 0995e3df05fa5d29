#!/bin/sh
# Stage the device checks for a lent GPU machine (docs/gpu-verification.md,
# "When a GPU is lent"): builds build-gpu/ for sm_90 only (an H100 or H200;
# no OpenBLAS or MPI, which that machine's image lacks), and writes .gpu/
# (ignored by git, under the device tool's 64 MiB): the stripped binaries
# packed in bin.tar.gz with the emulated build's cuttle for the roofline
# predictions, the libpng and libjpeg it links, a 6400/1000-image slice of
# Fashion-MNIST for tests/gpu_cli.sh, and scripts/gpu-check.sh's copy.
# Then, with the device tool: run `PREBUILT=1 bash .gpu/gpu-check.sh`,
# carry [".gpu"], timeout_s 600.
#   FASHION=/usr/share/datasets/fashion-mnist  the full .gz files
set -e
cd "$(dirname "$0")/.."
FASHION=${FASHION:-/usr/share/datasets/fashion-mnist}
TESTS="test_gpu test_backend_ops test_cuda_graph test_stage test_precision test_loss_scaling test_optimize test_replicas"
jobs=$(nproc)
make -j"$jobs" BUILD=build-gpu CUDA=1 CUDA_ARCHS=90 BLAS=0 MPI=0 build-gpu/cuttle \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done)
make -j"$jobs" CUDA=emu build-emu/cuttle
rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib .gpu/fashion
cp build-gpu/cuttle .gpu/bin/
for t in $TESTS; do cp build-gpu/tests/$t .gpu/bin/; done
cp build-emu/cuttle .gpu/bin/cuttle-emu
strip .gpu/bin/*
(cd .gpu/bin && tar -czf ../bin.tar.gz .)
rm -rf .gpu/bin
for lib in libpng16.so.16 libjpeg.so.62; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
    [ -n "$path" ] && cp -L "$path" .gpu/lib/
done
/usr/bin/python3 tests/fashion_slice.py --gzip "$FASHION" .gpu/fashion 6400 1000
cp scripts/gpu-check.sh .gpu/
du -sh .gpu
