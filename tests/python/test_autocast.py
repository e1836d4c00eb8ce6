"""torch.autocast("tpu"): PyTorch's op lists and cast policies on the tpu device, bfloat16 by default.

Values are compared with a float64 reference: an op that autocast runs in bfloat16 may be at most twice as far from it
as CPU's bfloat16 computation of the same op (plus a floor), and an op kept in float32 as close as float32 CPU.
"""

from __future__ import annotations

import os
import sys

import torch

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def near(tpu: torch.Tensor, cpu_low: torch.Tensor, ref64: torch.Tensor, floor: float = 1e-6):
    e_tpu = (tpu.cpu().double() - ref64).abs().max().item()
    e_cpu = (cpu_low.double() - ref64).abs().max().item()
    assert e_tpu <= 2 * e_cpu + floor * ref64.abs().max().item(), (e_tpu, e_cpu)


def test_default_dtype_is_bfloat16_and_helpers():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.tpu.get_autocast_dtype() == torch.bfloat16
    assert not torch.tpu.is_autocast_enabled()
    with torch.autocast("tpu"):
        assert torch.tpu.is_autocast_enabled()
        with torch.autocast("tpu", enabled=False):
            assert not torch.tpu.is_autocast_enabled()
    assert not torch.tpu.is_autocast_enabled()


def test_torch_tpu_private_autocast_names_of_google_torchtpu():
    assert torch.tpu._get_autocast_dtype() == torch.get_autocast_dtype("tpu")
    torch.tpu._set_autocast_dtype(torch.float16)
    try:
        with torch.autocast("tpu"):
            assert torch.tpu._is_autocast_enabled()
            assert (torch.ones(2, 2, device="tpu") @ torch.ones(2, 2, device="tpu")).dtype == torch.float16
        torch.tpu._set_autocast_enabled(True)
        assert torch.is_autocast_enabled("tpu")
    finally:
        torch.tpu._set_autocast_enabled(False)
        torch.tpu._set_autocast_dtype(torch.bfloat16)
    assert not torch.tpu._is_autocast_enabled()


def test_matmul_linear_conv_run_in_bfloat16():
    a, b = torch.randn(32, 48), torch.randn(48, 16)
    w, bias = torch.randn(8, 48), torch.randn(8)
    img, k = torch.randn(2, 3, 10, 10), torch.randn(4, 3, 3, 3)
    ta, tb, tw, tbias, timg, tk = (t.to("tpu") for t in (a, b, w, bias, img, k))
    with torch.autocast("tpu"):
        mm = ta @ tb
        lin = torch.nn.functional.linear(ta, tw, tbias)
        conv = torch.nn.functional.conv2d(timg, tk)
    assert mm.dtype == lin.dtype == conv.dtype == torch.bfloat16
    bf = torch.bfloat16
    near(mm, (a.to(bf) @ b.to(bf)), a.double() @ b.double())
    near(
        lin,
        torch.nn.functional.linear(a.to(bf), w.to(bf), bias.to(bf)),
        torch.nn.functional.linear(a.double(), w.double(), bias.double()),
    )
    near(conv, torch.nn.functional.conv2d(img.to(bf), k.to(bf)), torch.nn.functional.conv2d(img.double(), k.double()))


def test_float32_policy_ops_and_promotion():
    x = torch.randn(6, 20)
    tx = x.to("tpu").to(torch.bfloat16)
    with torch.autocast("tpu"):
        soft = torch.softmax(tx, -1)
        ln = torch.nn.functional.layer_norm(tx, (20,))
        loss = torch.nn.functional.mse_loss(tx, torch.zeros_like(tx))
        summed = tx.sum()
        promoted = torch.addcmul(torch.ones(6, 20, device="tpu"), tx, tx)
    assert soft.dtype == ln.dtype == loss.dtype == summed.dtype == promoted.dtype == torch.float32
    xb = x.to(torch.bfloat16).double()  # the input autocast saw, exactly
    torch.testing.assert_close(soft.cpu().double(), torch.softmax(xb, -1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ln.cpu().double(), torch.nn.functional.layer_norm(xb, (20,)), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss.cpu().double(), (xb**2).mean(), rtol=1e-5, atol=1e-6)


def test_gradients_reach_float32_parameters():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    tpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    x = torch.randn(8, 16)
    with torch.autocast("tpu"):
        out = tpu(x.to("tpu"))
    assert out.dtype == torch.bfloat16
    out.float().square().sum().backward()
    ref = cpu.double()(x.double()).square().sum()
    ref.backward()
    for p, q in zip(tpu.parameters(), cpu.parameters(), strict=True):
        assert p.grad.dtype == torch.float32
        g, r = p.grad.cpu().double(), q.grad
        assert (g - r).norm() <= 0.05 * r.norm(), (g - r).norm() / r.norm()  # bfloat16's 8 bits, through two layers


def test_float16_when_asked():
    a = torch.randn(8, 8)
    with torch.autocast("tpu", dtype=torch.float16):
        out = a.to("tpu") @ a.to("tpu")
    assert out.dtype == torch.float16
    near(out, a.half().float() @ a.half().float(), a.double() @ a.double(), floor=1e-3)


def test_gpt_training_under_bfloat16_autocast_tracks_float32():
    """30 steps of examples/train_gpt.py's GPT with bf16 autocast stay within 0.02 of the float32 run's losses.

    Measured: 7e-4 at most (float32 losses fall from 4.3 to 0.16).
    """
    import train_gpt

    torch_pjrt.reset_metrics()  # fallbacks counted by earlier tests in this process are not this test's

    def run(amp: bool) -> list[float]:
        torch.manual_seed(0)
        model = train_gpt.GPT().to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        gen = torch.Generator().manual_seed(0)
        losses = []
        for _ in range(30):
            x, y = (t.to("tpu") for t in train_gpt.batch(gen, 16, 32, 64))
            with torch.autocast("tpu", enabled=amp):
                _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    f32, bf16 = run(False), run(True)
    assert f32[-1] < 0.5 * f32[0]
    assert max(abs(a - b) for a, b in zip(f32, bf16, strict=True)) < 0.02, (f32, bf16)
    assert torch_pjrt.metrics()["fallback_ops"] == {}
