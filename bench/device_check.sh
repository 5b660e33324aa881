#!/usr/bin/env bash
# One device call on the GPU machine: build, test_cuda once per engine policy (CVF_CUDA_ENGINE),
# compute-sanitizer on the quick set, the CLI's GPU runs, the Python package's tests on the GPU,
# then the benchmarks side by side (cvfuse_cuda_bench vs cuBLASLt, PyTorch eager MLP, ViT training
# steps with and without swap_mlps). Logs under $OUT. Steps are skipped with SKIP="tests bench vit".
#   DLPACK_INCLUDE_DIR: where dlpack/dlpack.h is (the machine may lack libdlpack-dev)
#   WHEELS: a folder of wheels to put on PYTHONPATH first (pytest, timm) when the machine lacks them
set -u
OUT=${OUT:-/tmp/cvfuse-out}
mkdir -p "$OUT"
skip() { case " ${SKIP:-} " in *" $1 "*) return 0 ;; esac; return 1; }
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "-- $name rc=$?"; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build build -j 16 >> "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
if ! skip tests; then
    for e in auto own cublaslt unfused; do
        q=--quick; [ "$e" = auto ] && q=
        CVF_CUDA_ENGINE=$e step "test_cuda_$e" 200 build/tests/test_cuda $q
        grep -E "^test_cuda:|FAIL" "$OUT/test_cuda_$e.log" | head -5
    done
    step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/test_cuda --quick
    # racecheck does not follow the epilogue warpgroup's bar.arrive / bar.sync handoff and reports its
    # boxes as hazards (docs/PERF.md, issue 12 part 6): it checks everything else, that kernel off
    CVF_CUDA_EPI_WARPS=0 step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 3 build/tests/test_cuda --quick
    step cli 120 bash tests/test_cli.sh build/cvfuse
    tail -1 "$OUT/cli.log"
fi
if [ -n "${WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl && export PYTHONPATH=/tmp/site
fi
if ! skip python; then
    cmake -S python -B build-py -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v python3)" \
        ${DLPACK_INCLUDE_DIR:+-DDLPACK_INCLUDE_DIR=$DLPACK_INCLUDE_DIR} > "$OUT/python_build.log" 2>&1 &&
        cmake --build build-py -j 16 >> "$OUT/python_build.log" 2>&1 || tail -20 "$OUT/python_build.log"
    rm -rf /tmp/pkg && mkdir -p /tmp/pkg && cp -r python/cvfuse /tmp/pkg/ && cp build-py/_cvfuse*.so /tmp/pkg/cvfuse/
    export PYTHONPATH=/tmp/pkg${PYTHONPATH:+:$PYTHONPATH}
    step pytest 300 python3 -m pytest -p no:cacheprovider -q -rs python/tests
    tail -3 "$OUT/pytest.log"
fi
if ! skip bench; then
    step bench 240 build/cvfuse_cuda_bench --json "$OUT/bench.jsonl"
    grep -E "^(matmul-relu|gemm|mlp-backward|mlp-forward) " "$OUT/bench.log"
    step torch_mlp 200 python3 bench/torch_mlp_bench.py --json "$OUT/torch.jsonl"
    grep -E "^torch " "$OUT/torch_mlp.log" | head
fi
if ! skip python; then
    step first_call 120 python3 bench/first_call.py
    cat "$OUT/first_call.log"
fi
if ! skip vit; then
    step vit 300 python3 bench/torch_vit_bench.py --json-out "$OUT/vit.jsonl" --steps 10 --warmup 3
    tail -12 "$OUT/vit.log"
fi
