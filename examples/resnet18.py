"""Train a ResNet-18 (defined below) on synthetic 3x32x32 images, on the tpu device.

The standard ResNet-18 topology: a 7x7 stride-2 stem convolution with
BatchNorm and ReLU, a 3x3 stride-2 max pool, four stages of two BasicBlocks
(3x3 convolutions with BatchNorm; the first block of stages 2-4 halves the
resolution and projects its shortcut with a strided 1x1 convolution), adaptive
average pooling and a linear classifier. Only the widths are smaller (16, 32,
64, 128 channels instead of 64-512) to keep the CPU run short. The synthetic
task has 4 classes, each a fixed random template that the images are noisy
copies of, so the loss falls quickly. Trained with SGD, momentum and weight
decay.

    python examples/resnet18.py                 # on tpu
    python examples/resnet18.py --device cpu    # the same run on CPU
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = 4


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = CLASSES, width: int = 16, in_channels: int = 3):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        widths = [width, 2 * width, 4 * width, 8 * width]
        layers, inplanes = [], width
        for i, planes in enumerate(widths):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inplanes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model() -> ResNet18:
    return ResNet18()


def batch(gen: torch.Generator, batch_size: int = 16, size: int = 32):
    """(images, labels): one fixed random template per class (seed 4321) plus as much noise."""
    templates = torch.randn(CLASSES, 3, size, size, generator=torch.Generator().manual_seed(4321))
    labels = torch.randint(0, CLASSES, (batch_size,), generator=gen)
    images = templates[labels] + torch.randn(batch_size, 3, size, size, generator=gen)
    return images, labels


def make_trainer(device: str, seed: int = 0):
    """(model, step): step() runs one training step on `device` and returns the loss tensor."""
    torch.manual_seed(seed)
    model = build_model().to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(seed)

    def step() -> torch.Tensor:
        x, y = (t.to(device) for t in batch(gen))
        loss = F.cross_entropy(model(x), y)
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
def infer(device: str, seed: int = 0) -> torch.Tensor:
    """Logits (on CPU) of the eval-mode model (BatchNorm with running statistics) for a batch."""
    torch.manual_seed(seed)
    model = build_model().to(device).eval()
    x, _ = batch(torch.Generator().manual_seed(seed + 1))
    return model(x.to(device)).cpu()


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
