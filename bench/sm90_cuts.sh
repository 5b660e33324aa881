#!/usr/bin/env bash
# Issue 12: the evidence behind the cut model of cvf_cuda_sm90_schedule. For each shape below, our
# Hopper kernel (CVF_CUDA_ENGINE=own) under the schedule's own choice ("default") and under forced
# tile widths and cuts (CVF_CUDA_TILE_N, CVF_CUDA_SPLITK: 1 whole tiles, kP P K parts), beside
# cuBLASLt in the same process, ROUNDS rounds (default 2). One line per run:
#   round  M,N,K  variables  ours-ms  cublaslt-ms  ratio
# then per shape the default's mean over the rounds against the fastest forced cut's.
#
#   [ROUNDS=2] [SHAPES="M,N,K ..."] bench/sm90_cuts.sh [BENCH]
#   BENCH: the cvfuse_cuda_bench binary (default build/cvfuse_cuda_bench); SHAPES: only these.
set -u
BENCH=${1:-build/cvfuse_cuda_bench}
# M,N,K and its forced WIDTH:CUT pairs (step 4 of PERF.md's 2026-12-06 third session: the cuts
# that piece costs of 3, 10 and 20 slices chose, and a few more)
CASES='
768,3072,12608 192:k4 192:1 192:k2 192:k3 192:k6 256:k3 256:k7
3072,768,12608 192:k4 192:1
1024,1024,12608 256:k4 128:k2 256:k2 192:k2 256:1
768,768,12608 192:k5 128:k3 192:k2
256,3072,4096 192:k4 128:k2 192:k2 256:k2
1024,768,4096 192:k4 128:k2 192:k2 256:k2
2048,1024,4096 256:k2 128:1
1024,1024,1024 128:k2 128:1
768,1024,12608 256:k5 192:k3 128:k2 256:k2 192:k2
3072,1024,12608 256:k4 256:1 256:k2
2048,768,1024 192:k2 128:1
1024,4096,4096 256:1
2048,2048,2048 256:1
'
# step 5: products of 4-24 tiles of 128 columns under every K cut of that width
for shape in 256,256,12608 256,1024,4096 256,768,3072 128,3072,8192 512,512,8192 384,768,4096; do
    CASES="$CASES$shape 128:1 128:k2 128:k3 128:k4 128:k5 128:k6 128:k7 128:k8"$'\n'
done

# One run: round, shape, then the variables (none for the default); prints its result line.
run_one() {
    local round=$1 shape=$2
    shift 2
    printf "r%d %-16s %-40s " "$round" "$shape" "${*:-default}"
    env CVF_CUDA_ENGINE=own "$@" timeout 60 "$BENCH" --repeat 20 --warmup 3 "gemm,bf16,$shape" 2>&1 |
        awk '/^gemm / { print $7, $12, $17; found = 1 } END { if (!found) print "failed" }'
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "${ROUNDS:-2}"); do
    while read -r shape cuts; do
        [ -n "$shape" ] || continue
        case " ${SHAPES:-$shape} " in *" $shape "*) ;; *) continue ;; esac
        run_one "$round" "$shape"
        for cut in $cuts; do
            run_one "$round" "$shape" "CVF_CUDA_TILE_N=${cut%%:*}" "CVF_CUDA_SPLITK=${cut#*:}"
        done
    done <<<"$CASES"
done | tee "$results"
awk '
    $NF != "failed" { v = $3 == "default" ? "default" : $3 " " $4
                      sum[$2, v] += $(NF - 2); n[$2, v]++ }
    END { for (k in sum) { split(k, p, SUBSEP); mean = sum[k] / n[k]
                           if (p[2] == "default") dflt[p[1]] = mean
                           else if (!(p[1] in best) || mean < best[p[1]]) { best[p[1]] = mean; cut[p[1]] = p[2] } }
          for (s in dflt) if (s in best)
              printf "%-16s default %.4f  fastest forced %.4f (%s)  default / fastest %.3f\n",
                     s, dflt[s], best[s], cut[s], dflt[s] / best[s] }' "$results" | sort -t, -k1,1n -k2,2n -k3,3n
