#!/usr/bin/env bash
# One device call: build (or use prebuilt binaries), test the CUDA backend against the float64
# reference, run compute-sanitizer (memcheck, racecheck) on a small set, benchmark against
# cuBLASLt, and optionally profile one case with ncu. Every step runs under `timeout`.
#
#   bench/run_device.sh [--prebuilt DIR] [--skip-tests] [--skip-sanitize] [--ncu CASE] [CASE ...]
#
# DIR holds test_cuda, test_errors and cvfuse_cuda_bench built elsewhere for this image; when
# they do not run, the script builds. CASEs go to cvfuse_cuda_bench (op,dtype,m,n,k). Writes
# $OUT/log (everything), $OUT/bench.jsonl (one JSON object per case) and $OUT/ncu.txt.
set -u
OUT=${OUT:-/tmp/cvfuse-out}
mkdir -p "$OUT"
LOG=$OUT/log
: >"$LOG"
prebuilt="" skip_tests=0 skip_sanitize=0 ncu_case="" cases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --skip-tests) skip_tests=1; shift ;;
    --skip-sanitize) skip_sanitize=1; shift ;;
    --ncu) ncu_case=$2; shift 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done

say() { echo "$*" | tee -a "$LOG"; }
# step NAME SECONDS COMMAND...: runs the command under timeout, output to the log, and says how it ended.
step() {
  local name=$1 limit=$2 start rc
  shift 2
  say "== $name (limit ${limit}s): $*"
  start=$SECONDS
  timeout "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  say "-- $name: rc=$rc, $((SECONDS - start)) s"
  return $rc
}

step "gpu" 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
bin=""
if [ -n "$prebuilt" ] && timeout 60 "$prebuilt/test_errors" >/dev/null 2>&1; then
  bin=$prebuilt
  say "using prebuilt binaries in $bin"
else
  step "configure" 120 cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCVF_CUDA_PTXAS_VERBOSE=ON || exit 1
  step "build" 400 cmake --build build -j 16 || exit 1
  mkdir -p build/bin && cp build/tests/test_cuda build/tests/test_errors build/cvfuse_cuda_bench build/bin/
  bin=build/bin
fi

step "smoke (test_cuda --quick)" 90 "$bin/test_cuda" --quick
if [ $? -eq 124 ]; then
  say "smoke test timed out: a kernel hangs; stopping here"
  exit 1
fi
if [ $skip_tests -eq 0 ]; then
  step "test_errors" 60 "$bin/test_errors"
  step "test_cuda" 200 "$bin/test_cuda"
  grep -E "passed|FAIL|worst|large" "$LOG" | tail -40
fi
if [ $skip_sanitize -eq 0 ]; then
  step "memcheck" 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_cuda" --quick
  step "racecheck" 150 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/test_cuda" --quick
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test_cuda:" "$LOG" | tail -6
fi
step "bench" 200 "$bin/cvfuse_cuda_bench" --json "$OUT/bench.jsonl" "${cases[@]}"
grep -E "ours|device:" "$LOG" | tail -12
if [ -n "$ncu_case" ]; then
  step "ncu" 240 ncu --clock-control none -k regex:sm90_gemm_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats "$bin/cvfuse_cuda_bench" --repeat 3 "$ncu_case"
  sed -n '/== ncu/,$p' "$LOG" >"$OUT/ncu.txt"
  grep -E "Duration|Throughput|Stall|Issued|Eligible" "$OUT/ncu.txt" | head -40
fi
say "done"
