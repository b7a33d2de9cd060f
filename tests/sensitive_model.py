"""A small CNN built so that exactly ONE layer is quantization-sensitive (for per-layer analysis and fallback tests).

Use as ``tests.sensitive_model:sensitive_cnn`` wherever edgekit takes ``package.module:factory``.
Input: float32 NCHW (1, 3, 16, 16). Output: (1, 10) logits. Weights come from a seeded generator (same net on
every call).

Graph: conv1 3x3 (3->8) + ReLU -> conv2 3x3 (8->16) + ReLU  [SENSITIVE] -> conv3 3x3 stride 2 (16->16) + ReLU
-> global average pool -> linear (16->10).

Why conv2 is the sensitive layer: conv1's last output channel is dead (zero weights, bias -1, then ReLU: always
exactly 0). conv2 gives every output channel one huge weight (``OUTLIER_WEIGHT``) on that dead channel's centre tap
next to small informative weights (std 0.15). In float the huge weight multiplies 0 and does nothing; in int8 the
per-channel symmetric weight scale becomes OUTLIER_WEIGHT/127, so nearly every informative weight rounds to 0 or to
one large step and conv2's output is wrong (cumulative SQNR falls from ~40 dB to ~3 dB at conv2; the model output
ends near 9 dB). conv2's input and output activation ranges are ordinary (its output grid alone gives ~44 dB), so the
damage is local to conv2 and lies in its WEIGHTS: keeping conv2 alone in float restores the output, while int16
activations (16x8) would not help. This is the "outlier weight after BatchNorm folding / a dead channel" case that
per-channel weight quantization does not cure.

After ``edgekit quantize`` (litert-torch route; tensor names are identical in model_float.tflite and
model_int8.tflite) the ops are TRANSPOSE, CONV_2D conv1, CONV_2D conv2, PAD, CONV_2D conv3, MEAN, FULLY_CONNECTED:
conv2 is op #2 (``SENSITIVE_OP_INDEX``) and its output tensor is ``SENSITIVE_TENSOR`` (checked by
tests/test_per_layer.py).

``sample_inputs(n, seed)`` gives deterministic smooth random images for calibration and evaluation.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

INPUT_SHAPE = (1, 3, 16, 16)
SEED = 20261129
OUTLIER_WEIGHT = 40.0
SENSITIVE_LAYER = "conv2"
SENSITIVE_OP_INDEX = 2  # op index in model_int8.tflite (0 is the NCHW->NHWC TRANSPOSE)
SENSITIVE_TENSOR = "tests.sensitive_model.SensitiveCNN;;tests.sensitive_model.SensitiveCNN/torch.nn.modules.conv.Conv2d_conv2;1"


class SensitiveCNN(nn.Module):
    example_input_shape = INPUT_SHAPE

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, 10)
        self._init_weights()

    def _init_weights(self) -> None:
        g = torch.Generator().manual_seed(SEED)
        with torch.no_grad():
            for layer, std in ((self.conv1, 0.4), (self.conv2, 0.15), (self.conv3, 0.15), (self.head, 0.4)):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * std)
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=g) * 0.05 + (0.1 if layer is not self.head else 0.0))
            self.conv1.weight[-1].zero_()
            self.conv1.bias[-1] = -1.0           # dead channel: ReLU(-1) == 0 everywhere
            self.conv2.weight[:, -1, 1, 1] = OUTLIER_WEIGHT  # huge weight on the dead channel, every output channel

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.conv3(x))
        return self.head(torch.flatten(self.pool(x), 1))


def sensitive_cnn() -> nn.Module:
    """The network in eval mode (the ``package.module:factory`` entry point)."""
    return SensitiveCNN().eval()


def sample_inputs(n: int, seed: int = 0) -> np.ndarray:
    """n smooth random images (n, 3, 16, 16) float32 in about [-1, 1], a pure function of (n, seed)."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(-1.0, 1.0, size=(n, 3, 4, 4))
    images = np.repeat(np.repeat(coarse, 4, axis=2), 4, axis=3)
    images = images + rng.normal(0.0, 0.1, size=images.shape)
    return images.astype(np.float32)
