"""cvfuse for PyTorch: the vision MLP (fc1 -> GELU -> fc2) as one autograd function.

    mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate="none")
        forward: one cvf_mlp_forward (fc1's bias + GELU fused, fc1_output and gelu_output saved);
        backward: one cvf_mlp_backward (GELU' and the bias gradients fused).
    FusedMlp(in_features, hidden_features=None, out_features=None, bias=True, approximate="none")
        a drop-in for timm's Mlp: the same submodules and parameter names (fc1.weight, fc1.bias,
        fc2.weight, fc2.bias), so load_state_dict from a timm Mlp works.
    swap_mlps(model)
        replaces the timm Mlp modules of a model in place (sharing their parameters).
    tp_mlp(x, fc1_weight_slice, fc1_bias_slice, fc2_weight_slice, fc2_bias, group=None, ...)
        one rank of a Megatron-style tensor-parallel MLP over a torch.distributed process group
        (any backend): cvfuse's partial mode, the partial sums all-reduced by torch.distributed.

On CUDA the calls are queued on torch's current stream and their workspace comes from torch's
caching allocator; nothing synchronises the host. Under torch.autocast the inputs are cast to
the autocast dtype first, as nn.Linear's are.

What the fused path does not cover falls back to plain torch ops, never silently to something
else: an MLP whose fc2 does not map back to fc1's input width (out_features != in_features; the C
library's MLP is (S, H) -> (S, I) -> (S, H)). swap_mlps leaves such modules (and those with
dropout, a norm between the layers or a non-GELU activation) as they are and reports them.
"""

import warnings

import torch
import torch.nn as nn

import cvfuse

__all__ = ["mlp", "tp_mlp", "FusedMlp", "swap_mlps"]

_APPROXIMATE = ("none", "tanh")


def _autocast_dtype(device_type):
    """The autocast dtype for device_type when autocast is on there, else None."""
    try:
        enabled = torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4
        enabled = torch.is_autocast_enabled() if device_type == "cuda" else torch.is_autocast_cpu_enabled()
    if not enabled:
        return None
    try:
        return torch.get_autocast_dtype(device_type)
    except (AttributeError, TypeError):  # torch < 2.4
        return torch.get_autocast_gpu_dtype() if device_type == "cuda" else torch.get_autocast_cpu_dtype()


class _MlpFunction(torch.autograd.Function):
    """The fused MLP; with tp = (size, rank, intermediate), one rank of a tensor-parallel MLP:
    cvfuse's partial mode, then torch.distributed.all_reduce over group of the partial output
    (forward) and of the partial grad_x (backward)."""

    @staticmethod
    def forward(ctx, x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate, group=None, tp=None):
        output, fc1_output, gelu_output = cvfuse.mlp_forward(
            x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate=approximate, tensor_parallel=tp
        )
        if tp is not None:
            torch.distributed.all_reduce(output, group=group)  # rank 0's partial carried fc2_bias
        ctx.save_for_backward(x, fc1_weight, fc2_weight, fc1_output, gelu_output)
        ctx.approximate, ctx.group, ctx.tp = approximate, group, tp
        ctx.biases = (fc1_bias is not None, fc2_bias is not None)
        return output

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        x, fc1_weight, fc2_weight, fc1_output, gelu_output = ctx.saved_tensors
        grad_x, grad_w1, grad_b1, grad_w2, grad_b2 = cvfuse.mlp_backward(
            grad_output if ctx.tp is None else grad_output.contiguous(), x, fc1_weight, fc2_weight, fc1_output,
            gelu_output, approximate=ctx.approximate, tensor_parallel=ctx.tp,
        )
        if ctx.tp is not None:
            torch.distributed.all_reduce(grad_x, group=ctx.group)  # the partials of grad_x summed
        return (
            grad_x,
            grad_w1,
            grad_b1 if ctx.biases[0] else None,
            grad_w2,
            grad_b2 if ctx.biases[1] else None,  # with tp, already the full sum: grad_output is replicated
            None,
            None,
            None,
        )


def mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate="none"):
    """gelu(x @ fc1_weight^T + fc1_bias) @ fc2_weight^T + fc2_bias with cvfuse's fused kernels.

    x: (..., H); fc1_weight: (I, H); fc2_weight: (H, I); biases (I,), (H,) or None. approximate:
    "none" (exact erf GELU, torch.nn.GELU()'s default) or "tanh". Differentiable (one fused
    backward call); float64 tensors on the CPU run on the library's reference device, so
    torch.autograd.gradcheck works.
    """
    if approximate not in _APPROXIMATE:
        raise ValueError(f"cvfuse.torch.mlp: approximate={approximate!r}: expected 'none' or 'tanh'")
    dtype = _autocast_dtype(x.device.type)
    if dtype is not None:
        x, fc1_weight, fc1_bias, fc2_weight, fc2_bias = (
            t.to(dtype) if t is not None and t.is_floating_point() else t
            for t in (x, fc1_weight, fc1_bias, fc2_weight, fc2_bias)
        )
    if not torch.is_grad_enabled() or not any(
        t is not None and t.requires_grad for t in (x, fc1_weight, fc1_bias, fc2_weight, fc2_bias)
    ):
        # inference: nothing to save for a backward
        output, _, _ = cvfuse.mlp_forward(
            x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate=approximate, save_intermediates=False
        )
        return output
    return _MlpFunction.apply(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate, None, None)


def tp_mlp(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, *, group=None, intermediate=None, approximate="none"):
    """One rank's share of a Megatron-style tensor-parallel MLP over a torch.distributed process group.

    Every rank of group (default: the world) calls it with the same x (..., H) and fc2_bias (H,),
    and its slices of the whole MLP's intermediate dimension I, as cvfuse.tensor_parallel_slice(I,
    group size, group rank) gives them (torch.tensor_split's rule: e.g. fc1.weight.tensor_split(P)[r]):
    fc1_weight (I_r, H), fc1_bias (I_r,) or None, fc2_weight (H, I_r). Returns the MLP's full output
    on every rank. Column-parallel fc1 and row-parallel fc2 run as one fused cvfuse call in partial
    mode; the partial output (fc2_bias added by rank 0 only) is summed with
    torch.distributed.all_reduce, and in the backward the partial grad_x likewise. Gradients of the
    weights are the rank's slices; fc2_bias's is the full one on every rank.

    intermediate: the whole I (the sum of the ranks' slices); None sums them with one extra
    all_reduce per call. Any backend works (gloo on the CPU, NCCL on GPUs); the library's own NCCL
    path (the C API's args.tp.nccl_comm, which overlaps the backward's all-reduce with the weight
    gradients) is not used here: torch.distributed does not hand out its communicator.
    """
    if approximate not in _APPROXIMATE:
        raise ValueError(f"cvfuse.torch.tp_mlp: approximate={approximate!r}: expected 'none' or 'tanh'")
    dist = torch.distributed
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    if intermediate is None:
        total = torch.tensor([fc1_weight.shape[0]], dtype=torch.int64, device=x.device)
        dist.all_reduce(total, group=group)
        intermediate = int(total.item())
    dtype = _autocast_dtype(x.device.type)
    if dtype is not None:
        x, fc1_weight, fc1_bias, fc2_weight, fc2_bias = (
            t.to(dtype) if t is not None and t.is_floating_point() else t
            for t in (x, fc1_weight, fc1_bias, fc2_weight, fc2_bias)
        )
    tp = (size, rank, intermediate)
    return _MlpFunction.apply(x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, approximate, group, tp)


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


class FusedMlp(nn.Module):
    """A drop-in for timm.layers.Mlp (fc1 -> GELU -> fc2) running cvfuse's fused MLP.

    The submodules are timm's (fc1, act, drop1, norm, fc2, drop2; the last four without
    parameters), so state dicts load both ways. When out_features != in_features the fused
    kernels do not apply and the module runs plain torch ops (a warning says so once).
    """

    def __init__(
        self,
        in_features,
        hidden_features=None,
        out_features=None,
        bias=True,
        approximate="none",
        device=None,
        dtype=None,
    ):
        super().__init__()
        if approximate not in _APPROXIMATE:
            raise ValueError(f"FusedMlp: approximate={approximate!r}: expected 'none' or 'tanh'")
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias1, bias2 = _pair(bias)
        factory = {"device": device, "dtype": dtype}
        self.approximate = approximate
        self.fc1 = nn.Linear(in_features, hidden_features, bias=bias1, **factory)
        self.act = nn.GELU(approximate=approximate)
        self.drop1 = nn.Identity()
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias2, **factory)
        self.drop2 = nn.Identity()
        if out_features != in_features:
            warnings.warn(
                f"FusedMlp({in_features}, {hidden_features}, {out_features}): cvfuse's MLP maps back to the "
                f"input width (out_features == in_features); this module runs plain torch ops",
                stacklevel=2,
            )

    @property
    def fused(self):
        """Whether forward runs cvfuse's fused MLP (else plain torch ops)."""
        return self.fc2.out_features == self.fc1.in_features

    def forward(self, x):
        if not self.fused:
            return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))
        return mlp(x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}, fused={self.fused}"


def _gelu_approximate(act):
    """'none' / 'tanh' for a GELU module, None for anything else."""
    if isinstance(act, nn.GELU):
        return act.approximate
    name = type(act).__name__
    module = type(act).__module__ or ""
    if module.startswith("timm"):
        if name == "GELU":
            return "none"
        if name == "GELUTanh":
            return "tanh"
    return None


def _no_op(module):
    if isinstance(module, nn.Identity):
        return True
    return isinstance(module, nn.Dropout) and module.p == 0.0


def _why_not(module):
    """Why a timm-style Mlp cannot become a FusedMlp, or None when it can."""
    fc1, fc2 = getattr(module, "fc1", None), getattr(module, "fc2", None)
    if not isinstance(fc1, nn.Linear) or not isinstance(fc2, nn.Linear):
        return "fc1/fc2 are not nn.Linear (use_conv?)"
    if fc2.out_features != fc1.in_features:
        return f"out_features {fc2.out_features} != in_features {fc1.in_features}"
    if _gelu_approximate(getattr(module, "act", None)) is None:
        return f"activation {type(getattr(module, 'act', None)).__name__} is not GELU"
    for name in ("drop1", "norm", "drop2"):
        part = getattr(module, name, None)
        if part is not None and not _no_op(part):
            return f"{name} is {part!r} (only Identity / Dropout(p=0) fuse)"
    return None


def _is_timm_mlp(module):
    try:
        from timm.layers import Mlp
    except Exception:  # timm absent or broken: recognise the class by name
        Mlp = None
    if Mlp is not None and type(module) is Mlp:
        return True
    return type(module).__name__ == "Mlp" and hasattr(module, "fc1") and hasattr(module, "fc2")


def swap_mlps(model, verbose=False):
    """Replaces every timm Mlp inside model with a FusedMlp, in place, and returns the number
    replaced. The FusedMlp takes over the Mlp's own fc1/fc2 modules (same Parameter objects, so an
    optimizer built before the swap keeps working). Mlps that cannot be fused (see FusedMlp) are
    left as they are, with a warning naming them and why."""
    swapped = 0
    skipped = []
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, FusedMlp) or not _is_timm_mlp(child):
                continue
            path = f"{parent_name}.{name}" if parent_name else name
            reason = _why_not(child)
            if reason is not None:
                skipped.append(f"{path}: {reason}")
                continue
            fused = FusedMlp.__new__(FusedMlp)
            nn.Module.__init__(fused)
            fused.approximate = _gelu_approximate(child.act)
            fused.fc1 = child.fc1
            fused.act = nn.GELU(approximate=fused.approximate)
            fused.drop1 = nn.Identity()
            fused.norm = nn.Identity()
            fused.fc2 = child.fc2
            fused.drop2 = nn.Identity()
            fused.train(child.training)
            setattr(parent, name, fused)
            swapped += 1
    if skipped:
        warnings.warn("swap_mlps left these Mlp modules unfused: " + "; ".join(skipped), stacklevel=2)
    if verbose:
        print(f"swap_mlps: {swapped} fused, {len(skipped)} left as they were")
    return swapped

