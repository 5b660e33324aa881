"""PyTorch's CPU MLP backward, op by op: the seven ops of bench/torch_cpu_bench.py's mlp-backward,
each timed alone (median and minimum of `repeat` calls after 3), to set beside the steps of
bench/cpu_mlp_steps.c (K1 = the mm, gelu_backward and sum; K3 = the sum of grad_output): the
steps of torch_cpu_bench's backward (make_case), timed by its time_calls.

  python3 bench/torch_cpu_steps.py [--threads 16] [--S 2048] [--dtype bf16] [--repeat 15]
"""
import argparse
import os
import statistics
import sys

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
    gen = torch.Generator().manual_seed(1)
    backward, _, _ = torch_cpu_bench.make_case("mlp-backward", torch_cpu_bench.DTYPES[args.dtype],
                                               (args.S, args.H, args.I), gen)
    total = 0.0
    for name, step in backward.steps:
        times = torch_cpu_bench.time_calls(step, 3, args.repeat)
        median = statistics.median(times)
        total += median
        print("torch %-22s %8.3f ms  min %8.3f" % (name, median, min(times)))
    print("torch sum of medians %.3f ms (%s, S=%d, %d threads)" % (total, args.dtype, args.S, args.threads))


if __name__ == "__main__":
    main()
