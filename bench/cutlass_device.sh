#!/usr/bin/env bash
# One device call for issue 12's choice of base: CUTLASS 4.2's sm90 kernels (bench/cutlass_probe.cu)
# against cuBLASLt, and our kernel forced (CVF_CUDA_ENGINE=own) against cuBLASLt on the same
# shapes, in one call on the same card.
#
#   bench/cutlass_device.sh [PROBE_CASE ...]
#
# Needs build-cutlass/ carried from the development machine (the device reaches no registry):
# the unpacked `nvidia-cutlass` 4.2.0.0 wheel in build-cutlass/x (see bench/cutlass_probe.cu's
# header), and optionally a probe binary built there, build-cutlass/cutlass_probe (else it is
# built here: ~3 min of one core). Writes $OUT/log, $OUT/cutlass.txt, $OUT/ours.jsonl.
set -u
OUT=${OUT:-/tmp/cvfuse-out}
mkdir -p "$OUT"
LOG=$OUT/log
: >"$LOG"
. "$(dirname "$0")/steps.sh"

CUT=build-cutlass/x/cutlass_library/source
probe=build-cutlass/cutlass_probe
step gpu 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
step configure 120 cmake -S . -B build -DCMAKE_BUILD_TYPE=Release || exit 1
(cmake --build build -j 12 --target cvfuse_cuda_bench >"$OUT/build.log" 2>&1; echo "rc=$?" >>"$OUT/build.log") &
build_pid=$!
if [ ! -x "$probe" ]; then
  step probe-build 400 nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I"$CUT/include" \
    -I"$CUT/tools/util/include" bench/cutlass_probe.cu -lcublasLt -o "$probe" || exit 1
fi
wait "$build_pid"
tail -n 1 "$OUT/build.log" | tee -a "$LOG"
step probe 300 sh -c "$probe $* | tee $OUT/cutlass.txt"
cat "$OUT/cutlass.txt"
# ours on the probe's default shapes (cvfuse_cuda_bench's cases: op,dtype,m,n,k / op,dtype,S,H,I)
cases="gemm,bf16,8192,8192,8192 gemm,bf16,4096,4096,4096"
for shape in 12608,768,3072 16448,1024,4096 16448,1280,5120; do
  IFS=, read -r s h i <<<"$shape"
  cases="$cases gemm,bf16,$s,$i,$h gemm,bf16,$h,$i,$s gemm,bf16,$i,$h,$s gemm,bf16,$s,$h,$i"
  cases="$cases mlp-backward,bf16,$s,$h,$i mlp-forward,bf16,$s,$h,$i"
done
cases="$cases matmul-relu,f16,4096,4096,4096 matmul-relu,f16,8192,8192,256 matmul-relu,f16,16384,8192,64"
cases="$cases matmul-relu,f16,8192,8192,512"
step ours 300 env CVF_CUDA_ENGINE=own build/cvfuse_cuda_bench --json "$OUT/ours.jsonl" $cases
grep -E "^ *(gemm|matmul|mlp)" "$LOG" | tail -n 40
