#!/usr/bin/env bash
# Runs each fuzzer for SECONDS on a temporary copy of its seed corpus (tests/fuzz/corpus/NAME;
# the checked-in corpus is never written), then prints the executions and the rate.
#   tests/fuzz/run.sh BUILD_DIR SECONDS [NAME...]      NAME: npy, api (default: both)
# A crash, a violated property (a trap), a leak or a timeout (FUZZ_TIMEOUT seconds for one input,
# default 60: each takes milliseconds, but a loaded machine can stall one for seconds) fails the
# run; the input that did it is kept in BUILD_DIR/fuzz-artifacts/ (reproduce with
# `BUILD_DIR/tests/fuzz/fuzz_NAME FILE`). Extra libFuzzer flags: FUZZ_FLAGS.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS [NAME...]}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [NAME...]}
shift 2
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(npy api)
here=$(cd "$(dirname "$0")" && pwd)
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
work=$(mktemp -d "${TMPDIR:-/tmp}/cvfuse-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

status=0
for name in "${names[@]}"; do
    fuzzer="$build/tests/fuzz/fuzz_$name"
    [ -x "$fuzzer" ] || { echo "run.sh: $fuzzer not built (make fuzz-build)" >&2; exit 2; }
    mkdir -p "$work/$name"
    cp "$here/corpus/$name/"* "$work/$name/"
    echo "== fuzz_$name: ${seconds}s on a copy of tests/fuzz/corpus/$name ($(ls "$work/$name" | wc -l) seeds)"
    log="$work/$name.log"
    # shellcheck disable=SC2086
    if "$fuzzer" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-60}" -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/fuzz_${name}-" ${FUZZ_FLAGS:-} "$work/$name" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        echo "fuzz_$name: ok, ${runs:-?} executions (${rate:-?}/s), corpus $(ls "$work/$name" | wc -l) inputs"
    else
        status=1
        echo "fuzz_$name: FAILED; the end of its log:"
        tail -n 60 "$log"
        echo "fuzz_$name: the failing input is in $artifacts/"
    fi
done
exit $status
