#!/usr/bin/env python3
"""cvfuse and PyTorch eager on the CPU in one process, alternated in blocks of calls (issue 15).

`cvfuse bench` and bench/torch_cpu_bench.py run in separate processes, minutes apart; on a shared
many-core host the machine changes between them (the 16-core device host: one process's median
1.5x another's for the same call). Here both run on the same inputs in one process, --warmup
calls of each, then --repeat timed calls of each in alternating blocks (below), so that a slow
stretch of the machine falls on both.
Reported: each side's median and minimum, the ratio of the medians, and the median of the
per-pair ratios ours / torch (a pair: two neighbouring blocks; the statistic drift least moves).

The ops (torch's side is bench/torch_cpu_bench.py's make_case: preallocated outputs, out=):
  matmul-relu   cvfuse.matmul(a, b, activation="relu", out=c)
  gemm          cvfuse.matmul(a, b, out=c)
  mlp-backward  one cvf_mlp_backward through the extension into preallocated gradients (what
                cvfuse.mlp_backward calls, without its allocation of the five outputs, which
                torch's side does not pay either)
Idle threads: each library's workers spin for a while after its call before they sleep (PyTorch's
OpenMP threads for milliseconds: libgomp's default spin count), and a call that starts while the
other library's threads still spin on the same CPUs runs slower (our 16-thread MLP backward at
S = 256 on the 16-core host: 9.4 ms in strict call-by-call alternation, 3.1 ms alone in `cvfuse
bench`). So the sides alternate in blocks: one untimed call (which absorbs the other side's
spinning threads; ours are parked with cvfuse.park_threads() before torch's block, as `cvfuse
bench` parks them before OpenBLAS's calls), then --block timed calls, each side hot as in a loop
of its own calls; a pair is then two neighbouring blocks' medians. The side that goes first
alternates from pair to pair, so that a steady drift of the machine cancels out of the pairs.
--settle MS sleeps that long before each block as well (after our workers are parked), so that
libgomp's spinning threads (~300,000 pauses before they sleep) are asleep before the untimed call;
each row carries every call's time (times_ms, torch_times_ms, in order, blocks of --block).
Threads: torch.set_num_threads(N); cvfuse's context takes one thread per CPU the process may run
on, so the process is first restricted to N CPUs (sched_setaffinity; both libraries then share
them). --check compares both sides' outputs with each other once (largest relative Frobenius
difference).

usage: bench/torch_cpu_side_by_side.py --op OP --dtype T [--m M --n N --k K | --S S --H H --I I]
                                       [--threads N] [--repeat N] [--warmup N] [--block N]
                                       [--settle MS] [--json-out FILE] [--check]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_cpu_bench  # noqa: E402  (make_case, DTYPES, OPS)

import cvfuse  # noqa: E402


def ours_fn(op, i, o):
    """Our side of the case: a function computing into outputs of the same shapes as torch's."""
    if op in ("gemm", "matmul-relu"):
        c = torch.empty_like(o["c"])
        activation = "relu" if op == "matmul-relu" else "none"
        return (lambda: cvfuse.matmul(i["a"], i["b"], activation=activation, out=c)), {"c": c}
    out = {k: torch.empty_like(o[k]) for k in ("grad_hidden_state", "grad_fc1_weight", "grad_fc1_bias",
                                                  "grad_fc2_weight", "grad_fc2_bias")}
    kind, index, _ = cvfuse._target(i["grad_output"], None)
    ctx, gelu = cvfuse._context(kind, index), cvfuse._gelu("tanh")

    def fn():
        cvfuse._C.mlp_backward(ctx, i["grad_output"], i["hidden_state"], i["fc1_weight"], i["fc2_weight"],
                               i["fc1_output"], i["gelu_output"], out["grad_hidden_state"], out["grad_fc1_weight"],
                               out["grad_fc1_bias"], out["grad_fc2_weight"], out["grad_fc2_bias"], gelu, 0, None,
                               None)
    return fn, out


def cvfuse_threads(x):
    """The threads of the cvfuse context that serves host tensors like x."""
    kind, index, _ = cvfuse._target(x, None)
    return cvfuse._C.context_info(cvfuse._context(kind, index))[1]


def rel_diff(x, y):
    x, y = x.double(), y.double()
    return float((x - y).norm() / max(float(y.norm()), 1e-300))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", default="mlp-backward", choices=("gemm", "matmul-relu", "mlp-backward"))
    p.add_argument("--dtype", default="bf16", choices=tuple(torch_cpu_bench.DTYPES))
    for name in ("m", "n", "k", "S", "H", "I"):
        p.add_argument("--" + name, type=int)
    p.add_argument("--threads", type=int, default=0, help="0: every CPU the process may run on")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--block", type=int, default=5, help="timed calls of one side before the other's")
    p.add_argument("--settle", type=float, default=0.0,
                   help="ms to sleep before each block, after the other side's calls (their threads' spin ends)")
    p.add_argument("--json-out")
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    if args.repeat < 1 or args.block < 1 or args.warmup < 0 or args.settle < 0:
        p.error("--repeat and --block must be at least 1, --warmup and --settle at least 0")

    cpus = sorted(os.sched_getaffinity(0))
    threads = args.threads or len(cpus)
    if threads > len(cpus):
        p.error(f"--threads {threads}: only {len(cpus)} CPUs are available")
    os.sched_setaffinity(0, cpus[:threads])
    torch.set_num_threads(threads)

    defaults = torch_cpu_bench.OPS[args.op][0]
    names = ("m", "n", "k") if args.op in ("gemm", "matmul-relu") else ("S", "H", "I")
    dims = tuple(getattr(args, n) or d for n, d in zip(names, defaults))
    gen = torch.Generator().manual_seed(args.seed)
    theirs, inputs, outputs = torch_cpu_bench.make_case(args.op, torch_cpu_bench.DTYPES[args.dtype], dims, gen)
    ours, our_outputs = ours_fn(args.op, inputs, outputs)

    for _ in range(args.warmup):
        ours()
        theirs()
    t_ours, t_theirs, pairs = [], [], []
    for index, done in enumerate(range(0, args.repeat, args.block)):
        sides = [(ours, t_ours), (theirs, t_theirs)]
        medians = {}
        for fn, times in (sides if index % 2 == 0 else sides[::-1]):
            if fn is theirs:
                cvfuse.park_threads()  # our idle workers stop spinning before torch's block
            if args.settle:
                time.sleep(args.settle * 1e-3)
            fn()  # untimed: the other side's threads may still spin
            block = []
            for _ in range(min(args.block, args.repeat - done)):
                start = time.perf_counter()
                fn()
                block.append((time.perf_counter() - start) * 1e3)
            times.extend(block)
            medians[fn] = statistics.median(block)
        pairs.append(medians[ours] / medians[theirs])
    pair = statistics.median(pairs)
    med_o, med_t = statistics.median(t_ours), statistics.median(t_theirs)
    shape = " ".join("%s=%d" % nd for nd in zip(names, dims))
    threads_used = cvfuse_threads(next(iter(inputs.values())))
    print("  %-12s %-5s %-24s thr %2d (cvfuse %2d)  ours %8.3f (min %8.3f)  torch %8.3f (min %8.3f)  "
          "ratio %.3f  pairs %.3f" % (args.op, args.dtype, shape, threads, threads_used, med_o, min(t_ours), med_t,
                                      min(t_theirs), med_o / med_t, pair), flush=True)
    row = {"op": args.op, "dtype": args.dtype, "shape": dict(zip(names, dims)), "threads": threads,
           "cvfuse_threads": threads_used, "pairs": len(pairs),
           "ms": med_o, "min_ms": min(t_ours), "torch_ms": med_t, "torch_min_ms": min(t_theirs),
           "ratio": med_o / med_t, "pair_ratio": pair, "repeat": args.repeat, "warmup": args.warmup, "block": args.block,
           "settle_ms": args.settle, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
           "times_ms": t_ours, "torch_times_ms": t_theirs,
           "torch": torch.__version__, "impl": "side-by-side"}
    if args.check:
        worst = max(rel_diff(our_outputs[k], outputs[k]) for k in our_outputs)
        print("  largest relative difference of the outputs, ours against torch's: %.2e" % worst)
        row["difference"] = worst
    if args.json_out:
        with open(args.json_out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
