"""Tensor-parallel MLP (issue 14) from Python: the partial mode of mlp_forward / mlp_backward
(tensor_parallel=(size, rank, intermediate)) with P ranks simulated in turn, and cvfuse.torch.tp_mlp
over a real torch.distributed process group (gloo, 2 CPU processes)."""

import socket

import numpy as np
import pytest

import cvfuse
from conftest import gelu_erf_np, rel_err


def _full(seed, S, H, I):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (S, H)).astype(np.float32)
    w1 = rng.uniform(-0.5, 0.5, (I, H)).astype(np.float32)
    b1 = rng.uniform(-1, 1, (I,)).astype(np.float32)
    w2 = rng.uniform(-0.5, 0.5, (H, I)).astype(np.float32)
    b2 = rng.uniform(-1, 1, (H,)).astype(np.float32)
    g = rng.uniform(-1, 1, (S, H)).astype(np.float32)
    return x, w1, b1, w2, b2, g


def test_slice_rule():
    for I in range(0, 13):
        for P in range(1, 5):
            parts = [cvfuse.tensor_parallel_slice(I, P, r) for r in range(P)]
            want = np.array_split(np.arange(I), P)  # numpy's array_split = torch.tensor_split's rule
            offsets = np.cumsum([0] + [len(w) for w in want])[:-1]
            assert [(int(o), len(w)) for o, w in zip(offsets, want)] == parts
    with pytest.raises(ValueError):
        cvfuse.tensor_parallel_slice(10, 2, 2)


@pytest.mark.parametrize("P", [2, 3, 4])
@pytest.mark.parametrize("I", [24, 22, 3])
def test_partial_sums_equal_full(P, I):
    S, H = 9, 16
    x, w1, b1, w2, b2, g = _full(P * 100 + I, S, H, I)
    y_full, fc1_full, gelu_full = cvfuse.mlp_forward(x, w1, b1, w2, b2, approximate="none")
    full_grads = cvfuse.mlp_backward(g, x, w1, w2, fc1_full, gelu_full, approximate="none")
    # the float64 answer of the full MLP
    h = x.astype(np.float64) @ w1.T.astype(np.float64) + b1
    y_ref = gelu_erf_np(h) @ w2.T.astype(np.float64) + b2
    y_sum = np.zeros((S, H))
    gx_sum = np.zeros((S, H))
    for r in range(P):
        off, n = cvfuse.tensor_parallel_slice(I, P, r)
        sl = slice(off, off + n)
        tp = (P, r, I)
        y, fc1, act = cvfuse.mlp_forward(
            x, w1[sl], b1[sl], np.ascontiguousarray(w2[:, sl]), b2, approximate="none", tensor_parallel=tp
        )
        assert rel_err(fc1, fc1_full[:, sl]) < 1e-5 and rel_err(act, gelu_full[:, sl]) < 1e-5
        y_sum += y
        gx, gw1, gb1, gw2, gb2 = cvfuse.mlp_backward(
            g, x, w1[sl], np.ascontiguousarray(w2[:, sl]), fc1, act, approximate="none", tensor_parallel=tp
        )
        gx_sum += gx
        assert rel_err(gw1, full_grads[1][sl]) < 1e-5
        assert rel_err(gb1, full_grads[2][sl]) < 1e-5
        assert rel_err(gw2, full_grads[3][:, sl]) < 1e-5
        assert rel_err(gb2, full_grads[4]) < 1e-6  # the full sum on every rank
    assert rel_err(y_sum, y_full) < 1e-5
    assert rel_err(y_sum, y_ref) < 1e-5
    assert rel_err(gx_sum, full_grads[0]) < 1e-5


def test_bad_slice_rejected():
    x, w1, b1, w2, b2, _ = _full(1, 4, 8, 10)
    # rank 0 of 3 holds 4 rows of 10 (tensor_split), not 3
    with pytest.raises(ValueError, match="args.tp"):
        cvfuse.mlp_forward(x, w1[:3], b1[:3], np.ascontiguousarray(w2[:, :3]), b2, tensor_parallel=(3, 0, 10))
    with pytest.raises(ValueError, match="args.tp.rank"):
        cvfuse.mlp_forward(x, w1[:5], b1[:5], np.ascontiguousarray(w2[:, :5]), b2, tensor_parallel=(2, 2, 10))
    with pytest.raises(ValueError):
        cvfuse.mlp_forward(x, w1, b1, w2, b2, tensor_parallel=(2, 0))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tp_worker(rank, world, port, I, given, results):
    import torch
    import torch.distributed as dist

    import cvfuse.torch as ct

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(7)  # the same full MLP on every rank
        S, H = 6, 12
        x = torch.randn(S, H, dtype=torch.float64, requires_grad=True)
        w1 = torch.randn(I, H, dtype=torch.float64) * 0.3
        b1 = torch.randn(I, dtype=torch.float64)
        w2 = torch.randn(H, I, dtype=torch.float64) * 0.3
        b2 = torch.randn(H, dtype=torch.float64)
        g = torch.randn(S, H, dtype=torch.float64)
        mine = [t.tensor_split(world, dim=d)[rank].contiguous().requires_grad_() for t, d in ((w1, 0), (b1, 0), (w2, 1))]
        b2r = b2.clone().requires_grad_()
        y = ct.tp_mlp(x, mine[0], mine[1], mine[2], b2r, intermediate=I if given else None)
        y.backward(g)
        # the full MLP in plain torch, on every rank
        xf = x.detach().clone().requires_grad_()
        full = [t.clone().requires_grad_() for t in (w1, b1, w2, b2)]
        yf = torch.nn.functional.linear(
            torch.nn.functional.gelu(torch.nn.functional.linear(xf, full[0], full[1])), full[2], full[3]
        )
        yf.backward(g)
        errs = {
            "output": (y - yf).abs().max().item(),
            "grad_x": (x.grad - xf.grad).abs().max().item(),
            "grad_w1": (mine[0].grad - full[0].grad.tensor_split(world, 0)[rank]).abs().max().item(),
            "grad_b1": (mine[1].grad - full[1].grad.tensor_split(world, 0)[rank]).abs().max().item(),
            "grad_w2": (mine[2].grad - full[2].grad.tensor_split(world, 1)[rank]).abs().max().item(),
            "grad_b2": (b2r.grad - full[3].grad).abs().max().item(),
        }
        results[rank] = errs
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("I,given", [(16, True), (15, False)])
def test_torch_tp_mlp_gloo(I, given):
    pytest.importorskip("torch")
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    world = 2
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_tp_worker, args=(world, _free_port(), I, given, results), nprocs=world, join=True)
        results = dict(results)
    assert sorted(results) == list(range(world))
    for rank, errs in results.items():
        for name, err in errs.items():
            assert err < 1e-10, (rank, name, err)
