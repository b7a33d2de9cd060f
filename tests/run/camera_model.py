"""A small 96x96 RGB camera-style classifier (person / no person / background style, 3 classes) with fixed
seeded weights, converted to a fully int8 .tflite (int8 input and output) with the TFLite converter.

CONV_2D (stride 2) -> DEPTHWISE_CONV_2D (stride 2) -> CONV_2D 1x1 -> MEAN -> FULLY_CONNECTED (logits), the
shape of the MLPerf Tiny visual-wake-words models at a fraction of their size; calibrated on the committed photos.
"""
from pathlib import Path

import numpy as np

SIZE = 96


def calibration_images(n: int = 16) -> np.ndarray:
    from PIL import Image

    from tests.preprocessing.edge_cases import PHOTO_FILES, PHOTOS

    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        image = Image.open(PHOTOS / PHOTO_FILES[i % len(PHOTO_FILES)]).convert("RGB")
        w, h = image.size
        left, top = int(rng.integers(0, w // 4)), int(rng.integers(0, h // 4))
        crop = image.crop((left, top, left + 3 * w // 4, top + 3 * h // 4)).resize((SIZE, SIZE), Image.BILINEAR)
        out.append(np.asarray(crop, np.float32) / 255.0)
    return np.stack(out)


def build(path: Path) -> Path:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(15)
    inputs = tf.keras.Input((SIZE, SIZE, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(inputs)
    x = tf.keras.layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu")(x)
    x = tf.keras.layers.Conv2D(16, 1, activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    outputs = tf.keras.layers.Dense(3)(x)  # int8 logits: they differ from frame to frame
    model = tf.keras.Model(inputs, outputs)
    calib = calibration_images()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([c[None]] for c in calib)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    Path(path).write_bytes(converter.convert())
    return Path(path)


if __name__ == "__main__":
    import sys

    print(build(Path(sys.argv[1])))
