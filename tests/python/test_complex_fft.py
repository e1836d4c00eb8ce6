"""complex64/complex128 tensors and the FFT lowerings (aten::_fft_r2c/_fft_c2c/_fft_c2r), compared with CPU."""

import cmath

import pytest
import torch

import torch_pjrt
from compare import DEVICE, check

TOL = {"rtol": 1e-5, "atol": 1e-5}


def no_fallback():
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def cplx(*shape, dtype=torch.complex64):
    return torch.randn(*shape, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_round_trip_and_print(dtype):
    x = cplx(3, 4, dtype=dtype)
    y = x.to(DEVICE)
    assert y.dtype == dtype and y.device.type == "tpu"
    assert torch.equal(y.cpu(), x)
    assert "j" in repr(y)


def test_complex_elementwise():
    torch_pjrt.reset_metrics()
    a, b = cplx(4, 5), cplx(4, 5)
    for fn in (torch.add, torch.sub, torch.mul, torch.div):
        check(fn, a, b, **TOL)
    check(torch.neg, a, **TOL)
    check(torch.exp, a, **TOL)
    check(torch.abs, a, **TOL)
    check(lambda x: x * 2.5 + 1, a, **TOL)  # real Python scalars promote to complex
    check(lambda x, y: x + y, a, torch.randn(4, 5), **TOL)  # complex64 + float32 -> complex64
    check(lambda x: x.t() * 3, a, **TOL)  # non-contiguous
    no_fallback()


def test_complex_promotion_with_double():
    check(lambda x, y: x * y, cplx(3), torch.randn(3, dtype=torch.float64), **TOL)  # -> complex128


def test_real_imag_conj_views():
    torch_pjrt.reset_metrics()
    a = cplx(3, 4)
    check(lambda x: x.real, a, **TOL)
    check(lambda x: x.imag, a, **TOL)
    check(lambda x: x.conj() * 1, a, **TOL)
    check(lambda x: x.conj().cpu().to(DEVICE) if x.device.type == "tpu" else x.conj().clone(), a, **TOL)
    check(torch.view_as_real, a, **TOL)
    check(lambda x: torch.view_as_complex(x), torch.randn(3, 4, 2), **TOL)
    no_fallback()


def test_view_as_real_write_through():
    a = cplx(2, 3)
    d = a.to(DEVICE)
    torch.view_as_real(a)[..., 1].mul_(2)
    torch.view_as_real(d)[..., 1].mul_(2)
    assert torch.allclose(d.cpu(), a)


def test_complex_and_polar():
    torch_pjrt.reset_metrics()
    re, im = torch.randn(3, 4), torch.randn(3, 4)
    check(torch.complex, re, im, **TOL)
    check(torch.complex, re.t(), im.t(), **TOL)
    check(torch.polar, torch.rand(3, 4), torch.randn(3, 4), **TOL)
    out_c, out_d = torch.empty(3, 4, dtype=torch.complex64), torch.empty(3, 4, dtype=torch.complex64, device=DEVICE)
    torch.complex(re, im, out=out_c)
    torch.complex(re.to(DEVICE), im.to(DEVICE), out=out_d)
    assert torch.equal(out_d.cpu(), out_c)
    no_fallback()


def test_cast_to_complex_and_back():
    x = torch.randn(3, 4)
    check(lambda t: t.cfloat(), x, **TOL)
    check(lambda t: t.cdouble(), x, **TOL)
    check(lambda t: t.to(torch.complex64).abs(), x, **TOL)


def test_complex_cpu_scalar_of_128_bits_is_a_runtime_scalar():
    """A zero-dim complex128 CPU tensor is a runtime scalar like any zero-dim CPU tensor: no recompile per value."""
    x = torch.randn(2, dtype=torch.complex128)
    compiles = None
    for v in (0.1 + 0.3j, -2.5 + 1e-3j):
        s = torch.tensor(v, dtype=torch.complex128)
        torch.testing.assert_close(torch.add(x.to(DEVICE), s).cpu(), torch.add(x, s), rtol=1e-12, atol=1e-12)
        if compiles is None:
            compiles = torch_pjrt.metrics()["compiles"]
    assert torch_pjrt.metrics()["compiles"] == compiles


REAL_IN = {
    "fft": lambda x: torch.fft.fft(x),
    "fft_n_ortho": lambda x: torch.fft.fft(x, n=7, norm="ortho"),
    "ifft": lambda x: torch.fft.ifft(x, dim=0),
    "rfft": lambda x: torch.fft.rfft(x),
    "rfft_forward": lambda x: torch.fft.rfft(x, n=4, norm="forward"),
    "rfft2": lambda x: torch.fft.rfft2(x),
    "rfftn_dims": lambda x: torch.fft.rfftn(x, dim=(1, 0)),
    "fft2": lambda x: torch.fft.fft2(x, norm="backward"),
    "ihfft": lambda x: torch.fft.ihfft(x),
    "ihfft2": lambda x: torch.fft.ihfft2(x, norm="ortho"),
    "irfft": lambda x: torch.fft.irfft(x),
    "hfft": lambda x: torch.fft.hfft(x, n=9),
}

COMPLEX_IN = {
    "fft": lambda x: torch.fft.fft(x),
    "ifft_ortho": lambda x: torch.fft.ifft(x, norm="ortho"),
    "fftn": lambda x: torch.fft.fftn(x),
    "fftn_4d": lambda x: torch.fft.fftn(x.reshape(2, 3, 2, 2)),
    "ifftn_forward": lambda x: torch.fft.ifftn(x, dim=(0, 1), norm="forward"),
    "irfft": lambda x: torch.fft.irfft(x),
    "irfft_n": lambda x: torch.fft.irfft(x, n=5, norm="ortho"),
    "irfft2": lambda x: torch.fft.irfft2(x),
    "irfftn_forward": lambda x: torch.fft.irfftn(x, s=(4, 6), norm="forward"),
    "hfft": lambda x: torch.fft.hfft(x),
    "hfft2": lambda x: torch.fft.hfft2(x),
}


@pytest.mark.parametrize("name", sorted(REAL_IN))
def test_fft_of_real_input(name):
    torch_pjrt.reset_metrics()
    x = torch.randn(6, 4)
    check(REAL_IN[name], x, grad=True, rtol=2e-5, atol=2e-5)
    check(REAL_IN[name], torch.randn(4, 6).t(), rtol=2e-5, atol=2e-5)  # non-contiguous
    no_fallback()


@pytest.mark.parametrize("name", sorted(COMPLEX_IN))
def test_fft_of_complex_input(name):
    torch_pjrt.reset_metrics()
    fn = COMPLEX_IN[name]
    x = cplx(6, 4)
    check(fn, x, rtol=2e-5, atol=2e-5)
    check(fn, cplx(4, 6).t(), rtol=2e-5, atol=2e-5)
    # Gradient with respect to a complex input, against CPU autograd.
    xc, xd = x.clone().requires_grad_(), x.to(DEVICE).requires_grad_()
    yc, yd = fn(xc), fn(xd)
    w = torch.randn(yc.shape, dtype=yc.dtype)
    yc.backward(w)
    yd.backward(w.to(DEVICE))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    no_fallback()


def test_fft_float64():
    check(lambda x: torch.fft.rfft(x), torch.randn(5, 8, dtype=torch.float64), rtol=1e-10, atol=1e-10)
    check(lambda x: torch.fft.ifft(x), cplx(5, 8, dtype=torch.complex128), rtol=1e-10, atol=1e-10)


def test_fft_out_variant():
    x = torch.randn(4, 8)
    out_c = torch.empty(4, 5, dtype=torch.complex64)
    out_d = out_c.to(DEVICE)
    torch.fft.rfft(x, out=out_c)
    torch.fft.rfft(x.to(DEVICE), out=out_d)
    torch.testing.assert_close(out_d.cpu(), out_c, **TOL)


def test_fft_bfloat16_refused_like_cpu():
    x = torch.randn(8, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError):
        torch.fft.rfft(x)
    with pytest.raises(RuntimeError):
        torch.fft.rfft(x.to(DEVICE))


def test_python_complex_scalars():
    torch_pjrt.reset_metrics()
    a = cplx(3, 4)
    check(lambda x: x * 1j, a, **TOL)
    check(lambda x: x + (0.5 - 2j), a, **TOL)
    check(lambda x: x * 1j, torch.randn(3, 4), **TOL)  # float32 tensor * Python complex -> complex64
    no_fallback()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.float64, torch.int64])
def test_python_complex_scalars_keep_double_precision(dtype):
    """A Python complex travels as complex128 and is rounded to the op's dtype in the program, as CPU rounds it: a
    complex128 tensor sees every bit of 0.1j or exp(0.7j), and foreach and in-place forms take it too."""
    torch_pjrt.reset_metrics()
    s = cmath.exp(0.7j)
    x = (torch.randn(3, 4, dtype=torch.complex128) * 4).to(dtype)
    cpu, tpu = x * s + 0.1j, (x.to(DEVICE) * s + 0.1j).cpu()
    assert tpu.dtype == cpu.dtype
    # complex128 results: far tighter than a scalar rounded to complex64 (~1e-8 relative) could meet
    tol = {"rtol": 1e-12, "atol": 1e-12} if cpu.dtype == torch.complex128 else {"rtol": 1e-6, "atol": 1e-6}
    torch.testing.assert_close(tpu, cpu, **tol)
    if dtype.is_complex:
        xs, ys = [x.clone(), x.clone() + 1], [x.to(DEVICE), x.to(DEVICE) + 1]
        torch._foreach_mul_(xs, 1.1 + 0.3j)
        torch._foreach_mul_(ys, 1.1 + 0.3j)
        for a, b in zip(ys, xs):
            torch.testing.assert_close(a.cpu(), b, **tol)
    no_fallback()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_angle_of_real(dtype):
    torch_pjrt.reset_metrics()
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), -float("inf")]).to(dtype)
    check(torch.angle, x, **TOL)
    check(torch.angle, torch.randn(4, 3).to(dtype).t(), grad=dtype == torch.float32, **TOL)
    check(torch.angle, torch.tensor([-3, 0, 4]), **TOL)  # int -> float
    no_fallback()


def test_angle_of_complex_and_out():
    torch_pjrt.reset_metrics()
    check(torch.angle, cplx(3, 4), **TOL)
    out_c, out_d = torch.empty(3), torch.empty(3, device=DEVICE)
    z = cplx(3)
    torch.angle(z, out=out_c)
    torch.angle(z.to(DEVICE), out=out_d)
    torch.testing.assert_close(out_d.cpu(), out_c, **TOL)
    no_fallback()


def test_polar_backward():
    torch_pjrt.reset_metrics()
    check(torch.polar, torch.rand(3, 4) + 0.1, torch.randn(3, 4), grad=True, **TOL)
    no_fallback()


def test_complex_sum_and_mean():
    torch_pjrt.reset_metrics()
    a = cplx(4, 5)
    check(lambda x: x.sum(), a, **TOL)
    check(lambda x: x.sum(0), a.t(), **TOL)
    check(lambda x: x.mean(1, keepdim=True), a, **TOL)
    no_fallback()


def test_empty_complex_backward():
    # A real view of an empty complex storage is re-typed on the device.
    check(torch.polar, torch.rand(0, 1, 3), torch.randn(0, 4, 3), grad=True, **TOL)


def test_writes_through_conjugate_and_negative_views_reach_the_storage():
    def write(x, y):
        x.conj().copy_(y)
        x.conj()[1:3].mul_(2)
        return x

    check(write, torch.randn(4, dtype=torch.complex64), torch.randn(4, dtype=torch.complex64))

    def write_neg(x):
        x._neg_view().copy_(torch.ones(5))
        return x

    check(write_neg, torch.randn(5))
