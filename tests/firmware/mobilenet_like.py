"""A tiny MobileNet-style PyTorch model with fixed random weights, for firmware tests.

Use as ``tests.firmware.mobilenet_like:mobilenet_like`` wherever edgekit takes ``package.module:factory``
(``edgekit quantize``, ``edgekit deploy``). Input: float32 NCHW (1, 3, 32, 32). Output: (1, 10) logits.

Stem conv (stride 2) + BN + hardswish, three inverted-residual blocks (1x1 expand, 3x3 depthwise, 1x1
project; hardswish / ReLU / hardswish; residual adds in the stride-1 blocks, the middle one has stride 2),
global average pool, linear head. Weights and BatchNorm statistics are drawn from a seeded generator, so every
call returns the same network. Through `edgekit quantize` (litert-torch) it becomes TRANSPOSE, PAD, CONV_2D,
DEPTHWISE_CONV_2D, HARD_SWISH, ADD, MEAN and FULLY_CONNECTED in int8.

`calibration_images(n)` gives n seeded inputs to calibrate and check parity with, e.g.
``np.save("calib.npy", calibration_images(100))`` then
``edgekit quantize tests.firmware.mobilenet_like:mobilenet_like --calib calib.npy -o out``.
"""
from __future__ import annotations

import torch
from torch import nn

INPUT_SHAPE = (1, 3, 32, 32)
SEED = 20240607


class InvertedResidual(nn.Module):
    """1x1 expand -> 3x3 depthwise -> 1x1 project (+ identity when stride 1 and channels match)."""

    def __init__(self, cin: int, cout: int, expand: int, stride: int, activation: type) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), activation(),
            nn.Conv2d(hidden, hidden, 3, stride=stride, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            activation(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_residual else y


class MobileNetLike(nn.Module):
    example_input_shape = INPUT_SHAPE

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 2, 1, nn.Hardswish),
            InvertedResidual(16, 24, 3, 2, nn.ReLU),
            InvertedResidual(24, 24, 2, 1, nn.Hardswish),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(24, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


def _randomize(model: nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                fan_in = module.weight[0].numel()
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * (2.0 / fan_in) ** 0.5)
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=gen) * 0.1)
            elif isinstance(module, nn.BatchNorm2d):
                n = module.num_features
                module.weight.copy_(1.0 + 0.2 * torch.randn(n, generator=gen))
                module.bias.copy_(0.2 * torch.randn(n, generator=gen))
                module.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
                module.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def mobilenet_like() -> nn.Module:
    """The model in eval mode with its fixed weights."""
    model = MobileNetLike()
    _randomize(model, SEED)
    return model.eval()


def _grating_images(count: int, rng):
    """Coloured sine gratings of random frequency, orientation, phase and colour, float32 in [0, 1]."""
    import numpy as np

    yy, xx = np.meshgrid(np.arange(32, dtype=np.float32), np.arange(32, dtype=np.float32), indexing="ij")
    out = np.empty((count, 3, 32, 32), np.float32)
    for i in range(count):
        fx, fy = rng.uniform(0.1, 0.8, 2) * rng.choice([-1.0, 1.0], 2)
        wave = np.sin(fx * xx + fy * yy + rng.uniform(0.0, 6.3))
        colour, base = rng.uniform(-0.5, 0.5, 3), rng.uniform(0.2, 0.8, 3)
        out[i] = np.clip(base[:, None, None] + colour[:, None, None] * wave[None], 0.0, 1.0)
    return out


def calibration_images(count: int, seed: int = 0, min_margin: float = 0.5):
    """`count` seeded input images (count, 3, 32, 32) on which the float model's top-1 class is unambiguous.

    With random weights many inputs give near-tied logits; top-1 agreement on those measures the tie, not
    the quantization. Images whose top-1/top-2 logit margin is below `min_margin` are skipped.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    model = mobilenet_like()
    kept = []
    total = 0
    while total < count:
        batch = _grating_images(4 * count, rng)
        with torch.no_grad():
            logits = model(torch.from_numpy(batch)).numpy()
        top2 = np.sort(logits, axis=1)[:, -2:]
        good = batch[(top2[:, 1] - top2[:, 0]) >= min_margin]
        kept.append(good[: count - total])
        total += len(kept[-1])
    return np.concatenate(kept).astype(np.float32)
