"""untyped_storage().resize_() on tpu, as FSDP2 frees and restores parameters, compared with the same steps on CPU."""

from __future__ import annotations

import torch

import torch_pjrt


def both(fn):
    """fn(device) on CPU and on tpu; returns (cpu result, tpu result on the CPU)."""
    return fn("cpu"), fn("tpu").cpu()


def test_shrink_and_grow_keep_the_prefix():
    def steps(device):
        x = torch.arange(12.0, device=device)
        s = x.untyped_storage()
        s.resize_(5 * 4)  # shrink to five floats
        five = torch.empty(0, device=device).set_(s)
        s.resize_(8 * 4)  # grow again: the five are kept (the rest is unspecified; not compared)
        return torch.cat([five.clone(), torch.empty(0, device=device).set_(s)[:5]])

    cpu, tpu = both(steps)
    assert torch.equal(cpu, tpu)


def test_resize_to_zero_and_back_as_fsdp2_does():
    def steps(device):
        torch.manual_seed(0)
        lin = torch.nn.Linear(8, 4).to(device)
        full = lin.weight.detach().clone()
        storage = lin.weight.untyped_storage()
        nbytes = storage.nbytes()
        storage.resize_(0)  # freed between uses
        assert storage.nbytes() == 0
        storage.resize_(nbytes)  # restored, then refilled
        with torch.no_grad():
            lin.weight.copy_(full * 2)
        x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1)).to(device)
        out = lin(x)
        out.sum().backward()
        return torch.cat([out.detach().flatten(), lin.weight.grad.flatten(), lin.weight.detach().flatten()])

    cpu, tpu = both(steps)
    torch.testing.assert_close(tpu, cpu)


def test_freed_storage_frees_device_memory():
    x = torch.empty(1 << 20, device="tpu").fill_(1.0)
    torch_pjrt.synchronize()
    before = torch.tpu.memory_allocated()
    x.untyped_storage().resize_(0)
    assert torch.tpu.memory_allocated() <= before - (4 << 20) + 4096
    x.untyped_storage().resize_(4 << 20)
    x.fill_(3.0)
    assert x.sum().item() == 3.0 * (1 << 20)
