"""cvfuse on NumPy arrays: every function against NumPy in float64, strided views, errors."""

import math
import threading

import numpy as np
import pytest

import cvfuse
from conftest import gelu_erf_np, gelu_tanh_np, rel_err

ACT = {
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu_tanh": gelu_tanh_np,
    "gelu_erf": gelu_erf_np,
}


@pytest.mark.parametrize("activation", list(ACT))
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (33, 65, 17), (128, 96, 130), (3, 0, 4)])
def test_matmul_f32(activation, shape):
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    c = cvfuse.matmul(a, b, bias=bias, activation=activation)
    assert isinstance(c, np.ndarray) and c.dtype == np.float32 and c.shape == (m, n)
    ref = ACT[activation](a.astype(np.float64) @ b.astype(np.float64) + bias)
    assert rel_err(c, ref) < 1e-5


def test_matmul_strided_views_and_out():
    rng = np.random.default_rng(1)
    big = rng.standard_normal((40, 50)).astype(np.float32)
    a = big[1:31:2, 3:40]  # row stride 100, col stride 1
    b = rng.standard_normal((20, 37)).astype(np.float32).T  # transposed view
    bias = rng.standard_normal(40).astype(np.float32)[::2]  # strided vector
    out_base = np.zeros((15, 60), dtype=np.float32)
    out = out_base[:, 10:30]  # strided output
    res = cvfuse.matmul(a, b, bias=bias, activation="relu", out=out)
    assert res is out
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    assert rel_err(out, ref) < 1e-5
    assert not out_base[:, :10].any() and not out_base[:, 30:].any()


def test_matmul_batch_dims():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal((8, 5)).astype(np.float32)
    c = cvfuse.matmul(a, b)
    assert c.shape == (2, 3, 5)
    assert rel_err(c, a.astype(np.float64) @ b) < 1e-5


def test_matmul_f16():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((17, 40)).astype(np.float16)
    b = rng.standard_normal((40, 9)).astype(np.float16)
    c = cvfuse.matmul(a, b, activation="gelu_tanh")
    assert c.dtype == np.float16
    assert rel_err(c, gelu_tanh_np(a.astype(np.float64) @ b.astype(np.float64))) < 2e-3


def test_float64_runs_on_reference():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    c = cvfuse.matmul(a, b, activation="gelu_erf")
    assert c.dtype == np.float64
    assert rel_err(c, gelu_erf_np(a @ b)) < 1e-13
    # the CPU device does not take float64: a TypeError with the library's message
    with pytest.raises(TypeError, match="cvf_matmul"):
        cvfuse.matmul(a, b, device="cpu")


def test_set_device():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    assert cvfuse.get_device() == "auto"
    cvfuse.set_device("reference")
    try:
        c = cvfuse.matmul(a, b)
    finally:
        cvfuse.set_device("auto")
    assert rel_err(c, a.astype(np.float64) @ b) < 1e-6
    with pytest.raises(ValueError):
        cvfuse.set_device("gpu")


def _mlp_ref(x, w1, b1, w2, b2, gelu):
    fc1 = x @ w1.T + b1
    act = gelu(fc1)
    return act @ w2.T + b2, fc1, act


def _gelu_grad(z, approximate):
    if approximate == "tanh":
        c = np.sqrt(2 / np.pi)
        t = np.tanh(c * (z + 0.044715 * z**3))
        return 0.5 * (1 + t) + 0.5 * z * (1 - t**2) * c * (1 + 3 * 0.044715 * z**2)
    phi = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
    cdf = 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(z / np.sqrt(2)))
    return cdf + z * phi


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_mlp_forward_backward(approximate, dtype, tol):
    gelu = gelu_tanh_np if approximate == "tanh" else gelu_erf_np
    rng = np.random.default_rng(6)
    B, N, H, I = 2, 5, 12, 20
    x = rng.standard_normal((B, N, H)).astype(dtype)
    w1, b1 = rng.standard_normal((I, H)).astype(dtype) * 0.3, rng.standard_normal(I).astype(dtype)
    w2, b2 = rng.standard_normal((H, I)).astype(dtype) * 0.3, rng.standard_normal(H).astype(dtype)
    out, fc1, act = cvfuse.mlp_forward(x, w1, b1, w2, b2, approximate=approximate)
    f64 = [t.astype(np.float64) for t in (x, w1, b1, w2, b2)]
    ref_out, ref_fc1, ref_act = _mlp_ref(*f64, gelu)
    assert out.shape == (B, N, H) and fc1.shape == (B, N, I) and act.shape == (B, N, I)
    assert rel_err(fc1, ref_fc1) < tol and rel_err(act, ref_act) < tol and rel_err(out, ref_out) < tol

    g = rng.standard_normal((B, N, H)).astype(dtype)
    gx, gw1, gb1, gw2, gb2 = cvfuse.mlp_backward(g, x, w1, w2, fc1, act, approximate=approximate)
    g64, x64 = g.astype(np.float64).reshape(-1, H), f64[0].reshape(-1, H)
    fc1_64, act64 = ref_fc1.reshape(-1, I), ref_act.reshape(-1, I)
    dfc1 = (g64 @ f64[3]) * _gelu_grad(fc1_64, approximate)
    assert rel_err(gb2, g64.sum(0)) < tol
    assert rel_err(gw2, g64.T @ act64) < tol
    assert rel_err(gb1, dfc1.sum(0)) < tol
    assert rel_err(gw1, dfc1.T @ x64) < tol
    assert gx.shape == x.shape and rel_err(gx.reshape(-1, H), dfc1 @ f64[1]) < tol


def test_mlp_inference_outputs_optional():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((9, 8)).astype(np.float32)
    w1, b1 = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    w2, b2 = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    full, _, _ = cvfuse.mlp_forward(x, w1, b1, w2, b2)
    out, fc1, act = cvfuse.mlp_forward(x, w1, b1, w2, b2, save_intermediates=False)
    assert fc1 is None and act is None
    np.testing.assert_array_equal(out, full)


def test_errors_carry_the_library_message():
    a = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"shape mismatch.*b"):
        cvfuse.matmul(a, np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match="activation"):
        cvfuse.matmul(a, np.zeros((3, 2), np.float32), activation="swish")
    with pytest.raises(TypeError, match="dtype"):
        cvfuse.matmul(a.astype(np.int32), np.zeros((3, 2), np.int32))
    with pytest.raises(TypeError, match="DLPack"):
        cvfuse.matmul([[1.0]], np.zeros((1, 1), np.float32))
    with pytest.raises(ValueError, match="negative stride"):
        cvfuse.matmul(a[::-1], np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="approximate"):
        cvfuse.mlp_forward(a, a, None, a, None, approximate="erf")
    out = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="out has shape"):
        cvfuse.matmul(a, np.zeros((3, 3), np.float32), out=out)
    # an output aliasing an input: the library refuses, nothing is written
    b = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError, match="alias"):
        cvfuse.matmul(b, b, out=b)


def test_contexts_per_thread():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    ref = a.astype(np.float64) @ a
    errors = []

    def work():
        try:
            for _ in range(5):
                assert rel_err(cvfuse.matmul(a, a), ref) < 1e-5
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_park_threads():
    cvfuse.park_threads()  # no context on this thread yet (or one from earlier tests): no error
    rng = np.random.default_rng(10)
    a = rng.standard_normal((96, 80)).astype(np.float32)
    b = rng.standard_normal((80, 72)).astype(np.float32)
    first = cvfuse.matmul(a, b, activation="relu")
    for _ in range(3):  # the parked workers are woken by the next call: same bits
        cvfuse.park_threads()
        assert np.array_equal(cvfuse.matmul(a, b, activation="relu"), first)
    assert rel_err(first, np.maximum(a.astype(np.float64) @ b, 0)) < 1e-5


class LegacyProducer:
    """A DLPack producer from before DLPack 1.0 (no max_version), of no known array library."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def reshape(self, *shape):
        return LegacyProducer(self.array.reshape(*shape))


def test_legacy_capsules_and_foreign_arrays():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    c = cvfuse.matmul(LegacyProducer(a), LegacyProducer(b), activation="relu")
    assert isinstance(c, np.ndarray)
    assert rel_err(c, np.maximum(a.astype(np.float64) @ b, 0)) < 1e-5


def test_fork_makes_fresh_contexts():
    import multiprocessing as mp
    import os

    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    a = np.ones((32, 32), np.float32)
    cvfuse.matmul(a, a)  # a context exists in this process
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply(_child_matmul) == 32.0


def _child_matmul():
    a = np.ones((32, 32), np.float32)
    return float(cvfuse.matmul(a, a)[0, 0])


def test_caller_workspace(monkeypatch):
    """The allocator path CUDA tensors take (workspace sized by cvf_*_workspace_size, taken from the
    caller's library, given to the context for one call), driven here with NumPy on the CPU."""
    sizes = []

    def alloc(self, device_type):
        def take(n):
            sizes.append(n)
            return np.empty(n, np.uint8)

        return take

    monkeypatch.setattr(cvfuse._Numpy, "alloc", alloc)
    rng = np.random.default_rng(10)
    S, H, I = 37, 24, 80
    x = rng.standard_normal((S, H)).astype(np.float32)
    w1, b1 = rng.standard_normal((I, H)).astype(np.float32), rng.standard_normal(I).astype(np.float32)
    w2, b2 = rng.standard_normal((H, I)).astype(np.float32), rng.standard_normal(H).astype(np.float32)
    out, fc1, act = cvfuse.mlp_forward(x, w1, b1, w2, b2)
    g = rng.standard_normal((S, H)).astype(np.float32)
    grads = cvfuse.mlp_backward(g, x, w1, w2, fc1, act)
    c = cvfuse.matmul(x, w2)
    monkeypatch.undo()
    # the backward keeps grad_fc1_output (S x I, fp32) in the workspace
    assert sizes and max(sizes) >= S * I * 4
    ref_out, _, _ = cvfuse.mlp_forward(x, w1, b1, w2, b2)
    np.testing.assert_array_equal(out, ref_out)
    for ours, ref in zip(grads, cvfuse.mlp_backward(g, x, w1, w2, fc1, act)):
        np.testing.assert_array_equal(ours, ref)
    np.testing.assert_array_equal(c, cvfuse.matmul(x, w2))
