"""Shared helpers of the cvfuse Python tests. Run: python -m pytest python/tests (after pip install ./python)."""

import math

import numpy as np
import pytest

import cvfuse


def gelu_erf_np(x):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh_np(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def rel_err(ours, ref):
    """max |ours - ref| / max |ref| (ref's scale), in float64."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    if ref.size == 0:
        return 0.0
    scale = max(np.abs(ref).max(), 1e-30)
    return float(np.abs(ours - ref).max() / scale)


def cuda_ok():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and cvfuse.cuda_available()


# The torch tests run on these devices; "cuda" is skipped without a GPU (or a CUDA build).
TORCH_DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not cuda_ok(), reason="no CUDA GPU, or cvfuse built without CUDA")),
]
