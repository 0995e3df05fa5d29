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

# CMake: find_package(cuttle) against the installed tree builds examples/
# (examples/CMakeLists.txt) on the shared and on the static library, and
# the programs run; a version newer than the installed one is refused.
if command -v cmake > /dev/null 2>&1; then
    cmake_log="$prefix/cmake.log"
    if cmake -S examples -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
            > "$cmake_log" 2>&1 &&
        cmake --build "$prefix/cmake-build" >> "$cmake_log" 2>&1 &&
        "$prefix/cmake-build/two_layer" >> "$cmake_log" 2>&1 &&
        "$prefix/cmake-build/two_layer_static" >> "$cmake_log" 2>&1 &&
        ! ldd "$prefix/cmake-build/two_layer_static" | grep -q libcuttle &&
        ldd "$prefix/cmake-build/two_layer" | grep -q "$prefix/lib/libcuttle.so" &&
        "$prefix/cmake-build/mish_demo" cpu >> "$cmake_log" 2>&1; then
        echo "PASS cmake_find_package_builds_the_examples"
    else
        echo "FAIL cmake_find_package_builds_the_examples"
        sed 's/^/    /' "$cmake_log" >&2
    fi
    mkdir -p "$prefix/too-new"
    printf 'cmake_minimum_required(VERSION 3.13)\nproject(t C)\nfind_package(cuttle 99.0 REQUIRED)\n' \
        > "$prefix/too-new/CMakeLists.txt"
    if cmake -S "$prefix/too-new" -B "$prefix/too-new/b" -DCMAKE_PREFIX_PATH="$prefix" \
            > "$cmake_log" 2>&1; then
        echo "FAIL cmake_refuses_a_newer_version"
        sed 's/^/    /' "$cmake_log" >&2
    elif grep -q "compatible" "$cmake_log" && grep -q "version: 0" "$cmake_log"; then
        echo "PASS cmake_refuses_a_newer_version"
    else
        echo "FAIL cmake_refuses_a_newer_version (not for the version)"
        sed 's/^/    /' "$cmake_log" >&2
    fi
else
    echo "# skipped: cmake_* (no cmake: apt-get install cmake)"
fi

# The shared library exports exactly the functions include/ marks CT_API:
# nothing internal (the build hides the rest), nothing public missing.
exported=$(nm -D --defined-only "$prefix/lib/libcuttle.so" | awk '$2 ~ /[TDBRVW]/ {print $3}' | sort)
declared=$(grep -ho '^CT_API [^(]*(' include/*.h | sed 's/($//; s/.*[ *]//' | sort)
if [ -n "$declared" ] && [ "$exported" = "$declared" ]; then
    echo "PASS library_exports_only_the_public_api"
else
    echo "FAIL library_exports_only_the_public_api"
    printf '%s\n' "$exported" > "$prefix/exported.txt"
    printf '%s\n' "$declared" | diff "$prefix/exported.txt" - | sed 's/^/    /' >&2
    exit 1
fi

# The command line and the examples compile against the public headers
# alone (tools/lib_internal.h names its one exception): a private include
# there fails the build, since their include path is include/ (and tools/).
if grep -n '#include "\(core\|cpu\|cuda\|data\|graph\|io\|nn\|ops\|prof\)/' tools/*.[ch] examples/*.c \
    >&2; then
    echo "FAIL cli_uses_public_headers_only"
    exit 1
fi
echo "PASS cli_uses_public_headers_only"

# A custom op from outside the library (examples/custom_op), built with its
# own Makefile against the installed header and library, trains on the CPU.
cp -r examples/custom_op "$prefix/custom_op"
if PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -C "$prefix/custom_op" > "$prefix/mish.log" 2>&1 &&
    LD_LIBRARY_PATH="$prefix/lib" "$prefix/custom_op/mish_demo" cpu >> "$prefix/mish.log" 2>&1; then
    echo "PASS custom_op_example_builds_and_trains"
else
    echo "FAIL custom_op_example_builds_and_trains"
    sed 's/^/    /' "$prefix/mish.log" >&2
    exit 1
fi
