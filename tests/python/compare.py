"""Run the same function on CPU and on tpu and compare, values and dtypes.

``check(fn, *args)`` moves every tensor in ``args`` to tpu (keeping its
strides, so non-contiguous views stay non-contiguous), runs ``fn`` on both
devices, and compares every tensor in the results. With ``grad=True`` the
floating inputs require grad and the gradients are compared as well.

``compare(fn, *args)`` is check() for the op test files that also test refusals: where CPU raises, the tpu must
raise too, and no op may take the CPU fallback (``fallback_guard()``, which their autouse fixture runs, lets a test
name ops it allows).
"""

from __future__ import annotations

import pytest
import torch

import torch_pjrt

DEVICE = torch.device("tpu")

# (rtol, atol) per dtype.
TOLERANCES = {
    torch.float32: (1.3e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


def to_device(x, device):
    """Moves tensors (nested in lists/tuples/dicts) to ``device``, preserving strides."""
    if isinstance(x, torch.Tensor):
        if x.device == device:
            return x
        y = _same_view(x.detach(), lambda storage: storage.to(device))
        if x.requires_grad:
            y.requires_grad_(True)
        return y
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(e, device) for e in x)
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    return x


def _same_view(x, move):
    """``x`` recreated over ``move(its whole storage)``, with its shape, strides and offset."""
    if x.numel() == 0 or _is_whole_storage(x):
        return move(x).detach()
    storage = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
    with torch.no_grad():
        return move(storage).as_strided(x.shape, x.stride(), x.storage_offset())


def _is_whole_storage(x):
    return x.is_contiguous() and x.storage_offset() == 0 and x.untyped_storage().nbytes() == x.numel() * x.itemsize


def flatten(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in flatten(e)]
    return [x]


def assert_close(actual, expected, rtol=None, atol=None, msg=""):
    a_list, e_list = flatten(actual), flatten(expected)
    assert len(a_list) == len(e_list), f"{msg}: {len(a_list)} results vs {len(e_list)}"
    for a, e in zip(a_list, e_list):
        if not isinstance(e, torch.Tensor):
            assert a == e or (a != a and e != e), f"{msg}: {a} != {e}"
            continue
        assert isinstance(a, torch.Tensor), f"{msg}: expected a tensor, got {type(a)}"
        assert a.device.type == "tpu", f"{msg}: result on {a.device}, expected tpu"
        assert a.dtype == e.dtype, f"{msg}: dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"{msg}: shape {tuple(a.shape)} != {tuple(e.shape)}"
        r, t = TOLERANCES.get(e.dtype, (0, 0))
        torch.testing.assert_close(
            a.cpu(),
            e,
            rtol=rtol if rtol is not None else r,
            atol=atol if atol is not None else t,
            equal_nan=True,
            msg=msg,
        )


def check(fn, *args, grad=False, rtol=None, atol=None, **kwargs):
    """Runs ``fn`` on CPU and tpu with the same inputs and compares the results (and gradients)."""
    cpu_args = [
        _same_view(a.detach(), torch.clone).requires_grad_(grad and a.is_floating_point())
        if isinstance(a, torch.Tensor)
        else a
        for a in args
    ]
    dev_args = [to_device(a, DEVICE) for a in cpu_args]
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*dev_args, **kwargs)
    assert_close(actual, expected, rtol, atol, msg=getattr(fn, "__name__", "fn"))
    if grad:
        outs_e = [t for t in flatten(expected) if isinstance(t, torch.Tensor) and t.requires_grad]
        outs_a = [t for t in flatten(actual) if isinstance(t, torch.Tensor) and t.requires_grad]
        if not outs_e:
            return actual
        weights = [torch.randn(t.shape, dtype=t.dtype) for t in outs_e]
        torch.autograd.backward(outs_e, weights)
        torch.autograd.backward(outs_a, [w.to(DEVICE) for w in weights])
        for ca, da in zip(cpu_args, dev_args):
            if isinstance(ca, torch.Tensor) and ca.requires_grad:
                assert da.grad is not None, "no gradient on tpu input"
                assert_close(da.grad, ca.grad, rtol, atol, msg="grad")
    return actual


# ---- compare(): check() plus refusals, with no CPU fallback

# The ops the running test lets fall back to CPU, and whether a comparison failed (its report may print tpu tensors,
# which takes the fallback).
_fallback = {"allowed": set(), "failed": False}


def fallback_guard():
    """The body of an autouse fixture: fails the test if an op it did not allow ran through the CPU fallback.

    Yields the set of allowed op names, which a test may add to (``no_fallback.update(...)``).
    """
    _fallback["allowed"], _fallback["failed"] = set(), False
    torch_pjrt.reset_metrics()
    yield _fallback["allowed"]
    if not _fallback["failed"]:
        assert_no_fallback()


def assert_no_fallback():
    fallbacks = torch_pjrt.metrics()["fallback_ops"]
    assert set(fallbacks) <= _fallback["allowed"], f"ops fell back to CPU: {fallbacks}"


def compare(fn, *args, grad=False, rtol=None, atol=None):
    """check(), except that where CPU raises, the tpu must raise as well. Returns CPU's error type or None.

    A dtype CPU has no kernel for (NotImplementedError) is not compared: the tpu may support more dtypes.
    """
    try:
        fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    except NotImplementedError:
        return NotImplementedError
    except Exception as e:  # noqa: BLE001 - any other error CPU raises, the tpu must raise too
        try:
            with pytest.raises(Exception):  # noqa: B017 - any error, as CPU raised one
                fn(*[to_device(a, DEVICE) for a in args])
                torch_pjrt.synchronize()
        except BaseException:
            _fallback["failed"] = True
            raise
        return type(e)
    try:
        check(fn, *args, grad=grad, rtol=rtol, atol=atol)
        torch_pjrt.synchronize()
        assert_no_fallback()
    except BaseException:
        _fallback["failed"] = True
        explain(fn, args, rtol, atol)
        raise
    return None


def explain(fn, args, rtol, atol):
    """Re-raises a value mismatch with torch.testing's full report (check() only names the function)."""
    try:
        expected = flatten(fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
        actual = flatten(fn(*[to_device(a, DEVICE) for a in args]))
        actual = [a.cpu() if isinstance(a, torch.Tensor) else a for a in actual]
    except Exception:  # noqa: BLE001 - keep the original error
        return
    for i, (a, e) in enumerate(zip(actual, expected)):
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and a.dtype == e.dtype and a.shape == e.shape:
            r, t = TOLERANCES.get(e.dtype, (0, 0))
            try:
                torch.testing.assert_close(
                    a, e, rtol=r if rtol is None else rtol, atol=t if atol is None else atol, equal_nan=True
                )
            except AssertionError as err:
                small = all(not isinstance(x, torch.Tensor) or x.numel() <= 30 for x in args)
                detail = f"\ninputs: {args}\ntpu: {a}\ncpu: {e}" if small else ""
                raise AssertionError(f"result {i}: {err}{detail}") from None
