"""A small timm ViT trained 20 steps with and without cvfuse.torch.swap_mlps, from the same seed:
the losses agree within the dtype's tolerance (float32; bfloat16 autocast)."""

import copy

import pytest

torch = pytest.importorskip("torch")
vision_transformer = pytest.importorskip("timm.models.vision_transformer")

import cvfuse.torch as cvt  # noqa: E402
from conftest import TORCH_DEVICES  # noqa: E402

STEPS = 20


def small_vit():
    # ViT-Tiny's width and heads, 2 blocks, 32x32 images in 8x8 patches: seconds on a CPU
    return vision_transformer.VisionTransformer(
        img_size=32, patch_size=8, embed_dim=192, depth=2, num_heads=3, mlp_ratio=4.0, num_classes=10
    )


def train(model, device, autocast_dtype):
    gen = torch.Generator().manual_seed(1234)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(STEPS):
        images = torch.randn(8, 3, 32, 32, generator=gen).to(device)
        labels = torch.randint(0, 10, (8,), generator=gen).to(device)
        with torch.autocast(device_type=device, dtype=autocast_dtype or torch.float32,
                            enabled=autocast_dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("device", TORCH_DEVICES)
@pytest.mark.parametrize("autocast_dtype,tol", [(None, 2e-3), (torch.bfloat16, 1e-2)], ids=["f32", "bf16"])
def test_vit_training_matches(device, autocast_dtype, tol):
    torch.manual_seed(0)
    base = small_vit().to(device)
    fused = copy.deepcopy(base)
    assert cvt.swap_mlps(fused) == 2
    assert all(isinstance(b.mlp, cvt.FusedMlp) for b in fused.blocks)
    ref_losses = train(base, device, autocast_dtype)
    losses = train(fused, device, autocast_dtype)
    assert all(l == l for l in losses)  # no NaN
    for step, (a, b) in enumerate(zip(losses, ref_losses)):
        assert abs(a - b) <= tol * max(abs(b), 1.0), (step, losses, ref_losses)
