"""PyTorch's CPU MLP backward, op by op: the seven ops of bench/torch_cpu_bench.py's mlp-backward,
each timed alone (median and minimum of `repeat` calls after 3), to set beside the steps of
bench/cpu_mlp_steps.c (K1 = the mm, gelu_backward and sum; K3 = the sum of grad_output).

  python3 bench/torch_cpu_steps.py [--threads 16] [--S 2048] [--dtype bf16] [--repeat 15]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_cpu_bench  # noqa: E402  (make_case, DTYPES)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--S", type=int, default=2048)
    p.add_argument("--H", type=int, default=768)
    p.add_argument("--I", type=int, default=3072)
    p.add_argument("--dtype", default="bf16", choices=tuple(torch_cpu_bench.DTYPES))
    p.add_argument("--repeat", type=int, default=15)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dt = torch_cpu_bench.DTYPES[args.dtype]
    gen = torch.Generator().manual_seed(1)
    _, i, o = torch_cpu_bench.make_case("mlp-backward", dt, (args.S, args.H, args.I), gen)
    aten = torch.ops.aten
    g = i["grad_output"]
    grad_gelu = torch.empty(args.S, args.I, dtype=dt)
    ops = [
        ("K3 sum(grad_output)", lambda: torch.sum(g, 0, out=o["grad_fc2_bias"])),
        ("K2-1 g^T @ gelu_out", lambda: torch.mm(g.t(), i["gelu_output"], out=o["grad_fc2_weight"])),
        ("K1 mm g @ W2", lambda: torch.mm(g, i["fc2_weight"], out=grad_gelu)),
        ("K1 gelu_backward", lambda: aten.gelu_backward.grad_input(grad_gelu, i["fc1_output"], approximate="tanh",
                                                                  grad_input=o["grad_fc1_output"])),
        ("K1 sum", lambda: torch.sum(o["grad_fc1_output"], 0, out=o["grad_fc1_bias"])),
        ("K2-2 gfo^T @ x", lambda: torch.mm(o["grad_fc1_output"].t(), i["hidden_state"], out=o["grad_fc1_weight"])),
        ("K2-3 gfo @ W1", lambda: torch.mm(o["grad_fc1_output"], i["fc1_weight"], out=o["grad_hidden_state"])),
    ]
    total = 0.0
    for name, fn in ops:
        for _ in range(3):
            fn()
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        median = statistics.median(times)
        total += median
        print("torch %-22s %8.3f ms  min %8.3f" % (name, median, min(times)))
    print("torch sum of medians %.3f ms (%s, S=%d, %d threads)" % (total, args.dtype, args.S, args.threads))


if __name__ == "__main__":
    main()
