"""torch.set_float32_matmul_precision on tpu: the precision_config of float32 matmuls and convolutions."""

import pytest
import torch

import torch_pjrt

PRECISION_TEXT = {"highest": "precision HIGHEST", "high": "precision HIGH>", "medium": None}


@pytest.fixture
def restore_precision():
    previous = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(previous)


def pending_text(fn):
    with torch_pjrt.eager_mode("fused"):
        t = fn()
        text = torch_pjrt.stablehlo(t)
        torch_pjrt.synchronize()
    return text


@pytest.mark.parametrize("setting", ["highest", "high", "medium"])
def test_matmul_and_conv_carry_the_precision(setting, restore_precision):
    torch.set_float32_matmul_precision(setting)
    a = torch.randn(16, 32, device="tpu")
    x = torch.randn(2, 3, 8, 8, device="tpu")
    w = torch.randn(4, 3, 3, 3, device="tpu")
    for text in (pending_text(lambda: a @ a.t()), pending_text(lambda: torch.nn.functional.conv2d(x, w))):
        want = PRECISION_TEXT[setting]
        if want is None:
            assert "precision_config" not in text
        else:
            assert want in text, text


def test_precision_changes_the_program_and_results_stay_float32(restore_precision):
    a64 = torch.randn(64, 48, dtype=torch.float64)
    a = a64.float()
    want = a64 @ a64.t()
    errors = {}
    for setting in ("highest", "medium", "highest"):
        torch.set_float32_matmul_precision(setting)
        before = torch_pjrt.metrics()["compiles"]
        got = (a.to("tpu") @ a.to("tpu").t()).cpu()
        errors.setdefault(setting, []).append(torch_pjrt.metrics()["compiles"] - before)
        # What float32 can promise for a 48-term dot product, whichever platform ran it.
        assert torch.allclose(got.double(), want, rtol=0, atol=48 * 2**-23 * a64.abs().max().item() ** 2 * 4)
    # The first "highest" and "medium" compiled; coming back to "highest" found its program again.
    assert errors["highest"][1] == 0
    # The same product on CPU float32, for dtype and shape.
    assert got.dtype == (a @ a.t()).dtype and got.shape == (64, 64)
