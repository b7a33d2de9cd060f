"""The demo digits CNN as an RGB NHWC Keras model, what MediaPipe Tasks' ImageClassifier accepts (input [1, H, W, 3]:
it refuses GRAYSCALE metadata with "Only RGB color space is supported for now"), with the trained weights of
edgekit/demo/digits_cnn.pt2 copied over and a softmax on top so the scores are probabilities. The first conv's
kernel is the gray kernel / 3 on each of R, G, B: on a gray image (R = G = B, as Pillow converts the digit PNGs)
it computes what the gray model computes. Deterministic: no training."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "calibration_data" / "digits"


def torch_weights() -> dict:
    import torch

    program = torch.export.load(str(REPO / "edgekit" / "demo" / "digits_cnn.pt2"))
    return {k: v.detach().numpy() for k, v in program.state_dict.items()}


def build_keras_digits(path: Path) -> Path:
    """Save the NHWC model to ``path`` (.keras) and return it."""
    import keras

    w = torch_weights()
    layers = [keras.Input((8, 8, 3), batch_size=1, name="image"),
              keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv1"),
              keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2"),
              keras.layers.MaxPooling2D(2, name="pool"),
              keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv3"),
              keras.layers.GlobalAveragePooling2D(name="gap"),
              keras.layers.Dense(10, name="logits"),
              keras.layers.Softmax(name="scores")]
    model = keras.Sequential(layers)
    rgb = np.repeat(w["features.0.weight"], 3, axis=1) / 3.0
    model.get_layer("conv1").set_weights([rgb.transpose(2, 3, 1, 0), w["features.0.bias"]])
    for name, key in (("conv2", "features.2"), ("conv3", "features.5")):
        model.get_layer(name).set_weights([w[f"{key}.weight"].transpose(2, 3, 1, 0), w[f"{key}.bias"]])
    model.get_layer("logits").set_weights([w["classifier.weight"].T, w["classifier.bias"]])
    model.save(path)
    return path


def nhwc_copy(split: str, folder: Path) -> Path:
    """calibration_data/digits/<split> with its spec read as RGB NHWC (the images and labels unchanged)."""
    shutil.copytree(DIGITS / split, folder)
    spec = json.loads((folder / "preprocess.json").read_text())
    spec.update(layout="NHWC", color="rgb", name="digits-8x8-rgb")
    (folder / "preprocess.json").write_text(json.dumps(spec))
    return folder
