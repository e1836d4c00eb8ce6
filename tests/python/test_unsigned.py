"""uint16, uint32 and uint64 on tpu, for the ops CPU PyTorch implements for them, compared with CPU."""

import pytest
import torch

import torch_pjrt  # noqa: F401

DTYPES = [torch.uint16, torch.uint32, torch.uint64]
SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def values(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    top = {torch.uint16: 2**16, torch.uint32: 2**32, torch.uint64: 2**62}[dtype]
    big = torch.randint(0, top, (7, 5), generator=g, dtype=torch.int64)
    # Large values (the top bit where int64 holds it) and small ones, as the raw bits of the unsigned dtype.
    return big.to(dtype) if dtype != torch.uint64 else big.view(torch.uint64)


OPS = {
    "mul": lambda a, b: a * b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "sum": lambda a, b: a.sum(0),
    "prod": lambda a, b: (a & 7).prod(1),
    "cumsum": lambda a, b: a.cumsum(1),
    "to_float64": lambda a, b: a.double(),
    "to_int64": lambda a, b: a.to(torch.int64),
    "from_float": lambda a, b: (a & 1023).float().to(a.dtype),
    "cat": lambda a, b: torch.cat([a, b], 1),
    "stack": lambda a, b: torch.stack([a, b]),
    "clone_noncontiguous": lambda a, b: a.t().clone(),
    "index": lambda a, b: a[torch.tensor([0, 3, 3], device=a.device)],
    "slice_view": lambda a, b: a[1:5:2, ::2],
    "view_as_signed": lambda a, b: a.view(SIGNED[a.dtype]),
    "reshape": lambda a, b: a.reshape(5, 7),
    "sort": lambda a, b: a.sort(1).values,
    "unique": lambda a, b: torch.cat([a, a]).unique(),
    "full": lambda a, b: torch.full((3,), 12345, dtype=a.dtype, device=a.device),
    "zeros": lambda a, b: torch.zeros(4, dtype=a.dtype, device=a.device),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(OPS))
def test_unsigned_op_matches_cpu(dtype, op):
    a, b = values(dtype, 0), values(dtype, 1)
    want = OPS[op](a, b)
    got = OPS[op](a.to("tpu"), b.to("tpu"))
    assert got.device.type == "tpu" and got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unsigned_round_trip_item_tolist_and_in_place(dtype):
    a = values(dtype, 2)
    d = a.to("tpu")
    assert d[2, 3].item() == a[2, 3].item()
    assert d.tolist() == a.tolist()
    d[1] = a[0].to("tpu")
    a[1] = a[0]
    d.mul_(d)
    a.mul_(a)
    assert torch.equal(d.cpu(), a)


def test_unsigned_float_conversion_wraps_as_cpu():
    x = torch.tensor([300.0, -5.0, 70000.0, 12.75])
    for dtype in (torch.uint16, torch.uint32):
        assert torch.equal(x.to("tpu").to(dtype).cpu(), x.to(dtype))
