"""cvfuse on PyTorch tensors: the functional API and cvfuse.torch against torch, in float32 and
bfloat16, on random and awkward shapes and strided tensors; gradcheck in float64 on the
reference device. The "cuda" cases run only with a GPU (and a CUDA build of cvfuse)."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import cvfuse  # noqa: E402
import cvfuse.torch as cvt  # noqa: E402
from conftest import TORCH_DEVICES, cuda_ok  # noqa: E402

# max |ours - ref| / max |ref| bounds: fp32 accumulation vs float64; bf16 adds one rounding of
# each stored tensor (2^-9 relative) and of the intermediates the next step reads.
TOL = {torch.float32: 2e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}
DTYPES = [torch.float32, torch.bfloat16]
SHAPES = [(1, 1, 1), (7, 13, 5), (33, 64, 129), (130, 96, 40)]
MLP_SHAPES = [((1,), 8, 16), ((2, 7), 12, 48), ((3, 17), 40, 96), ((64,), 64, 256)]


def rel(ours, ref):
    ours, ref = ours.detach().double().cpu(), ref.detach().double().cpu()
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    if ref.numel() == 0:
        return 0.0
    return ((ours - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def rand(*shape, dtype=torch.float32, device="cpu", scale=1.0, gen=None):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(device=device, dtype=dtype)


ACT = {
    "none": lambda x: x,
    "relu": torch.relu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_erf": F.gelu,
}


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", list(ACT))
@pytest.mark.parametrize("shape", SHAPES)
def test_matmul(device, dtype, activation, shape):
    m, k, n = shape
    g = torch.Generator().manual_seed(m * 1000 + k * 10 + n)
    a, b, bias = rand(m, k, dtype=dtype, device=device, gen=g), rand(k, n, dtype=dtype, device=device, gen=g), rand(
        n, dtype=dtype, device=device, gen=g
    )
    c = cvfuse.matmul(a, b, bias=bias, activation=activation)
    assert isinstance(c, torch.Tensor) and c.dtype == dtype and c.device == a.device and c.shape == (m, n)
    ref = ACT[activation](a.double() @ b.double() + bias.double())
    assert rel(c, ref) < TOL[dtype]


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_strided(device, dtype):
    g = torch.Generator().manual_seed(1)
    base = rand(50, 70, dtype=dtype, device=device, gen=g)
    a = base[2:40:3, 5:60]  # (13, 55), row stride 210
    b = rand(33, 55, dtype=dtype, device=device, gen=g).t()  # transposed (55, 33)
    bias = rand(66, dtype=dtype, device=device, gen=g)[::2]
    out_base = torch.zeros(13, 80, dtype=dtype, device=device)
    out = out_base[:, 7:40]
    res = cvfuse.matmul(a, b, bias=bias, activation="gelu_tanh", out=out)
    assert res is out
    ref = F.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
    assert rel(out, ref) < TOL[dtype]
    assert not out_base[:, :7].any() and not out_base[:, 40:].any()
    # a broadcast (stride-0) operand is read in place too
    ones = torch.ones(1, 55, dtype=dtype, device=device).expand(13, 55)
    assert rel(cvfuse.matmul(ones, b), ones.double() @ b.double()) < TOL[dtype]


def torch_mlp(x, w1, b1, w2, b2, approximate):
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate=approximate), w2, b2)


def mlp_params(lead, H, I, dtype, device, seed, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    ts = [
        rand(*lead, H, gen=g),
        rand(I, H, scale=H**-0.5, gen=g),
        rand(I, gen=g, scale=0.1),
        rand(H, I, scale=I**-0.5, gen=g),
        rand(H, gen=g, scale=0.1),
    ]
    return [t.to(device=device, dtype=dtype).requires_grad_(requires_grad) for t in ts]


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("lead,H,I", MLP_SHAPES)
def test_mlp_forward_backward_functional(device, dtype, approximate, lead, H, I):
    x, w1, b1, w2, b2 = mlp_params(lead, H, I, dtype, device, seed=H + I)
    out, fc1, act = cvfuse.mlp_forward(x, w1, b1, w2, b2, approximate=approximate)
    assert out.shape == x.shape and fc1.shape == (*lead, I) and act.shape == (*lead, I)
    assert out.dtype == dtype and out.device == x.device
    # reference: float64 autograd of the same (rounded) inputs
    ref = [t.double().requires_grad_() for t in (x, w1, b1, w2, b2)]
    fc1_ref = F.linear(ref[0], ref[1], ref[2])
    act_ref = F.gelu(fc1_ref, approximate=approximate)
    out_ref = F.linear(act_ref, ref[3], ref[4])
    tol = TOL[dtype]
    assert rel(fc1, fc1_ref) < tol and rel(act, act_ref) < tol and rel(out, out_ref) < tol
    grad = rand(*out.shape, dtype=dtype, device=device, gen=torch.Generator().manual_seed(3))
    grads = cvfuse.mlp_backward(grad, x, w1, w2, fc1, act, approximate=approximate)
    out_ref.backward(grad.double())
    for ours, t, name in zip(grads, ref, ["x", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]):
        assert ours.shape == t.shape and ours.dtype == dtype, name
        assert rel(ours, t.grad) < 2 * tol, name


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_mlp_strided_inputs(device):
    x, w1, b1, w2, b2 = mlp_params((6, 5), 16, 32, torch.float32, device, seed=11)
    xs = torch.zeros(6, 9, 40, device=device)
    xs[:, 2:7, 10:26] = x
    xv = xs[:, 2:7, 10:26]  # (6, 5, 16) view: leading dims flatten to a strided (30, 16) view? no: copied
    w1t = w1.t().contiguous().t()  # column-major weight
    out, fc1, act = cvfuse.mlp_forward(xv, w1t, b1, w2, b2)
    ref = torch_mlp(x.double(), w1.double(), b1.double(), w2.double(), b2.double(), "tanh")
    assert rel(out, ref) < TOL[torch.float32]


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_autograd_mlp(device, dtype, approximate):
    params = mlp_params((3, 11), 24, 64, dtype, device, seed=5, requires_grad=True)
    ref = [p.detach().double().requires_grad_() for p in params]
    out = cvt.mlp(*params, approximate=approximate)
    out_ref = torch_mlp(*ref, approximate)
    assert rel(out, out_ref) < TOL[dtype]
    grad = rand(*out.shape, dtype=dtype, device=device, gen=torch.Generator().manual_seed(9))
    out.backward(grad)
    out_ref.backward(grad.double())
    for p, r in zip(params, ref):
        assert p.grad is not None and p.grad.dtype == p.dtype
        assert rel(p.grad, r.grad) < 2 * TOL[dtype]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gradcheck_float64_reference(approximate):
    params = mlp_params((2, 3), 5, 7, torch.float64, "cpu", seed=2, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *p: cvt.mlp(*p, approximate=approximate), params, eps=1e-6, atol=1e-8)


def test_gradcheck_without_biases():
    x, w1, _, w2, _ = mlp_params((4,), 3, 6, torch.float64, "cpu", seed=3, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, c: cvt.mlp(a, b, None, c, None), (x, w1, w2))


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_no_grad_inference(device):
    params = mlp_params((4, 9), 16, 64, torch.float32, device, seed=8)
    with torch.no_grad():
        out = cvt.mlp(*params)
    assert rel(out, torch_mlp(*[p.double() for p in params], "none")) < TOL[torch.float32]


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_autocast_bf16(device):
    params = mlp_params((2, 10), 32, 128, torch.float32, device, seed=4, requires_grad=True)
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        out = cvt.mlp(*params)
        ref = torch_mlp(*params, "none")
    assert out.dtype == torch.bfloat16 and ref.dtype == torch.bfloat16
    assert rel(out, ref.float()) < 2e-2
    out.float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in params)


def timm_like_mlp(H, I, out=None):
    timm_layers = pytest.importorskip("timm.layers")
    return timm_layers.Mlp(H, I, out)


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_fused_mlp_drop_in(device):
    torch.manual_seed(0)
    ref = timm_like_mlp(32, 96).to(device)
    fused = cvt.FusedMlp(32, 96).to(device)
    assert set(fused.state_dict()) == set(ref.state_dict())
    fused.load_state_dict(ref.state_dict())
    ref.load_state_dict(fused.state_dict())  # and back
    x = torch.randn(2, 7, 32, device=device, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    y, y_ref = fused(x), ref(x2)
    assert rel(y, y_ref) < 1e-4
    y.square().sum().backward()
    y_ref.square().sum().backward()
    assert rel(x.grad, x2.grad) < 1e-4
    for (n, p), (_, q) in zip(fused.named_parameters(), ref.named_parameters()):
        assert rel(p.grad, q.grad) < 1e-4, n


def test_fused_mlp_other_out_features_falls_back():
    with pytest.warns(UserWarning, match="out_features"):
        m = cvt.FusedMlp(16, 32, 8)
    assert not m.fused
    x = torch.randn(3, 16)
    assert m(x).shape == (3, 8)


def test_swap_mlps():
    timm_layers = pytest.importorskip("timm.layers")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = timm_layers.Mlp(16, 64)
            self.blocks = torch.nn.Sequential(timm_layers.Mlp(16, 32), timm_layers.Mlp(16, 32, 8))

        def forward(self, x):
            return self.blocks(self.a(x))

    torch.manual_seed(0)
    net = Net()
    x = torch.randn(5, 16)
    before = net(x)
    fc1 = net.a.fc1
    with pytest.warns(UserWarning, match="out_features 8"):
        assert cvt.swap_mlps(net) == 2
    assert isinstance(net.a, cvt.FusedMlp) and isinstance(net.blocks[0], cvt.FusedMlp)
    assert isinstance(net.blocks[1], timm_layers.Mlp)
    assert net.a.fc1 is fc1  # same parameters: an optimizer made before the swap keeps working
    assert rel(net(x), before) < 1e-5


def test_torch_errors():
    a = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="shape mismatch"):
        cvfuse.matmul(a, torch.zeros(4, 3))
    with pytest.raises(TypeError, match="dtype"):
        cvfuse.matmul(a.long(), torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="approximate"):
        cvt.mlp(a, a, None, a, None, approximate="erf")


@pytest.mark.skipif(not cuda_ok(), reason="no CUDA GPU, or cvfuse built without CUDA")
def test_cuda_stream_and_no_host_sync():
    params = mlp_params((8, 64), 128, 512, torch.bfloat16, "cuda", seed=1, requires_grad=True)
    ref = [p.detach().double().requires_grad_() for p in params]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.cuda.stream(stream):
            out = cvt.mlp(*params)
            out.float().square().sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.current_stream().wait_stream(stream)
    out_ref = torch_mlp(*ref, "none")
    out_ref.square().sum().backward()
    assert rel(out, out_ref) < 2e-2
    for p, r in zip(params, ref):
        assert rel(p.grad, r.grad) < 4e-2
