#!/bin/sh
# Installs the Debian packages that cuttle's build, tests and main job need,
# skipping those already installed.  Usage: scripts/setup-debian.sh [--torch]
#   --torch  also PyTorch, torchvision and PIL (python3-torch python3-torchvision
#            python3-pil): the tests that compare cuttle with PyTorch (models,
#            checkpoints, benchmark peers) use them and skip themselves, saying
#            so, without them; the README's test command and CI pass --torch;
#            with it also clang, which builds the emulated device's kernels
#            with the hooks its kernel counters need, and llvm-14-dev, the
#            headers of the pass that counts their fp work and branches
#            (emu/count_pass.cpp; docs/emulator.md); libomp-14-dev, LLVM's
#            OpenMP and its Archer tool for the ThreadSanitizer build
#            (make TSAN=1 test-tsan); python3-onnx, nodejs
#            and npm for the ONNX tests (ONNX Runtime itself comes from npm:
#            scripts/setup-onnxruntime.sh); and python3-numpy, python3-pytest
#            and python3-pip for the Python package's tests and its install
#            (tests/test_python.sh); and cmake, which builds examples/ against
#            the installed library (tests/test_install.sh).  libxml2-utils
#            (xmllint) checks the SVG charts.
set -e
packages="gcc g++ make pkg-config python3 libopenblas-openmp-dev zlib1g-dev libpng-dev libjpeg-dev openmpi-bin libopenmpi-dev dataset-fashion-mnist libxml2-utils"
if [ "$1" = "--torch" ]; then
    packages="$packages python3-torch python3-torchvision python3-pil clang llvm-14-dev libomp-14-dev python3-onnx nodejs python3-numpy python3-pytest python3-pip cmake"
    command -v npm >/dev/null 2>&1 || packages="$packages npm" # a nodejs may bundle its own
fi
missing=""
for package in $packages; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    echo "setup: all packages present ($packages)"
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    run=""
elif command -v sudo >/dev/null 2>&1; then
    run="sudo"
else
    echo "setup: need root (or sudo) to install:$missing" >&2
    exit 1
fi
echo "setup: installing$missing"
$run apt-get update -qq
DEBIAN_FRONTEND=noninteractive $run apt-get install -y -qq --no-install-recommends $missing
