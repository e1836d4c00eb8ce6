"""Linear algebra solvers and factorizations (csrc/lowering/linalg_factor.cc, vdot/cross/addr in linalg.cc)
against CPU PyTorch.

Each case runs on CPU and on tpu with the same inputs and compares values, dtypes, shapes and gradients
(compare.check). Factorizations are compared element by element, so pivots, signs of R and the Householder
reflectors must match LAPACK's conventions. No op may take the CPU fallback.
"""

import pytest
import torch

import torch_pjrt
from compare import DEVICE, check


@pytest.fixture(autouse=True)
def no_fallback():
    torch_pjrt.reset_metrics()
    yield
    fallbacks = torch_pjrt.metrics()["fallback_ops"]
    assert not fallbacks, f"ops fell back to CPU: {fallbacks}"


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def well_conditioned(*shape):
    n = shape[-1]
    return torch.randn(*shape) + n * torch.eye(n)


def spd(*shape):
    a = torch.randn(*shape)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


def noncontig(x):
    """The same values as a transposed (non-contiguous) view."""
    return x.mT.contiguous().mT


# ----------------------------------------------------------------------------- triangular solves


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(upper, left, unit):
    a = well_conditioned(2, 4, 4)
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit), a, b, grad=True)


def test_solve_triangular_broadcast_noncontig_out():
    a, b = noncontig(well_conditioned(4, 4)), torch.randn(3, 4, 2)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), a, b, grad=True)
    out = torch.empty(3, 4, 2, device=DEVICE)
    torch.linalg.solve_triangular(a.to(DEVICE), b.to(DEVICE), upper=True, out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.solve_triangular(a, b, upper=True))


@pytest.mark.parametrize("transpose", [True, False])
def test_triangular_solve(transpose):
    check(
        lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=transpose),
        torch.randn(2, 3, 2),
        well_conditioned(3, 3),
        grad=True,
    )


def test_solve_triangular_errors():
    with pytest.raises(RuntimeError):
        torch.linalg.solve_triangular(torch.randn(3, 3, device=DEVICE), torch.randn(4, 2, device=DEVICE), upper=True)
    with pytest.raises(RuntimeError):
        torch.linalg.solve_triangular(torch.randn(3, 4, device=DEVICE), torch.randn(3, 2, device=DEVICE), upper=True)


# ----------------------------------------------------------------------------- Cholesky


@pytest.mark.parametrize("upper", [True, False])
def test_cholesky(upper):
    a = spd(2, 4, 4)
    check(lambda a: torch.linalg.cholesky(a, upper=upper), a, grad=True)
    check(lambda a: torch.cholesky(a, upper=upper), noncontig(a), grad=True)
    check(lambda a: torch.linalg.cholesky_ex(a, upper=upper), a)


def test_cholesky_info_and_out():
    bad = torch.tensor([[[-1.0, 0.0], [0.0, 1.0]], [[4.0, 2.0], [2.0, 3.0]]])
    check(lambda a: torch.linalg.cholesky_ex(a).info, bad)
    later = spd(2, 5, 5)
    later[:, 3, 3] = -100  # the leading minor of order 4 fails
    check(lambda a: torch.linalg.cholesky_ex(a).info, later)
    check(torch.linalg.cholesky_ex, torch.tensor([[1.0, 2.0], [2.0, 1.0]]))  # LAPACK leaves the failed pivot
    with pytest.raises(RuntimeError, match="leading minor of order 4"):
        torch.linalg.cholesky(later.to(DEVICE))
    out = torch.empty(3, 3, device=DEVICE)
    a = spd(3, 3)
    torch.linalg.cholesky(a.to(DEVICE), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.cholesky(a))


@pytest.mark.parametrize("upper", [True, False])
def test_cholesky_solve_and_inverse(upper):
    f = torch.linalg.cholesky(spd(2, 3, 3), upper=upper)
    check(lambda b, f: torch.cholesky_solve(b, f, upper=upper), torch.randn(2, 3, 2), f, grad=True)
    check(lambda b, f: torch.cholesky_solve(b, f, upper=upper), torch.randn(3, 2), noncontig(f[0]))
    check(lambda f: torch.cholesky_inverse(f, upper=upper), f, grad=True)


# ----------------------------------------------------------------------------- LU


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (2, 3, 5), (1, 1)])
def test_lu_factor(shape):
    a = torch.randn(shape)
    check(torch.linalg.lu_factor_ex, a)
    check(torch.linalg.lu_factor_ex, noncontig(a))
    check(torch.linalg.lu, a, grad=True)


def test_lu_singular_info():
    a = torch.tensor(
        [[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]]
    )
    check(torch.linalg.lu_factor_ex, a)


@pytest.mark.parametrize("unpack", [(True, True), (True, False), (False, True), (False, False)])
def test_lu_unpack(unpack):
    lu, piv = torch.linalg.lu_factor(torch.randn(3, 5, 4))
    check(lambda lu, p: torch.lu_unpack(lu, p, *unpack), lu, piv)


def test_lu_unpack_out_and_grad():
    lu, piv = torch.linalg.lu_factor(torch.randn(4, 3))
    check(lambda lu, p: torch.lu_unpack(lu, p), lu, piv, grad=True)
    outs = [torch.empty(0, device=DEVICE) for _ in range(3)]
    torch.lu_unpack(lu.to(DEVICE), piv.to(DEVICE), out=tuple(outs))
    for o, e in zip(outs, torch.lu_unpack(lu, piv)):
        torch.testing.assert_close(o.cpu(), e)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve(left, adjoint):
    a = well_conditioned(2, 4, 4)
    lu, piv = torch.linalg.lu_factor(a)
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    check(lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, left=left, adjoint=adjoint), lu, piv, b, grad=True)
    check(
        lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, left=left, adjoint=adjoint), noncontig(lu), piv, noncontig(b)
    )


def test_solve():
    a = well_conditioned(2, 4, 4)
    check(torch.linalg.solve, a, torch.randn(2, 4, 3), grad=True)
    check(torch.linalg.solve, a, torch.randn(4), grad=True)  # vector right-hand side, broadcast
    check(torch.linalg.solve, a, torch.randn(2, 4), grad=True)  # batch of vectors
    check(lambda a, b: torch.linalg.solve(a, b, left=False), noncontig(a), torch.randn(2, 3, 4), grad=True)
    check(torch.linalg.solve_ex, well_conditioned(4, 4), torch.randn(3, 4, 2))
    out = torch.empty(0, device=DEVICE)
    torch.linalg.solve(a.to(DEVICE), torch.randn(2, 4, 3).to(DEVICE), out=out)
    assert out.shape == (2, 4, 3)


def test_inv():
    a = well_conditioned(3, 4, 4)
    check(torch.linalg.inv, a, grad=True)
    check(torch.linalg.inv_ex, noncontig(a))
    check(lambda a: torch.linalg.inv_ex(a).info, torch.zeros(2, 2))  # singular: info 1, like LAPACK
    check(lambda a: torch.linalg.tensorinv(a, ind=1), well_conditioned(6, 6).reshape(6, 2, 3))


def test_det_slogdet():
    a = torch.randn(3, 4, 4)
    check(torch.linalg.det, a, grad=True)
    check(torch.linalg.slogdet, a, grad=True)
    check(torch.logdet, spd(2, 3, 3), grad=True)
    # ATen factors A^T only for a contiguous A, and the backward depends on it (kContiguityFlag in ops.cc).
    check(torch.linalg.det, noncontig(a), grad=True)
    check(torch.linalg.slogdet, noncontig(a), grad=True)
    check(torch.ops.aten._linalg_det, noncontig(a))
    check(torch.linalg.slogdet, torch.zeros(2, 2))  # singular: sign 0, logabsdet -inf
    check(torch.ops.aten._linalg_det, a)


# ----------------------------------------------------------------------------- QR


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (4, 4)])
def test_geqrf(shape):
    a = torch.randn(shape)
    check(torch.geqrf, a)
    check(torch.geqrf, noncontig(a))


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(mode):
    a = torch.randn(2, 5, 3)
    check(lambda a: torch.linalg.qr(a, mode), a, grad=mode == "reduced")  # CPU refuses the others
    check(lambda a: torch.linalg.qr(a, mode), noncontig(a.mT))


def test_qr_out():
    a = torch.randn(4, 3)
    q, r = torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE)
    torch.linalg.qr(a.to(DEVICE), out=(q, r))
    eq, er = torch.linalg.qr(a)
    torch.testing.assert_close(q.cpu(), eq)
    torch.testing.assert_close(r.cpu(), er)


def test_householder_product():
    a, tau = torch.geqrf(torch.randn(2, 5, 3))
    check(torch.linalg.householder_product, a, tau, grad=True)
    check(torch.linalg.householder_product, noncontig(a[0]), tau[0, :2])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr(left, transpose):
    a, tau = torch.geqrf(torch.randn(2, 5, 3))
    c = torch.randn(2, 5, 4) if left else torch.randn(2, 4, 5)
    check(lambda a, t, c: torch.ormqr(a, t, c, left=left, transpose=transpose), a, tau, c, grad=True)
    check(lambda a, t, c: torch.ormqr(a, t, c, left=left, transpose=transpose), a, tau, noncontig(c))


# ----------------------------------------------------------------------------- vdot, cross, addr


def test_vdot():
    check(torch.vdot, torch.randn(5), torch.randn(5), grad=True)
    check(torch.vdot, torch.randn(10)[::2], torch.randn(5), grad=True)
    check(lambda x, y: torch.linalg.vecdot(x, y), torch.randn(3, 4), torch.randn(3, 4), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_cross(dtype):
    x, y = (torch.randn(4, 3) * 4).to(dtype), (torch.randn(1, 3) * 4).to(dtype)
    grad = dtype.is_floating_point
    check(torch.linalg.cross, x, y, grad=grad)
    check(lambda x, y: torch.cross(x, y, dim=0), x.mT, y.expand(4, 3).mT, grad=grad)
    out = torch.empty(4, 3, dtype=dtype, device=DEVICE)
    torch.linalg.cross(x.to(DEVICE), y.to(DEVICE), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.cross(x, y))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("beta", [0, 0.5, 2])
def test_addr(dtype, beta):
    s = (torch.randn(5, 7) * 3).to(dtype)
    v1, v2 = (torch.randn(5) * 3).to(dtype), (torch.randn(7) * 3).to(dtype)
    if dtype == torch.int64:
        beta = int(beta)
        alpha = 3
    else:
        alpha = 0.7
        s[0, 0] = float("nan")
    fn = lambda s, a, b: torch.addr(s, a, b, beta=beta, alpha=alpha)  # noqa: E731
    if dtype != torch.float32:  # the same roundings as ATen's kernel (XLA may fuse float32 into an fma)
        check(fn, s, v1, v2, rtol=0, atol=0)
    check(fn, s, v1, v2, grad=dtype.is_floating_point)
    check(fn, s[:, :1], v1, v2)  # broadcast, non-contiguous self
    x = s.to(DEVICE)
    x.addr_(v1.to(DEVICE), v2.to(DEVICE), beta=beta, alpha=alpha)
    torch.testing.assert_close(x.cpu(), s.clone().addr_(v1, v2, beta=beta, alpha=alpha), equal_nan=True)


def test_complex_inputs_take_the_cpu_fallback():
    # No native complex LU: the lowering declines (NotLowered) and the call runs on CPU, counted as a fallback.
    a, b = torch.randn(3, 3, dtype=torch.complex64), torch.randn(3, 2, dtype=torch.complex64)
    expected = torch.linalg.solve(a, b)
    torch.testing.assert_close(torch.linalg.solve(a.to(DEVICE), b.to(DEVICE)).cpu(), expected, rtol=1e-4, atol=1e-4)
    assert torch_pjrt.metrics()["fallback_ops"] == {"aten::_linalg_solve_ex": 1}
    torch_pjrt.reset_metrics()
