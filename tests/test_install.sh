#!/bin/sh
# `make install` into a temporary prefix, then build examples/two_layer.c
# against the installed header, library and pkg-config file, and run it.
# Prints PASS/FAIL lines like the test binaries.
BUILD=${BUILD:-build}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
if ! make -s --no-print-directory BUILD="$BUILD" PREFIX="$prefix" install > "$prefix.log" 2>&1; then
    cat "$prefix.log" >&2
    echo "FAIL install"
    exit 1
fi
echo "PASS install"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs cuttle) || {
    echo "FAIL pkg_config_finds_cuttle"
    exit 1
}
echo "PASS pkg_config_finds_cuttle"
if cc -std=c11 -o "$prefix/two_layer" examples/two_layer.c $flags -lm &&
    LD_LIBRARY_PATH="$prefix/lib" "$prefix/two_layer" > "$prefix/out.txt" &&
    grep -q "training accuracy" "$prefix/out.txt" &&
    [ -x "$prefix/bin/cuttle" ] && "$prefix/bin/cuttle" --version | grep -q cuttle; then
    echo "PASS installed_library_builds_and_trains"
else
    echo "FAIL installed_library_builds_and_trains"
    exit 1
fi
