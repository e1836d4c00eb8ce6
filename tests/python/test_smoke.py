import torch

from compare import check, to_device


def test_add_matches_cpu():
    check(torch.add, torch.randn(3, 4), torch.randn(4))


def test_noncontiguous_view_keeps_strides():
    x = torch.randn(4, 6).t()[1:, ::2]
    y = to_device(x, torch.device("tpu"))
    assert y.stride() == x.stride()
    check(lambda a: a * 2, x)


def test_mlp_grad():
    check(lambda x, w: torch.nn.functional.gelu(x @ w).sum(), torch.randn(5, 3), torch.randn(3, 2), grad=True)


def test_isposinf_isneginf_and_attention_without_fallback():
    import torch_pjrt

    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan")])
    torch_pjrt.reset_metrics()
    check(torch.isposinf, x)
    check(torch.isneginf, x)
    check(torch.isneginf, torch.tensor([3, -4]))
    q = torch.randn(1, 2, 4, 8)
    check(lambda a: torch.nn.functional.scaled_dot_product_attention(a, a, a, is_causal=True), q, grad=True)
    assert torch_pjrt.metrics()["fallback_ops"] == {}
