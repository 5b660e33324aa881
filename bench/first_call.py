"""The cost of the CUDA engine choice: the first call of a new key times every eligible engine
(engines.cu); later calls only look the choice up. Prints, per MLP shape (bf16), the wall time of
the first cvfuse.mlp_backward / mlp_forward call in a fresh process-wide context and the median of
later calls, each synchronised, as JSON lines.

    python3 bench/first_call.py [--shapes S,H,I ...]
"""
import argparse
import json
import statistics
import time

import torch

import cvfuse


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shapes", nargs="*", default=["12608,768,3072", "16448,1024,4096", "16448,1280,5120"])
    args = p.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    for shape in args.shapes:
        S, H, I = (int(v) for v in shape.split(","))
        r = lambda *d: (torch.rand(*d, device="cuda", generator=g, dtype=torch.float32) - 0.5).to(torch.bfloat16)
        x, w1, b1, w2, b2, go = r(S, H), r(I, H) * 0.1, r(I), r(H, I) * 0.1, r(H), r(S, H)
        fwd = lambda: cvfuse.mlp_forward(x, w1, b1, w2, b2, approximate="tanh")
        first_f = timed(fwd)
        later_f = statistics.median(timed(fwd) for _ in range(10))
        y, fc1, gelu = fwd()
        bwd = lambda: cvfuse.mlp_backward(go, x, w1, w2, fc1, gelu, approximate="tanh")
        first_b = timed(bwd)
        later_b = statistics.median(timed(bwd) for _ in range(10))
        print(json.dumps({"bench": "first_call", "S": S, "H": H, "I": I, "dtype": "bf16",
                          "forward_first_ms": round(first_f, 3), "forward_later_ms": round(later_f, 3),
                          "backward_first_ms": round(first_b, 3), "backward_later_ms": round(later_b, 3)}),
              flush=True)


if __name__ == "__main__":
    main()
