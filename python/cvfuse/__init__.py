"""cvfuse: fused matmul + vector-epilogue operators on DLPack arrays.

Every function takes arrays that speak DLPack (NumPy arrays, PyTorch CPU/CUDA tensors, CuPy
arrays, ...), reads them in place (strided views included, no copies) and returns results of the
caller's array type, allocated by the caller's library. Errors from the C library are raised as
ValueError (bad shapes, strides, aliasing), TypeError (dtype or device the library cannot run) or
RuntimeError, carrying the library's message.

Devices: CUDA arrays run on the "cuda" device of their GPU, on the framework's current stream
(PyTorch, CuPy). Host arrays run on the "cpu" device (all cores), except float64 arrays, which
only the "reference" device (the library's float64 oracle) accepts and which go there. The device
for host arrays can be chosen per call (device="cpu" | "reference"), per process
(cvfuse.set_device, or the CVFUSE_DEVICE environment variable).
"""

import os
import threading

from . import _cvfuse as _C

__all__ = [
    "matmul",
    "mlp_forward",
    "mlp_backward",
    "tensor_parallel_slice",
    "set_device",
    "get_device",
    "version",
    "cuda_available",
    "park_threads",
]

__version__ = "0.2.0"

_ACTIVATIONS = {
    "none": _C.ACTIVATION_NONE,
    "relu": _C.ACTIVATION_RELU,
    "gelu_tanh": _C.ACTIVATION_GELU_TANH,
    "gelu_erf": _C.ACTIVATION_GELU_ERF,
}
_GELUS = {"tanh": _C.GELU_TANH, "none": _C.GELU_ERF}
_HOST_DEVICES = ("auto", "cpu", "reference")

_KDL_CPU = 1
_KDL_CUDA = 2
_KDL_CUDA_HOST = 3

_settings = {"device": os.environ.get("CVFUSE_DEVICE", "auto") or "auto"}
if _settings["device"] not in _HOST_DEVICES:
    raise ValueError(
        f"CVFUSE_DEVICE={_settings['device']!r}: expected one of {', '.join(_HOST_DEVICES)}"
    )

# One context per (device, GPU index) and per thread: a cvf_context is used by one thread at a time.
_local = threading.local()
# Contexts inherited by a forked child: their thread pools (and CUDA state) did not survive the
# fork, so they are neither used nor destroyed there (destroying would join threads that do not
# exist); the child makes its own.
_inherited = []


def _after_fork_in_child():
    contexts = getattr(_local, "contexts", None)
    if contexts:
        _inherited.append(contexts)
    _local.contexts = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def version():
    """The C library's version string ("MAJOR.MINOR.PATCH")."""
    return _C.version()


def set_device(device):
    """Chooses the cvfuse device for host (CPU) arrays, for the whole process.

    "auto" (the default): "cpu", or "reference" for float64 arrays; "cpu": the CPU backend;
    "reference": the float64 oracle (slow; accepts float64). CUDA arrays always run on "cuda".
    """
    if device not in _HOST_DEVICES:
        raise ValueError(f"device={device!r}: expected one of {', '.join(_HOST_DEVICES)}")
    _settings["device"] = device


def get_device():
    """The device set_device chose for host arrays ("auto", "cpu" or "reference")."""
    return _settings["device"]


def park_threads():
    """Lets this thread's CPU context's worker threads sleep now.

    After each call they spin for the next one for up to CVF_CPU_SPIN_US microseconds (default
    2000) and hold the cores meanwhile; call this before handing the cores to other threaded work,
    such as PyTorch's CPU ops. The next cvfuse call wakes them. Does nothing when this thread has
    made no CPU call yet.
    """
    contexts = getattr(_local, "contexts", None) or {}
    for (device, _index), ctx in contexts.items():
        if device == _C.DEVICE_CPU:
            _C.park_threads(ctx)


def _context(device, index):
    contexts = getattr(_local, "contexts", None)
    if contexts is None:
        contexts = _local.contexts = {}
    key = (device, index)
    ctx = contexts.get(key)
    if ctx is None:
        ctx = contexts[key] = _C.context(device, index)
    return ctx


def cuda_available(index=0):
    """True when the extension was built with CUDA and a context opens on GPU index."""
    if not _C.BUILT_WITH_CUDA:
        return False
    try:
        _context(_C.DEVICE_CUDA, index)
    except RuntimeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Array libraries: how to allocate an output like an input, find the current stream, and hand
# out workspace, for each library the caller may use.
# ---------------------------------------------------------------------------------------------


class _Library:
    """What the array libraries share: outputs allocated through a NumPy-like module (self.xp)
    in the input's dtype, 2-D row views, operands and results passed as they are, host memory
    (no stream, no workspace allocator, no device to switch to). Each library overrides what
    differs."""

    name = "library"
    xp = None

    def dtype_of(self, like):
        return like.dtype

    def empty(self, like, shape):
        return self.xp.empty(shape, dtype=self.dtype_of(like))

    def zeros_broadcast(self, like, length):
        return self.xp.broadcast_to(self.xp.zeros(1, dtype=self.dtype_of(like)), (length,))

    def rows(self, x):
        return x.reshape(_rows_count(x), x.shape[-1])

    def same_memory(self, a, b):
        return a.__array_interface__["data"][0] == b.__array_interface__["data"][0]

    def prepare(self, x):
        return x

    def wrap(self, out):
        return out

    def stream(self, device_type):
        return 0, None

    def alloc(self, device_type):
        return None

    def device_guard(self, like):
        return _NullGuard()


class _Numpy(_Library):
    name = "numpy"

    def __init__(self, like):
        import numpy

        self.xp = numpy


class _Torch(_Library):
    name = "torch"

    def __init__(self, like):
        import torch

        self.torch = torch

    def empty(self, like, shape):
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def zeros_broadcast(self, like, length):
        return self.torch.zeros(1, dtype=like.dtype, device=like.device).expand(length)

    def same_memory(self, a, b):
        return a.data_ptr() == b.data_ptr()

    def prepare(self, x):
        # DLPack refuses tensors that require grad; cvfuse only reads them.
        return x.detach() if x.requires_grad else x

    def stream(self, device_type):
        if device_type != _KDL_CUDA:
            return 0, None
        # Queued on torch's current stream, which is also the stream every operand was produced
        # on: -1 tells __dlpack__ not to synchronise anything.
        return self.torch.cuda.current_stream().cuda_stream, -1

    def alloc(self, device_type):
        if device_type != _KDL_CUDA:
            return None
        torch = self.torch
        device = torch.device("cuda", torch.cuda.current_device())
        return lambda n: torch.empty(n, dtype=torch.uint8, device=device)

    def device_guard(self, like):
        if like.device.type == "cuda":
            return self.torch.cuda.device(like.device)
        return _NullGuard()


class _Cupy(_Library):
    name = "cupy"

    def __init__(self, like):
        import cupy

        self.xp = cupy

    def same_memory(self, a, b):
        return a.data.ptr == b.data.ptr

    def stream(self, device_type):
        ptr = self.xp.cuda.get_current_stream().ptr
        return ptr, (ptr if ptr else 1)

    def alloc(self, device_type):
        cp = self.xp
        return lambda n: cp.empty(n, dtype=cp.uint8)

    def device_guard(self, like):
        return like.device


class _Foreign(_Library):
    """Any other DLPack producer on the host (e.g. JAX): read in place; results are computed into
    NumPy arrays and handed back through the caller's from_dlpack (array API namespace)."""

    name = "foreign"

    def __init__(self, like):
        import numpy

        self.xp = numpy
        self.namespace = like.__array_namespace__() if hasattr(like, "__array_namespace__") else None

    def dtype_of(self, like):
        return self.xp.dtype(str(like.dtype))

    def wrap(self, out):
        if self.namespace is not None and hasattr(self.namespace, "from_dlpack"):
            return self.namespace.from_dlpack(out)
        return out

    def stream(self, device_type):
        if device_type == _KDL_CUDA:
            raise TypeError(
                "cvfuse: CUDA arrays are supported from PyTorch and CuPy (their current stream is "
                "known); convert the array with torch.from_dlpack or cupy.from_dlpack first"
            )
        return 0, None


class _NullGuard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _library(x):
    module = type(x).__module__ or ""
    if module.startswith("torch"):
        return _Torch(x)
    if module.startswith("numpy"):
        return _Numpy(x)
    if module.startswith("cupy"):
        return _Cupy(x)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(
            f"cvfuse: expected an array that supports DLPack (NumPy, PyTorch, CuPy, ...), got "
            f"{type(x).__module__}.{type(x).__name__}"
        )
    return _Foreign(x)


def _rows_count(x):
    n = 1
    for d in x.shape[:-1]:
        n *= int(d)
    return n


def _is_float64(x):
    return str(x.dtype).endswith("float64")


def _target(x, device):
    """(cvf device, index) for an operation whose first operand is x."""
    device_type, index = x.__dlpack_device__()
    device_type = int(device_type)
    if device_type == _KDL_CUDA:
        if device not in (None, "auto", "cuda"):
            raise ValueError(f"cvfuse: device={device!r} was asked for, but the arrays are on a CUDA GPU")
        return _C.DEVICE_CUDA, int(index), device_type
    if device_type not in (_KDL_CPU, _KDL_CUDA_HOST):
        raise TypeError(f"cvfuse: arrays on DLPack device type {device_type} are not supported (CPU and CUDA are)")
    name = device if device is not None else _settings["device"]
    if name not in _HOST_DEVICES:
        raise ValueError(f"cvfuse: device={name!r}: expected one of {', '.join(_HOST_DEVICES)}")
    if name == "auto":
        name = "reference" if _is_float64(x) else "cpu"
    return (_C.DEVICE_REFERENCE if name == "reference" else _C.DEVICE_CPU), 0, _KDL_CPU


def _shape2(x, what):
    if len(x.shape) < 2:
        raise ValueError(f"cvfuse: {what} must have at least 2 dimensions, got shape {tuple(x.shape)}")


def _gelu(approximate):
    try:
        return _GELUS[approximate]
    except (KeyError, TypeError):
        raise ValueError(f"cvfuse: approximate={approximate!r}: expected 'tanh' or 'none'") from None


def _out_rows(lib, out, shape, what):
    """out (of the given full shape) as a 2-D view sharing its memory, or a ValueError."""
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"cvfuse: {what} has shape {tuple(out.shape)}, expected {tuple(shape)}")
    rows = lib.rows(out)
    # reshape copies when out's strides do not allow a view: the results would be lost
    if len(shape) > 2 and _rows_count(out) > 0 and not lib.same_memory(rows, out):
        raise ValueError(f"cvfuse: {what}'s strides do not allow a 2-D view of its leading dimensions")
    return rows


def matmul(a, b, *, bias=None, activation="none", out=None, device=None):
    """out = activation(a @ b + bias), in one fused call.

    a: (..., K), b: (K, N), bias: (N,) or None; activation: "none", "relu", "gelu_tanh" or
    "gelu_erf". out (optional): (..., N), written in place and returned. The result has a's dtype
    and array type.
    """
    try:
        act = _ACTIVATIONS[activation]
    except (KeyError, TypeError):
        raise ValueError(
            f"cvfuse: activation={activation!r}: expected one of {', '.join(_ACTIVATIONS)}"
        ) from None
    lib = _library(a)
    _shape2(a, "a")
    if len(b.shape) != 2:
        raise ValueError(f"cvfuse: b must be 2-D (K, N), got shape {tuple(b.shape)}")
    kind, index, device_type = _target(a, device)
    with lib.device_guard(a):
        a2 = lib.rows(lib.prepare(a))
        b = lib.prepare(b)
        shape = tuple(a.shape[:-1]) + (b.shape[1],)
        if out is None:
            out = lib.empty(a, shape)
        c2 = _out_rows(lib, out, shape, "out")
        if bias is not None:
            bias = lib.prepare(bias)
        stream, dl_stream = lib.stream(device_type)
        _C.matmul(_context(kind, index), a2, b, c2, bias, act, stream, dl_stream, lib.alloc(device_type))
    return lib.wrap(out)


def _tp_args(tensor_parallel):
    """(size, rank, intermediate) -> the extension's tp_* keywords ({} for None)."""
    if tensor_parallel is None:
        return {}
    try:
        size, rank, intermediate = (int(v) for v in tensor_parallel)
    except (TypeError, ValueError):
        raise ValueError(
            f"cvfuse: tensor_parallel must be (size, rank, intermediate), got {tensor_parallel!r}"
        ) from None
    return {"tp_size": size, "tp_rank": rank, "tp_intermediate": intermediate}


def tensor_parallel_slice(intermediate, size, rank):
    """The rows (offset, length) of the intermediate dimension rank holds when size ranks split it:
    torch.tensor_split's rule (the first intermediate % size ranks hold one more), the only split
    tensor_parallel= accepts (cvf_tensor_parallel_slice)."""
    if size < 1 or not 0 <= rank < size or intermediate < 0:
        raise ValueError(f"cvfuse: no slice for intermediate={intermediate}, size={size}, rank={rank}")
    base, extra = divmod(intermediate, size)
    return rank * base + min(rank, extra), base + (1 if rank < extra else 0)


def mlp_forward(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, *, approximate="tanh", save_intermediates=True,
                device=None, tensor_parallel=None):
    """The vision MLP's forward in PyTorch layout (Linear(in, out).weight is (out, in)):

        fc1_output  = x @ fc1_weight^T + fc1_bias          (..., I)
        gelu_output = gelu(fc1_output)                      (..., I)
        output      = gelu_output @ fc2_weight^T + fc2_bias (..., H)

    x: (..., H), fc1_weight: (I, H), fc2_weight: (H, I); a bias may be None (zero). approximate:
    "tanh" or "none" (the exact erf GELU), as in torch.nn.functional.gelu. Returns
    (output, fc1_output, gelu_output); with save_intermediates=False (inference) the last two are
    None and are not stored.

    tensor_parallel=(size, rank, intermediate): this rank's part of a Megatron-style split over size
    ranks of the whole MLP's intermediate dimension (see tensor_parallel_slice): fc1_weight,
    fc1_bias and fc2_weight are the rank's slices ((I_r, H), (I_r,), (H, I_r)); fc1_output and
    gelu_output are its (..., I_r) slices; output is its partial sum, with fc2_bias added by rank 0
    only: sum output over the ranks (e.g. torch.distributed.all_reduce) for the MLP's output.
    """
    gelu = _gelu(approximate)
    tp = _tp_args(tensor_parallel)
    lib = _library(x)
    _shape2(x, "x")
    kind, index, device_type = _target(x, device)
    with lib.device_guard(x):
        x2 = lib.rows(lib.prepare(x))
        w1, w2 = lib.prepare(fc1_weight), lib.prepare(fc2_weight)
        if len(w1.shape) != 2 or len(w2.shape) != 2:
            raise ValueError(
                f"cvfuse: fc1_weight and fc2_weight must be 2-D, got shapes {tuple(w1.shape)} and {tuple(w2.shape)}"
            )
        inter, hidden = w1.shape[0], w2.shape[0]
        b1 = lib.prepare(fc1_bias) if fc1_bias is not None else lib.zeros_broadcast(w1, inter)
        b2 = lib.prepare(fc2_bias) if fc2_bias is not None else lib.zeros_broadcast(w2, hidden)
        lead = tuple(x.shape[:-1])
        output = lib.empty(x, lead + (hidden,))
        fc1_output = gelu_output = None
        if save_intermediates:
            fc1_output = lib.empty(x, lead + (inter,))
            gelu_output = lib.empty(x, lead + (inter,))
        stream, dl_stream = lib.stream(device_type)
        _C.mlp_forward(
            _context(kind, index),
            x2,
            w1,
            b1,
            w2,
            b2,
            lib.rows(fc1_output) if save_intermediates else None,
            lib.rows(gelu_output) if save_intermediates else None,
            lib.rows(output),
            gelu,
            stream,
            dl_stream,
            lib.alloc(device_type),
            **tp,
        )
    if not save_intermediates:
        return lib.wrap(output), None, None
    return lib.wrap(output), lib.wrap(fc1_output), lib.wrap(gelu_output)


def mlp_backward(grad_output, x, fc1_weight, fc2_weight, fc1_output, gelu_output, *, approximate="tanh",
                 device=None, tensor_parallel=None):
    """The vision MLP's backward (one fused cvf_mlp_backward call), given dL/d(output):

    returns (grad_x, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias), with the
    shapes (and dtypes) of x, fc1_weight, (I,), fc2_weight, (H,). grad_output, x, fc1_output and
    gelu_output may have the same leading batch dimensions (..., C). approximate must be the
    forward's.

    tensor_parallel=(size, rank, intermediate): as in mlp_forward; grad_x is then this rank's
    partial (sum it over the ranks), grad_fc2_bias the full sum on every rank (grad_output is
    replicated), the other gradients the rank's slices.
    """
    gelu = _gelu(approximate)
    tp = _tp_args(tensor_parallel)
    lib = _library(grad_output)
    _shape2(grad_output, "grad_output")
    _shape2(x, "x")
    kind, index, device_type = _target(grad_output, device)
    with lib.device_guard(grad_output):
        g2 = lib.rows(lib.prepare(grad_output))
        x2 = lib.rows(lib.prepare(x))
        fc1 = lib.rows(lib.prepare(fc1_output))
        act = lib.rows(lib.prepare(gelu_output))
        w1, w2 = lib.prepare(fc1_weight), lib.prepare(fc2_weight)
        if len(w1.shape) != 2 or len(w2.shape) != 2:
            raise ValueError(
                f"cvfuse: fc1_weight and fc2_weight must be 2-D, got shapes {tuple(w1.shape)} and {tuple(w2.shape)}"
            )
        grad_x = lib.empty(x, tuple(x.shape))
        grad_w1 = lib.empty(w1, tuple(w1.shape))
        grad_b1 = lib.empty(w1, (w1.shape[0],))
        grad_w2 = lib.empty(w2, tuple(w2.shape))
        grad_b2 = lib.empty(w2, (w2.shape[0],))
        stream, dl_stream = lib.stream(device_type)
        _C.mlp_backward(
            _context(kind, index),
            g2,
            x2,
            w1,
            w2,
            fc1,
            act,
            lib.rows(grad_x),
            grad_w1,
            grad_b1,
            grad_w2,
            grad_b2,
            gelu,
            stream,
            dl_stream,
            lib.alloc(device_type),
            **tp,
        )
    return tuple(lib.wrap(t) for t in (grad_x, grad_w1, grad_b1, grad_w2, grad_b2))
