"""The classic preprocessing skew, reproduced on the demo model.

The demo model (edgekit/demo/digits_cnn.pt2) reads 8x8 gray digits in [0, 1]. To put the classic
RGB/ImageNet pipeline in front of it, :func:`rgb_digits_model` wraps it: the wrapper takes a
(1, 3, 8, 8) RGB tensor normalized with ImageNet mean/std, undoes the normalization and converts
to gray (ITU-R 601 luma) before the unchanged digits CNN. :func:`write_rgb_digits` renders real
digits (calibration_data/digits) as larger color photos-like images: bright ink on a dark tinted
background with paper grain, at an odd size, so that resizing and channel order matter.

Then the training pipeline (``REFERENCE_SPEC``: Pillow bilinear with antialias, RGB, ImageNet
mean/std) and a typical app pipeline (``APP_SPEC`` run with OpenCV: INTER_LINEAR, BGR, mean/std
0.5) give different tensors and different predictions:

    python -m edgekit.preprocessing.demo OUT        # writes OUT/images, OUT/model.tflite, specs
    edgekit preprocess-parity --reference OUT/reference.json --candidate opencv:OUT/app.json \\
        --images OUT/images --model OUT/model.tflite -o OUT/report
"""
from __future__ import annotations

import csv
import json
import sys
from importlib.resources import files
from pathlib import Path
from typing import Dict

import numpy as np

from edgekit._resources import data_dir

DEMO_MODEL = Path(str(files("edgekit.demo") / "digits_cnn.pt2"))
DIGITS = data_dir("calibration_data") / "digits"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RENDER_SIZE = (37, 35)  # (height, width) of the rendered images: an odd, non-integer scale of 8x8

REFERENCE_SPEC: Dict[str, object] = {
    "name": "rgb-digits-training", "color": "rgb", "size": [8, 8], "resize": "bilinear", "antialias": True,
    "scale": 1 / 255, "mean": list(IMAGENET_MEAN), "std": list(IMAGENET_STD), "layout": "NCHW", "dtype": "float32",
}
APP_SPEC: Dict[str, object] = {
    "name": "rgb-digits-app", "color": "bgr", "size": [8, 8], "resize": "bilinear", "antialias": False,
    "scale": 1 / 255, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "layout": "NCHW", "dtype": "float32",
}


def rgb_digits_model():
    """The demo digits CNN behind an RGB, ImageNet-normalized (1, 3, 8, 8) input (torch nn.Module)."""
    import torch

    from edgekit.demo.digits_model import DigitsCNN

    digits = DigitsCNN()  # the committed weights, loaded into the architecture they were trained in
    digits.load_state_dict(torch.export.load(str(DEMO_MODEL)).state_dict)

    class RGBDigits(torch.nn.Module):
        example_input_shape = (1, 3, 8, 8)

        def __init__(self) -> None:
            super().__init__()
            self.digits = digits
            self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))
            self.register_buffer("luma", torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1))

        def forward(self, x):
            rgb = x * self.std + self.mean
            gray = (rgb * self.luma).sum(dim=1, keepdim=True)
            return self.digits(gray)

    return RGBDigits().eval()


def render(gray8: np.ndarray, rng: np.random.Generator, size=RENDER_SIZE) -> np.ndarray:
    """An 8x8 digit (0..255, bright strokes) as a (H, W, 3) uint8 color image."""
    from PIL import Image

    up = np.asarray(Image.fromarray(gray8).resize((size[1], size[0]), Image.Resampling.BICUBIC), np.float64) / 255.0
    paper = rng.uniform(10, 60, 3)  # dark, tinted background
    ink = rng.uniform(170, 255, 3)  # bright, tinted strokes
    image = paper + up[:, :, None] * (ink - paper)
    image += rng.normal(0.0, 10.0, image.shape)  # paper grain / sensor noise
    return np.clip(np.round(image), 0, 255).astype(np.uint8)


def write_rgb_digits(folder: Path, source: Path = DIGITS / "eval", limit: int | None = None, seed: int = 0) -> Path:
    """Render the digits of ``source`` as color PNGs in ``folder`` (+ labels.csv); deterministic."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(source / "labels.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))[:limit]
    for k, row in enumerate(rows):
        rng = np.random.default_rng([seed, k])
        gray = np.asarray(Image.open(source / row["file"]).convert("L"))
        Image.fromarray(render(gray, rng)).save(folder / row["file"])
    with open(folder / "labels.csv", "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["file", "label"])
        writer.writerows([(r["file"], r["label"]) for r in rows])
    return folder


def export_model(path: Path) -> Path:
    """rgb_digits_model() as a float .tflite (litert-torch through edgekit's export stage)."""
    from edgekit.export import to_float_tflite

    path = Path(path)
    path.write_bytes(to_float_tflite("edgekit.preprocessing.demo:rgb_digits_model").tflite)
    return path


def write_demo(out: Path, limit: int | None = None) -> Path:
    out = Path(out)
    write_rgb_digits(out / "images", limit=limit)
    (out / "reference.json").write_text(json.dumps(REFERENCE_SPEC, indent=1) + "\n")
    (out / "app.json").write_text(json.dumps(APP_SPEC, indent=1) + "\n")
    export_model(out / "model.tflite")
    return out


if __name__ == "__main__":  # python -m edgekit.preprocessing.demo OUT [LIMIT]
    target = write_demo(Path(sys.argv[1] if len(sys.argv) > 1 else "out/skew-demo"),
                        int(sys.argv[2]) if len(sys.argv) > 2 else None)
    print(f"wrote {target}/images, reference.json, app.json, model.tflite")
