"""Train a small diffusion UNet (defined below) to denoise synthetic images, on the tpu device.

A DDPM-style toy: clean 1x16x16 images are random sums of oriented sine
waves; each step draws a timestep per image, noises the images by the linear
beta schedule and trains the UNet to predict the noise (mean squared error).
The UNet has residual blocks of GroupNorm, SiLU and 3x3 convolutions, a
sinusoidal timestep embedding fed through an MLP into every block, two
downsampling levels (avg_pool2d, then max_pool2d) and two upsampling levels
(F.interpolate nearest, then nn.Upsample bilinear), with skip connections
concatenated on the way up.

    python examples/unet.py                 # on tpu
    python examples/unet.py --device cpu    # the same run on CPU
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = 16
STEPS_T = 100  # diffusion timesteps


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding [n, dim] of integer timesteps t [n], as in DDPM / the Transformer."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int, groups: int = 4):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(emb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class UNet(nn.Module):
    def __init__(self, channels: int = 1, base: int = 16, temb: int = 64):
        super().__init__()
        c1, c2, c3 = base, 2 * base, 4 * base
        self.temb_dim = temb
        self.time_mlp = nn.Sequential(nn.Linear(temb, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inc = nn.Conv2d(channels, c1, 3, padding=1)
        self.down1 = ResBlock(c1, c1, temb)  # 16x16, then avg_pool2d -> 8x8
        self.down2 = ResBlock(c1, c2, temb)  # 8x8, then max_pool2d -> 4x4
        self.mid = ResBlock(c2, c3, temb)  # 4x4
        self.up2 = ResBlock(c3 + c2, c2, temb)  # F.interpolate nearest -> 8x8, skip from down2
        self.upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.up1 = ResBlock(c2 + c1, c1, temb)  # nn.Upsample bilinear -> 16x16, skip from down1
        self.out_norm = nn.GroupNorm(4, c1)
        self.out = nn.Conv2d(c1, channels, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        emb = self.time_mlp(timestep_embedding(t, self.temb_dim))
        h = self.inc(x)
        s1 = self.down1(h, emb)  # [b, c1, 16, 16]
        s2 = self.down2(F.avg_pool2d(s1, 2), emb)  # [b, c2, 8, 8]
        m = self.mid(F.max_pool2d(s2, 2), emb)  # [b, c3, 4, 4]
        u = self.up2(torch.cat([F.interpolate(m, scale_factor=2, mode="nearest"), s2], dim=1), emb)
        u = self.up1(torch.cat([self.upsample(u), s1], dim=1), emb)
        return self.out(F.silu(self.out_norm(u)))


def build_model() -> UNet:
    return UNet()


def alphas_cumprod(steps: int = STEPS_T) -> torch.Tensor:
    betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64) * (1000 / steps)
    return torch.cumprod(1 - betas, dim=0).float()


def clean_images(gen: torch.Generator, n: int) -> torch.Tensor:
    """[n, 1, SIZE, SIZE]: each the sum of two sine waves of random direction, frequency and phase."""
    coords = torch.stack(torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")).float() / SIZE
    img = torch.zeros(n, SIZE, SIZE)
    for _ in range(2):
        angle = torch.rand(n, generator=gen) * math.pi
        freq = 1 + 3 * torch.rand(n, generator=gen)
        phase = torch.rand(n, generator=gen) * 2 * math.pi
        direction = torch.stack([angle.cos(), angle.sin()], dim=1)  # [n, 2]
        proj = torch.einsum("nc,chw->nhw", direction, coords)
        img += torch.sin(2 * math.pi * freq[:, None, None] * proj + phase[:, None, None])
    return (img / 2).unsqueeze(1)


def batch(gen: torch.Generator, batch_size: int = 8):
    """(noisy images, timesteps, noise): x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) noise."""
    x0 = clean_images(gen, batch_size)
    t = torch.randint(0, STEPS_T, (batch_size,), generator=gen)
    noise = torch.randn(x0.shape, generator=gen)
    abar = alphas_cumprod()[t][:, None, None, None]
    return abar.sqrt() * x0 + (1 - abar).sqrt() * noise, t, noise


def make_trainer(device: str, seed: int = 0):
    """(model, step): step() runs one training step on `device` and returns the loss tensor."""
    torch.manual_seed(seed)
    model = build_model().to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)

    def step() -> torch.Tensor:
        xt, t, noise = (v.to(device) for v in batch(gen))
        loss = F.mse_loss(model(xt, t), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return model, step


def train(device: str, steps: int, seed: int = 0, log=print, return_model: bool = False):
    """Trains for `steps` steps; returns the losses (and the model when return_model)."""
    model, step = make_trainer(device, seed)
    losses = []
    t0 = None
    for i in range(steps):
        losses.append(step().item())
        if i == 0:
            t0 = time.perf_counter()  # the first step compiles; time the rest
        log(f"step {i:4d}  loss {losses[-1]:.4f}")
    if steps > 1:
        log(f"{device}: {(steps - 1) / (time.perf_counter() - t0):.2f} steps/s over {steps - 1} steps after the first")
    return (losses, model) if return_model else losses


@torch.no_grad()
def infer(device: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(predicted noise, one DDPM reverse step x_{t-1} without the added noise), on CPU, for a batch."""
    torch.manual_seed(seed)
    model = build_model().to(device).eval()
    xt, t, _ = batch(torch.Generator().manual_seed(seed + 1))
    xt, t = xt.to(device), t.to(device)
    eps = model(xt, t)
    abar = alphas_cumprod().to(device)
    a_t = abar[t][:, None, None, None]
    a_prev = torch.where(t > 0, abar[(t - 1).clamp(min=0)], torch.ones_like(abar[t]))[:, None, None, None]
    alpha = a_t / a_prev
    x_prev = (xt - (1 - alpha) / (1 - a_t).sqrt() * eps) / alpha.sqrt()
    return eps.cpu(), x_prev.cpu()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu")
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    if args.device.startswith("tpu"):
        import torch_pjrt  # noqa: F401  (import torch already autoloads it; explicit for clarity)
    train(args.device, args.steps)


if __name__ == "__main__":
    main()
