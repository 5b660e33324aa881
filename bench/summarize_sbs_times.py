#!/usr/bin/env python3
"""Where the calls of bench/torch_cpu_side_by_side.py spread (issue 15; PERF.md, sixteenth session).

Reads the JSON rows the script appends (--json-out; bench/cpu_host_check.sh's $OUT/wait.jsonl
and $OUT/sbs.jsonl) and, for each row that carries every call's time, prints per side: the
minimum, the median, the median over the minimum, and the medians of the first timed call of
each block and of the others. If the other side's idle threads slow the calls that follow its block, the first calls
of a block are the slow ones; under OMP_WAIT_POLICY=PASSIVE or --settle they should not be.

usage: bench/summarize_sbs_times.py SBS.jsonl [...]
"""
import json
import statistics
import sys


def side(times, block):
    """min, median, median / min, median of each block's first call, median of the others."""
    first = [t for i, t in enumerate(times) if i % block == 0]
    rest = [t for i, t in enumerate(times) if i % block != 0]
    low, mid = min(times), statistics.median(times)
    return (low, mid, mid / low, statistics.median(first), statistics.median(rest) if rest else float("nan"))


def label(row):
    """The case and the wait it ran under."""
    shape = " ".join("%s=%s" % kv for kv in row["shape"].items())
    wait = "settle %g ms" % row["settle_ms"] if row.get("settle_ms") else (row.get("omp_wait_policy") or "default")
    return "%s %s %s thr %d, %s" % (row["op"], row["dtype"], shape, row["threads"], wait)


def main(paths):
    fmt = "  %-6s min %8.3f  median %8.3f  (x%.2f)  first of block %8.3f  others %8.3f"
    for path in paths:
        for line in open(path):
            if not line.strip():
                continue
            row = json.loads(line)
            if "times_ms" not in row:
                continue
            print("%s: ratio of medians %.3f, pairs %.3f" % (label(row), row["ratio"], row["pair_ratio"]))
            print(fmt % (("ours",) + side(row["times_ms"], row["block"])))
            print(fmt % (("torch",) + side(row["torch_times_ms"], row["block"])))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
