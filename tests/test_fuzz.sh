#!/bin/sh
# The fuzz targets (tests/fuzz/run.sh), briefly, so that CI keeps them
# building and finding nothing: FUZZ_SECONDS each (default here 10).  A
# long run is `make fuzz FUZZ_SECONDS=600`; docs/reliability.md records them.
cd "$(dirname "$0")/.." || exit 1
FUZZ_SECONDS=${FUZZ_SECONDS:-10} sh tests/fuzz/run.sh
