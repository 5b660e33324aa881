#!/usr/bin/env bash
# One device call on a many-core x86 CPU host (issues 15 and 16): lscpu, a Release build with the
# CLI and its OpenBLAS baseline, the CPU tests at every ISA level the CPU accepts, `cvfuse bench
# --suite cpu`, the thread-scaling sweep of issue 16 (ours vs OpenBLAS), issue 15's cases beside
# PyTorch eager (bench/torch_cpu_bench.py), and a summary. Run from the repository root:
#   bash bench/cpu_host_check.sh                 # logs and results under $OUT (default /tmp/cvfuse-out)
# Results: $OUT/sbs.jsonl (ours and PyTorch in one process, bench/torch_cpu_side_by_side.py),
# $OUT/cpu.jsonl (every JSON row: `cvfuse bench --json-out` rows with "impl":"cvfuse", torch
# rows with "impl":"torch"; each tagged with "group" and "isa", the CVF_CPU_ISA it ran under or
# "default"), $OUT/summary.txt (ours / OpenBLAS and ours / torch per case), one log per step.
# Knobs:
#   SKIP="cores tests suite scaling small torch split2d blocks reshape amx_l2 spin k1 pairs ab sbs wait order pause small_s"
#                                     groups to leave out
#   BLOCK_ROUNDS=3 I15_ROUNDS=3       rounds of the blocks, reshape, amx_l2, spin, k1, pairs, ab and order groups; of the
#                                     sbs and wait groups
#   DLPACK_INCLUDE_DIR                where dlpack/dlpack.h is, for the sbs group's Python extension
#   AB_PATCH="F ..."                  `git diff`s of changes to measure against this tree (the ab group)
#   THREADS_LIST="1 2 4 8 16"         the scaling sweep's thread counts; its last is the "many threads"
#                                     count of the suite and of issue 15's cases
#   JOBS=16                           build parallelism          PYTHON=python3   the one with torch
#   BUILD=build-host                  build directory            SMALL=1          small shapes, few repeats
#   LEVELS="generic avx2 avx512 avx512_bf16 amx"  CVF_CPU_ISA levels the tests try (rejected ones are skipped)
# Threads: each run at t threads gets OMP_NUM_THREADS=t and OPENBLAS_NUM_THREADS=t (bench also calls
# openblas_set_num_threads(t) itself; torch_cpu_bench.py calls torch.set_num_threads(t)).
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset, as `make bench` does (they slow OpenBLAS down).
set -u
OUT=${OUT:-/tmp/cvfuse-out}
JOBS=${JOBS:-16}
PYTHON=${PYTHON:-python3}
BUILD=${BUILD:-build-host}
THREADS_LIST=${THREADS_LIST:-1 2 4 8 16}
LEVELS=${LEVELS:-generic avx2 avx512 avx512_bf16 amx}
MANY=${THREADS_LIST##* }
CLI=$BUILD/cvfuse
JSONL=$OUT/cpu.jsonl
mkdir -p "$OUT" "$OUT/rows"
: > "$JSONL"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE GOTO_NUM_THREADS
skip() { case " ${SKIP:-} " in *" $1 "*) return 0 ;; esac; return 1; }
step() {
    local name=$1 limit=$2 t0=$SECONDS rc; shift 2; echo "== $name"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; rc=$?
    echo "-- $name rc=$rc $((SECONDS - t0))s"
}
# build_probe SOURCE DIR NAME LOG [FLAGS...]: a stand-alone probe of bench/ (compiled by hand, as its
# header says) against DIR/libcvfuse.a as DIR/NAME, the compiler's output appended to LOG; false if
# it fails.
build_probe() {
    local source=$1 dir=$2 name=$3 log=$4
    shift 4
    gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude "$@" "$source" "$dir/libcvfuse.a" -lpthread -lm -o "$dir/$name" \
        >> "$log" 2>&1
}
# build_base_probe SOURCE NAME: build_probe of SOURCE against this run's library as $BUILD/NAME, once
# per run however many groups ask; false, with the compiler's output in $OUT/NAME_build.log, if it fails.
base_probes_built=" "
build_base_probe() {
    case $base_probes_built in *" $2 "*) return 0 ;; esac
    build_probe "$1" "$BUILD" "$2" "$OUT/$2_build.log" && base_probes_built="$base_probes_built$2 "
}
# build_mlp_steps: bench/cpu_mlp_steps.c as $BUILD/mlp_steps (the reshape, spin, k1 and ab groups).
build_mlp_steps() { build_base_probe bench/cpu_mlp_steps.c mlp_steps; }
# steps_under_splits ROUND DTYPE REPEAT "STEP MC,CHUNKS ..." ...: each given GEMM of the MLP backward
# (bench/cpu_mlp_steps.c's step index) at $MANY threads, S = $S15, under the default split and then each
# forced blocks x chunks (CVF_CPU_BLOCKS=0,MC,0,CHUNKS); one line per run: round, step, split, the
# step's median, min and quartiles. After build_mlp_steps.
steps_under_splits() {
    local round=$1 dtype=$2 repeat=$3 split step v forced
    shift 3
    for split in "$@"; do
        set -- $split
        step=$1; shift
        for v in default "$@"; do
            forced= # the environment assignment of a forced split (none for the default)
            [ "$v" = default ] || forced=CVF_CPU_BLOCKS=0,${v%,*},0,${v#*,}
            printf 'round %s step %s %-29s ' "$round" "$step" "${forced:-default}"
            env $forced "$BUILD/mlp_steps" "$repeat" "$step" full "$dtype" "$MANY" $S15 | head -1
        done
    done
}
# rows NAME GROUP ISA [EXTRA]: appends $OUT/rows/NAME.jsonl to cpu.jsonl, each row tagged with its
# group and level, plus EXTRA (JSON members: ,"impl":"cvfuse" for bench's rows; torch's carry theirs).
rows() {
    [ -s "$OUT/rows/$1.jsonl" ] && sed "s/}\$/,\"group\":\"$2\",\"isa\":\"$3\"${4:-}}/" "$OUT/rows/$1.jsonl" >> "$JSONL"
}
# bench NAME GROUP THREADS [ARGS...]: cvfuse bench at THREADS threads (CVF_CPU_ISA from the caller's env).
bench() {
    local name=$1 group=$2 t=$3; shift 3
    rm -f "$OUT/rows/$name.jsonl"
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t step "$name" 150 "$CLI" bench --threads "$t" "$@" \
        --json-out "$OUT/rows/$name.jsonl"
    grep -E "^ +(gemm|matmul-relu|mlp-backward|mlp-forward) " "$OUT/$name.log"
    rows "$name" "$group" "${CVF_CPU_ISA:-default}" ',"impl":"cvfuse"'
}
# bench_blocks BLOCKS NAME GROUP THREADS [ARGS...]: bench under CVF_CPU_BLOCKS=BLOCKS ("default": unset).
bench_blocks() {
    local blocks=$1; shift
    if [ "$blocks" = default ]; then bench "$@"; else CVF_CPU_BLOCKS=$blocks bench "$@"; fi
}
# torch NAME GROUP THREADS [ARGS...]: bench/torch_cpu_bench.py at THREADS threads.
torch_bench() {
    local name=$1 group=$2 t=$3; shift 3
    rm -f "$OUT/rows/$name.jsonl"
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t step "$name" 120 "$PYTHON" bench/torch_cpu_bench.py --threads "$t" "$@" \
        --json-out "$OUT/rows/$name.jsonl"
    grep -E "^ +(gemm|matmul-relu|mlp-backward|mlp-forward) |Error" "$OUT/$name.log"
    rows "$name" "$group" default
}

# ---- the machine and the build ----
lscpu > "$OUT/lscpu.txt" 2>&1
nproc > "$OUT/nproc.txt" 2>&1
echo "nproc $(cat "$OUT/nproc.txt"); $(grep -E '^(Model name|Thread|Core|Socket|NUMA node\(s\))' "$OUT/lscpu.txt" | tr -s ' ' | paste -sd';')"
grep -o -w -E 'avx512_bf16|amx_bf16|amx_tile|avx512_fp16' "$OUT/lscpu.txt" | sort -u | paste -sd' ' | sed 's/^/flags: /'
echo "== build"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCVF_CUDA=OFF -DCVF_BUILD_CLI=ON > "$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD" -j "$JOBS" >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "-- build ${SECONDS}s"
grep -E "cvfuse: (bench baseline|OpenBLAS not found)" "$OUT/build.log" | tail -1
CVF_DEBUG=1 "$CLI" gemm --m 8 --n 8 --k 8 2>&1 >/dev/null | grep "cpu isa" | sed 's/^/default level: /'

if [ -n "${SMALL:-}" ]; then # a quick end-to-end run on a small machine
    SUITE_REP="--repeat 2 --warmup 1"; MM=256; S=256; H=128; I=512; S15=256
else
    SUITE_REP="--repeat 10 --warmup 2"; MM=4096; S=8192; H=768; I=3072; S15=2048
fi

# ---- which logical CPUs share a core, and the FMA rate with all busy (bench/cpu_core_probe.c): what
# bounds the scaling sweep's parallel efficiency ----
if ! skip cores; then
    gcc -O2 -std=c11 -D_GNU_SOURCE bench/cpu_core_probe.c -lpthread -o "$OUT/cpu_core_probe" 2> "$OUT/cores.log" &&
        "$OUT/cpu_core_probe" 0.3 > "$OUT/cores.txt" 2>&1
    rm -f "$OUT/cpu_core_probe"
    grep -v "^  j=" "$OUT/cores.txt"
    grep "^  j=" "$OUT/cores.txt" | tr -s ' ' | paste -sd' '
fi

# ---- tests: every CPU level, in parallel (they check correctness, not speed) ----
if ! skip tests; then
    levels=""
    for isa in $LEVELS; do
        # the library logs the level it took under CVF_DEBUG: a level it rejects (unknown name, or
        # not supported by this CPU) falls back to the detected one with a warning
        CVF_DEBUG=1 CVF_CPU_ISA=$isa "$CLI" gemm --m 8 --n 8 --k 8 > "$OUT/isa_$isa.txt" 2>&1
        if grep -q "^cvfuse: cpu isa $isa " "$OUT/isa_$isa.txt"; then
            levels="$levels $isa"
        else
            echo "SKIP level $isa: $(grep -v '^cvfuse: cpu isa' "$OUT/isa_$isa.txt" | head -1)"
        fi
    done
    t0=$SECONDS
    echo "== tests at levels:$levels (in parallel)"
    for isa in $levels; do
        for t in test_ops test_kernels test_vec test_plan; do
            (CVF_CPU_ISA=$isa timeout 240 "$BUILD/tests/$t" > "$OUT/${t}_$isa.log" 2>&1; echo "rc=$?" >> "$OUT/${t}_$isa.log") &
        done
    done
    (timeout 240 "$BUILD/tests/test_errors" > "$OUT/test_errors.log" 2>&1; echo "rc=$?" >> "$OUT/test_errors.log") &
    wait
    echo "-- tests $((SECONDS - t0))s (rc=124: timed out; rc=77: skipped)"
    for f in "$OUT"/test_*.log; do
        printf '%-26s %-6s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f")" "$(grep -E '^test_[a-z]+: ' "$f" | tail -1)$(grep -m1 FAIL "$f" | head -c 200)"
    done
fi

# ---- cvfuse bench --suite cpu (ours vs OpenBLAS) ----
if ! skip suite; then
    for t in $(echo 2 "$MANY" | tr ' ' '\n' | sort -un); do
        bench "suite_t$t" suite "$t" --suite cpu $SUITE_REP
    done
    CVF_CPU_ISA=avx2 bench suite_avx2_t2 suite 2 --suite cpu $SUITE_REP
fi

# ---- issue 16: thread scaling, ours vs OpenBLAS (fewer repeats where a call is long) ----
if ! skip scaling; then
    for t in $THREADS_LIST; do
        rep="--repeat 10 --warmup 1"
        [ "$t" -le 2 ] && rep="--repeat 5 --warmup 1"
        [ "$t" -le 1 ] && rep="--repeat 3 --warmup 1"
        bench "scaling_gemm_t$t" scaling "$t" --op gemm --dtype f32 --m $MM --n $MM --k $MM $rep
        bench "scaling_mmrelu_t$t" scaling "$t" --op matmul-relu --dtype f16 --m $MM --n $MM --k $MM $rep
        bench "scaling_mlpbw_t$t" scaling "$t" --op mlp-backward --dtype f32 --S $S --H $H --I $I $rep
    done
fi

# ---- issue 16: small calls (gemm 64^3-256^3: the second thread from 4 MFLOP; the MLP forward at a
# few tokens: the dot tiles), ours vs OpenBLAS at 2 and at many threads ----
if ! skip small; then
    for t in $(echo 2 "$MANY" | tr ' ' '\n' | sort -un); do
        for size in 64 128 160 256; do
            bench "small_gemm${size}_t$t" small "$t" --op gemm --dtype f32 --m $size --n $size --k $size \
                --repeat 1000 --warmup 50
        done
        for tokens in 1 8 16; do
            bench "small_mlpfw${tokens}_t$t" small "$t" --op mlp-forward --dtype f32 --S $tokens --H 768 --I 3072 \
                --repeat 100 --warmup 10
        done
    done
fi

# ---- issue 15: the 16-thread AMX MatMul+ReLU under forced blocks: today's M-only split (16 blocks of
# 128 rows at 16 threads) against 2-D splits (CVF_CPU_BLOCKS's fourth field, column chunks), to test
# whether too few AMX panels per B micro-panel cost the 16-thread runs their speed (PERF.md issue 15) ----
if ! skip split2d; then
    for blocks in default 2048,128,2048 2048,256,2048,2 2048,512,2048,4; do
        bench_blocks "$blocks" "split2d_${blocks//,/_}" "split2d:$blocks" "$MANY" --op matmul-relu --dtype bf16 \
            --m 2048 --n 2048 --k 2048 $SUITE_REP
    done
fi

# ---- issue 16: the M split at many threads inside one binary: MC blocks forced to the rows that
# make 16, 22, 32 and 43 blocks of 4096 rows (12-row panels of the AVX-512 fp32 kernel; "0,MC,0"
# keeps kc and nc), and for the AMX bf16 2048^3 case the default (32 blocks of 64 rows on 16
# threads since 217e477) against 16 of 128, the rule before it,
# alternated over BLOCK_ROUNDS rounds (one block per thread leaves no slack for a slowed core;
# more blocks re-read each B micro-panel more often) ----
if ! skip blocks; then
    for round in $(seq "${BLOCK_ROUNDS:-3}"); do
        for mc in default 264 192 132 96; do
            blocks=default
            [ "$mc" = default ] || blocks=0,$mc,0
            for what in "gemm f32" "matmul-relu f16"; do
                set -- $what
                bench_blocks "$blocks" "blocks_r${round}_$1_$2_$mc" "blocks:$mc" "$MANY" --op "$1" --dtype "$2" \
                    --m $MM --n $MM --k $MM --repeat 5 --warmup 1
            done
        done
        for mc in default 128; do
            blocks=default
            [ "$mc" = default ] || blocks=0,$mc,0
            bench_blocks "$blocks" "blocks_r${round}_bf16_$mc" "blocks:$mc" "$MANY" --op matmul-relu --dtype bf16 \
                --m 2048 --n 2048 --k 2048 --repeat 20 --warmup 2
        done
    done
fi

# ---- issues 15 and 16: one task per thread reshaped into blocks x chunks (PERF.md, sixth session,
# the next step): at many threads, each GEMM of the f32 MLP backward (bench/cpu_mlp_steps.c, built
# here; K2-1 and K2-2 read A transposed) and 2048^3 under the default split and forced one-round
# splits of 16 x 1 (the rule before da4a2d3), 8 x 2 and 4 x 4 (and 2 x 8 for K2-1's 768 rows; MC
# for the AVX-512 fp32 kernel's 12-row panels), alternated over BLOCK_ROUNDS rounds: whether fewer
# B columns per task pay for more A rows packed per task (on the VM, K2-3's 4 x 4 did 9% more work) ----
if ! skip reshape; then
    if build_mlp_steps; then
        for round in $(seq "${BLOCK_ROUNDS:-3}"); do
            # each: the step, then its 16 x 1, 8 x 2, 4 x 4 (, 2 x 8) splits as MC,CHUNKS
            steps_under_splits "$round" f32 10 "0 132,1 264,2 516,4" "1 48,1 96,2 192,4 384,8" \
                "2 192,1 384,2 768,4" "3 132,1 264,2 516,4" 2>&1 | tee -a "$OUT/reshape.log"
            for v in default 0,132,0,1 0,264,0,2 0,516,0,4; do
                bench_blocks "$v" "reshape_r${round}_gemm_${v//,/_}" "reshape:$v" "$MANY" --op gemm --dtype f32 \
                    --m 2048 --n 2048 --k 2048 --repeat 10 --warmup 2
            done
        done
    else
        echo "SKIP reshape: mlp_steps did not build"; tail -5 "$OUT/mlp_steps_build.log"
    fi
fi

# ---- issue 15: 2-D splits whose tasks keep their share of B in L2 (PERF.md, 2026-12-06 seventh
# session, the next step): at many threads, each GEMM of the bf16 MLP backward (AMX) under the
# default split and forced blocks x chunks (CVF_CPU_BLOCKS=0,MC,0,CHUNKS), alternated over
# BLOCK_ROUNDS rounds. The default gives 2048 rows 32 blocks of 64 rows, each task reading all of B
# (packed by the other threads) for 2 kernel calls per B micro-panel; the forced splits give each
# task 0.4-3 MB of A and 0.6-2.4 MB of B a pass (a 2 MB L2). mlp_steps prints each step's median,
# min and quartiles: on this host compare minima and quartiles as well as medians. Since the eighth
# session (PERF.md) K2-1's default is the 384,8 split, so its pair there checks the plan. ----
if ! skip amx_l2; then
    if build_mlp_steps; then
        for round in $(seq "${BLOCK_ROUNDS:-3}"); do
            # each: the step, then its forced splits as MC,CHUNKS
            steps_under_splits "$round" bf16 25 "0 512,4 256,2 1024,8" "1 384,8 768,16" "2 384,2 768,4" \
                "3 256,2 512,4" 2>&1 | tee -a "$OUT/amx_l2.log"
        done
    else
        echo "SKIP amx_l2: mlp_steps did not build"; tail -5 "$OUT/mlp_steps_build.log"
    fi
fi

# ---- issue 15: the pool's spin (PERF.md, seventh session): one binary under CVF_CPU_SPIN_US=14 (about
# the old 1000 pauses on this host) and the default (2000: 20 us of pauses, then yields), alternated
# over BLOCK_ROUNDS rounds, the side going first swapped each round: the backward's steps one by one
# at many threads (bench/cpu_mlp_steps.c, built here; medians, quartiles and maxima of each step),
# bf16 and f32 at S = 2048 and bf16 at S = 256, then the whole bf16 backward by `cvfuse bench`;
# PyTorch's seven ops (bench/torch_cpu_steps.py) once per round ----
if ! skip spin; then
    if build_mlp_steps; then
        for round in $(seq "${BLOCK_ROUNDS:-3}"); do
            order="14 default"
            [ $((round % 2)) = 0 ] && order="default 14"
            for us in $order; do
                spin= # the environment assignment of the forced spin (none for the default)
                [ "$us" = default ] || spin=CVF_CPU_SPIN_US=$us
                for run in "30 bf16 $S15" "15 f32 $S15" "30 bf16 256"; do
                    set -- $run
                    echo "round $round spin $us $2 S=$3"
                    env $spin "$BUILD/mlp_steps" "$1" -1 full "$2" "$MANY" "$3"
                done
                env $spin OMP_NUM_THREADS=$MANY OPENBLAS_NUM_THREADS=$MANY timeout 120 "$CLI" bench --threads "$MANY" \
                    --op mlp-backward --dtype bf16 --S $S15 --H 768 --I 3072 --repeat 20 --warmup 3 2>&1 |
                    grep -E "^ +mlp-backward" | sed "s/^/round $round spin $us /"
            done
            echo "round $round torch"
            OMP_NUM_THREADS=$MANY timeout 120 "$PYTHON" bench/torch_cpu_steps.py --threads "$MANY" --S $S15 \
                --dtype bf16 --repeat 15 2>&1 | tail -8
        done 2>&1 | tee "$OUT/spin.log" | grep -E "^round|sum of medians|^torch sum|mlp-backward"
    else
        echo "SKIP spin: mlp_steps did not build"; tail -5 "$OUT/mlp_steps_build.log"
    fi
fi

# ---- issue 15: what K1's epilogue costs at many threads (bench/cpu_mlp_steps.c, bf16, S = S15): K1
# without its GELU' and column sums (plain) and with the sums only, then the four steps with their
# quartiles, whose K1 row is K1 with both (full), BLOCK_ROUNDS rounds ----
if ! skip k1; then
    if build_mlp_steps; then
        for round in $(seq "${BLOCK_ROUNDS:-3}"); do
            for epilogue in plain sums; do
                echo "round $round K1 $epilogue: $("$BUILD/mlp_steps" 25 0 $epilogue bf16 "$MANY" $S15 | tail -1)"
            done
            echo "round $round steps:"
            "$BUILD/mlp_steps" 20 -1 full bf16 "$MANY" $S15
        done 2>&1 | tee "$OUT/k1.log"
    else
        echo "SKIP k1: mlp_steps did not build"; tail -5 "$OUT/mlp_steps_build.log"
    fi
fi

# ---- issue 15: the backward's independent GEMMs at the same time (bench/cpu_mlp_pairs.c, built here):
# cvf_mlp_backward as it runs, its four GEMMs one after another (also followed by K3's column sums),
# and K1 beside K2-1 then K2-2 beside K2-3 on two contexts that share the threads, the ways taking
# turns in one process; bf16 and f32 at S = 2048, many threads cut in half
# and 10 + 6 (K1's epilogue is the heavier), and at S = 256 cut in half, BLOCK_ROUNDS rounds ----
if ! skip pairs; then
    if build_probe bench/cpu_mlp_pairs.c "$BUILD" mlp_pairs "$OUT/mlp_pairs_build.log"; then
        for round in $(seq "${BLOCK_ROUNDS:-3}"); do
            for run in "bf16 $((MANY / 2)) $S15" "f32 $((MANY / 2)) $S15" "bf16 $((MANY * 5 / 8)) $S15" \
                "f32 $((MANY * 5 / 8)) $S15" "bf16 $((MANY / 2)) 256" "f32 $((MANY / 2)) 256"; do
                set -- $run
                echo "round $round"
                timeout 120 "$BUILD/mlp_pairs" 15 "$1" "$MANY" "$3" "$2"
            done
        done 2>&1 | tee "$OUT/pairs.log"
    else
        echo "SKIP pairs: mlp_pairs did not build"; tail -5 "$OUT/mlp_pairs_build.log"
    fi
fi

# apply_whole FILE: applies a unified diff to the current folder, all of it or nothing, without fuzz (patch checks it
# first; git apply, where patch is missing, is atomic outside a repository: the ceiling keeps it from
# taking the enclosing one, where it would skip every path outside this folder and still succeed)
apply_whole() {
    if command -v patch > /dev/null; then
        patch -p1 -N -F0 --batch --dry-run < "$1" && patch -p1 -N -F0 --batch < "$1"
    else
        GIT_CEILING_DIRECTORIES=$(dirname "$PWD") git apply "$1"
    fi
}
# ---- A/B of changes to the library (AB_PATCH: one or more unified diffs against this tree, made with
# `git diff`, separated by spaces): for the n-th, the tree copied to $BUILD-abN-src with the patch
# applied, built as $BUILD-abN, its op, kernel and thread-pool tests at the default level (the host's
# best); then bench/cpu_mlp_steps.c against each library, this tree's ("base") and each abN, in turns
# that start one later each round, BLOCK_ROUNDS rounds: the bf16 steps at $MANY threads (wall time)
# and on 1 thread (thread CPU time, the least noisy measure), the f32 steps at $MANY threads, and the
# first bf16 1024^3 call after a pause against the next (bench/cpu_pause_probe.c) at $MANY threads ----
if ! skip ab && [ -n "${AB_PATCH:-}" ]; then
    if build_mlp_steps && build_base_probe bench/cpu_pause_probe.c pause_probe; then
        variants=(base) dirs=("$BUILD") n=0
        for patch in $AB_PATCH; do
            n=$((n + 1)) src=$BUILD-ab$n-src dir=$BUILD-ab$n patch_file=$(realpath "$patch")
            rm -rf "$src" && mkdir -p "$src"
            for f in *; do # the tree as it is, without build folders
                case $f in build*) ;; *) cp -r "$f" "$src/" ;; esac
            done
            if (cd "$src" && apply_whole "$patch_file") > "$OUT/ab${n}_build.log" 2>&1 &&
                (cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCVF_CUDA=OFF &&
                    cmake --build "$dir" -j "$JOBS" --target cvfuse test_ops test_kernels test_threadpool) >> "$OUT/ab${n}_build.log" 2>&1 &&
                build_probe bench/cpu_mlp_steps.c "$dir" mlp_steps "$OUT/ab${n}_build.log" &&
                build_probe bench/cpu_pause_probe.c "$dir" pause_probe "$OUT/ab${n}_build.log"; then
                echo "ab$n: $patch"
                for t in test_ops test_kernels test_threadpool; do
                    timeout 240 "$dir/tests/$t" > "$OUT/ab${n}_$t.log" 2>&1
                    echo "ab$n $t rc=$? $(grep -E '^test_[a-z]+: ' "$OUT/ab${n}_$t.log" | tail -1)$(grep -m1 FAIL "$OUT/ab${n}_$t.log" | head -c 200)"
                done
                variants+=("ab$n") dirs+=("$dir")
            else
                echo "SKIP ab$n ($patch): the patched library did not build"; tail -20 "$OUT/ab${n}_build.log"
            fi
        done
        for round in $(seq "${BLOCK_ROUNDS:-3}"); do
            for k in $(seq 0 $((${#variants[@]} - 1))); do
                v=$(((k + round - 1) % ${#variants[@]}))
                for run in "20 bf16 $MANY" "5 bf16 1" "10 f32 $MANY"; do
                    set -- $run
                    echo "round $round ${variants[$v]} $2 threads $3: $("${dirs[$v]}/mlp_steps" "$1" -1 full "$2" "$3" $S15 | tail -1)"
                done
                "${dirs[$v]}/pause_probe" "$MANY" 1024 1 bf16 | sed "s/^/round $round ${variants[$v]} /"
            done
        done 2>&1 | tee "$OUT/ab.log"
    else
        echo "SKIP ab: mlp_steps or pause_probe did not build"; tail -5 "$OUT/mlp_steps_build.log" "$OUT/pause_probe_build.log"
    fi
fi

# build_python_pkg: the Python extension built here into $OUT/pkg (DLPACK_INCLUDE_DIR where the host
# lacks libdlpack-dev), once per run (the sbs and wait groups); false, with the build's tail shown, if it fails.
python_pkg_built=
build_python_pkg() {
    [ -n "$python_pkg_built" ] && return 0
    { ( cmake -S python -B "$BUILD-py" -DCMAKE_BUILD_TYPE=Release -DCVF_CUDA=OFF \
          -DPython_EXECUTABLE="$(command -v "$PYTHON")" ${DLPACK_INCLUDE_DIR:+-DDLPACK_INCLUDE_DIR=$DLPACK_INCLUDE_DIR} &&
        cmake --build "$BUILD-py" -j "$JOBS" ) > "$OUT/python_build.log" 2>&1 &&
        rm -rf "$OUT/pkg" && mkdir -p "$OUT/pkg" && cp -r python/cvfuse "$OUT/pkg/" &&
        cp "$BUILD-py"/_cvfuse*.so "$OUT/pkg/cvfuse/" && python_pkg_built=1; } ||
        { echo "the Python extension did not build"; tail -20 "$OUT/python_build.log"; return 1; }
}
sbs() { # NAME THREADS ARGS...: one side-by-side run, its row appended to ${SBS_JSONL:-$OUT/sbs.jsonl}
    local name=$1 t=$2; shift 2
    PYTHONPATH="$OUT/pkg" step "$name" 120 "$PYTHON" bench/torch_cpu_side_by_side.py --threads "$t" "$@" \
        --json-out "${SBS_JSONL:-$OUT/sbs.jsonl}"
    grep -E "^ +(gemm|matmul-relu|mlp-backward) |Error" "$OUT/$name.log"
}

# ---- issue 15's cases, ours and PyTorch eager in one process (bench/torch_cpu_side_by_side.py,
# through the Python extension built here), over I15_ROUNDS rounds: separate processes minutes
# apart disagree by up to 1.5x on this host ----
if ! skip sbs; then
    build_python_pkg && for round in $(seq "${I15_ROUNDS:-3}"); do
        sbs "sbs_r${round}_mmrelu_t$MANY" "$MANY" --op matmul-relu --dtype bf16 --m 2048 --n 2048 --k 2048 --repeat 30 --warmup 3
        sbs "sbs_r${round}_mlpbw_bf16" "$MANY" --op mlp-backward --dtype bf16 --S $S15 --H 768 --I 3072 --repeat 20 --warmup 3
        sbs "sbs_r${round}_mlpbw_f32" "$MANY" --op mlp-backward --dtype f32 --S $S15 --H 768 --I 3072 --repeat 10 --warmup 2
        sbs "sbs_r${round}_mmrelu_t2" 2 --op matmul-relu --dtype bf16 --m 2048 --n 2048 --k 2048 --repeat 10 --warmup 2
        sbs "sbs_r${round}_mlpbw_bf16_s256" "$MANY" --op mlp-backward --dtype bf16 --S 256 --H 768 --I 3072 --repeat 30 --warmup 3
    done
fi

# ---- issue 15: what PyTorch's idle OpenMP threads cost the calls of ours that follow its block
# (PERF.md, sixteenth session): three sbs cases under libgomp's default wait, under
# OMP_WAIT_POLICY=PASSIVE (its threads sleep at once) and with --settle 50 (50 ms of sleep before
# each block, longer than the default spin), over I15_ROUNDS rounds; rows in $OUT/wait.jsonl, each
# with every call's time (times_ms, torch_times_ms), summed up by bench/summarize_sbs_times.py ----
if ! skip wait; then
    caller_policy=${OMP_WAIT_POLICY-unset} # restored after the group
    SBS_JSONL=$OUT/wait.jsonl
    : > "$SBS_JSONL"
    build_python_pkg && for round in $(seq "${I15_ROUNDS:-3}"); do
        for wait in default passive settle; do
            settle= # the option of this wait
            [ $wait = settle ] && settle="--settle 50"
            if [ $wait = passive ]; then export OMP_WAIT_POLICY=PASSIVE; else unset OMP_WAIT_POLICY; fi
            sbs "wait_r${round}_${wait}_mlpbw_bf16" "$MANY" --op mlp-backward --dtype bf16 --S $S15 --H 768 --I 3072 \
                --repeat 20 --warmup 3 $settle
            sbs "wait_r${round}_${wait}_mlpbw_f32" "$MANY" --op mlp-backward --dtype f32 --S $S15 --H 768 --I 3072 \
                --repeat 10 --warmup 2 $settle
            sbs "wait_r${round}_${wait}_mmrelu_t$MANY" "$MANY" --op matmul-relu --dtype bf16 --m 2048 --n 2048 --k 2048 \
                --repeat 30 --warmup 3 $settle
        done
    done
    unset OMP_WAIT_POLICY SBS_JSONL
    [ "$caller_policy" = unset ] || export OMP_WAIT_POLICY=$caller_policy
    [ -s "$OUT/wait.jsonl" ] && "$PYTHON" bench/summarize_sbs_times.py "$OUT/wait.jsonl" | tee "$OUT/wait_summary.txt"
fi

# ---- issue 15: the AMX kernel's instruction order (bench/cpu_amx_order_probe.c: the library's kernel
# beside copies of its loop in other orders, and the tile unit's bounds), on one CPU, operands in L1,
# L2 and beyond, BLOCK_ROUNDS rounds in each run ----
if ! skip order; then
    if build_probe bench/cpu_amx_order_probe.c "$BUILD" amx_order "$OUT/amx_order_build.log" \
        -Isrc -mavx512f -mamx-tile -mamx-bf16; then
        cpu=$(($(nproc) > 4 ? 3 : $(nproc) - 1)) # CPU 3, as the earlier kernel probes ran on
        for shape in "256 1 1" "768 1 2" "2048 1 8" "2048 8 1" "768 96 2"; do
            timeout 120 taskset -c $cpu "$BUILD/amx_order" $shape "${BLOCK_ROUNDS:-3}"
        done 2>&1 | tee "$OUT/order.log"
    else
        echo "SKIP order: amx_order did not build"; tail -5 "$OUT/amx_order_build.log"
    fi
fi

# ---- the first call after a pause (bench/cpu_pause_probe.c): waking the pool's sleeping workers
# after its spin, and the cores' own state after idling, at $MANY threads and on 1, with the default
# spin and with workers that never sleep ----
if ! skip pause; then
    if build_base_probe bench/cpu_pause_probe.c pause_probe; then
        {
            "$BUILD/pause_probe" "$MANY" 1024 2 bf16
            CVF_CPU_SPIN_US=100000 "$BUILD/pause_probe" "$MANY" 1024 1 bf16
            "$BUILD/pause_probe" 1 1024 2 bf16
        } 2>&1 | tee "$OUT/pause.log"
    else
        echo "SKIP pause: pause_probe did not build"; tail -5 "$OUT/pause_probe_build.log"
    fi
fi

# ---- a short backward on many threads (S = 256): its GEMMs as plain products under the default
# split and forced 2-D splits (CVF_CPU_BLOCKS's fourth field: 1 block x 16 chunks reads each B
# column once; the balance's tie-break picks the split that moves the least A and B, 2 x 8 for
# 256 rows on 16 AMX threads, PERF.md 2026-12-05 fifth session) ----
if ! skip small_s; then
    for round in 1 2; do
        for v in default 0,256,0,16 0,64,0,4; do
            for dims in "256 3072 768" "256 768 3072"; do
                set -- $dims
                bench_blocks "$v" "smalls_r${round}_${1}x${2}x${3}_${v//,/_}" "small_s:$v" "$MANY" --op gemm --dtype bf16 \
                    --m $1 --n $2 --k $3 --repeat 30 --warmup 3
            done
        done
        for v in default 0,768,0,16 0,192,0,4 0,96,0,2; do
            bench_blocks "$v" "smalls_r${round}_768x3072x256_${v//,/_}" "small_s:$v" "$MANY" --op gemm --dtype bf16 \
                --m 768 --n 3072 --k 256 --repeat 30 --warmup 3
        done
        bench "smalls_r${round}_mlpbw" "small_s:default" "$MANY" --op mlp-backward --dtype bf16 --S 256 --H 768 --I 3072 \
            --repeat 30 --warmup 3
    done
fi

# ---- issue 15: ours and PyTorch eager side by side, then torch on the suite's cases ----
if ! skip torch; then
    "$PYTHON" -c "import torch; print(torch.__version__); print(torch.__config__.show()); print(torch.__config__.parallel_info())" \
        > "$OUT/torch_config.txt" 2>&1 || echo "no torch for $PYTHON: $(tail -1 "$OUT/torch_config.txt")"
    head -1 "$OUT/torch_config.txt" | sed 's/^/torch /'
    for t in $(echo "$MANY" 2 | tr ' ' '\n' | awk '!seen[$0]++'); do
        bench "i15_mmrelu_t$t" issue15 "$t" --op matmul-relu --dtype bf16 --m 2048 --n 2048 --k 2048 $SUITE_REP
        torch_bench "torch_mmrelu_t$t" issue15 "$t" --op matmul-relu --dtype bf16 --m 2048 --n 2048 --k 2048 $SUITE_REP
    done
    for dt in f32 bf16; do
        bench "i15_mlpbw_${dt}_t$MANY" issue15 "$MANY" --op mlp-backward --dtype $dt --S $S15 --H 768 --I 3072 $SUITE_REP
        torch_bench "torch_mlpbw_${dt}_t$MANY" issue15 "$MANY" --op mlp-backward --dtype $dt --S $S15 --H 768 --I 3072 $SUITE_REP
    done
    if ! skip suite; then
        for t in $(echo 2 "$MANY" | tr ' ' '\n' | sort -un); do
            torch_bench "torch_suite_t$t" suite "$t" --suite cpu $SUITE_REP
        done
    fi
fi

# ---- summary: ours / OpenBLAS and ours / torch per case ----
"$PYTHON" - "$JSONL" > "$OUT/summary.txt" 2>&1 << 'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
def key(r):
    return (r["op"], r["dtype"], " ".join("%s=%s" % kv for kv in r["shape"].items()), r["threads"])
torch = {key(r): r for r in rows if r["impl"] == "torch"}
fmt = "%-8s %-12s %-5s %-22s %3s %-11s %9s %8s %9s %7s %9s %7s"
print(fmt % ("group", "op", "dtype", "shape", "thr", "isa", "ours ms", "GFLOP/s", "blas ms", "o/blas", "torch ms", "o/torch"))
num = lambda x, f="%.3f": f % x if x is not None else "-"
for r in rows:
    if r["impl"] != "cvfuse":
        continue
    t = torch.get(key(r)) if r["isa"] == "default" else None
    print(fmt % (r["group"], r["op"], r["dtype"], key(r)[2], r["threads"], r["isa"], num(r["ms"]), num(r["gflops"], "%.0f"),
                 num(r.get("baseline_ms")), num(r.get("ratio")), num(t and t["ms"]), num(t and r["ms"] / t["ms"])))
print("ratios < 1: ours faster. torch rows without a cvfuse row at the same threads:",
      sum(1 for k in torch if not any(key(r) == k for r in rows if r["impl"] == "cvfuse")))
EOF
cat "$OUT/summary.txt"
echo "-- total ${SECONDS}s"
