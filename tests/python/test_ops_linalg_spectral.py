"""Symmetric eigendecomposition and SVD (csrc/lowering/linalg_spectral.cc, cyclic Jacobi) against CPU PyTorch.

Eigenvector and singular vector signs are Jacobi's, not LAPACK's, so values and gradients are compared through
sign-invariant functions (eigenvalues, singular values, reconstructions, projectors, pinv, norms); vectors are
checked for orthonormality and reconstruction. No op may take the CPU fallback, except complex inputs.
"""

import pytest
import torch

import torch_pjrt
from compare import DEVICE, check


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


@pytest.fixture
def no_fallback():
    torch_pjrt.reset_metrics()
    yield
    fallbacks = torch_pjrt.metrics()["fallback_ops"]
    assert not fallbacks, f"ops fell back to CPU: {fallbacks}"


def sym(*shape, dtype=torch.float32):
    a = torch.randn(*shape, dtype=dtype)
    return a + a.mT


def noncontig(x):
    return x.mT.contiguous().mT


# ----------------------------------------------------------------------------- eigh


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 4, 4), (2, 1, 6, 6)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh(shape, uplo):
    check(torch.linalg.eigvalsh, torch.randn(*shape), UPLO=uplo, grad=True)


@pytest.mark.usefixtures("no_fallback")
def test_eigvalsh_noncontiguous_f64_and_out():
    check(torch.linalg.eigvalsh, noncontig(sym(4, 4)))
    check(torch.linalg.eigvalsh, sym(2, 5, 5, dtype=torch.float64))
    a = sym(4, 4)
    out = torch.empty(4, device=DEVICE)
    torch.linalg.eigvalsh(a.to(DEVICE), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.eigvalsh(a))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(4, 4), (2, 6, 6)])
def test_eigh_vectors(shape):
    a = sym(*shape)
    w, v = torch.linalg.eigh(a.to(DEVICE))
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(a))
    eye = torch.eye(shape[-1]).expand_as(a)
    torch.testing.assert_close((v.mT @ v).cpu(), eye, atol=1e-5, rtol=0)
    torch.testing.assert_close((v @ torch.diag_embed(w) @ v.mT).cpu(), a, atol=1e-5, rtol=1e-5)


@pytest.mark.usefixtures("no_fallback")
def test_eigh_sign_invariant_grad():
    # v diag(f(w)) v^T does not depend on the signs of the eigenvectors.
    def fn(a):
        w, v = torch.linalg.eigh(a)
        return v @ torch.diag_embed(w.exp()) @ v.mT

    check(fn, sym(5, 5), grad=True, atol=1e-4, rtol=1e-4)


@pytest.mark.usefixtures("no_fallback")
def test_eigh_repeated_and_diagonal():
    check(torch.linalg.eigvalsh, torch.diag(torch.tensor([3.0, -1.0, 3.0, 0.0])))
    check(torch.linalg.eigvalsh, torch.zeros(3, 3))
    check(torch.linalg.eigvalsh, torch.ones(4, 4))


# ----------------------------------------------------------------------------- svd


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (6, 3), (3, 6), (2, 4, 4), (2, 3, 7, 2), (0, 3), (2, 0, 0)])
def test_svdvals(shape):
    check(torch.linalg.svdvals, torch.randn(*shape), grad=0 not in shape)


@pytest.mark.usefixtures("no_fallback")
def test_svdvals_noncontiguous_f64_and_out():
    check(torch.linalg.svdvals, noncontig(torch.randn(5, 3)))
    check(torch.linalg.svdvals, torch.randn(2, 4, 6, dtype=torch.float64))
    a = torch.randn(4, 3)
    out = torch.empty(3, device=DEVICE)
    torch.linalg.svdvals(a.to(DEVICE), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.svdvals(a))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 7)])
def test_svd_vectors(shape):
    a = torch.randn(*shape)
    u, s, vh = torch.linalg.svd(a.to(DEVICE), full_matrices=False)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a))
    k = min(shape[-2:])
    eye = torch.eye(k).expand(*shape[:-2], k, k)
    torch.testing.assert_close((u.mT @ u).cpu(), eye, atol=1e-5, rtol=0)
    torch.testing.assert_close((vh @ vh.mT).cpu(), eye, atol=1e-5, rtol=0)
    torch.testing.assert_close((u @ torch.diag_embed(s) @ vh).cpu(), a, atol=1e-5, rtol=1e-5)


@pytest.mark.usefixtures("no_fallback")
def test_svd_rank_deficient():
    a = torch.randn(5, 2) @ torch.randn(2, 4)
    check(torch.linalg.svdvals, a, atol=1e-5, rtol=1e-5)
    check(torch.linalg.matrix_rank, a)
    check(torch.linalg.pinv, a, atol=1e-4, rtol=1e-4)
    check(torch.linalg.svdvals, torch.zeros(3, 4))


@pytest.mark.usefixtures("no_fallback")
def test_sign_invariant_functions():
    a = torch.randn(2, 5, 4)
    check(torch.linalg.pinv, a, grad=True, atol=1e-4, rtol=1e-4)
    check(torch.linalg.matrix_norm, a, ord="nuc", grad=True)
    check(torch.linalg.matrix_norm, a, ord=2, grad=True)
    check(torch.linalg.matrix_norm, a, ord=-2, grad=True)
    check(torch.linalg.cond, torch.randn(4, 4))
    check(torch.linalg.matrix_rank, sym(4, 4), hermitian=True)
    check(torch.linalg.pinv, sym(4, 4), hermitian=True, atol=1e-4, rtol=1e-4)


# ----------------------------------------------------------------------------- dtypes and errors


def test_complex_takes_the_cpu_fallback():
    a = torch.randn(3, 3, dtype=torch.complex64)
    torch_pjrt.reset_metrics()
    check(torch.linalg.svdvals, a)
    check(torch.linalg.eigvalsh, a + a.mH)
    assert set(torch_pjrt.metrics()["fallback_ops"]) == {"aten::_linalg_svd", "aten::_linalg_eigh"}


@pytest.mark.parametrize("fn", [torch.linalg.svdvals, torch.linalg.eigvalsh])
def test_low_precision_raises_like_cpu(fn):
    a = torch.randn(3, 3, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError):
        fn(a)
    with pytest.raises(RuntimeError):
        fn(a.to(DEVICE))


def test_bad_arguments_raise():
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.eigvalsh(torch.randn(3, 4, device=DEVICE))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.linalg.svdvals(torch.randn(3, device=DEVICE))
