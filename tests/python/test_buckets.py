"""Shape buckets: an op whose sizes change call after call compiles one program per bucket, not per size.

Every test compares with CPU PyTorch on the same inputs; the compile counts come from
torch_pjrt.metrics() ("compiles_by_name" counts the compiles of each op's one-op programs, and of fused regions under
"fused_region").
"""

import math

import pytest
import torch

import torch_pjrt

TPU = torch.device("tpu")


@pytest.fixture(params=["strict", "debug", "fused"])
def mode(request):
    with torch_pjrt.eager_mode(request.param):
        torch_pjrt.reset_metrics()
        yield request.param


def close(actual, expected, tol=1e-5):
    assert actual.device.type == "tpu"
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=tol)


def attention_decode(device, keys, values, queries):
    """One head group's greedy-decode attention with a KV cache grown by torch.cat each step."""
    kc, vc = keys[0].to(device), values[0].to(device)
    outs = []
    for k, v, q in zip(keys[1:], values[1:], queries):
        kc = torch.cat([kc, k.to(device)], dim=2)
        vc = torch.cat([vc, v.to(device)], dim=2)
        att = (q.to(device) @ kc.transpose(-2, -1)) * (1.0 / math.sqrt(kc.size(-1)))
        outs.append(torch.softmax(att, dim=-1) @ vc)
    return outs


def test_a_kv_cache_decode_compiles_a_bucket_per_octave(mode):
    steps, prompt, heads, dim = 128, 8, 4, 16
    g = torch.Generator().manual_seed(0)
    keys = [torch.randn(1, heads, prompt, dim, generator=g)] + [
        torch.randn(1, heads, 1, dim, generator=g) for _ in range(steps)
    ]
    values = [torch.randn(1, heads, prompt, dim, generator=g)] + [
        torch.randn(1, heads, 1, dim, generator=g) for _ in range(steps)
    ]
    queries = [torch.randn(1, heads, 1, dim, generator=g) for _ in range(steps)]
    expected = attention_decode("cpu", keys, values, queries)
    torch_pjrt.reset_metrics()
    actual = attention_decode(TPU, keys, values, queries)
    for a, e in zip(actual, expected):
        close(a, e)
    met = torch_pjrt.metrics()
    by_name = met["compiles_by_name"]
    # Each op structure: at most log2(128) + 4 programs (the cache grows from 9 to 136).
    budget = int(math.log2(steps)) + 4
    assert by_name.get("aten::cat", 0) <= budget, by_name
    assert by_name.get("aten::_softmax", 0) <= budget, by_name
    assert by_name.get("aten::bmm", 0) <= 2 * budget, by_name  # q @ k^T and att @ v
    assert met["bucket_hits"] > 5 * steps
    assert met["padded_elements"] > 0
    # Five op structures (two cats share one), and in fused mode nothing else: the calls whose sizes change
    # leave the regions, so no region takes a new size.
    assert met["compiles"] <= 5 * budget, met["compiles"]


def test_bucketed_ops_match_cpu_at_every_length(mode):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 5, generator=g)
    for n in range(5, 40, 3):
        a = torch.randn(3, n, 8, generator=g)
        b = torch.randn(3, n, 8, generator=g)
        row = torch.randn(8, generator=g)
        x, y, wt, r = a.to(TPU), b.to(TPU), w.to(TPU), row.to(TPU)
        close(torch.softmax(x, dim=1), torch.softmax(a, dim=1))
        close(torch.log_softmax(x.transpose(1, 2), dim=-1), torch.log_softmax(a.transpose(1, 2), dim=-1))
        close(torch.cat([x, y], dim=1), torch.cat([a, b], dim=1))
        close(torch.cat([x, y[:, :2]], dim=1), torch.cat([a, b[:, :2]], dim=1))
        close(torch.bmm(x, y.transpose(1, 2)), torch.bmm(a, b.transpose(1, 2)))
        close(torch.bmm(x.transpose(1, 2), y), torch.bmm(a.transpose(1, 2), b))
        close(x[0] @ wt, a[0] @ w)
        close(torch.addmm(r[:5], x[1], wt), torch.addmm(row[:5], a[1], w))
        close(x * 0.5 + r, a * 0.5 + row)
        close(torch.tanh(x[:, ::2]), torch.tanh(a[:, ::2]))
        close(torch.nn.functional.gelu(x - y), torch.nn.functional.gelu(a - b))
        close(torch.where(x > 0, x, y), torch.where(a > 0, a, b))
        close(x.masked_fill(y > 0.5, -1.0), a.masked_fill(b > 0.5, -1.0))
        close(x.transpose(0, 1).clone(), a.transpose(0, 1).clone())
        close((x.to(torch.float64) * 2).exp(), (a.to(torch.float64) * 2).exp(), tol=1e-12)
        ix, ib = (a * 10).to(torch.int64), (b * 10).to(torch.int64)
        assert torch.equal((ix.to(TPU) + ib.to(TPU)).cpu(), ix + ib)
    assert torch_pjrt.metrics()["bucket_hits"] > 0


def test_a_bucketed_result_is_a_plain_tensor(mode):
    g = torch.Generator().manual_seed(2)
    outs = []
    for n in range(10, 20):
        a = torch.randn(2, n, generator=g)
        outs.append((a, torch.softmax(a.to(TPU), dim=-1)))
    assert torch_pjrt.metrics()["bucket_hits"] > 0
    for a, y in outs:
        expected = torch.softmax(a, dim=-1)
        assert y.is_contiguous() and y.shape == a.shape
        close(y, expected)
        assert y.untyped_storage().nbytes() >= y.numel() * y.element_size()
        close(y.sum(dim=1), expected.sum(dim=1))
        close(y.view(-1)[1:], expected.view(-1)[1:])
        close(y.t().contiguous(), expected.t().contiguous())
        y.add_(1)
        close(y, expected + 1)


def generate_bookkeeping(device, prompt_ids, new_ids, prompt_scores, new_scores, eos):
    """The per-token work of HF generate() around a decoder: a growing attention mask and its positions, an EOS test
    on the last token, and a masked softmax over scores that grow by one column, with in-place writes."""
    ids, scores = prompt_ids.to(device), prompt_scores.to(device)
    mask = torch.ones_like(ids)
    eos = eos.to(device)
    seen = []
    for tok, col in zip(new_ids, new_scores):
        ids = torch.cat([ids, tok.to(device)], dim=-1)
        mask = torch.cat([mask, mask.new_ones(1, 1)], dim=-1)
        pos = mask.bool().long().cumsum(-1) - 1  # _to_copy, cumsum, sub
        pos.masked_fill_(mask == 0, 1)  # an in-place write into a bucketed storage
        done = torch.isin(ids[:, -1], eos)  # a size-1 view whose row stride grows
        scores = torch.cat([scores, col.to(device)], dim=-1)
        rows = torch.isneginf(scores).all(-1, keepdim=True)  # _safe_softmax's fully masked rows
        probs = torch.softmax(scores, -1).masked_fill(rows, 0.0)
        out = probs.clone()
        out.copy_(probs * 2)  # copy_ into a bucketed storage
        seen.append((pos.cpu(), done.cpu(), out.cpu(), mask.bool().all().cpu(), scores.sum(-1).cpu()))
    return seen


def test_generate_bookkeeping_compiles_a_bucket_per_octave(mode):
    steps = 64
    g = torch.Generator().manual_seed(5)
    prompt_ids = torch.randint(0, 11, (1, 8), generator=g)
    new_ids = [torch.randint(0, 11, (1, 1), generator=g) for _ in range(steps)]
    prompt_scores = torch.randn(1, 4, 1, 8, generator=g)
    prompt_scores[:, 3] = -math.inf  # one head fully masked: _safe_softmax's zero rows
    new_scores = [torch.randn(1, 4, 1, 1, generator=g) for _ in range(steps)]
    for col in new_scores:
        col[:, 3] = -math.inf
    eos = torch.tensor([2, 5])
    expected = generate_bookkeeping("cpu", prompt_ids, new_ids, prompt_scores, new_scores, eos)
    torch_pjrt.reset_metrics()
    actual = generate_bookkeeping(TPU, prompt_ids, new_ids, prompt_scores, new_scores, eos)
    for step, (a, e) in enumerate(zip(actual, expected)):
        for x, y in zip(a, e):
            assert x.dtype == y.dtype and x.shape == y.shape, step
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5, equal_nan=True, msg=f"step {step}")
    by_name = torch_pjrt.metrics()["compiles_by_name"]
    budget = int(math.log2(steps)) + 4
    # cat: the Long ids and mask share one structure, the Float scores are another; masked_fill: in place on the
    # positions, and out of place on the probabilities.
    structures = {"aten::cat": 2, "aten::masked_fill.Scalar": 2}
    over = {n: c for n, c in by_name.items() if n != "fused_region" and c > budget * structures.get(n, 1)}
    assert not over, by_name
    assert by_name.get("fused_region", 0) <= 3 * budget, by_name


def test_bucketed_index_checks_and_wraps_against_the_true_size(mode):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 8, generator=g)
    xt = x.to(TPU)
    for _ in range(40):
        col = torch.randn(2, 1, generator=g)
        x, xt = torch.cat([x, col], 1), torch.cat([xt, col.to(TPU)], 1)
        n = x.shape[1]
        idx = torch.tensor([0, n - 1, -1, -n])  # -1 is the last true element, never padding
        close(xt[:, idx.to(TPU)], x[:, idx])
    assert torch_pjrt.metrics()["compiles_by_name"].get("aten::index.Tensor", 0) <= int(math.log2(48)) + 4
    # One past the true size lies inside the bucket (48 of 64): it must raise as CPU does, naming the true size.
    bad = torch.tensor([n])
    with pytest.raises(IndexError, match=f"size {n}"):
        x[:, bad]
    with pytest.raises(IndexError, match=f"size {n}"):
        xt[:, bad.to(TPU)].cpu()
    close(xt[:, idx.to(TPU)], x[:, idx])  # and the process goes on


def test_division_of_a_growing_tensor_compiles_a_bucket_per_octave(mode):
    g = torch.Generator().manual_seed(7)

    def divisors(n):  # nonzero, both signs
        return torch.randint(1, 9, (2, n), generator=g) * (torch.randint(0, 2, (2, n), generator=g) * 2 - 1)

    a, d = torch.randint(-50, 50, (2, 8), generator=g), divisors(8)
    at, dt = a.to(TPU), d.to(TPU)
    for _ in range(40):
        col, dcol = torch.randint(-50, 50, (2, 1), generator=g), divisors(1)
        a, at = torch.cat([a, col], 1), torch.cat([at, col.to(TPU)], 1)
        d, dt = torch.cat([d, dcol], 1), torch.cat([dt, dcol.to(TPU)], 1)
        assert torch.equal(torch.floor_divide(at, dt).cpu(), torch.floor_divide(a, d))
        assert torch.equal(torch.div(at, dt, rounding_mode="trunc").cpu(), torch.div(a, d, rounding_mode="trunc"))
        assert torch.equal(torch.remainder(at, dt).cpu(), torch.remainder(a, d))
        assert torch.equal(torch.fmod(at, dt).cpu(), torch.fmod(a, d))
        af, df = a.double() / 3, d.double() / 7
        aft, dft = at.double() / 3, dt.double() / 7  # bucketed storages, as the cat results are
        close(torch.div(aft, dft, rounding_mode="floor"), torch.div(af, df, rounding_mode="floor"), tol=1e-12)
    by_name = torch_pjrt.metrics()["compiles_by_name"]
    budget = int(math.log2(48)) + 4  # the length grows from 9 to 48
    for op in ("aten::div.Tensor_mode", "aten::remainder.Tensor", "aten::fmod.Tensor", "aten::floor_divide"):
        assert by_name.get(op, 0) <= 2 * budget, by_name  # div.Tensor_mode: int64 and float64
    assert torch_pjrt.metrics()["bucket_hits"] > 0
    # A zero divisor at the true end raises, as on CPU; the padding past it (inside the bucket) never does.
    d[:, -1] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.remainder(a, d)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.remainder(at, d.to(TPU)).cpu()
    assert torch.equal(torch.remainder(at, dt).cpu(), torch.remainder(a, dt.cpu()))  # and the process goes on


def test_buckets_off_runs_exact_programs():
    import subprocess
    import sys

    code = (
        "import torch, torch_pjrt\n"
        "for n in range(5, 15): torch.softmax(torch.randn(2, n).to('tpu'), -1).cpu()\n"
        "m = torch_pjrt.metrics(); assert m['bucket_hits'] == 0, m\n"
    )
    env = dict(__import__("os").environ, TORCH_PJRT_SHAPE_BUCKETS="0")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_fused_regions_keep_one_structure_while_the_cache_grows():
    """A decode step with static projections around the growing attention, read every step (as generate() does)."""
    steps, heads, dim = 48, 2, 8
    g = torch.Generator().manual_seed(3)
    w_in, w_out = torch.randn(dim, 3 * dim, generator=g), torch.randn(dim, dim, generator=g)
    x0 = torch.randn(heads, 1, dim, generator=g)

    def run(device):
        wi, wo, x = w_in.to(device), w_out.to(device), x0.to(device)
        kc = vc = None
        seen = []
        for _ in range(steps):
            q, k, v = (x @ wi).split(dim, dim=-1)
            kc = k if kc is None else torch.cat([kc, k], dim=1)
            vc = v if vc is None else torch.cat([vc, v], dim=1)
            att = torch.softmax(q @ kc.transpose(-2, -1), dim=-1)
            x = torch.tanh((att @ vc) @ wo)
            seen.append(x.sum().item())  # a sync point each step
        return x, seen

    expected, expected_seen = run("cpu")
    with torch_pjrt.eager_mode("fused"):
        for _ in range(2):  # warm-up: the structures, their buckets, then the first step's exact programs
            run(TPU)
        torch_pjrt.reset_metrics()
        actual, seen = run(TPU)
        met = torch_pjrt.metrics()
    close(actual, expected)
    assert seen == pytest.approx(expected_seen, rel=1e-5, abs=1e-5)
    # A later run repeats the sizes: nothing new to compile, and the regions ran each step.
    assert met["compiles"] == 0, met["compiles_by_name"]
    assert met["regions"] >= steps  # the static ops still fuse


def test_fused_decode_compiles_a_bounded_set_of_regions():
    steps, heads, dim = 64, 2, 8
    g = torch.Generator().manual_seed(4)
    w = torch.randn(dim, dim, generator=g)
    prompt = torch.randn(heads, 8, dim, generator=g)
    ks = [torch.randn(heads, 1, dim, generator=g) for _ in range(steps)]

    def run(device, dtype=torch.float32):
        wd, kc, out = w.to(device, dtype), prompt.to(device, dtype), []
        for k in ks:
            k = torch.relu(k.to(device, dtype) @ wd)  # a static region before the growing op
            kc = torch.cat([kc, k], dim=1)
            out.append((kc.sum(1) @ wd).cpu())  # a static region after it, read each step
        return out

    # Sums over up to 72 rows: compared with float64, within what float32 sums promise.
    expected = run("cpu", torch.float64)
    with torch_pjrt.eager_mode("fused"):
        torch_pjrt.reset_metrics()
        actual = run(TPU)
        met = torch_pjrt.metrics()
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.double(), e, rtol=1e-4, atol=1e-4)
    assert met["compiles_by_name"].get("fused_region", 0) <= 6, met["compiles_by_name"]
    assert met["compiles_by_name"].get("aten::cat", 0) <= int(math.log2(steps)) + 4, met["compiles_by_name"]


def test_uploads_of_a_changing_length_land_in_storages_of_their_bucket(mode):
    # Batches of a new length each step, copied from the host: once the length is dynamic, each upload's storage has
    # its bucket's capacity, so the ops that read it (a mean over the length, layer norm over its rows) compile per
    # bucket, not per length. The tensors themselves stay plain: their sizes, contiguity and values are the host's.
    g = torch.Generator().manual_seed(9)
    ln = torch.nn.LayerNorm(16)
    ln_t = torch.nn.LayerNorm(16).to(TPU)
    ln_t.load_state_dict(ln.state_dict())
    lengths = list(range(3, 40))
    for n in lengths:
        x = torch.randn(2, n, 16, generator=g)
        xt = x.to(TPU)
        assert xt.shape == x.shape and xt.is_contiguous() and xt.storage_offset() == 0
        close(xt, x)
        close(xt.mean(1), x.mean(1))
        close(ln_t(xt), ln(x))
    assert xt.untyped_storage().nbytes() == 2 * 64 * 16 * 4  # the last length, 39, in the bucket of 64
    by_name = torch_pjrt.metrics()["compiles_by_name"]
    budget = int(math.log2(lengths[-1])) + 4
    for op in ("aten::mean.dim", "aten::native_layer_norm"):
        assert by_name.get(op, 0) <= budget, by_name
