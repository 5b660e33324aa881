#!/usr/bin/env python3
"""Joins the MLP results of cvfuse_cuda_bench (bench.jsonl) and bench/torch_mlp_bench.py
(torch.jsonl) per (op, dtype, S, H, I) and checks the targets (ABSOLUTE_TARGETS below; docs/PERF.md
records them with the measurements).

usage: python3 bench/summarize_mlp.py BENCH_JSONL [TORCH_JSONL] [--out FILE]

One line per case: ours (cvf_mlp_backward / cvf_mlp_forward, ms), cuBLASLt's calls (ms), torch
eager and torch.compile (ms, where measured), ours / cuBLASLt, ours / torch (torch = the faster of
eager and compiled), "epi": the fused kernel's epilogue cost (ours K1 / K1's GEMM alone - 1; for
the forward, fc1's), the largest difference of ours against cuBLASLt, and the verdict. Targets
(bf16 backward only): 12608x768x3072 <= 0.385 ms, 16448x1024x4096 <= 0.75 ms, 16448x1280x5120 <=
1.24 ms, and each <= 0.80 x torch; K1's epilogue within 5% of its GEMM alone. Matmul lines of
bench.jsonl are ignored; a case measured twice keeps its last line. Missing files or numbers show
as "-". Always exits 0 (2 for a bad command line).
"""
import argparse
import json
import os
import sys

# (op, dtype, S, H, I) -> the absolute target of the whole, ms
ABSOLUTE_TARGETS = {
    ("mlp-backward", "bf16", 12608, 768, 3072): 0.385,
    ("mlp-backward", "bf16", 16448, 1024, 4096): 0.75,
    ("mlp-backward", "bf16", 16448, 1280, 5120): 1.24,
}
TORCH_FACTOR = 0.80
K1_EPILOGUE_LIMIT = 0.05


def key_of(obj):
    """The join key of a JSON object, or None for a line that is not an MLP case."""
    if not str(obj.get("op", "")).startswith("mlp-") or "S" not in obj:
        return None
    return (obj["op"], obj["dtype"], int(obj["S"]), int(obj["H"]), int(obj["I"]))


def load(path):
    """The MLP objects of a JSONL file by key (the last line of a key wins); {} when unreadable."""
    found = {}
    if not path or not os.path.exists(path):
        return found
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            key = key_of(obj)
            if key:
                found[key] = obj
    return found


def num(obj, name):
    """A positive number of obj, or None."""
    v = obj.get(name) if obj else None
    return v if isinstance(v, (int, float)) and v > 0 else None


def fmt(v, spec="%.4f"):
    """A number, or "-"."""
    return "-" if v is None else spec % v


def verdict(key, ours, torch_best, k1_overhead):
    """Whether the case meets its targets: "met", "MISSED (...)", or "-" where none applies."""
    if key[0] != "mlp-backward" or key[1] != "bf16":
        return "-"
    missed, unknown = [], []
    limit = ABSOLUTE_TARGETS.get(key)
    if ours is None:
        return "no result"
    if limit is not None and ours > limit:
        missed.append("%.4f > %.3f ms" % (ours, limit))
    if torch_best is None:
        unknown.append("torch")
    elif ours > TORCH_FACTOR * torch_best:
        missed.append("%.3f x torch > %.2f" % (ours / torch_best, TORCH_FACTOR))
    if k1_overhead is not None and k1_overhead > K1_EPILOGUE_LIMIT:
        missed.append("K1 epilogue +%.1f%% > 5%%" % (100 * k1_overhead))
    if missed:
        return "MISSED (" + "; ".join(missed) + ")"
    if limit is None and torch_best is None:
        return "-"
    return "met" + (" (no torch result)" if unknown else "")


def summarize(bench, torch):
    """The summary's lines."""
    header = "%-12s %-5s %6s %5s %5s | %8s %8s %8s %8s | %6s %6s | %6s %8s | %s" % (
        "op", "dtype", "S", "H", "I", "ours", "cublaslt", "torch", "compile", "/lt", "/torch", "epi", "diff",
        "target")
    lines = ["MLP summary (ms; /lt = ours / cuBLASLt, /torch = ours / best of torch eager and compiled)", header,
             "-" * len(header)]
    for key in sorted(set(bench) | set(torch)):
        b, t = bench.get(key), torch.get(key)
        ours, lt = num(b, "ms"), num(b, "baseline_ms")
        eager, compiled = num(t, "torch_eager_ms"), num(t, "torch_compile_ms")
        best = min(v for v in (eager, compiled) if v is not None) if (eager or compiled) else None
        overhead = (b.get("k1_epilogue_overhead", b.get("fc1_epilogue_overhead")) if b else None)
        diff = b.get("max_rel_diff") if b else None
        lines.append("%-12s %-5s %6d %5d %5d | %8s %8s %8s %8s | %6s %6s | %6s %8s | %s" % (
            key + (fmt(ours), fmt(lt), fmt(eager), fmt(compiled),
                   fmt(ours / lt if ours and lt else None, "%.3f"),
                   fmt(ours / best if ours and best else None, "%.3f"),
                   fmt(100 * overhead if isinstance(overhead, (int, float)) else None, "%+.1f%%"),
                   fmt(diff if isinstance(diff, (int, float)) else None, "%.2g"),
                   verdict(key, ours, best, overhead if isinstance(overhead, (int, float)) else None))))
        if b and b.get("nan_in_outputs"):
            lines.append("    ^ NaN or Inf in an output: see the bench log")
    if not bench and not torch:
        lines.append("(no MLP results found)")
    return lines


def main(argv):
    """Prints the summary (and writes it to --out)."""
    p = argparse.ArgumentParser(description="join cvfuse and torch MLP results and check the targets")
    p.add_argument("bench", help="bench.jsonl of cvfuse_cuda_bench")
    p.add_argument("torch", nargs="?", help="torch.jsonl of torch_mlp_bench.py")
    p.add_argument("--out", help="also write the summary to this file")
    args = p.parse_args(argv)
    lines = summarize(load(args.bench), load(args.torch))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
