"""Preprocessing written the way users write it (no edgekit spec): a training side and serving sides.

The classic skew: training with PIL (bilinear, antialiased, RGB, ImageNet mean/std, CHW) and serving
with OpenCV (cv2.INTER_LINEAR, BGR as cv2.imread returns it, mean 0.5 / std 0.5, CHW).
"""
import numpy as np
from PIL import Image

SIZE = 112
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def _pil(path, mode="RGB", resample=Image.BILINEAR):
    with Image.open(path) as img:
        return np.asarray(img.convert(mode).resize((SIZE, SIZE), resample), np.float32)


def train(path):
    """PIL bilinear, RGB, ImageNet mean/std, CHW."""
    x = (_pil(path) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)


def serve(path):
    """cv2.imread (BGR), cv2.INTER_LINEAR, (x / 255 - 0.5) / 0.5, CHW."""
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    img = cv2.resize(img, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    x = (img / 255.0 - 0.5) / 0.5
    return x.transpose(2, 0, 1)


def train_nearest(path):
    """Only the resize method differs from train."""
    x = (_pil(path, resample=Image.NEAREST) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)


def train_hwc(path):
    """Only the layout differs from train."""
    return train(path).transpose(1, 2, 0)


def rgb_unit(path):
    """RGB on 0..1, CHW."""
    return (_pil(path) / 255.0).transpose(2, 0, 1)


def gray_unit(path):
    """Grayscale (PIL 'L') on 0..1, 1xHxW."""
    return (_pil(path, "L") / 255.0)[None]


def train_copy(path):
    """The same code as train, written again."""
    x = (_pil(path) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))
