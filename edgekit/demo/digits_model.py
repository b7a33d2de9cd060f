"""The demo model: a small CNN for scikit-learn's 8x8 handwritten digits.

Input: float32 NCHW (N, 1, 8, 8), pixel values in [0, 1] (8-bit gray / 255).
Output: (N, 10) logits (no softmax).
"""
from __future__ import annotations

from torch import nn

__all__ = ["DigitsCNN", "digits_cnn"]


class DigitsCNN(nn.Module):
    """Conv(1->16) -> Conv(16->32) -> MaxPool(2) -> Conv(32->32) -> GAP -> Linear(32->10)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def digits_cnn() -> nn.Module:
    """Build the (untrained) architecture. Weights come from the .pt2 the demo script saves."""
    return DigitsCNN()
