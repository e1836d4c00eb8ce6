"""Inputs that used to crash the process or return silently wrong results.

Each case is compared with CPU PyTorch: where CPU raises, tpu raises the same
exception class, and the next op works; where CPU returns, tpu matches.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

import torch_pjrt

TPU = "tpu"


def _next_op_works():
    x = torch.arange(4.0, device=TPU)
    assert (x + 1).sum().item() == 10.0


def _cpu_error(fn):
    try:
        fn("cpu")
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    return None


def _same_error_as_cpu(fn):
    expected = _cpu_error(fn)
    assert expected is not None, "CPU accepted the input"
    with pytest.raises(expected):
        fn(TPU)
        torch.tpu.synchronize()
    _next_op_works()


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.ones(3, device=d).mul_(1j),
        lambda d: torch.ones(3, device=d).add_(torch.ones(3, dtype=torch.complex64, device=d)),
        lambda d: torch.ones(3, device=d).add_(torch.ones(3, dtype=torch.complex128, device=d)),
        lambda d: torch.ones(3, dtype=torch.int64, device=d).add_(torch.ones(3, device=d)),
        lambda d: torch.ones(3, dtype=torch.bool, device=d).add_(2),
    ],
    ids=["mul_complex_scalar", "add_complex64", "add_complex128", "long_add_float", "bool_add_int"],
)
def test_in_place_casts_raise(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize("mode", ["strict", "debug"])
@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.tensor([1, 2], device=d) // torch.tensor([0, 1], device=d),
        lambda d: torch.tensor([1, 2], device=d) % torch.tensor([0, 1], device=d),
        lambda d: torch.fmod(torch.tensor([1, 2], device=d), 0),
        lambda d: torch.tensor([7], device=d).div(torch.tensor([0], device=d), rounding_mode="trunc"),
        lambda d: torch.tensor(5, dtype=torch.uint8, device=d) // 0,
        lambda d: torch.tensor([[3, 4]], dtype=torch.int32, device=d).remainder_(torch.tensor([2, 0], device=d)),
    ],
    ids=["floor_divide", "remainder", "fmod_scalar", "div_trunc", "uint8_scalar", "remainder_"],
)
def test_integer_division_by_zero(case, mode):
    assert _cpu_error(case) is RuntimeError  # CPU: RuntimeError("ZeroDivisionError")
    with torch_pjrt.eager_mode(mode):
        with pytest.raises(ZeroDivisionError) as info:
            case(TPU).cpu()
    assert isinstance(info.value, RuntimeError)
    assert "ZeroDivisionError" in str(info.value)
    _next_op_works()


def test_integer_division_without_zero_matches_cpu():
    a, b = torch.tensor([7, -7, 5, -5]), torch.tensor([2, 2, -3, -3])
    for op in (torch.floor_divide, torch.remainder, torch.fmod):
        torch.testing.assert_close(op(a.to(TPU), b.to(TPU)).cpu(), op(a, b))


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.zeros(1, device=d).expand(1000).add_(1),
        lambda d: torch.zeros(3, device=d)[None].expand(2, 3).mul_(2),
        lambda d: torch.exp(torch.ones(3, device=d), out=torch.zeros(1, device=d).expand(3)),
        lambda d: torch.zeros(1, device=d).expand(3).copy_(torch.ones(3, device=d)),
        lambda d: torch.zeros(1, device=d).expand(3).uniform_(),
    ],
    ids=["add_", "mul_2d", "exp_out", "copy_", "uniform_"],
)
def test_internal_overlap_raises(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.zeros(1, device=d).expand(3).fill_(2),
        lambda d: torch.zeros(1, device=d).expand(3).zero_(),
        lambda d: torch.zeros(1, device=d).expand(3).masked_fill_(torch.tensor([True, False, True], device=d), 1.0),
    ],
    ids=["fill_", "zero_", "masked_fill_"],
)
def test_overlapping_fills_are_allowed_as_on_cpu(case):
    assert _cpu_error(case) is None
    torch.testing.assert_close(case(TPU).cpu(), case("cpu"))


def test_rng_state_on_the_device_raises_type_error():
    with pytest.raises(TypeError, match="ByteTensor"):
        torch.tpu.set_rng_state(torch.tpu.get_rng_state().to(TPU))
    g = torch.Generator(TPU)
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state(g.get_state().to(TPU))
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state(torch.zeros(16, dtype=torch.float32))
    with pytest.raises(RuntimeError):
        g.set_state(torch.zeros(3, dtype=torch.uint8))
    _next_op_works()


def test_rng_state_round_trips():
    torch.tpu.manual_seed(7)
    state = torch.tpu.get_rng_state()
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    a = torch.rand(8, device=TPU).cpu()
    torch.tpu.set_rng_state(state)
    torch.testing.assert_close(torch.rand(8, device=TPU).cpu(), a)


def test_rng_state_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    expected = torch.tpu.get_rng_state()
    with FakeTensorMode():
        state = torch.tpu.get_rng_state()
        g_state = torch.Generator(TPU).get_state()
    assert torch.equal(state, expected)
    assert g_state.dtype == torch.uint8 and g_state.numel() == 16
    _next_op_works()


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "cuda:0"])
def test_set_device_to_another_type_raises_value_error(device):
    with pytest.raises(ValueError):
        torch.tpu.set_device(device)
    assert torch.tpu.current_device() == 0


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, ids):
        return self.head(self.norm(self.emb(ids)))


def test_module_to_keeps_tied_parameters():
    torch.manual_seed(0)
    cpu = _Tied()
    tpu = _Tied()
    tpu.load_state_dict(cpu.state_dict())
    emb_param = tpu.emb.weight
    tpu.to(TPU)
    assert tpu.head.weight is tpu.emb.weight
    assert tpu.emb.weight is emb_param  # the same Parameter object, as with .to("cuda")
    assert len(list(tpu.parameters())) == len(list(cpu.parameters())) == 3
    assert tpu.emb.weight.device.type == "tpu" and isinstance(tpu.emb.weight, torch.nn.Parameter)

    ids = torch.tensor([[1, 2, 3, 4]])
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.5)
    opt_t = torch.optim.SGD(tpu.parameters(), lr=0.5)
    for _ in range(3):
        for model, opt, dev in ((cpu, opt_c, "cpu"), (tpu, opt_t, TPU)):
            opt.zero_grad()
            model(ids.to(dev)).logsumexp(-1).sum().backward()
            opt.step()
    torch.testing.assert_close(tpu.emb.weight.detach().cpu(), cpu.emb.weight.detach(), rtol=1e-5, atol=1e-6)
    back = tpu.to("cpu")
    assert back.head.weight is back.emb.weight and back.emb.weight.device.type == "cpu"


def test_module_to_keeps_module_contract():
    m = torch.nn.Linear(3, 2)
    w = m.weight
    m.weight.grad = torch.ones(2, 3)
    m.to(TPU)
    assert m.weight is w and m.weight.grad.device.type == "tpu"
    m.to(torch.float64)
    assert m.weight is w and m.weight.dtype == torch.float64
    m.to("cpu", torch.float32)
    assert m.weight is w and m.weight.device.type == "cpu"
    # CPU-only modules keep their behaviour (CPU <-> CPU is compatible anyway).
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, dtype=torch.float64))
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device=TPU))
    assert not torch._has_compatible_shallow_copy_type(torch.ones(1, device=TPU), torch.ones(1).to_sparse())


def test_crashing_inputs_in_a_child_process():
    """The original one-liners, each in a fresh interpreter: no signal."""
    script = textwrap.dedent(
        """
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        cases = [
            lambda: torch.ones(3, device="tpu").mul_(1j),
            lambda: torch.ones(3, device="tpu").add_(torch.ones(3, dtype=torch.complex64, device="tpu")),
            lambda: torch.tpu.set_rng_state(torch.tpu.get_rng_state().to("tpu")),
            lambda: torch.Generator("tpu").set_state(torch.Generator("tpu").get_state().to("tpu")),
        ]
        for case in cases:
            try:
                case()
            except Exception:
                pass
        with FakeTensorMode():
            torch.tpu.get_rng_state()
            torch.Generator("tpu").get_state()
        print("survived", (torch.ones(2, device="tpu") * 3).sum().item())
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "survived 6.0" in r.stdout


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.randint(3, (2,), device=d).uniform_(),
        lambda d: torch.tensor([True], device=d).floor_divide(torch.tensor([True], device=d)),
        lambda d: torch.histc(torch.tensor([1, 2], device=d)),
        lambda d: torch.remainder(torch.ones(2, dtype=torch.complex64, device=d), 2),
        lambda d: torch.zeros(3, device=d).masked_scatter_(
            torch.ones(3, dtype=torch.bool, device=d), torch.ones(2, device=d)
        ),
        lambda d: torch.nn.functional.max_unpool1d(
            torch.ones(1, 1, 2, device=d), torch.tensor([[[0, 9]]], device=d), 2
        ),
        lambda d: torch.linalg.cholesky_ex(-torch.eye(2, device=d), check_errors=True),
        lambda d: torch.linalg.inv_ex(torch.zeros(2, 2, device=d), check_errors=True),
        lambda d: torch.linalg.lu_factor_ex(torch.zeros(2, 2, device=d), check_errors=True),
        lambda d: torch.linalg.solve_ex(torch.zeros(2, 2, device=d), torch.ones(2, device=d), check_errors=True),
        lambda d: torch.ones(3, device=d).sum(5),
        lambda d: torch.ones(3, device=d)[torch.tensor([7], device=d)],
    ],
    ids=[
        "uniform_long",
        "floor_divide_bool",
        "histc_long",
        "remainder_complex",
        "masked_scatter_short_source",
        "max_unpool_bad_index",
        "cholesky_ex",
        "inv_ex",
        "lu_factor_ex",
        "solve_ex",
        "dim_out_of_range",
        "index_out_of_range",
    ],
)
def test_error_kinds_match_cpu(case):
    _same_error_as_cpu(case)


def test_ex_without_check_errors_returns_info():
    _, info = torch.linalg.cholesky_ex(-torch.eye(2, device=TPU))
    assert info.item() == torch.linalg.cholesky_ex(-torch.eye(2))[1].item() != 0


A = torch.ops.aten
_B, _L, _C64 = torch.bool, torch.long, torch.complex64


def _z(d, *shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype, device=d)


# Reductions, shape/index ops, linalg and selection: the exception class CPU raises for dtypes its kernels do not
# dispatch (NotImplementedError), reduction dims of size 0 and dims a tensor lacks (IndexError), bad steps
# (ValueError), and checks on runtime scalars and values (RuntimeError at the next sync point).
CLASS_CASES = {
    "amin_empty_dim": lambda d: A.amin(_z(d, 2, 0), [1]),
    "max_dim_empty": lambda d: A.max(_z(d, 2, 0), 1),
    "argmin_numel0": lambda d: A.argmin(_z(d, 0)),
    "aminmax_empty_dim": lambda d: A.aminmax(_z(d, 2, 0), dim=1),
    "median_dim_empty": lambda d: A.median(_z(d, 2, 0), 1),
    "nanmedian_dim_empty": lambda d: A.nanmedian(_z(d, 2, 0), 1),
    "kthvalue_empty": lambda d: A.kthvalue(_z(d, 2, 0), 1),
    "mode_empty": lambda d: A.mode(_z(d, 2, 0)),
    "median_bool": lambda d: A.median(_z(d, 2, 2, dtype=_B)),
    "median_dim_complex": lambda d: A.median(_z(d, 2, 2, dtype=_C64), 1),
    "nanmedian_dim_bool": lambda d: A.nanmedian(_z(d, 2, 2, dtype=_B), 0),
    "kthvalue_bool": lambda d: A.kthvalue(_z(d, 2, 2, dtype=_B), 1),
    "mode_complex": lambda d: A.mode(_z(d, 2, 2, dtype=_C64)),
    "sort_complex": lambda d: A.sort(_z(d, 2, 2, dtype=_C64)),
    "topk_bool": lambda d: A.topk(_z(d, 2, 2, dtype=_B), 1),
    "unique_complex": lambda d: A._unique2(_z(d, 2, 2, dtype=_C64)),
    "unique_dim_complex": lambda d: A.unique_dim(_z(d, 2, 2, dtype=_C64), 0),
    "unique_dim_0d": lambda d: A.unique_dim(_z(d), 0),
    "unique_consecutive_0d": lambda d: A.unique_consecutive(_z(d), dim=-1),
    "trace_bool_3d": lambda d: A.trace(_z(d, 2, 2, 2, dtype=_B)),
    "logcumsumexp_long": lambda d: A._logcumsumexp(_z(d, 2, dtype=_L), 0),
    "cumsum_to_bool": lambda d: A.cumsum(_z(d, 2), 0, dtype=_B),
    "cummax_values_rank": lambda d: A._cummax_helper(_z(d, 2, 2), _z(d, 1), _z(d, 2, 2, dtype=_L), -2),
    "mm_bool": lambda d: A.mm(_z(d, 2, 2, dtype=_B), _z(d, 2, 2, dtype=_B)),
    "bmm_bool": lambda d: A.bmm(_z(d, 2, 2, 2, dtype=_B), _z(d, 2, 2, 2, dtype=_B)),
    "dot_bool": lambda d: A.dot(_z(d, 2, dtype=_B), _z(d, 2, dtype=_B)),
    "mv_0d": lambda d: A.mv(_z(d), _z(d, 2)),
    "embedding_backward_0d": lambda d: A.embedding_dense_backward(_z(d), _z(d, 2, dtype=_L), 3, -1, False),
    "embedding_backward_0d_short_indices": lambda d: A.embedding_dense_backward(
        _z(d), _z(d, 2, dtype=torch.int16), 3, -1, False
    ),
    "geqrf_long": lambda d: A.geqrf(_z(d, 2, 2, dtype=_L)),
    "lu_bool": lambda d: A.linalg_lu_factor_ex(_z(d, 2, 2, dtype=_B)),
    "eigh_long": lambda d: A._linalg_eigh(_z(d, 2, 2, dtype=_L)),
    "svd_half": lambda d: A._linalg_svd(_z(d, 2, 2, dtype=torch.float16)),
    "cholesky_long": lambda d: A.cholesky(_z(d, 2, 2, dtype=_L)),
    "cholesky_solve_0d_factor": lambda d: A._cholesky_solve_helper(_z(d, 1, 3, 2, dtype=torch.int16), _z(d), True),
    "cholesky_solve_long": lambda d: A._cholesky_solve_helper(_z(d, 2, 3, dtype=_L), _z(d, 3, 3, dtype=_L), False),
    "solve_triangular_half": lambda d: A.linalg_solve_triangular(
        _z(d, 2, 2, dtype=torch.float16), _z(d, 2, 2, dtype=torch.float16), upper=True
    ),
    "householder_long": lambda d: A.linalg_householder_product(_z(d, 2, 2, dtype=_L), _z(d, 1, dtype=_L)),
    "index_select_matrix_index": lambda d: A.index_select(_z(d, 3), 0, _z(d, 1, 1, dtype=_L)),
    "index_too_many": lambda d: A.index(_z(d, 2), [_z(d, 1, dtype=_L), _z(d, 1, dtype=_L)]),
    "index_fill_int32_index": lambda d: A.index_fill(_z(d, 3), 0, _z(d, 1, dtype=torch.int32), 1.0),
    "scatter_src_dtype": lambda d: A.scatter(_z(d, 3), 0, _z(d, 1, dtype=_L), _z(d, 1, dtype=torch.float64)),
    "scatter_reduce_sum_legacy": lambda d: A.scatter(_z(d, 3), 0, _z(d, 1, dtype=_L), _z(d, 1), reduce="sum"),
    "gather_index_out_of_range": lambda d: A.gather(_z(d, 3), 0, torch.tensor([5], device=d)),
    "unfold_backward_step": lambda d: A.unfold_backward(_z(d, 2, 2), [3], 0, 2, 0),
    "renorm_nonpositive_p": lambda d: A.renorm(_z(d, 2, 2), 0, 0, 1.0),
    "renorm_negative_maxnorm": lambda d: A.renorm(_z(d, 2, 2), 1, 0, -1.0),
    "vector_norm_neg_order_empty": lambda d: A.linalg_vector_norm(_z(d, 2, 0), -1.0, [1]),
    "vector_norm_int_dtype": lambda d: A.linalg_vector_norm(_z(d, 2), 2, dtype=_L),
    "norm_bool_bad_dim": lambda d: A.norm(_z(d, 2, dtype=_B), 2, [5]),
    "norm_dtype_long_bad_dim": lambda d: A.norm(_z(d, 2, dtype=_L), 2, [3], False, dtype=torch.float32),
    "histc_min_above_max": lambda d: A.histc(_z(d, 3), 4, 2.0, 1.0),
    "lu_unpack_bad_pivots": lambda d: A.lu_unpack(_z(d, 2, 2), torch.tensor([5, 1], dtype=torch.int32, device=d)),
    "segment_reduce_bad_axis": lambda d: A.segment_reduce(
        _z(d, 3, dtype=_C64), "sum", lengths=_z(d, 1, dtype=_L), axis=4
    ),
    "segment_reduce_backward_long": lambda d: A._segment_reduce_backward(
        _z(d, 2, dtype=_L), _z(d, 2, dtype=_L), _z(d, 2, dtype=_L), "amax", lengths=torch.ones(2, dtype=_L, device=d)
    ),
}


@pytest.mark.parametrize("name", list(CLASS_CASES))
def test_reduction_shape_linalg_error_classes_match_cpu(name):
    _same_error_as_cpu(CLASS_CASES[name])


def _t(d, *shape, dtype=torch.float32):
    return (torch.arange(float(max(1, torch.Size(shape).numel()))).reshape(shape) / 7 - 0.3).to(dtype).to(d)


# Group B lowerings (nn, pool, pad, conv): the class CPU raises for dtypes its
# kernels do not dispatch, sizes read before the rank, and value checks.
@pytest.mark.parametrize(
    "case",
    [
        lambda d: A.leaky_relu(_t(d, 3, dtype=torch.int64), 0.1),
        lambda d: A.hardswish(_t(d, 3, dtype=torch.int32)),
        lambda d: A.hardsigmoid_backward(_t(d, 3, dtype=torch.int32), _t(d, 3, dtype=torch.int32)),
        lambda d: A.mish(_t(d, 3, dtype=torch.int64)),
        lambda d: A.softplus(_t(d, 3, dtype=torch.bool), 1, 20),
        lambda d: A.threshold(_t(d, 3, dtype=torch.bool), 0, 0),
        lambda d: A.hardtanh(_t(d, 3, dtype=torch.bool), -1, 1),
        lambda d: A.hardtanh(_t(d, 3, dtype=torch.uint8), -1, 1),
        lambda d: A.glu(_t(d, 3, dtype=torch.int64), 0),
        lambda d: A._prelu_kernel(_t(d, 3), _t(d, 3, dtype=torch.float64)),
        lambda d: A._softmax(_t(d, 2, 3, dtype=torch.int64), 0, False),
        lambda d: A._log_softmax(_t(d, 2, 3), 1, True),
        lambda d: A._softmax_backward_data(_t(d, 2, 3), _t(d, 3, 3), 1, torch.float32),
        lambda d: A._softmax_backward_data(_t(d, 2, 3), _t(d, 2, 3, dtype=torch.float64), 1, torch.float32),
        lambda d: A.leaky_relu_backward(_t(d, 3), _t(d, 3), -0.1, True),
        lambda d: A.elu_backward(_t(d, 3), -1.0, 1, 1, True, _t(d, 3)),
        lambda d: A.softshrink(_t(d, 3), -0.5),
        lambda d: A.smooth_l1_loss(_t(d, 3), _t(d, 3), 1, -1.0),
        lambda d: A.huber_loss(_t(d, 3), _t(d, 3), 1, 0.0),
        lambda d: A.binary_cross_entropy(_t(d, 3) + 2, _t(d, 3), None, 1),
        lambda d: A.binary_cross_entropy(_t(d, 3, 1), _t(d, 3, 1), _t(d, 4), 1),
        lambda d: A.rrelu_with_noise(_t(d, 3), _t(d, 4), 0.1, 0.3, False),
        lambda d: A.mse_loss_backward(_t(d), _t(d, 2, dtype=torch.int64), _t(d, 2), 1),
        lambda d: A.replication_pad1d_backward(_t(d, 4), _t(d, 2), [1, 1]),
        lambda d: A.reflection_pad2d_backward(_t(d), _t(d), [1, 1, 1, 1]),
        lambda d: A.replication_pad2d_backward(
            _t(d, 1, 4, 4, dtype=torch.int64), _t(d, 1, 2, 2, dtype=torch.int64), [1] * 4
        ),
        lambda d: A.reflection_pad1d(_t(d, 2, 3, dtype=torch.bool), [1, 1]),
        lambda d: A.avg_pool2d(_t(d, 3), [1, 1]),
        lambda d: A.avg_pool2d(_t(d, 1, 2, 2, dtype=torch.uint8), [1, 1]),
        lambda d: A.avg_pool2d_backward(_t(d, 1, 3, 2), _t(d, 1, 2, 2), [1, 1], [1, 1], [0, 0], False, True, None),
        lambda d: A._adaptive_avg_pool3d_backward(_t(d, 3, 3), _t(d, 3, 3)),
        lambda d: A._adaptive_avg_pool2d(_t(d, 1, 2, 2, dtype=torch.int64), [1, 1]),
        lambda d: A.im2col(_t(d, 3), [1, 1], [1, 1], [0, 0], [1, 1]),
        lambda d: A.im2col(_t(d, 1, 2, 2, dtype=torch.int64), [1, 1], [1, 1], [0, 0], [1, 1]),
    ],
    ids=[
        "leaky_relu_long",
        "hardswish_int",
        "hardsigmoid_backward_int",
        "mish_long",
        "softplus_bool",
        "threshold_bool",
        "hardtanh_bool",
        "hardtanh_uint8_negative",
        "glu_long",
        "prelu_mixed",
        "softmax_long",
        "log_softmax_half_to_float_float",
        "softmax_backward_sizes",
        "softmax_backward_output_dtype",
        "leaky_relu_backward_in_place_negative",
        "elu_backward_in_place_negative",
        "softshrink_negative_lambda",
        "smooth_l1_negative_beta",
        "huber_zero_delta",
        "bce_input_out_of_range",
        "bce_weight_does_not_broadcast_into",
        "rrelu_noise_shape",
        "mse_backward_cast",
        "replication_pad1d_backward_rank",
        "reflection_pad2d_backward_scalar",
        "replication_pad2d_backward_long",
        "reflection_pad1d_bool",
        "avg_pool2d_rank",
        "avg_pool2d_uint8",
        "avg_pool2d_backward_grad_size",
        "adaptive_avg_pool3d_backward_rank",
        "adaptive_avg_pool2d_long",
        "im2col_rank",
        "im2col_long",
    ],
)
def test_nn_pool_pad_errors_match_cpu(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        # CPU reads z = exp(-|x|) from the buffer argument
        lambda d: A.log_sigmoid_backward(_t(d, 4), _t(d, 4), _t(d, 4) + 1),
        # the loss backwards are typed like self
        lambda d: A.mse_loss_backward(_t(d, dtype=torch.float64), _t(d), _t(d), 1),
        lambda d: A.smooth_l1_loss_backward(_t(d, dtype=torch.float64), _t(d), _t(d), 1, 1.0),
        # the training draw only refuses lower > upper when some x <= 0
        lambda d: A.rrelu_with_noise(_t(d, 3).abs() + 1, _t(d, 3), 0.5, 0.1, True)[0],
    ],
    ids=["log_sigmoid_backward_buffer", "mse_backward_dtype", "smooth_l1_backward_dtype", "rrelu"],
)
def test_nn_values_match_cpu(case):
    want = case("cpu")
    got = case(TPU).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


def _x(d):
    return torch.arange(8.0, device=d)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: (lambda x: x[1:].add_(x[:-1]))(_x(d)),
        lambda d: (lambda x: torch.add(x[:4], 1, out=x[2:6]))(_x(d)),
        lambda d: (lambda x: torch.mul(x[:4], x[4:], out=x[1:5]))(_x(d)),
        lambda d: (lambda x: x[:4].lerp_(x[2:6], 0.5))(_x(d)),
    ],
    ids=["add_", "add_out", "mul_out", "lerp_"],
)
def test_partial_overlap_of_input_and_written_tensor_raises(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        lambda x: x.add_(x),
        lambda x: torch.add(x, x, out=x),
        lambda x: x[:4].mul_(x[4:]),
        lambda x: x[::2].add_(x[1::2]),
    ],
    ids=["same_in_place", "same_out", "disjoint_halves", "interleaved"],
)
def test_full_or_no_overlap_is_accepted(case):
    cpu, tpu = torch.arange(8.0), torch.arange(8.0, device=TPU)
    case(cpu)
    case(tpu)
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=0, atol=0)


def _o(d, dtype):
    return torch.empty(0, dtype=dtype, device=d)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.ops.aten.clone.out(torch.rand(3, device=d), out=_o(d, torch.float64)),
        lambda d: torch.mm(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d), out=_o(d, torch.float64)),
        lambda d: torch.neg(torch.ones(3, device=d), out=_o(d, torch.float64)),
        lambda d: torch.argmax(torch.ones(3, 2, device=d), 0, out=_o(d, torch.int32)),
        lambda d: torch.sort(torch.ones(3, device=d), out=(_o(d, torch.float64), _o(d, torch.long))),
    ],
    ids=["clone", "mm", "neg", "argmax", "sort"],
)
def test_out_of_another_dtype_raises_where_cpu_wants_the_same(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.add(torch.ones(3, device=d), 1, out=_o(d, torch.float64)),
        lambda d: torch.sin(torch.ones(3, device=d), out=_o(d, torch.float64)),
        lambda d: torch.sum(torch.ones(3, 2, device=d), 0, out=_o(d, torch.float64)),
        lambda d: torch.clamp_min(torch.ones(3, device=d), torch.zeros(3, device=d), out=_o(d, torch.float64)),
    ],
    ids=["add", "sin", "sum", "clamp_min_tensor"],
)
def test_out_of_a_castable_dtype_is_accepted_where_cpu_accepts_it(case):
    torch.testing.assert_close(case(TPU).cpu(), case("cpu"))


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.bincount(torch.ones(2, 2, device=d)),
        lambda d: torch.bincount(torch.tensor([True, False], device=d)),
        lambda d: torch.bincount(torch.ones(2, device=d), minlength=-1),
        lambda d: torch.bincount(torch.ones(2, 2, dtype=torch.long, device=d), minlength=-1),
        lambda d: torch.ops.aten.repeat_interleave.Tensor(torch.ones(2, 2, device=d)),
        lambda d: torch.ops.aten.repeat_interleave.Tensor(torch.tensor([1.0, 2.0], device=d), output_size=3),
        lambda d: torch.ops.aten.repeat_interleave.Tensor(torch.tensor(2, device=d)),
    ],
    ids=[
        "bincount_float_2d",
        "bincount_bool",
        "bincount_float_minlength",
        "bincount_minlength",
        "repeat_interleave_float",
        "repeat_interleave_float_sized",
        "repeat_interleave_0d",
    ],
)
def test_host_prepared_ops_check_in_cpu_order(case):
    _same_error_as_cpu(case)


def _expanded(d):
    return torch.zeros(1, 4, device=d).expand(2, 4)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.any(torch.ones(3, device=d), 0, out=_o(d, torch.float32)),
        lambda d: torch.all(torch.ones(3, 2, device=d), out=_o(d, torch.complex64)),
        # TensorIterator kernels check an expanded out before they resize it.
        lambda d: torch.nn.functional.softplus(torch.ones(3, 4, device=d), out=_expanded(d)),
        lambda d: torch.pow(torch.ones(3, 4, device=d), torch.ones(3, 4, device=d), out=_expanded(d)),
        lambda d: torch.add(torch.ones(3, 4, device=d), 1, out=_expanded(d)),
        # binary_cross_entropy_backward does not resize grad_input.
        lambda d: torch.ops.aten.binary_cross_entropy_backward.grad_input(
            torch.ones(4, 3, device=d),
            torch.full((4, 3), 0.5, device=d),
            torch.ones(4, 3, device=d),
            torch.ones(3, device=d),
            grad_input=_o(d, torch.float32),
        ),
    ],
    ids=["any_float_out", "all_complex_out", "softplus_expanded", "pow_expanded", "add_expanded", "bce_backward"],
)
def test_out_rules_of_cpu_kernels(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.any(torch.ones(3, device=d), 0, out=_o(d, torch.uint8)),
        # cat and generated out= wrappers resize an expanded out first.
        lambda d: torch.cat([torch.ones(3, 4, device=d)], out=_expanded(d)),
        lambda d: torch.ops.aten.__lshift__.Scalar_out(
            torch.ones(3, 4, dtype=torch.int32, device=d),
            1,
            out=torch.zeros(1, 4, dtype=torch.int32, device=d).expand(2, 4),
        ),
        # A generated out= wrapper computes into a fresh tensor, then copies.
        lambda d: (lambda x: torch.ops.aten.__lshift__.Scalar_out(x[:4], 1, out=x[2:6]))(
            torch.arange(8, dtype=torch.int32, device=d)
        ),
    ],
    ids=["any_uint8_out", "cat_expanded", "lshift_scalar_expanded", "lshift_scalar_partial_overlap"],
)
def test_out_accepted_where_cpu_accepts_it(case):
    torch.testing.assert_close(case(TPU).cpu(), case("cpu"))


@pytest.mark.parametrize(
    "case",
    [
        lambda d: torch.empty(0, 2, device=d)[torch.tensor([0, 1], device=d)],
        lambda d: torch.empty(0, 2, device=d).index_put_((torch.tensor([0, 1], device=d),), torch.ones(2, 2, device=d)),
        lambda d: torch.ops.aten._index_put_impl_(
            torch.empty(0, 1, 2, device=d), [torch.tensor([0, 1], device=d)] * 2, torch.ones(1, 1, 2, device=d)
        ),
    ],
    ids=["index", "index_put_", "_index_put_impl_"],
)
def test_index_into_an_empty_dim_raises(case):
    _same_error_as_cpu(case)


def _bn(d, x, w=None, b=None, rm=None, rv=None, train=True):
    return A.native_batch_norm(x, w, b, rm, rv, train, 0.1, 1e-5)


# Norm lowerings: CPU's checks in its kernels' order (rank, running stats
# pairing, dtype dispatch, mixed-type rule, shapes).
@pytest.mark.parametrize(
    "case",
    [
        lambda d: _bn(d, _t(d), train=False),
        lambda d: _bn(d, _t(d, 3, dtype=torch.int64)),
        lambda d: _bn(d, _t(d, 3, dtype=torch.int64), train=False),
        lambda d: _bn(d, _t(d, 3), rm=_t(d, 3), train=False),
        lambda d: _bn(d, _t(d, 2, 3, dtype=torch.complex64), rm=_t(d, 3), rv=_t(d, 3)),
        lambda d: _bn(d, _t(d, 2, 3), w=_t(d, 3, dtype=torch.float64), rm=_t(d, 3), rv=_t(d, 3)),
        lambda d: _bn(d, _t(d, 2, 3, dtype=torch.float64), w=_t(d, 3), rm=_t(d, 3), rv=_t(d, 3)),
        lambda d: _bn(d, _t(d, 2, 3), w=_t(d, 3), rm=_t(d, 3, dtype=torch.float64), rv=_t(d, 3)),
        lambda d: _bn(d, torch.zeros(0, 3, device=d), rm=_t(d, 3), rv=_t(d, 3)),
        lambda d: _bn(d, _t(d, 2, 3), rm=_t(d, 3), rv=_t(d, 1, 3), train=False),
        lambda d: A._native_batch_norm_legit(_t(d, 2, 3), None, None, None, _t(d, 3), True, 0.1, 1e-5),
        lambda d: A._native_batch_norm_legit_no_training(_t(d, 2), None, None, _t(d, 2), _t(d, 2), 0.1, 1e-5),
        lambda d: A._native_batch_norm_legit.no_stats(_t(d, 2, 2, dtype=torch.bool), None, None, True, 0.1, 1e-5),
        lambda d: A.native_group_norm(_t(d, 3, 4, dtype=torch.int64), None, None, 1, 4, 2, 1, 0.3),
        lambda d: A.native_group_norm(_t(d, 3, 4), None, None, 3, 4, 1, 3, 0.3),
        lambda d: A.native_group_norm(_t(d, 3, 4), _t(d, 1, 4), None, 3, 4, 1, 2, 0.3),
        lambda d: A.native_group_norm(_t(d, 3, 4), None, None, 1, 4, 2, 1, 0.3),
        lambda d: A.native_group_norm(
            _t(d, 3, 4, dtype=torch.float16), _t(d, 4), _t(d, 4, dtype=torch.float16), 3, 4, 1, 2, 0.3
        ),
        lambda d: A.native_group_norm_backward(
            *[_t(d, 3, 3, 3, dtype=torch.bool)] * 4, _t(d, 3, dtype=torch.bool), 3, 3, 3, 1, [True, True, True]
        ),
        lambda d: A.native_group_norm_backward(
            _t(d, 4, 2, 3), _t(d, 4, 2, 3), _t(d, 4, 1), _t(d, 4, 1), None, 4, 2, 3, 1, [True, True, True]
        ),
        lambda d: A.native_layer_norm(_t(d, 3, 2, dtype=torch.complex64), [2], None, None, 0.3),
        lambda d: A.native_layer_norm(_t(d, 2, 2), [2], _t(d, 2, 2), None, 0.3),
        lambda d: A.native_layer_norm(_t(d, 2, 1), [2, 1], None, _t(d, 1), 0.3),
        lambda d: A.native_layer_norm(
            _t(d, 2, 1, 1, dtype=torch.int64), [1], _t(d, 1, dtype=torch.complex128), None, 0.3
        ),
        lambda d: A.native_layer_norm(_t(d, 2, 3), [], None, None, 0.3),
        lambda d: A.native_layer_norm_backward(
            _t(d, 2, 3), _t(d, 2, 3), [3], _t(d, 2, 1), _t(d, 2, 1), _t(d, 3), None, [True, True, True]
        ),
    ],
    ids=[
        "bn_rank0",
        "bn_rank1_long_train",
        "bn_rank1_long_eval",
        "bn_rank1_one_stat_eval",
        "bn_complex",
        "bn_mixed_double_weight",
        "bn_mixed_double_input",
        "bn_stat_dtype",
        "bn_empty_train",
        "bn_stat_rank",
        "bn_legit_none_stat",
        "bn_no_training_rank1",
        "bn_no_stats_bool",
        "gn_long",
        "gn_groups",
        "gn_weight_shape",
        "gn_numel",
        "gn_mixed",
        "gn_backward_bool",
        "gn_backward_no_weight",
        "ln_complex",
        "ln_weight_shape",
        "ln_bias_shape",
        "ln_mixed",
        "ln_empty_shape",
        "ln_backward_no_bias",
    ],
)
def test_norm_errors_match_cpu(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        # CPU reads the first C elements of a longer or reshaped parameter
        lambda d: _bn(d, _t(d, 2, 3), w=_t(d, 1, 3), rm=_t(d, 5), rv=_t(d, 4) + 1),
        lambda d: _bn(d, _t(d, 2, 3), b=_t(d, 2, 3), rm=_t(d, 3), rv=_t(d, 3) + 1, train=False),
        # eval of an empty input returns before reading size(1)
        lambda d: _bn(
            d, torch.zeros(0, device=d), rm=torch.zeros(0, device=d), rv=torch.ones(0, device=d), train=False
        ),
        # group norm reads the input as a flat [N, C, HxW] buffer
        lambda d: A.native_group_norm(_t(d, 3, 4), None, None, 3, 2, 2, 1, 0.3),
        lambda d: A.native_group_norm(_t(d, 4), None, None, 1, 4, 1, 2, 0.3),
        # mean 0, rstd NaN over an empty normalized shape
        lambda d: A.native_layer_norm(torch.zeros(0, 4, device=d), [0, 4], None, None, 1.4),
        lambda d: A.native_layer_norm_backward(
            _t(d, 3), _t(d, 3), [3], _t(d, 3), _t(d, 3) + 1, _t(d, 3), None, [True, True, False]
        )[:2],
    ],
    ids=["bn_long_stats", "bn_eval_2d_bias", "bn_eval_empty", "gn_flat", "gn_rank1", "ln_empty", "ln_backward_rows"],
)
def test_norm_values_match_cpu(case):
    want, got = case("cpu"), case(TPU)
    for w, g in zip(want, got):
        g = g.cpu()
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, equal_nan=True)


# cdist: CPU's checks in its order (ranks, columns, dtypes, p, mode, batch;
# the backward reads sizes first, so low ranks are IndexError).
@pytest.mark.parametrize(
    "case",
    [
        lambda d: A._cdist_forward(_t(d, 3, dtype=torch.int64), _t(d, 2, 3), 2.0, None),
        lambda d: A._cdist_forward(_t(d, 2, 3), _t(d, 2, 3, dtype=torch.int16), 2.0, 3),
        lambda d: A._cdist_forward(_t(d, 2, 3), _t(d, 2, 3), 2.0, 3),
        lambda d: A._cdist_forward(_t(d, 2, 3), _t(d, 2, 3), -1.0, None),
        lambda d: A._cdist_forward(_t(d, 2, 3), _t(d, 2, 3, dtype=torch.float64), 1.0, None),
        lambda d: A._cdist_forward(_t(d, 30, 3), _t(d, 2, 3, dtype=torch.float64), 2.0, None),
        lambda d: A._cdist_forward(_t(d, 2, 3, dtype=torch.float16), _t(d, 2, 3, dtype=torch.float16), 2.0, None),
        lambda d: A._cdist_forward(_t(d, 2, 3, dtype=torch.float16), _t(d, 2, 3, dtype=torch.float16), 1.0, 1),
        lambda d: A._cdist_forward(_t(d, 2, 2, 3), _t(d, 3, 2, 3), 2.0, None),
        lambda d: A._cdist_backward(_t(d, 3), _t(d, 3), _t(d, 1), 0.6, _t(d, 3)),
        lambda d: A._cdist_backward(_t(d), _t(d), _t(d), 0.6, _t(d)),
        lambda d: A._cdist_backward(*[_t(d, 4, 4, dtype=torch.bool)] * 3, 0.5, _t(d, 4, 4, dtype=torch.bool)),
        lambda d: A._cdist_backward(_t(d, 2, 2), _t(d, 2, 3, dtype=torch.float16), _t(d, 2, 3), 0.9, _t(d, 2, 2)),
        lambda d: A._cdist_backward(_t(d, 2, 2), _t(d, 2, 3, dtype=torch.float64), _t(d, 2, 3), 0.9, _t(d, 2, 2)),
    ],
    ids=[
        "fw_rank",
        "fw_int_x2",
        "fw_mode",
        "fw_negative_p",
        "fw_mixed_kernel",
        "fw_mixed_product",
        "fw_half_kernel",
        "fw_half_p1_mode1",
        "fw_batch",
        "bw_rank1",
        "bw_rank0",
        "bw_bool",
        "bw_half",
        "bw_mixed",
    ],
)
def test_cdist_errors_match_cpu(case):
    _same_error_as_cpu(case)


@pytest.mark.parametrize(
    "case",
    [
        lambda d: A._cdist_forward(torch.zeros(0, 3, device=d), _t(d, 2, 3, dtype=torch.float64), 2.0, None),
        # the gradient keeps x1's broadcast batch dims; grad is read flat
        lambda d: A._cdist_backward(_t(d, 2, 2, 2), _t(d, 1, 2, 3), _t(d, 2, 2, 3) * 2, 0.5, _t(d, 2, 2, 2) + 1),
        lambda d: A._cdist_backward(_t(d, 4), _t(d, 2, 3), _t(d, 2, 3) * 2, 1.5, _t(d, 2, 2) + 1),
        lambda d: A._cdist_backward(_t(d, 2, 2), _t(d, 2, 3, dtype=torch.float64), _t(d, 2, 3), 0.0, _t(d, 2, 2)),
        lambda d: A._cdist_backward(
            torch.zeros(0, 2, dtype=torch.int64, device=d),
            torch.zeros(0, 3, dtype=torch.int64, device=d),
            _t(d, 2, 3, dtype=torch.int64),
            0.5,
            torch.zeros(0, 2, dtype=torch.int64, device=d),
        ),
    ],
    ids=["fw_empty_mixed", "bw_batch", "bw_flat_grad", "bw_p0_mixed", "bw_empty_long"],
)
def test_cdist_values_match_cpu(case):
    want, got = case("cpu"), case(TPU).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


# grid_sampler: sizes read before the rank check (IndexError for 0-d), the
# dtype dispatch of CPU's kernels.
@pytest.mark.parametrize(
    "case",
    [
        lambda d: A.grid_sampler_2d(_t(d), _t(d), 0, 0, True),
        lambda d: A.grid_sampler_3d(_t(d, 2), _t(d), 0, 0, True),
        lambda d: A.grid_sampler_2d(
            _t(d, 1, 1, 2, 2, dtype=torch.int64), _t(d, 1, 2, 2, 2, dtype=torch.int64), 0, 0, True
        ),
        lambda d: A.grid_sampler_2d(_t(d, 1, 1, 2, 2), _t(d, 1, 2, 2, 2, dtype=torch.float64), 0, 0, True),
        lambda d: A.grid_sampler_2d(_t(d, 1, 1, 0, 2), _t(d, 1, 2, 2, 2), 0, 0, True),
        lambda d: A.grid_sampler_2d_backward(_t(d), _t(d), _t(d), 0, 0, True, [True, True]),
        lambda d: A.grid_sampler_2d_backward(
            _t(d, 3, 9, 3, dtype=torch.bool),
            _t(d, 3, 3, 2, 3, dtype=torch.bool),
            _t(d, 3, 2, 3, 2, dtype=torch.bool),
            0,
            0,
            True,
            [True, True],
        ),
        lambda d: A.grid_sampler_3d_backward(
            *[_t(d, 1, 1, 2, 2, 2, dtype=torch.int64)] * 2,
            _t(d, 1, 2, 2, 2, 3, dtype=torch.int64),
            0,
            0,
            True,
            [True, True],
        ),
    ],
    ids=[
        "2d_zero_dim",
        "3d_grid_zero_dim",
        "2d_long",
        "2d_mixed",
        "2d_empty_spatial",
        "2d_backward_zero_dim",
        "2d_backward_bool",
        "3d_backward_long",
    ],
)
def test_grid_sampler_errors_match_cpu(case):
    _same_error_as_cpu(case)


def _ix(d, *values, dtype=_L):
    return torch.tensor(values, dtype=dtype, device=d)


_EBD = A._embedding_bag_dense_backward

# _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
# scale_grad_by_freq, mode, per_sample_weights, padding_idx) checks in CPU's order: index_select and size reads
# (IndexError) before the index dispatch and the dtypes of offset2bag and bag_size (RuntimeError).
EMBEDDING_BAG_BACKWARD_ERRORS = {
    "indices_matrix": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1).view(1, 2), _ix(d, 0, 0), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1
    ),
    "offset2bag_short": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1, 2), _ix(d, 0, 0), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1
    ),
    "float_indices_short_offset2bag": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1, dtype=torch.float32), _ix(d, 0), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1
    ),
    "float_indices": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1, dtype=torch.float32), _ix(d, 0, 0), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1
    ),
    "int_offset2bag": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 0, 0, dtype=torch.int32), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1
    ),
    "psw_short": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, _t(d, 1), -1
    ),
    "grad_1d": lambda d: _EBD(_t(d, 3), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1),
    "offset2bag_0d_no_index": lambda d: _EBD(
        _t(d, 3, 4), _ix(d), _ix(d, 1)[0], _ix(d, 2), _ix(d, 0), 5, False, 0, None, -1
    ),
    "max_indices_1d": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0, 0), _ix(d, 0, 0, 0), 5, False, 2, None, -1
    ),
    "max_indices_narrow": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0, 0), _ix(d, 0, 0, 0).view(3, 1), 5, False, 2, None, -1
    ),
    "max_indices_float": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0, 0), _t(d, 3, 4), 5, False, 2, None, -1
    ),
    "max_bag_past_grad": lambda d: _EBD(
        _t(d, 2, 4), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0, 1), _ix(d, *[0] * 12).view(3, 4), 5, False, 2, None, -1
    ),
    "max_index_out_of_range": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 0, 0), _ix(d, 2, 0, 0), _ix(d, *[7] * 12).view(3, 4), 5, False, 2, None, -1
    ),
    "max_0d_grad": lambda d: _EBD(
        _t(d), _ix(d, 0), _ix(d, 0, 0), _ix(d, 1, 0, 1), _ix(d, 0, 0, 0), 4, True, 2, None, 0
    ),
}


@pytest.mark.parametrize("name", list(EMBEDDING_BAG_BACKWARD_ERRORS))
def test_embedding_bag_dense_backward_errors_match_cpu(name):
    _same_error_as_cpu(EMBEDDING_BAG_BACKWARD_ERRORS[name])


EMBEDDING_BAG_BACKWARD_VALUES = {
    # CPU reads a grad of more dims as contiguous rows of grad.size(1)
    "grad_4d": lambda d: _EBD(
        _t(d, 2, 3, 2, 2), _ix(d, 0, 1), _ix(d, 0, 1), _ix(d, 2, 0), _ix(d, 0), 5, False, 0, None, -1
    ),
    # only indices.numel() rows of offset2bag and per_sample_weights are read; a 0-d one is one row
    "offset2bag_long": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 0, 1), _ix(d, 1, 2, 0), _ix(d, 2, 0, 1), _ix(d, 0), 5, True, 1, None, -1
    ),
    "offset2bag_0d": lambda d: _EBD(
        _t(d, 3, 4), _ix(d, 3), _ix(d, 2)[0], _ix(d, 2), _ix(d, 0), 5, False, 0, _t(d, 2)[1], -1
    ),
    # a 1-D grad is never read when every index is padding_idx
    "grad_1d_all_padding": lambda d: _EBD(
        _t(d, 3), _ix(d, 1, 1), _ix(d, 0, 0), _ix(d, 2), _ix(d, 0), 5, False, 0, None, 1
    ),
    # max mode: only the nonempty bags' max_indices are read, and only grad.size(1) of their columns
    "max_wide_indices": lambda d: _EBD(
        _t(d, 3, 4),
        _ix(d, 0, 1),
        _ix(d, 0, 0),
        _ix(d, 2, 1, 0),
        _ix(d, *range(18)).view(3, 6) % 5,
        5,
        False,
        2,
        None,
        -1,
    ),
    "max_unused_rows_out_of_range": lambda d: _EBD(
        _t(d, 3, 4),
        _ix(d, 0, 1),
        _ix(d, 0, 0),
        _ix(d, 2, 0, 0, 0),
        _ix(d, *[0] * 4, *[9] * 8).view(3, 4),
        5,
        False,
        2,
        None,
        -1,
    ),
}


@pytest.mark.parametrize("name", list(EMBEDDING_BAG_BACKWARD_VALUES))
def test_embedding_bag_dense_backward_values_match_cpu(name):
    want = EMBEDDING_BAG_BACKWARD_VALUES[name]("cpu")
    got = EMBEDDING_BAG_BACKWARD_VALUES[name](TPU).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


# Upsample kernels dispatch floats (not Half/BFloat16 for the antialiased ones) and, for some forwards, uint8; the
# other dtypes raise NotImplementedError after the shape checks, empty inputs included.
UPSAMPLE_DTYPE_CASES = {
    "nearest_exact1d_bool_empty": lambda d: A._upsample_nearest_exact1d(_t(d, 0, 2, 3, dtype=_B), [3], None),
    "nearest1d_long": lambda d: A.upsample_nearest1d(_t(d, 1, 2, 3, dtype=_L), [2]),
    "nearest2d_int": lambda d: A.upsample_nearest2d(_t(d, 1, 1, 2, 2, dtype=torch.int32), [3, 3]),
    "nearest3d_complex": lambda d: A.upsample_nearest3d(_t(d, 1, 1, 2, 2, 2, dtype=_C64), [3, 3, 3]),
    "nearest2d_backward_uint8": lambda d: A.upsample_nearest2d_backward(
        _t(d, 1, 1, 2, 2, dtype=torch.uint8), [2, 2], [1, 1, 3, 3]
    ),
    "nearest_exact3d_backward_bool": lambda d: A._upsample_nearest_exact3d_backward(
        _t(d, 1, 1, 2, 2, 2, dtype=_B), [2, 2, 2], [1, 1, 1, 1, 1]
    ),
    "linear1d_uint8": lambda d: A.upsample_linear1d(_t(d, 1, 2, 3, dtype=torch.uint8), [4], False),
    "trilinear3d_uint8": lambda d: A.upsample_trilinear3d(_t(d, 1, 1, 2, 2, 2, dtype=torch.uint8), [3, 3, 3], False),
    "bilinear2d_long": lambda d: A.upsample_bilinear2d(_t(d, 1, 1, 2, 2, dtype=_L), [3, 3], False),
    "bilinear2d_backward_uint8": lambda d: A.upsample_bilinear2d_backward(
        _t(d, 1, 1, 2, 2, dtype=torch.uint8), [2, 2], [1, 1, 3, 3], False
    ),
    "bicubic2d_bool": lambda d: A.upsample_bicubic2d(_t(d, 1, 1, 2, 2, dtype=_B), [3, 3], False),
    "bicubic2d_backward_int": lambda d: A.upsample_bicubic2d_backward(
        _t(d, 1, 1, 2, 2, dtype=torch.int32), [2, 2], [1, 1, 3, 3], False
    ),
    "bilinear2d_aa_half": lambda d: A._upsample_bilinear2d_aa(_t(d, 1, 1, 2, 2, dtype=torch.float16), [3, 3], False),
    "bilinear2d_aa_backward_bfloat16": lambda d: A._upsample_bilinear2d_aa_backward(
        _t(d, 1, 1, 2, 2, dtype=torch.bfloat16), [2, 2], [1, 1, 3, 3], False
    ),
}


@pytest.mark.parametrize("name", list(UPSAMPLE_DTYPE_CASES))
def test_upsample_dtypes_cpu_refuses_are_refused(name):
    _same_error_as_cpu(UPSAMPLE_DTYPE_CASES[name])


@pytest.mark.parametrize(
    "case",
    [
        lambda d: A.upsample_nearest2d(_t(d, 1, 1, 2, 2, dtype=torch.uint8) * 9, [3, 3]),
        lambda d: A._upsample_nearest_exact1d(_t(d, 1, 2, 2, dtype=torch.float16), [3], None),
        lambda d: A.upsample_nearest1d_backward(_t(d, 1, 1, 4, dtype=torch.bfloat16), [4], [1, 1, 2]),
    ],
    ids=["nearest2d_uint8", "nearest_exact1d_half", "nearest1d_backward_bfloat16"],
)
def test_upsample_dtypes_cpu_accepts_match(case):
    want = case("cpu")
    got = case(TPU).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)


# Scalar arguments the CPU kernels convert with Scalar::to<T> (c10::checked_convert) in the dtype they compute in:
# a complex value or one out of T's range raises "value cannot be converted to type T without overflow".
SCALAR_FITS_CASES = {
    "hardshrink_backward_complex": lambda d: A.hardshrink_backward(
        _t(d, 2, dtype=_B), _t(d, 2, dtype=torch.float64), 1 - 2j
    ),
    "hardshrink_backward_half_0d_bool": lambda d: A.hardshrink_backward(
        _t(d, 4, dtype=torch.float16), _t(d, dtype=_B), 1 - 2j
    ),
    "hardshrink_backward_half_big": lambda d: A.hardshrink_backward(
        _t(d, 4, dtype=torch.float16), _t(d, dtype=torch.float64), 1e6
    ),
    "softshrink_backward_float_big": lambda d: A.softshrink_backward(_t(d, 4), _t(d, 4), 1e300),
    "hardshrink_bfloat16_big": lambda d: A.hardshrink(_t(d, 4, dtype=torch.bfloat16), 1e300),
    "softshrink_complex": lambda d: A.softshrink(_t(d, 4), 0.5 - 1j),
    "hardtanh_complex": lambda d: A.hardtanh(_t(d, 4), 1 - 2j, 1 - 2j),
    "hardtanh_half_big": lambda d: A.hardtanh(_t(d, 4, dtype=torch.float16), -1, 70000.0),
    "hardtanh_uint8_big": lambda d: A.hardtanh(_t(d, 4, dtype=torch.uint8), 0, 1e9),
    "hardtanh_backward_big": lambda d: A.hardtanh_backward(_t(d, 4), _t(d, 4), -1, 1e300),
    "threshold_complex": lambda d: A.threshold(_t(d, 4), 1 - 2j, 0),
    "leaky_relu_big": lambda d: A.leaky_relu(_t(d, 4, dtype=torch.float16), 1e300),
    "leaky_relu_backward_complex": lambda d: A.leaky_relu_backward(_t(d, 4), _t(d, 4), 1 - 2j, False),
    "elu_big": lambda d: A.elu(_t(d, 4), 1, 1e300, 1),
    "elu_backward_complex": lambda d: A.elu_backward(_t(d, 4), 1 - 2j, 1, 1, False, _t(d, 4)),
    "softplus_big": lambda d: A.softplus(_t(d, 4), 1e300, 20),
    "softplus_backward_complex": lambda d: A.softplus_backward(_t(d, 4), _t(d, 4), 1, 1 - 2j),
    "rrelu_with_noise_big": lambda d: A.rrelu_with_noise(_t(d, 4), _t(d, 4), 1e300, 1e300, False),
    "clamp_half_big": lambda d: A.clamp(_t(d, 4, dtype=torch.float16), 70000.0),
    "clamp_min_bfloat16_big": lambda d: A.clamp_min(_t(d, 4, dtype=torch.bfloat16), 1e300),
    "logit_half_eps_big": lambda d: A.logit(_t(d, 4, dtype=torch.float16), 70000.0),
}


@pytest.mark.parametrize("name", list(SCALAR_FITS_CASES))
def test_scalar_that_does_not_fit_the_kernel_dtype_raises(name):
    _same_error_as_cpu(SCALAR_FITS_CASES[name])


@pytest.mark.parametrize(
    "case",
    [
        lambda d: A.hardtanh(_t(d, 4, dtype=torch.float64), float("nan"), 1.0),
        lambda d: A.hardtanh(_t(d, 4, dtype=torch.uint8), 0, 2.5),
        lambda d: A.hardshrink_backward(_t(d, 4, dtype=torch.float16), _t(d, 4, dtype=torch.float16), 0.5 + 0j),
    ],
    ids=["hardtanh_nan_limit", "hardtanh_uint8_fraction", "hardshrink_backward_real_complex"],
)
def test_scalars_that_fit_match_cpu(case):
    want = case("cpu")
    got = case(TPU).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, equal_nan=True)


# Pools refuse empty non-batch dims as CPU's shape checks do (adaptive_avg_pool2d checks only the pooled dims); an
# empty batch dim is accepted.
POOL_EMPTY_DIM_ERRORS = {
    "max_pool3d_4d_empty_first": lambda d: A.max_pool3d_with_indices(_z(d, 0, 3, 3, 3), [1, 1, 1]),
    "max_pool3d_empty_channels": lambda d: A.max_pool3d_with_indices(_z(d, 2, 0, 3, 3, 3), [1, 1, 1]),
    "max_pool3d_empty_spatial": lambda d: A.max_pool3d_with_indices(_z(d, 2, 2, 3, 3, 0), [1, 1, 1]),
    "avg_pool3d_empty_channels": lambda d: A.avg_pool3d(_z(d, 2, 0, 3, 3, 3), [1, 1, 1]),
    "max_pool2d_3d_empty_first": lambda d: A.max_pool2d_with_indices(_z(d, 0, 3, 3), [1, 1]),
    "max_pool2d_empty_channels": lambda d: A.max_pool2d_with_indices(_z(d, 2, 0, 3, 3), [1, 1]),
    "avg_pool2d_empty_channels": lambda d: A.avg_pool2d(_z(d, 2, 0, 3, 3), [1, 1]),
    "adaptive_max_pool2d_empty_spatial": lambda d: A.adaptive_max_pool2d(_z(d, 2, 2, 0, 3), [1, 1]),
    "adaptive_max_pool3d_empty_channels": lambda d: A.adaptive_max_pool3d(_z(d, 2, 0, 3, 3, 3), [1, 1, 1]),
    "adaptive_max_pool3d_empty_spatial": lambda d: A.adaptive_max_pool3d(_z(d, 2, 3, 0, 3), [1, 1, 1]),
    "adaptive_avg_pool3d_empty_channels": lambda d: A._adaptive_avg_pool3d(_z(d, 2, 0, 3, 3, 3), [1, 1, 1]),
    "adaptive_avg_pool2d_empty_spatial": lambda d: A._adaptive_avg_pool2d(_z(d, 2, 3, 0), [1, 1]),
}


@pytest.mark.parametrize("name", list(POOL_EMPTY_DIM_ERRORS))
def test_pool_empty_non_batch_dims_raise(name):
    _same_error_as_cpu(POOL_EMPTY_DIM_ERRORS[name])


@pytest.mark.parametrize(
    "case",
    [
        lambda d: A.max_pool3d_with_indices(_z(d, 0, 2, 3, 3, 3), [1, 1, 1]),
        lambda d: A.max_pool2d_with_indices(_z(d, 0, 2, 3, 3), [1, 1]),
        lambda d: A.adaptive_max_pool2d(_z(d, 0, 3, 3), [1, 1]),
        lambda d: A._adaptive_avg_pool2d(_z(d, 2, 0, 3, 3), [1, 1]),
        lambda d: A._adaptive_avg_pool3d(_z(d, 0, 3, 3, 3), [1, 1, 1]),
    ],
    ids=[
        "max_pool3d_empty_batch",
        "max_pool2d_empty_batch",
        "adaptive_max_pool2d_3d",
        "adaptive_avg_pool2d_channels",
        "adaptive_avg_pool3d_4d",
    ],
)
def test_pool_empty_batch_matches_cpu(case):
    want = case("cpu")
    got = case(TPU)
    for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        assert g.shape == w.shape and g.dtype == w.dtype
