"""Spec scenarios every implementation is compared on (tests and the agreement benchmark)."""

SCENARIOS = {
    "imagenet": dict(name="imagenet", color="rgb", shorter_side=256, crop=[224, 224], resize="bilinear",
                     mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], layout="NCHW"),
    "bilinear-noaa": dict(name="noaa", color="rgb", size=[96, 96], resize="bilinear", antialias=False, layout="NHWC"),
    "gray": dict(name="gray", color="grayscale", size=[32, 40], resize="bilinear", layout="NCHW"),
    "bicubic-int8-bgr": dict(name="int8", color="bgr", size=[32, 32], resize="bicubic", scale=1.0, layout="NHWC",
                             dtype="int8", quantization={"scale": 1.0, "zero_point": -128}),
    "nearest": dict(name="nn", color="rgb", size=[50, 70], resize="nearest"),
    "box": dict(name="box", color="rgb", size=[64, 64], resize="box"),
    "lanczos": dict(name="lanczos", color="rgb", size=[48, 48], resize="lanczos"),
}
