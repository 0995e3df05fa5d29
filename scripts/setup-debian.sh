#!/bin/sh
# Installs the Debian packages that cuttle's build, tests and main job need,
# skipping those already installed.  Usage: scripts/setup-debian.sh [--torch]
# (python3: the tests check the JSON that cuttle prints.)
#   --torch  also python3-torch (the PyTorch peer of the benchmarks and the
#            script that regenerates the test fixtures)
set -e
packages="gcc make pkg-config libopenblas-openmp-dev zlib1g-dev dataset-fashion-mnist python3"
if [ "$1" = "--torch" ]; then
    packages="$packages python3-torch"
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
