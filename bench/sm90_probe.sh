#!/usr/bin/env bash
# One device call for the Hopper kernel work (issue 12): build, quick test, our kernel forced
# (CVF_CUDA_ENGINE=own) against cuBLASLt on the GEMM shapes of the targets, and ncu on chosen
# cases: the sections (speed of light, compute pipes, warp stall reasons, scheduler issue slots)
# and the per-instruction stall samples of the SASS (csv), to tell mainloop from epilogue.
#
#   bench/sm90_probe.sh [--no-ncu] [--ncu-case CASE]... [--tests] [--base TARBALL] [--also VAR=VALUE]...
#                       [CASE ...]
#
# --base: a `git archive | gzip` of an earlier commit, built beside this tree and benched right
# after it in the same call (before / after on the same card). --tests: the whole test_cuda under
# auto and under CVF_CUDA_ENGINE=own (else the --quick set). --also: the bench again with that
# variable set (e.g. CVF_CUDA_SM90_TILE=256), as more columns of the table. Writes $OUT/log, $OUT/bench.jsonl (and base.jsonl), $OUT/ncu_sections.txt and
# $OUT/ncu_sass_N.csv (N: the ncu case's index). Without CASEs: the plain GEMM and MatMul+ReLU
# targets of issue 12.
set -u
OUT=${OUT:-/tmp/cvfuse-out}
mkdir -p "$OUT"
LOG=$OUT/log
: >"$LOG"
ncu=1 tests=0 base="" ncu_cases=() cases=() also=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-ncu) ncu=0; shift ;;
    --ncu-case) ncu_cases+=("$2"); shift 2 ;;
    --tests) tests=1; shift ;;
    --base) base=$2; shift 2 ;;
    --also) also+=("$2"); shift 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done
if [ ${#cases[@]} -eq 0 ]; then
  for dt in bf16 f16; do
    cases+=(gemm,$dt,8192,8192,8192 gemm,$dt,4096,4096,4096)
    for shape in 12608,768,3072 16448,1024,4096 16448,1280,5120; do
      IFS=, read -r s h i <<<"$shape"
      cases+=(gemm,$dt,$h,$i,$s gemm,$dt,$i,$h,$s gemm,$dt,$s,$h,$i)
    done
  done
  cases+=(matmul-relu,f16,8192,8192,8192 matmul-relu,f16,4096,4096,4096 matmul-relu,f16,8192,8192,256
          matmul-relu,f16,16384,8192,64 mlp-backward,bf16,12608,768,3072 mlp-forward,bf16,12608,768,3072)
fi
# An ncu case is CASE[:SKIP:COUNT[:REGEX]]: the launches of kernels whose demangled name matches
# REGEX (default sm90_gemm_kernel) to skip and to profile (default 3 and 1; an MLP backward's first
# four sm90 launches are its K1, K2-1, K2-2 and K2-3, forced serial by ncu, unless a plan step
# runs elsewhere: name the kernel to be sure, e.g. K1's bf16 one (N 256, DT 1, A_MN 0, B_MN 1):
# 'mlp-backward,bf16,12608,768,3072:0:1:\(int\)256, \(int\)1, \(int\)0, \(int\)1>').
[ ${#ncu_cases[@]} -eq 0 ] && ncu_cases=(mlp-backward,bf16,12608,768,3072:0:4 matmul-relu,f16,16384,8192,64:3:1)

. "$(dirname "$0")/steps.sh"

step gpu 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
if [ -n "$base" ]; then
  rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf "$base" -C /tmp/base
  (cmake -S /tmp/base -B /tmp/base/build -DCMAKE_BUILD_TYPE=Release >/tmp/base.log 2>&1 &&
    cmake --build /tmp/base/build -j 8 --target cvfuse_cuda_bench >>/tmp/base.log 2>&1; echo "base build rc=$?" >>/tmp/base.log) &
fi
step configure 120 cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCVF_CUDA_PTXAS_VERBOSE=ON || exit 1
step build 400 cmake --build build -j 16 --target test_cuda cvfuse_cuda_bench || exit 1
wait
[ -n "$base" ] && tail -2 /tmp/base.log | tee -a "$LOG"
grep -E "spill" "$LOG" | sort | uniq -c
# The SASS of the bf16 kernel 256 wide with K-major A and N-major B (the MLP's K1), for reading here:
# the consumers' epilogue (EW false, b0) and the epilogue warpgroup's kernel (EW true, b1).
obj=$(find build -name 'gemm_sm90_bf16.cu.o' | head -n 1)
for ew in 0 1; do
  sass=$OUT/sass_bf16_01_ew$ew.txt
  [ -n "$obj" ] && cuobjdump -sass -fun "_ZN4sm9016sm90_gemm_kernelILi256ELi1ELi0ELi1ELb${ew}EEEv14CUtensorMap_stS1_S1_S1_NS_11sm90_paramsE" \
    "$obj" >"$sass" 2>&1
  [ -f "$sass" ] && say "SASS (EW $ew): $(wc -l <"$sass") lines, $(grep -c MUFU "$sass") MUFU, $(grep -cE 'STL|LDL' "$sass") local"
done
step smoke 120 build/tests/test_cuda --quick || { say "smoke failed"; grep -E "FAIL|passed" "$LOG" | head -30; exit 1; }
grep -E "passed|FAIL" "$LOG" | head -20
if [ $tests -eq 1 ]; then
  step test_cuda 300 build/tests/test_cuda
  CVF_CUDA_ENGINE=own step test_cuda_own 300 build/tests/test_cuda
  grep -E "passed|FAIL|worst" "$LOG" | tail -30
fi
CVF_CUDA_ENGINE=own step bench 300 build/cvfuse_cuda_bench --json "$OUT/bench.jsonl" "${cases[@]}"
n=0
for v in ${also[@]+"${also[@]}"}; do
  step "bench with $v" 300 env CVF_CUDA_ENGINE=own "$v" build/cvfuse_cuda_bench --json "$OUT/also_$n.jsonl" "${cases[@]}"
  n=$((n + 1))
done
if [ -n "$base" ] && [ -x /tmp/base/build/cvfuse_cuda_bench ]; then
  CVF_CUDA_ENGINE=own step base-bench 300 /tmp/base/build/cvfuse_cuda_bench --json "$OUT/base.jsonl" "${cases[@]}"
fi
python3 - "$OUT/bench.jsonl" "$OUT/base.jsonl" "$OUT"/also_*.jsonl <<'PY' | tee -a "$LOG"
import json, sys, os
def load(p):
    d = {}
    if os.path.exists(p):
        for line in open(p):
            r = json.loads(line)
            sh = r.get("shape") or {}
            key = (r["op"], r["dtype"], sh.get("m", r.get("S")), sh.get("n", r.get("H")), sh.get("k", r.get("I")))
            d[key] = r
    return d
new, old = load(sys.argv[1]), load(sys.argv[2])
alsos = [load(p) for p in sys.argv[3:] if os.path.exists(p)]
print("%-12s %-5s %-18s %9s %9s %7s | %9s %7s" % ("op", "dt", "shape", "ours ms", "lt ms", "ratio", "base ms", "ratio")
      + "".join(" | also%d ms  ratio" % i for i in range(len(alsos))))
for k, r in new.items():
    b = old.get(k, {})
    fmt = lambda x: "%9.4f" % x if isinstance(x, (int, float)) else "%9s" % "-"
    fr = lambda x: "%7.3f" % x if isinstance(x, (int, float)) else "%7s" % "-"
    print("%-12s %-5s %-18s %s %s %s | %s %s" % (k[0], k[1], "x".join(str(v) for v in k[2:]), fmt(r.get("ms")),
          fmt(r.get("baseline_ms")), fr(r.get("ratio")), fmt(b.get("ms")), fr(b.get("ratio")))
          + "".join(" | %s %s" % (fmt(a.get(k, {}).get("ms")), fr(a.get(k, {}).get("ratio"))) for a in alsos))
    if "kernels" in r:
        print("    ours", json.dumps(r["kernels"].get("ours")), "lt", json.dumps(r["kernels"].get("cublaslt")),
              "k1_plain", r.get("k1_plain_ms", r.get("fc1_plain_ms")))
        if "kernels" in b:
            print("    base", json.dumps(b["kernels"].get("ours")))
PY
if [ $ncu -eq 1 ]; then
  idx=0
  for spec in "${ncu_cases[@]}"; do
    IFS=: read -r c skip count kernel <<<"$spec"
    CVF_CUDA_ENGINE=own step "ncu $spec" 240 ncu --clock-control none --kernel-name-base demangled \
      -k "regex:${kernel:-sm90_gemm_kernel}" \
      --launch-skip "${skip:-3}" --launch-count "${count:-1}" \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section SourceCounters --section Occupancy \
      --import-source no -o "/tmp/ncu_$idx" -f build/cvfuse_cuda_bench --repeat 3 --warmup 1 "$c"
    {
      echo "##### $spec"
      ncu -i "/tmp/ncu_$idx.ncu-rep" --page details 2>&1
    } >>"$OUT/ncu_sections.txt"
    ncu -i "/tmp/ncu_$idx.ncu-rep" --page source --print-source sass --csv >"$OUT/ncu_sass_$idx.csv" 2>&1
    idx=$((idx + 1))
  done
  grep -E "#####|sm90_gemm|Duration|Issue Slots Busy|Issued Ipc A|No Eligible|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued" "$OUT/ncu_sections.txt" | head -60
fi
say done
