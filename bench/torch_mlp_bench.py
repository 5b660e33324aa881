#!/usr/bin/env python3
"""PyTorch baseline of the cvfuse vision-MLP benchmark (issue 5), on one CUDA GPU.

The model is the one cvf_mlp_forward / cvf_mlp_backward compute, in the case's dtype on cuda:
    x (S x H, requires_grad), fc1 = Linear(H, I), fc2 = Linear(I, H)
    y = fc2(gelu(fc1(x), approximate="tanh"))
Inputs: x and grad_output uniform in [-1, 1); weights and biases keep Linear's default init.

What is timed (CUDA events on the current stream, warm-up calls first, median of --repeat calls):
  mlp-backward  y.backward(grad_output, retain_graph=True) on one forward's graph: the weight and
                bias gradients of fc1 and fc2, grad of x, GELU backward. Before each call, outside
                the timed region, every .grad is set to None, so that each call stores fresh
                gradients (no accumulation kernels). When the host launches slower than the GPU
                runs, the launch gaps are in the time, as in a training step.
  mlp-forward   y = model(x) with autograd on (a training forward: fc1 addmm, GELU, fc2 addmm).
With --compile, the same under torch.compile(mode="max-autotune-no-cudagraphs") as well
(compiling and autotuning take minutes per case). Where the compiled graph refuses a second
backward through a retained graph, the forward is re-run before each backward, untimed; the JSON
says which ("torch_compile_backward").

usage: python3 bench/torch_mlp_bench.py [--json FILE] [--repeat N] [--warmup N] [--compile] [CASE ...]
  CASE is op,dtype,S,H,I with op mlp-backward or mlp-forward and dtype bf16 or f16 (the syntax of
  cvfuse_cuda_bench); without cases, the MLP suite of bench/cuda_bench.c.
Output: a table on stdout; with --json FILE, one JSON object per case appended to FILE: op, dtype,
S, H, I, device, torch_eager_ms, torch_eager_tflops, torch_compile_ms (null without --compile),
torch_compile_tflops, torch_compile_backward, repeat, warmup, torch, gpu.
Exit status: 0 (also when torch or CUDA is missing: a message says so and nothing runs), 1 when a
case failed, 2 for a bad command line.
"""
import argparse
import json
import statistics
import sys

SHAPES = [(12608, 768, 3072), (16448, 1024, 4096), (16448, 1280, 5120)]
DEFAULT_CASES = ([("mlp-backward", "bf16") + s for s in SHAPES] + [("mlp-backward", "f16") + s for s in SHAPES] +
                 [("mlp-forward", "bf16") + s for s in SHAPES])
OPS = ("mlp-backward", "mlp-forward")
DTYPES = ("bf16", "f16")


def parse_case(text):
    """Parses op,dtype,S,H,I into a tuple; raises ValueError for anything else."""
    parts = text.split(",")
    if len(parts) != 5 or parts[0] not in OPS or parts[1] not in DTYPES:
        raise ValueError(text)
    dims = tuple(int(p) for p in parts[2:])
    if min(dims) <= 0:
        raise ValueError(text)
    return (parts[0], parts[1]) + dims


def parse_args(argv):
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(description="PyTorch eager (and torch.compile) baseline of the vision-MLP benchmark")
    p.add_argument("cases", nargs="*", help="op,dtype,S,H,I (default: the MLP suite)")
    p.add_argument("--json", help="append one JSON object per case to this file")
    p.add_argument("--repeat", type=int, default=50, help="timed calls per measurement (default 50)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first (default 10)")
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile(mode='max-autotune-no-cudagraphs') (slow to compile)")
    args = p.parse_args(argv)
    try:
        args.cases = [parse_case(c) for c in args.cases] or list(DEFAULT_CASES)
    except ValueError as e:
        p.error("bad case %s: expected mlp-backward|mlp-forward,bf16|f16,S,H,I" % e)
    if args.repeat < 1 or args.warmup < 0:
        p.error("--repeat must be >= 1 and --warmup >= 0")
    return args


def cuda_median(torch, fn, warmup, repeat, before=None):
    """Median ms of fn() between a CUDA event pair on the current stream; before() runs first each
    time, outside the timed region."""
    for _ in range(warmup):
        if before:
            before()
        fn()
    torch.cuda.synchronize()
    events = []
    for _ in range(repeat):
        if before:
            before()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        events.append((start, stop))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


class Mlp:
    """The model and inputs of one case, on cuda in the case's dtype."""

    def __init__(self, torch, dtype, S, H, I):
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        gen = torch.Generator(device="cuda").manual_seed(1)
        self.torch = torch
        self.fc1 = torch.nn.Linear(H, I, device="cuda", dtype=dt)
        self.fc2 = torch.nn.Linear(I, H, device="cuda", dtype=dt)
        self.x = torch.empty(S, H, device="cuda", dtype=dt).uniform_(-1, 1, generator=gen).requires_grad_()
        self.grad_output = torch.empty(S, H, device="cuda", dtype=dt).uniform_(-1, 1, generator=gen)
        self.leaves = [self.x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias]

    def forward(self, x):
        """y = fc2(gelu_tanh(fc1(x)))."""
        F = self.torch.nn.functional
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

    def clear_grads(self):
        """Drops every gradient, so that the next backward stores fresh ones."""
        for t in self.leaves:
            t.grad = None


def time_forward(torch, model, forward, warmup, repeat):
    """Median ms of the training forward."""
    return cuda_median(torch, lambda: forward(model.x), warmup, repeat)


def time_backward(torch, model, forward, warmup, repeat, compiled):
    """Median ms of the backward, and how it was timed: on one retained graph, or (a compiled graph
    that refuses a second backward) after an untimed forward each time."""
    y = forward(model.x)
    try:
        ms = cuda_median(torch, lambda: y.backward(model.grad_output, retain_graph=True), warmup, repeat,
                         before=model.clear_grads)
        return ms, "retained graph"
    except RuntimeError as e:
        if not compiled or isinstance(e, torch.cuda.OutOfMemoryError):
            raise
        print("  torch.compile: backward on a retained graph failed (%s): re-running the forward, untimed" %
              str(e).splitlines()[0][:120])
        del y
        model.clear_grads()
        holder = {}

        def before():
            model.clear_grads()
            holder["y"] = forward(model.x)

        ms = cuda_median(torch, lambda: holder["y"].backward(model.grad_output), warmup, repeat, before=before)
        return ms, "forward re-run before each backward (untimed)"


def measure(torch, case, args):
    """Times one case in eager mode (and compiled with --compile); returns its JSON object."""
    op, dtype, S, H, I = case
    model = Mlp(torch, dtype, S, H, I)
    flops = (8 if op == "mlp-backward" else 4) * S * H * I
    result = {"op": op, "dtype": dtype, "S": S, "H": H, "I": I, "device": "cuda", "torch_eager_ms": None,
              "torch_eager_tflops": None, "torch_compile_ms": None, "torch_compile_tflops": None,
              "torch_compile_backward": None, "repeat": args.repeat, "warmup": args.warmup,
              "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    variants = [("eager", model.forward)]
    if args.compile:
        torch._dynamo.reset()  # each case compiles afresh (the recompile limit is per function)
        variants.append(("compile", torch.compile(model.forward, mode="max-autotune-no-cudagraphs")))
    for name, forward in variants:
        if op == "mlp-backward":
            ms, how = time_backward(torch, model, forward, args.warmup, args.repeat, name == "compile")
            if name == "compile":
                result["torch_compile_backward"] = how
        else:
            ms = time_forward(torch, model, forward, args.warmup, args.repeat)
        result["torch_%s_ms" % name] = round(ms, 5)
        result["torch_%s_tflops" % name] = round(flops / (ms * 1e-3) / 1e12, 1)
        model.clear_grads()
    return result


def row(result):
    """One table line of a case's result."""
    text = "%-12s %-5s %6d %6d %6d  torch eager %8.4f ms %6.1f TF/s" % (
        result["op"], result["dtype"], result["S"], result["H"], result["I"], result["torch_eager_ms"],
        result["torch_eager_tflops"])
    if result["torch_compile_ms"] is not None:
        text += "  compiled %8.4f ms %6.1f TF/s" % (result["torch_compile_ms"], result["torch_compile_tflops"])
        if result["torch_compile_backward"] and result["torch_compile_backward"] != "retained graph":
            text += " (%s)" % result["torch_compile_backward"]
    return text


def main(argv):
    """Runs the cases; see the module's docstring."""
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch_mlp_bench: PyTorch is not installed (import torch failed): nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("torch_mlp_bench: torch %s sees no CUDA device: nothing to measure" % torch.__version__)
        return 0
    print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name()))
    failed = 0
    out = open(args.json, "a") if args.json else None
    for case in args.cases:
        try:
            result = measure(torch, case, args)
        except Exception as e:  # report the case, go on with the others
            print("%s: failed: %s: %s" % (",".join(str(c) for c in case), type(e).__name__, e))
            failed += 1
            continue
        finally:
            torch.cuda.empty_cache()
        print(row(result), flush=True)
        if out:
            out.write(json.dumps(result) + "\n")
            out.flush()
    if out:
        out.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
