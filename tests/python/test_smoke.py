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
