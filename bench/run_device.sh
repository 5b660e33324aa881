#!/usr/bin/env bash
# One device call: build (or use prebuilt binaries), test the CUDA backend against the float64
# reference, run compute-sanitizer (memcheck, racecheck) on a small set, benchmark against
# cuBLASLt, time the MLP cases in PyTorch too, summarize the MLP results against the targets, and
# optionally profile one case with ncu. Every step runs under `timeout`.
#
#   bench/run_device.sh [--prebuilt DIR] [--skip-tests] [--skip-sanitize] [--mlp-only]
#                       [--torch-compile] [--ncu CASE] [CASE ...]
#
# DIR holds test_cuda, test_errors and cvfuse_cuda_bench built elsewhere for this image; when
# they do not run, the script builds. CASEs go to cvfuse_cuda_bench (op,dtype,m,n,k for
# matmul-relu and gemm; op,dtype,S,H,I for mlp-backward and mlp-forward); without CASEs it runs its
# whole suite (the matmul and the MLP targets). --mlp-only keeps only the MLP cases (the mlp suite,
# or the mlp-* CASEs given), for a short device call; add --skip-tests --skip-sanitize for the
# shortest. After the bench, when python3 can import torch, bench/torch_mlp_bench.py times the same
# MLP cases in PyTorch eager (--torch-compile: also torch.compile max-autotune, slow), and
# bench/summarize_mlp.py joins both per case and checks the targets (its table; docs/PERF.md).
# Writes $OUT/log (everything), $OUT/bench.jsonl (one JSON object per case), $OUT/torch.jsonl,
# $OUT/summary.txt and $OUT/ncu.txt.
#
#   fastest MLP check:  bench/run_device.sh --skip-tests --skip-sanitize --mlp-only
set -u
OUT=${OUT:-/tmp/cvfuse-out}
mkdir -p "$OUT"
LOG=$OUT/log
: >"$LOG"
prebuilt="" skip_tests=0 skip_sanitize=0 mlp_only=0 torch_compile=0 ncu_case="" cases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --skip-tests) skip_tests=1; shift ;;
    --skip-sanitize) skip_sanitize=1; shift ;;
    --mlp-only) mlp_only=1; shift ;;
    --torch-compile) torch_compile=1; shift ;;
    --ncu) ncu_case=$2; shift 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done

. "$(dirname "$0")/steps.sh"

# The bench's arguments, and whether MLP cases run (then torch and the summary follow).
mlp_cases=()
for c in ${cases[@]+"${cases[@]}"}; do
  case "$c" in mlp-*) mlp_cases+=("$c") ;; esac
done
bench_args=(${cases[@]+"${cases[@]}"}) has_mlp=1
if [ ${#cases[@]} -eq 0 ]; then
  [ $mlp_only -eq 1 ] && bench_args=(--suite mlp)
else
  [ $mlp_only -eq 1 ] && bench_args=(${mlp_cases[@]+"${mlp_cases[@]}"})
  [ ${#mlp_cases[@]} -eq 0 ] && has_mlp=0
  if [ ${#bench_args[@]} -eq 0 ]; then
    say "--mlp-only: none of the CASEs given is an mlp-* case"
    exit 2
  fi
fi

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
  # (the epilogue warpgroup's kernel off: racecheck does not follow its bar.arrive / bar.sync
  # handoff, docs/PERF.md issue 12 part 6)
  CVF_CUDA_EPI_WARPS=0 step "racecheck" 150 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/test_cuda" --quick
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test_cuda:" "$LOG" | tail -6
fi
step "bench" 300 "$bin/cvfuse_cuda_bench" --json "$OUT/bench.jsonl" ${bench_args[@]+"${bench_args[@]}"}
grep -E "^(matmul-relu|gemm|mlp-backward|mlp-forward) |device:|FALLBACK|not supported" "$LOG" | tail -30
if [ $has_mlp -eq 1 ]; then
  if timeout 120 python3 -c "import torch" >/dev/null 2>&1; then
    torch_args=(--json "$OUT/torch.jsonl") torch_limit=240
    if [ $torch_compile -eq 1 ]; then
      torch_args+=(--compile)
      torch_limit=540
    fi
    step "torch" $torch_limit python3 bench/torch_mlp_bench.py "${torch_args[@]}" ${mlp_cases[@]+"${mlp_cases[@]}"}
    grep -E "^torch |torch eager|^torch_mlp_bench|: failed:" "$LOG" | tail -12
  else
    say "torch: python3 cannot import torch here: no PyTorch baseline"
  fi
  step "summary" 60 python3 bench/summarize_mlp.py "$OUT/bench.jsonl" "$OUT/torch.jsonl" --out "$OUT/summary.txt"
  [ -f "$OUT/summary.txt" ] && cat "$OUT/summary.txt"
fi
if [ -n "$ncu_case" ]; then
  step "ncu" 240 ncu --clock-control none -k regex:sm90_gemm_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats "$bin/cvfuse_cuda_bench" --repeat 3 "$ncu_case"
  sed -n '/== ncu/,$p' "$LOG" >"$OUT/ncu.txt"
  grep -E "Duration|Throughput|Stall|Issued|Eligible" "$OUT/ncu.txt" | head -40
fi
say "done"
