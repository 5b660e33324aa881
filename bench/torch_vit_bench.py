#!/usr/bin/env python3
"""ViT training steps with and without cvfuse's fused MLP, side by side in one process.

For each model (timm ViT-B/16 and ViT-L/16 by default, random weights, 224x224 images) it times a
training step (forward + backward, bf16 autocast, batch 64) of the model as timm builds it and of a
deep copy whose Mlp modules cvfuse.torch.swap_mlps replaced, alternating the two so that clocks
and caches treat them alike; then the MLP layers alone (timm Mlp vs FusedMlp on the model's
(tokens, width, 4 x width) shape, forward and forward + backward). Every result is one JSON line
on stdout (and in --json-out). Runs unattended; a case that fails prints a JSON line with "error".

    pip install ./python timm && python bench/torch_vit_bench.py            # on the GPU machine
    python bench/torch_vit_bench.py --models vit_base_patch16_224 --steps 20 --json-out vit.jsonl
"""

import argparse
import copy
import json
import statistics
import sys
import time
import traceback


def emit(record, sink):
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if sink:
        sink.write(line + "\n")
        sink.flush()


def timer(torch, device):
    """fn -> milliseconds of one call, measured with CUDA events (or the wall clock on the CPU)."""
    if device == "cuda":

        def run(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)

    else:

        def run(fn):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3

    return run


def side_by_side(fns, warmup, steps, time_one):
    """Runs each of fns warmup times, then steps rounds of one call each (alternating); returns the
    per-function list of milliseconds."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(steps):
        for i, fn in enumerate(fns):
            times[i].append(time_one(fn))
    return times


def summary(ms):
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "mean_ms": statistics.fmean(ms)}


def bench_model(torch, timm, cvt, name, args, time_one, sink):
    torch.manual_seed(0)
    base = timm.create_model(name, pretrained=False, num_classes=1000).to(args.device)
    fused = copy.deepcopy(base)
    swapped = cvt.swap_mlps(fused)
    base.train()
    fused.train()
    gen = torch.Generator(device=args.device).manual_seed(0)
    images = torch.randn(args.batch, 3, 224, 224, device=args.device, generator=gen)
    labels = torch.randint(0, 1000, (args.batch,), device=args.device, generator=gen)
    losses = {}

    def step(model, key):
        def run():
            with torch.autocast(device_type=args.device, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(images), labels)
            model.zero_grad(set_to_none=True)
            loss.backward()
            losses[key] = loss

        return run

    times = side_by_side([step(base, "timm"), step(fused, "cvfuse")], args.warmup, args.steps, time_one)
    t_base, t_fused = summary(times[0]), summary(times[1])
    loss_timm, loss_fused = losses["timm"].item(), losses["cvfuse"].item()
    emit(
        {
            "bench": "vit_train_step",
            "model": name,
            "batch": args.batch,
            "dtype": "bf16 autocast",
            "mlps_swapped": swapped,
            "steps": args.steps,
            "timm": t_base,
            "cvfuse": t_fused,
            "speedup": t_base["median_ms"] / t_fused["median_ms"],
            "images_per_s_timm": args.batch * 1e3 / t_base["median_ms"],
            "images_per_s_cvfuse": args.batch * 1e3 / t_fused["median_ms"],
            "last_loss_timm": loss_timm,
            "last_loss_cvfuse": loss_fused,
        },
        sink,
    )
    block = base.blocks[0].mlp
    width, hidden = block.fc1.in_features, block.fc1.out_features
    tokens = base.patch_embed.num_patches + getattr(base, "num_prefix_tokens", 1)
    del base, fused, images, labels, losses
    if args.device == "cuda":
        torch.cuda.empty_cache()
    bench_mlp(torch, timm, cvt, name, width, hidden, tokens, args, time_one, sink)


def bench_mlp(torch, timm, cvt, name, width, hidden, tokens, args, time_one, sink):
    from timm.layers import Mlp

    torch.manual_seed(0)
    dtype = torch.bfloat16
    ref = Mlp(width, hidden).to(device=args.device, dtype=dtype)
    fused = cvt.FusedMlp(width, hidden).to(device=args.device, dtype=dtype)
    fused.load_state_dict(ref.state_dict())
    x = torch.randn(args.batch, tokens, width, device=args.device, dtype=dtype, requires_grad=True)
    grad = torch.randn(args.batch, tokens, width, device=args.device, dtype=dtype)

    def forward(m):
        def run():
            with torch.no_grad():
                m(x)

        return run

    def train(m):
        def run():
            x.grad = None
            m.zero_grad(set_to_none=True)
            m(x).backward(grad)

        return run

    with torch.no_grad():
        err = ((fused(x) - ref(x)).abs().max() / ref(x).abs().max()).item()
    for what, make in (("forward", forward), ("forward+backward", train)):
        times = side_by_side([make(ref), make(fused)], args.warmup, args.steps, time_one)
        t_ref, t_fused = summary(times[0]), summary(times[1])
        flops = 2 * 2 * args.batch * tokens * width * hidden * (1 if what == "forward" else 3)
        emit(
            {
                "bench": "mlp_layer",
                "model": name,
                "what": what,
                "tokens": args.batch * tokens,
                "hidden": width,
                "intermediate": hidden,
                "dtype": "bf16",
                "timm": t_ref,
                "cvfuse": t_fused,
                "speedup": t_ref["median_ms"] / t_fused["median_ms"],
                "tflops_timm": flops / t_ref["median_ms"] / 1e9,
                "tflops_cvfuse": flops / t_fused["median_ms"] / 1e9,
                "max_rel_diff_forward": err,
            },
            sink,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["vit_base_patch16_224", "vit_large_patch16_224"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    parser.add_argument("--json-out", default=None, help="also append the JSON lines to this file")
    args = parser.parse_args()

    import torch
    import timm

    import cvfuse
    import cvfuse.torch as cvt

    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    sink = open(args.json_out, "a") if args.json_out else None
    env = {
        "bench": "environment",
        "torch": torch.__version__,
        "timm": timm.__version__,
        "cvfuse": cvfuse.__version__,
        "cvfuse_library": cvfuse.version(),
        "cvfuse_cuda_build": bool(cvfuse._C.BUILT_WITH_CUDA),
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "batch": args.batch,
        "steps": args.steps,
        "warmup": args.warmup,
    }
    emit(env, sink)
    if args.device == "cuda" and not cvfuse.cuda_available():
        emit({"bench": "error", "error": "cvfuse has no CUDA device: reinstall with nvcc on PATH"}, sink)
        return 1
    time_one = timer(torch, args.device)
    failures = 0
    for name in args.models:
        try:
            bench_model(torch, timm, cvt, name, args, time_one, sink)
        except Exception as e:  # noqa: BLE001 - one failing model must not stop the others
            failures += 1
            emit({"bench": "vit_train_step", "model": name, "error": f"{type(e).__name__}: {e}",
                  "traceback": traceback.format_exc()}, sink)
            if args.device == "cuda":
                torch.cuda.empty_cache()
    if sink:
        sink.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
