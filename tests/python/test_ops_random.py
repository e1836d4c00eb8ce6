"""Random lowerings (csrc/lowering/random.cc) on the tpu device.

Random numbers cannot match CPU's values, so each distribution is checked by
its range and moments (with bounds several standard errors wide, so a wrong
distribution fails while a right one passes), and the generator by
reproducibility: the same seed or the same saved state gives the same
numbers, and successive draws differ.
"""

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F

import torch_pjrt
from compare import DEVICE, to_device

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
N = 64 * 1024  # samples per moment check: one program shape for most tests
SHAPE = (64, 1024)


@contextlib.contextmanager
def lowered():
    """Asserts the body ran without the CPU fallback."""
    torch_pjrt.reset_metrics()
    yield
    torch_pjrt.synchronize()
    assert torch_pjrt.metrics()["fallback_ops"] == {}


def host(x):
    """A tpu tensor's values as float64 on the host."""
    assert x.device.type == "tpu"
    return x.cpu().double()


def assert_moments(x, mean, var, n_sigma=6.0):
    """Sample mean and variance of x within n_sigma standard errors of the true ones (needs a finite 4th moment)."""
    n = x.numel()
    m, v = x.mean().item(), x.var().item()
    kurt = ((x - mean) ** 4).mean().item() / var**2 if var > 0 else 0
    assert abs(m - mean) < n_sigma * math.sqrt(var / n) + 1e-12, f"mean {m} vs {mean}"
    assert abs(v - var) < n_sigma * var * math.sqrt(max(kurt - 1, 0.1) / n) + 1e-12, f"variance {v} vs {var}"


def assert_uniform_histogram(x, lo, hi, bins=16):
    """Every bin of [lo, hi) holds about 1/bins of the samples."""
    counts = torch.histc(x, bins=bins, min=lo, max=hi)
    p = 1 / bins
    expected, sd = x.numel() * p, math.sqrt(x.numel() * p * (1 - p))
    assert (counts - expected).abs().max() < 6 * sd, counts


# ---------------------------------------------------------------- continuous distributions


@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_and_uniform(dtype):
    with lowered():
        x = torch.rand(SHAPE, device=DEVICE, dtype=dtype)
        y = torch.empty(SHAPE, device=DEVICE, dtype=dtype).uniform_(-2.0, 3.0)
    assert x.dtype == y.dtype == dtype and x.shape == y.shape == SHAPE
    x, y = host(x), host(y)
    assert x.min() >= 0 and x.max() < 1
    assert y.min() >= -2 and y.max() < 3
    # reduced-precision floats round to multiples of 2^-digits: the mean shifts by at most half a step
    step = {torch.bfloat16: 2**-8, torch.float16: 2**-11}.get(dtype, 0)
    assert_moments(x + step / 2, 0.5, 1 / 12)
    assert_moments(y, 0.5, 25 / 12 + 25 * step**2 / 12) if dtype in (torch.float32, torch.float64) else None
    assert_uniform_histogram(x, 0, 1)
    assert_uniform_histogram(y, -2, 3, bins=10)
    # enough distinct values: not a coarse grid or a repeating pattern
    distinct = {torch.bfloat16: 200, torch.float16: 1500}.get(dtype, N // 2)
    assert x.unique().numel() > distinct


def test_float64_uniform_has_more_than_float32_resolution():
    with lowered():
        x = host(torch.rand(N, device=DEVICE, dtype=torch.float64))
    # a float32 grid has 2^24 points in [0, 1); float64 draws are (almost) never on it
    on_f32_grid = (x * 2**24 == (x * 2**24).floor()).float().mean()
    assert on_f32_grid < 0.01


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_and_normal(dtype):
    with lowered():
        z = torch.randn(SHAPE, device=DEVICE, dtype=dtype)
        y = torch.empty(SHAPE, device=DEVICE, dtype=dtype).normal_(2.0, 3.0)
        w = torch.normal(-1.0, 0.5, SHAPE, device=DEVICE, dtype=dtype)
    assert z.dtype == y.dtype == w.dtype == dtype
    z, y, w = host(z), host(y), host(w)
    assert torch.isfinite(z).all()
    assert_moments(z, 0.0, 1.0)
    assert_moments(y, 2.0, 9.0)
    assert_moments(w, -1.0, 0.25)
    # shape of the distribution: the fraction within 1 and 2 sigma, and both tails present
    for k, p in ((1, 0.6827), (2, 0.9545)):
        frac = (z.abs() < k).double().mean().item()
        assert abs(frac - p) < 6 * math.sqrt(p * (1 - p) / N) + 0.01, (k, frac)
    assert z.min() < -3.5 and z.max() > 3.5
    assert abs(((z**3).mean()).item()) < 0.1  # symmetric


def test_normal_and_uniform_degenerate_parameters():
    with lowered():
        a = torch.empty(5, device=DEVICE, dtype=torch.float16).normal_(3.0, 0.0)
        b = torch.empty(5, device=DEVICE).uniform_(2.0, 2.0)
        c = torch.empty(0, device=DEVICE).normal_()
        d = torch.empty((), device=DEVICE).uniform_(5.0, 6.0)
    assert torch.equal(a.cpu(), torch.full((5,), 3.0, dtype=torch.float16))
    assert torch.equal(b.cpu(), torch.full((5,), 2.0))
    assert c.shape == (0,)
    assert d.shape == () and 5.0 <= d.item() < 6.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exponential(dtype):
    with lowered():
        x = host(torch.empty(SHAPE, device=DEVICE, dtype=dtype).exponential_(2.0))
    assert x.min() >= 0 and torch.isfinite(x).all()
    assert_moments(x, 0.5, 0.25, n_sigma=8)
    assert abs((x < math.log(2) / 2).double().mean().item() - 0.5) < 0.01  # the median is ln 2 / lambda


def test_integer_self_is_refused_for_float_distributions():
    x = torch.empty(3, dtype=torch.int64, device=DEVICE)
    for draw in (lambda t: t.normal_(), lambda t: t.uniform_(), lambda t: t.exponential_()):
        with pytest.raises(RuntimeError):
            draw(torch.empty(3, dtype=torch.int64))  # CPU refuses too
        with pytest.raises(RuntimeError):
            draw(x)


# ---------------------------------------------------------------- Bernoulli and dropout


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool])
def test_bernoulli_scalar_p(dtype):
    with lowered():
        x = torch.empty(SHAPE, device=DEVICE, dtype=dtype).bernoulli_(0.3)
    assert x.dtype == dtype
    x = host(x)
    assert set(x.unique().tolist()) == {0.0, 1.0}
    p = x.mean().item()
    assert abs(p - 0.3) < 6 * math.sqrt(0.21 / N)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bernoulli_tensor_probabilities(dtype):
    probs = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).to(dtype).repeat(N // 5 + 1)[:N].reshape(SHAPE)
    with lowered():
        x = torch.bernoulli(to_device(probs, DEVICE))
    assert x.dtype == dtype
    x, probs = host(x), probs.double()
    assert set(x.unique().tolist()) <= {0.0, 1.0}
    for p in (0.0, 0.1, 0.5, 0.9, 1.0):
        sel = x[probs == float(torch.tensor(p).to(dtype))]
        q = float(torch.tensor(p).to(dtype))
        assert abs(sel.mean().item() - q) < 6 * math.sqrt(q * (1 - q) / sel.numel()) + 1e-12, (p, sel.mean())


def test_bernoulli_inplace_on_a_view_writes_only_the_view():
    base = torch.full((8, 6), 7.0, device=DEVICE)
    alias = base.t()
    with lowered():
        base[:, 1::2].bernoulli_(0.5)
    b = base.cpu()
    assert (b[:, ::2] == 7).all()
    assert set(b[:, 1::2].unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(alias.cpu(), b.t())


@pytest.mark.parametrize(
    "dtype,p", [(torch.float32, 0.1), (torch.float32, 0.5), (torch.bfloat16, 0.2), (torch.float16, 0.7)]
)
def test_dropout_statistics_and_mask_relation(dtype, p):
    x = to_device(torch.rand(SHAPE).to(dtype) + 0.5, DEVICE)  # no zeros in x: zeros in the output are dropped
    with lowered():
        out, mask = torch.native_dropout(x, p, True)
        y = F.dropout(x, p)
    assert out.dtype == y.dtype == dtype and mask.dtype == torch.bool
    out, mask, y, xc = out.cpu().double(), mask.cpu(), y.cpu().double(), x.cpu().double()
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    # out == x * mask / (1 - p)
    torch.testing.assert_close(out, xc * mask / (1 - p), rtol=tol, atol=tol)
    for kept in (mask, y != 0):
        frac = kept.double().mean().item()
        assert abs(frac - (1 - p)) < 6 * math.sqrt(p * (1 - p) / N), frac
    torch.testing.assert_close(y, xc * (y != 0) / (1 - p), rtol=tol, atol=tol)
    # the kept elements are not clustered: every row keeps about 1 - p
    rows = mask.double().mean(1)
    assert (rows - (1 - p)).abs().max() < 6 * math.sqrt(p * (1 - p) / SHAPE[1])
    # the masks of successive calls differ
    assert not torch.equal(mask, (y != 0))


def test_dropout_edge_cases():
    x = to_device(torch.rand(4, 5) + 0.5, DEVICE)
    with lowered():
        out1, mask1 = torch.native_dropout(x, 1.0, True)
        out0, mask0 = torch.native_dropout(x, 0.0, True)
        oute, maske = torch.native_dropout(x, 0.5, False)
        z = F.dropout(x.clone(), 0.4, inplace=True)
        m = torch.nn.Dropout(0.5).train()(x)
    xc = x.cpu()
    assert (out1.cpu() == 0).all() and not mask1.cpu().any()
    assert torch.equal(out0.cpu(), xc) and mask0.cpu().all()
    assert torch.equal(oute.cpu(), xc) and maske.cpu().all()
    x.add_(1)  # the eval-mode output is not an alias of the input
    assert torch.equal(oute.cpu(), xc)
    for y, p in ((z.cpu(), 0.4), (m.cpu(), 0.5)):  # in-place F.dropout and nn.Dropout in training mode
        kept = y != 0
        assert kept.any() and not kept.all()
        torch.testing.assert_close(y, xc * kept / (1 - p))


# ---------------------------------------------------------------- integers


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.bfloat16])
def test_random_from_to(dtype):
    with lowered():
        x = torch.empty(SHAPE, device=DEVICE, dtype=dtype).random_(-3, 7)
        y = torch.empty(SHAPE, device=DEVICE, dtype=dtype).random_(5)
    x, y = host(x), host(y)
    assert x.dtype == torch.float64
    counts = torch.bincount((x + 3).long().flatten(), minlength=10)
    assert counts.numel() == 10  # nothing outside [-3, 7)
    sd = math.sqrt(N * 0.1 * 0.9)
    assert (counts - N / 10).abs().max() < 6 * sd, counts
    assert set(y.unique().tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}


def test_randint():
    with lowered():
        x = torch.randint(-5, 5, SHAPE, device=DEVICE)
        y = torch.randint(3, SHAPE, device=DEVICE, dtype=torch.int32)
        big = torch.randint(0, 2**40, SHAPE, device=DEVICE)
    assert x.dtype == torch.int64 and y.dtype == torch.int32
    assert set(x.cpu().unique().tolist()) == set(range(-5, 5))
    assert set(y.cpu().unique().tolist()) == {0, 1, 2}
    b = host(big)
    assert b.min() >= 0 and b.max() < 2**40 and b.max() > 2**39
    assert_moments(b / 2**40, 0.5, 1 / 12)


@pytest.mark.parametrize(
    "dtype,lo,hi",
    [
        (torch.uint8, 0, 255),
        (torch.int8, 0, 127),
        (torch.int16, 0, 2**15 - 1),
        (torch.bool, 0, 1),
        (torch.float16, 0, 2**11),
        (torch.bfloat16, 0, 2**8),
        (torch.float32, 0, 2**24),
    ],
)
def test_random_default_range(dtype, lo, hi):
    # random_() without bounds draws from [0, 2^digits] for floats and [0, max] for integers
    with lowered():
        x = host(torch.empty(SHAPE, device=DEVICE, dtype=dtype).random_())
    assert x.min() >= lo and x.max() <= hi
    assert x.max() > hi * 0.9 and x.min() < hi * 0.1 + 1
    assert_moments(x / hi, 0.5, 1 / 12 + (1 / (6 * hi) if hi < 300 else 0), n_sigma=8)


def test_random_full_int64_range():
    with lowered():
        x = torch.empty(N, device=DEVICE, dtype=torch.int64).random_().cpu()
    assert x.min() >= 0
    assert x.max() > 2**62  # uses the whole positive range
    assert_moments(x.double() / 2**63, 0.5, 1 / 12)


def test_random_refuses_empty_range():
    with pytest.raises(RuntimeError):
        torch.empty(3, device=DEVICE, dtype=torch.int64).random_(5, 5)


# ---------------------------------------------------------------- generator: seeds and states


DRAWS = {
    "rand": lambda: torch.rand(1000, device=DEVICE),
    "randn": lambda: torch.randn(1000, device=DEVICE, dtype=torch.bfloat16),
    "uniform_": lambda: torch.empty(1000, device=DEVICE).uniform_(-1, 1),
    "normal_": lambda: torch.empty(1000, device=DEVICE, dtype=torch.float16).normal_(1, 2),
    "bernoulli": lambda: torch.bernoulli(torch.full((1000,), 0.4, device=DEVICE)),
    "bernoulli_": lambda: torch.empty(1000, device=DEVICE).bernoulli_(0.4),
    "dropout": lambda: F.dropout(torch.ones(1000, device=DEVICE), 0.5),
    "native_dropout": lambda: torch.native_dropout(torch.ones(1000, device=DEVICE), 0.5, True)[1],
    "exponential_": lambda: torch.empty(1000, device=DEVICE).exponential_(),
    "random_": lambda: torch.empty(1000, device=DEVICE, dtype=torch.int64).random_(0, 1000),
    "randint": lambda: torch.randint(0, 2**40, (1000,), device=DEVICE),
}


def sequence(draw, k=3):
    return [draw().cpu() for _ in range(k)]


@pytest.mark.parametrize("name", list(DRAWS))
def test_manual_seed_reproduces_and_successive_draws_differ(name):
    draw = DRAWS[name]
    with lowered():
        torch.manual_seed(1234)
        a = sequence(draw)
        torch.manual_seed(1234)
        torch.rand(10)  # CPU draws do not disturb the tpu generator
        b = sequence(draw)
        torch.manual_seed(4321)
        c = sequence(draw)
        torch.tpu.manual_seed(1234)
        d = sequence(draw)
    for x, y, z in zip(a, b, d):
        assert torch.equal(x, y) and torch.equal(x, z)
    assert not torch.equal(a[0], c[0])  # another seed, other numbers
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[1], a[2])  # the generator advances


@pytest.mark.parametrize("name", ["rand", "randn", "bernoulli_", "dropout", "random_"])
def test_rng_state_replays(name):
    draw = DRAWS[name]
    with lowered():
        torch.manual_seed(7)
        draw()
        state = torch.tpu.get_rng_state()
        a = sequence(draw)
        torch.tpu.set_rng_state(state)
        b = sequence(draw)
        torch.manual_seed(8)  # another seed, then back to the state
        torch.tpu.set_rng_state(state)
        c = sequence(draw)
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y) and torch.equal(x, z)
    assert not torch.equal(a[0], a[1])


def test_rng_state_is_a_copy_and_initial_seed():
    torch.manual_seed(99)
    assert torch.tpu.initial_seed() == 99
    s = torch.tpu.get_rng_state()
    torch.rand(5, device=DEVICE)
    assert not torch.equal(s, torch.tpu.get_rng_state())  # drawing advances the state, not the saved copy
    torch.tpu.set_rng_state(s)
    assert torch.equal(s, torch.tpu.get_rng_state())


def test_explicit_generator():
    g = torch.Generator(device=DEVICE)
    with lowered():
        g.manual_seed(3)
        a = torch.rand(100, device=DEVICE, generator=g).cpu()
        torch.manual_seed(0)  # the default generator is another one
        b = torch.rand(100, device=DEVICE, generator=g).cpu()
        g.manual_seed(3)
        c = torch.rand(100, device=DEVICE, generator=g).cpu()
        d = torch.empty(100, device=DEVICE).normal_(generator=g).cpu()
        g.manual_seed(3)
        torch.rand(100, device=DEVICE, generator=g)
        e = torch.empty(100, device=DEVICE).normal_(generator=g).cpu()
    assert torch.equal(a, c) and not torch.equal(a, b)
    assert torch.equal(d, e)


def test_successive_draws_are_independent():
    # successive draws share no values (no overlapping counter streams) and are uncorrelated
    with lowered():
        torch.manual_seed(5)
        a, b = torch.rand(N, device=DEVICE).cpu(), torch.rand(N, device=DEVICE).cpu()
        z1, z2 = torch.randn(N, device=DEVICE).cpu(), torch.randn(N, device=DEVICE).cpu()
    common = set(a.tolist()) & set(b.tolist())
    assert len(common) < 1000  # about N^2 / 2^24 = 256 chance collisions expected
    for shift in (0, 1, 2, 4):  # no shifted copy of the previous stream
        assert (a[shift:] == b[: N - shift]).double().mean() < 0.01
    assert abs(torch.corrcoef(torch.stack([a, b]))[0, 1].item()) < 6 / math.sqrt(N)
    assert abs(torch.corrcoef(torch.stack([z1, z2]))[0, 1].item()) < 6 / math.sqrt(N)
    # neighbours within one draw are uncorrelated too
    assert abs(torch.corrcoef(torch.stack([a[1:], a[:-1]]))[0, 1].item()) < 6 / math.sqrt(N)


def test_inplace_draws_on_views_and_out():
    with lowered():
        base = torch.zeros(6, 4, device=DEVICE)
        base.t()[1:3].uniform_(5, 6)  # a strided view: columns 1 and 2
        ints = torch.zeros(6, 4, device=DEVICE, dtype=torch.int64)
        ints[:, 1].random_(3, 9)
        rows = torch.zeros(6, 4, device=DEVICE)
        rows[::2].normal_()
        out = torch.empty(50, 40, device=DEVICE)
        torch.rand(50, 40, out=out)
    b = base.cpu()
    assert ((b[:, 1:3] >= 5) & (b[:, 1:3] < 6)).all() and (b[:, [0, 3]] == 0).all()
    i = ints.cpu()
    assert ((i[:, 1] >= 3) & (i[:, 1] < 9)).all() and (i[:, [0, 2, 3]] == 0).all()
    r = rows.cpu()
    assert (r[1::2] == 0).all() and (r[::2] != 0).all()
    o = out.cpu()
    assert o.min() >= 0 and o.max() < 1 and o.unique().numel() > 1900


def test_fork_rng_restores_the_tpu_generator():
    torch.manual_seed(0)
    with torch.random.fork_rng(devices=[0], device_type="tpu"):
        a = torch.rand(8, device=DEVICE).cpu()
        torch.manual_seed(3)
        torch.rand(8, device=DEVICE)
    b = torch.rand(8, device=DEVICE).cpu()
    assert torch.equal(a, b)


def test_seeds_differing_in_high_bits_differ():
    draws = []
    for seed in (1, 1 + 2**32, 1 + 2**62):
        torch.manual_seed(seed)
        draws.append(torch.rand(100, device=DEVICE).cpu())
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])


def test_same_seed_same_numbers_in_debug_mode():
    torch.manual_seed(11)
    a = torch.randn(100, device=DEVICE).cpu()
    with torch_pjrt.eager_mode("debug"):
        torch.manual_seed(11)
        b = torch.randn(100, device=DEVICE).cpu()
    assert torch.equal(a, b)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize(
    "weights",
    [[0.5, -0.1, 0.6], [0.0, 0.0, 0.0], [0.5, float("nan"), 0.5], [0.5, float("inf"), 0.5], [[1.0, 2.0], [0.0, 0.0]]],
)
@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial_refuses_what_cpu_refuses(mode, weights, replacement):
    with pytest.raises(RuntimeError) as on_cpu:
        torch.multinomial(torch.tensor(weights), 1, replacement=replacement)
    with torch_pjrt.eager_mode(mode):
        with pytest.raises(RuntimeError) as on_tpu:
            torch.multinomial(torch.tensor(weights, device="tpu"), 1, replacement=replacement).cpu()
    assert str(on_cpu.value) in str(on_tpu.value)
    ok = torch.multinomial(torch.tensor([0.0, 1.0], device="tpu"), 1).cpu()
    assert ok.tolist() == [1]
