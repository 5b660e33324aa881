#!/usr/bin/env python3
"""PyTorch CPU eager times of cvfuse's ops, to set beside `cvfuse bench` (issues 15 and 16).

Each op is written with plain torch ops (eager, no autograd) into preallocated outputs (out=),
as cvfuse writes into the caller's tensors, in the case's dtype (torch accumulates in fp32 inside
its kernels and rounds each op's output to the dtype):
  gemm          c = a @ b
  matmul-relu   c = a @ b; c.relu_()
  mlp-forward   fc1_output = hidden_state @ fc1_weight^T + fc1_bias; gelu_output = gelu_tanh(fc1_output);
                output = gelu_output @ fc2_weight^T + fc2_bias
  mlp-backward  cvf_mlp_backward's seven operations (include/cvfuse.h):
                grad_fc2_bias = g.sum(0); grad_fc2_weight = g^T @ gelu_output;
                grad_fc1_output = (g @ fc2_weight) * gelu_tanh'(fc1_output)  (aten.gelu_backward, what
                autograd runs); grad_fc1_bias = grad_fc1_output.sum(0);
                grad_fc1_weight = grad_fc1_output^T @ hidden_state; grad_hidden_state = grad_fc1_output @ fc1_weight
Inputs as `cvfuse bench` makes them: uniform in [-1, 1); for the backward fc1_weight in
[-3/sqrt(H), 3/sqrt(H)) and fc1_output, gelu_output from the forward (no subnormals: on Intel
they send FMAs to microcode assists). Times: --warmup untimed calls, then the median (and min) of
--repeat calls, wall clock.

usage: bench/torch_cpu_bench.py [--op OP] [--dtype T] [--m M --n N --k K | --S S --H H --I I]
                                [--threads N] [--repeat N] [--warmup N] [--json-out FILE] [--check]
       bench/torch_cpu_bench.py --suite cpu [--threads N] ...   (the cases of `cvfuse bench --suite cpu`)
--json-out FILE appends one object per case with the keys of `cvfuse bench --json-out` that apply
(op, device, dtype, shape, threads, ms, gflops, min_ms, repeat, warmup) plus "impl":"torch" and
"torch" (its version). --check compares each op once with a float64 evaluation (slow at big shapes).
"""
import argparse
import json
import math
import statistics
import time

import torch

# tools/cli_bench.c's SUITE_CPU: (op, dtype, dims).
SUITE_CPU = [("gemm", "f32", (2048, 2048, 2048)), ("matmul-relu", "f16", (2048, 2048, 2048)),
             ("matmul-relu", "f16", (4096, 4096, 256)), ("matmul-relu", "f16", (8192, 1024, 64)),
             ("mlp-backward", "f32", (2048, 768, 3072)), ("matmul-relu", "bf16", (2048, 2048, 2048))]
# tools/cli_ops.c: default dims, default dtype, FLOPs per m*n*k (or S*H*I).
OPS = {"gemm": ((1024, 1024, 1024), "f32", 2.0), "matmul-relu": ((1024, 1024, 1024), "f16", 2.0),
       "mlp-forward": ((197, 768, 3072), "f32", 4.0), "mlp-backward": ((197, 768, 3072), "f32", 8.0)}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
aten = torch.ops.aten


def uniform(shape, dt, gen, r=1.0):
    return (torch.rand(shape, generator=gen, dtype=torch.float32) * (2 * r) - r).to(dt)


def make_case(op, dt, dims, gen):
    """Returns (fn, inputs, outputs): fn() computes outputs from inputs in place (dicts of tensors)."""
    if op in ("gemm", "matmul-relu"):
        m, n, k = dims
        i = {"a": uniform((m, k), dt, gen), "b": uniform((k, n), dt, gen)}
        o = {"c": torch.empty(m, n, dtype=dt)}

        def fn():
            torch.mm(i["a"], i["b"], out=o["c"])
            if op == "matmul-relu":
                o["c"].relu_()
        return fn, i, o
    S, H, I = dims
    i = {"hidden_state": uniform((S, H), dt, gen), "fc1_bias": uniform((I,), dt, gen),
         "fc2_weight": uniform((H, I), dt, gen), "fc2_bias": uniform((H,), dt, gen)}
    i["fc1_weight"] = uniform((I, H), dt, gen, 1.0 if op == "mlp-forward" else 3.0 / math.sqrt(H))
    fw = {"fc1_output": torch.empty(S, I, dtype=dt), "gelu_output": torch.empty(S, I, dtype=dt),
          "output": torch.empty(S, H, dtype=dt)}

    def forward():
        torch.addmm(i["fc1_bias"], i["hidden_state"], i["fc1_weight"].t(), out=fw["fc1_output"])
        aten.gelu.out(fw["fc1_output"], approximate="tanh", out=fw["gelu_output"])
        torch.addmm(i["fc2_bias"], fw["gelu_output"], i["fc2_weight"].t(), out=fw["output"])
    if op == "mlp-forward":
        return forward, i, fw
    forward()
    i.update(fc1_output=fw["fc1_output"], gelu_output=fw["gelu_output"], grad_output=uniform((S, H), dt, gen))
    o = {"grad_fc2_bias": torch.empty(H, dtype=dt), "grad_fc2_weight": torch.empty(H, I, dtype=dt),
         "grad_fc1_bias": torch.empty(I, dtype=dt), "grad_fc1_weight": torch.empty(I, H, dtype=dt),
         "grad_hidden_state": torch.empty(S, H, dtype=dt), "grad_fc1_output": torch.empty(S, I, dtype=dt)}
    grad_gelu = torch.empty(S, I, dtype=dt)

    g, gfo = i["grad_output"], o["grad_fc1_output"]
    # the backward's ops in order, named by the cvfuse step they stand beside (bench/torch_cpu_steps.py
    # times them one by one)
    steps = [
        ("K3 sum(grad_output)", lambda: torch.sum(g, 0, out=o["grad_fc2_bias"])),
        ("K2-1 g^T @ gelu_out", lambda: torch.mm(g.t(), i["gelu_output"], out=o["grad_fc2_weight"])),
        ("K1 mm g @ W2", lambda: torch.mm(g, i["fc2_weight"], out=grad_gelu)),
        ("K1 gelu_backward", lambda: aten.gelu_backward.grad_input(grad_gelu, i["fc1_output"], approximate="tanh",
                                                                  grad_input=gfo)),
        ("K1 sum", lambda: torch.sum(gfo, 0, out=o["grad_fc1_bias"])),
        ("K2-2 gfo^T @ x", lambda: torch.mm(gfo.t(), i["hidden_state"], out=o["grad_fc1_weight"])),
        ("K2-3 gfo @ W1", lambda: torch.mm(gfo, i["fc1_weight"], out=o["grad_hidden_state"])),
    ]

    def backward():
        for _, step in steps:
            step()
    backward.steps = steps
    return backward, i, o


def gelu64(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def dgelu64(x):
    """d/dx gelu_tanh(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) (src/reference)."""
    t = torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)


def reference(op, i):
    """The op's outputs in float64 from the same inputs (for --check)."""
    d = {k: v.double() for k, v in i.items()}
    if op in ("gemm", "matmul-relu"):
        c = d["a"] @ d["b"]
        return {"c": c.relu() if op == "matmul-relu" else c}
    if op == "mlp-forward":
        f1 = d["hidden_state"] @ d["fc1_weight"].t() + d["fc1_bias"]
        return {"fc1_output": f1, "gelu_output": gelu64(f1),
                "output": gelu64(f1) @ d["fc2_weight"].t() + d["fc2_bias"]}
    g = d["grad_output"]
    g1 = (g @ d["fc2_weight"]) * dgelu64(d["fc1_output"])
    return {"grad_fc2_bias": g.sum(0), "grad_fc2_weight": g.t() @ d["gelu_output"], "grad_fc1_output": g1,
            "grad_fc1_bias": g1.sum(0), "grad_fc1_weight": g1.t() @ d["hidden_state"],
            "grad_hidden_state": g1 @ d["fc1_weight"]}


def time_calls(fn, warmup, repeat):
    """The times in ms of `repeat` calls of fn after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def run_case(op, dtype, dims, args):
    """Times one case; prints a row and returns its JSON object."""
    gen = torch.Generator().manual_seed(args.seed)
    fn, inputs, outputs = make_case(op, DTYPES[dtype], dims, gen)
    times = time_calls(fn, args.warmup, args.repeat)
    ms = statistics.median(times)
    gflops = OPS[op][2] * dims[0] * dims[1] * dims[2] / (ms * 1e6)
    names = ("m", "n", "k") if op in ("gemm", "matmul-relu") else ("S", "H", "I")
    shape = " ".join("%s=%d" % nd for nd in zip(names, dims))
    print("  %-12s %-5s %-24s %10.3f %10.3f %9.1f" % (op, dtype, shape, ms, min(times), gflops), flush=True)
    if args.check:
        ref = reference(op, inputs)
        for name, want in ref.items():
            err = ((outputs[name].double() - want).norm() / max(want.norm().item(), 1e-300)).item()
            print("    check %-18s rel_err %.2e" % (name, err))
    return {"op": op, "device": "cpu", "dtype": dtype, "shape": dict(zip(names, dims)),
            "threads": torch.get_num_threads(), "ms": ms, "gflops": gflops, "min_ms": min(times),
            "repeat": args.repeat, "warmup": args.warmup, "impl": "torch", "torch": torch.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--op", choices=sorted(OPS) + ["all"], default="all")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="default: each op's cvfuse default")
    for d in ("m", "n", "k", "S", "H", "I"):
        p.add_argument("--" + d, type=int)
    p.add_argument("--suite", choices=["cpu"], help="the cases of `cvfuse bench --suite cpu`")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json-out", help="append one JSON object per case to this file")
    p.add_argument("--check", action="store_true", help="compare with a float64 evaluation")
    args = p.parse_args()
    if args.repeat < 1 or args.warmup < 0:
        p.error("--repeat must be >= 1 and --warmup >= 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.suite:
        cases = SUITE_CPU
    else:
        cases = []
        for op in sorted(OPS) if args.op == "all" else [args.op]:
            defaults, dtype, _ = OPS[op]
            given = (args.m, args.n, args.k) if op in ("gemm", "matmul-relu") else (args.S, args.H, args.I)
            dims = tuple(g if g is not None else dflt for g, dflt in zip(given, defaults))
            cases.append((op, args.dtype or dtype, dims))
    print("torch %s eager on cpu, %d threads; median and min of %d calls after %d warm-up call(s)"
          % (torch.__version__, torch.get_num_threads(), args.repeat, args.warmup))
    print("  %-12s %-5s %-24s %10s %10s %9s" % ("op", "dtype", "shape", "median ms", "min ms", "GFLOP/s"))
    for op, dtype, dims in cases:
        row = run_case(op, dtype, dims, args)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(json.dumps(row, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
