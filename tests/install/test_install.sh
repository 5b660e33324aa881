#!/usr/bin/env bash
# The install test: usage test_install.sh SOURCE_DIR WORK_DIR
# For a shared and a static build of cvfuse (CPU only, no tests or CLI: quick), configure, build and
# `cmake --install` into WORK_DIR, then build the consumer (tests/install/consumer.c) against the
# installed copy with find_package(cvfuse) and with `pkg-config [--static] --cflags --libs cvfuse`,
# and run each. The shared library must export exactly the CVF_API functions of include/cvfuse.h.
# Environment: CMAKE, CC (the outer build's), CVF_WERROR (forwarded), JOBS (default 2).
set -euo pipefail

src=$(cd "$1" && pwd)
work=$2
cmake=${CMAKE:-cmake}
jobs=${JOBS:-2}
werror=${CVF_WERROR:-OFF}
cc=${CC:-cc}

# Without pkg-config the find_package half still runs; the test then reports itself skipped (77).
have_pkg_config=1
command -v pkg-config >/dev/null || have_pkg_config=0

rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
version=$(sed -n 's/^#define CVF_VERSION_\(MAJOR\|MINOR\|PATCH\) \+\([0-9]\+\).*/\2/p' "$src/include/cvfuse.h" | paste -sd.)

# step NAME COMMAND...: runs the command with its output in WORK/NAME.log, shown only on failure.
step() {
    local name=$1
    shift
    if ! "$@" >"$work/$name.log" 2>&1; then
        cat "$work/$name.log"
        echo "test_install: FAILED: $name: $*"
        exit 1
    fi
}

# The CVF_API function names the header declares, one a line, sorted.
public_functions() {
    grep -oE '^CVF_API [^(]*\bcvf_[a-z0-9_]+\(' "$src/include/cvfuse.h" | grep -oE 'cvf_[a-z0-9_]+\($' | tr -d '(' | sort -u
}

# Fails unless the shared library's defined dynamic symbols are exactly the public functions.
check_exports() {
    local lib=$1
    nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRrVviu]$/ {print $3}' | sort -u >"$work/exported.txt"
    public_functions >"$work/public.txt"
    if ! diff -u "$work/public.txt" "$work/exported.txt"; then
        echo "test_install: FAILED: $lib exports other symbols than the header's CVF_API functions (diff above: - missing, + extra)"
        exit 1
    fi
    echo "exports: $(wc -l <"$work/exported.txt") symbols, exactly the header's CVF_API functions"
}

# Fails unless a consumer of the shared library loads libcvfuse.so and one of the static doesn't.
check_linkage() {
    local kind=$1 exe=$2
    if [ "$kind" = shared ] && ! readelf -d "$exe" | grep -q 'NEEDED.*libcvfuse\.so'; then
        echo "test_install: FAILED: $exe does not load libcvfuse.so"
        exit 1
    fi
    if [ "$kind" = static ] && readelf -d "$exe" | grep -q 'NEEDED.*libcvfuse'; then
        echo "test_install: FAILED: $exe loads a shared libcvfuse"
        exit 1
    fi
}

# Builds, installs and consumes one kind (shared or static) of the library.
check_kind() {
    local kind=$1 shared=OFF static_flag=""
    [ "$kind" = shared ] && shared=ON
    [ "$kind" = static ] && static_flag=--static
    local build=$work/build-$kind prefix=$work/prefix-$kind
    echo "== $kind"
    step "$kind-configure" "$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
        -DBUILD_SHARED_LIBS=$shared -DCVF_CUDA=OFF -DCVF_BUILD_TESTS=OFF -DCVF_BUILD_CLI=OFF \
        -DCVF_BUILD_BENCH=OFF -DCVF_WERROR="$werror"
    step "$kind-build" "$cmake" --build "$build" -j "$jobs"
    step "$kind-install" "$cmake" --install "$build" --prefix "$prefix"
    local libdir
    libdir=$(dirname "$(find "$prefix" -name cvfuse.pc)")
    libdir=$(dirname "$libdir")
    test -f "$prefix/include/cvfuse.h"
    if [ "$kind" = shared ]; then
        test -e "$libdir/libcvfuse.so"
        check_exports "$libdir/libcvfuse.so"
    else
        test -f "$libdir/libcvfuse.a"
        test ! -e "$libdir/libcvfuse.so"
    fi

    # find_package(cvfuse): the CMake consumer (the installed target carries its RPATH).
    step "$kind-consumer-configure" "$cmake" -S "$src/tests/install" -B "$work/consumer-$kind" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" -DCVF_EXPECT_VERSION="$version"
    step "$kind-consumer-build" "$cmake" --build "$work/consumer-$kind"
    echo "-- find_package(cvfuse):"
    "$work/consumer-$kind/consumer"
    check_linkage "$kind" "$work/consumer-$kind/consumer"

    # pkg-config: the flags a Makefile user would write.
    if [ "$have_pkg_config" = 0 ]; then
        echo "-- pkg-config not found: its consumer is not built"
        return
    fi
    local flags
    flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config $static_flag --cflags --libs cvfuse)
    echo "-- pkg-config $static_flag --cflags --libs cvfuse: $flags"
    # shellcheck disable=SC2086 # the flags are words
    step "$kind-pkgconfig-build" "$cc" -std=c11 -Wall -Wextra -Werror "$src/tests/install/consumer.c" \
        -o "$work/consumer-pc-$kind" $flags -lm
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer-pc-$kind"

    check_linkage "$kind" "$work/consumer-pc-$kind"
}

check_kind shared
check_kind static
if [ "$have_pkg_config" = 0 ]; then
    echo "test_install: pkg-config not found (apt-get install pkg-config): the find_package consumers passed, skipped"
    exit 77
fi
echo "test_install: ok (cvfuse $version, shared and static, find_package and pkg-config)"
