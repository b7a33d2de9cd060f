"""FP32-vs-INT8 parity runs on LiteRT's optimized kernels; the report names them, and the claim that int8
results stay within 1 LSB per op of the reference kernels (BUILTIN_REF) is checked on the MLPerf Tiny int8 models."""
from __future__ import annotations

import numpy as np
import pytest

from edgekit.parity.runners import OPTIMIZED_NOTE, TFLiteRunner
from edgekit.report import kernel_lines
from edgekit.tflite_model import TFLiteModel
from tests.conftest import MLPERF


def test_default_kernels_are_the_optimized_ones_and_reports_say_so():
    model = TFLiteModel.load(MLPERF / "kws_ref_model_int8.tflite")
    optimized, reference = TFLiteRunner(model).describe(), TFLiteRunner(model, kernels="reference").describe()
    assert optimized["kernels"] == "LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES (optimized kernels)"
    assert optimized["kernels_note"] == OPTIMIZED_NOTE and "1 LSB per op" in OPTIMIZED_NOTE
    assert reference["kernels"] == "LiteRT BUILTIN_REF (reference kernels)" and "kernels_note" not in reference
    lines = kernel_lines(reference, optimized)
    assert lines[0] == ("Kernels: reference on LiteRT BUILTIN_REF (reference kernels); candidate on "
                        "LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES (optimized kernels).")
    assert lines[1] == f"Note: {OPTIMIZED_NOTE}."
    with pytest.raises(ValueError, match="kernels must be one of"):
        TFLiteRunner(model, kernels="fast")


# Largest |optimized - BUILTIN_REF| seen at the output (LSB): 1 per op; the AD autoencoder's 10 FC layers carry it to 2.
MAX_LSB = {"kws_ref_model_int8.tflite": 1, "ic_resnet8_int8.tflite": 1, "ad_autoencoder_int8.tflite": 2}


@pytest.mark.parametrize("name", sorted(MAX_LSB))
def test_optimized_int8_close_to_reference(name):
    model = TFLiteModel.load(MLPERF / name)
    optimized, reference = TFLiteRunner(model), TFLiteRunner(model, kernels="reference")
    spec = model.inputs[0]
    lo, hi = (spec.zero_point - 128) * spec.scale, (spec.zero_point + 127) * spec.scale
    rng = np.random.default_rng(0)
    worst = 0
    for _ in range(8):
        sample = [rng.uniform(lo, hi, (1, *spec.shape[1:])).astype(np.float32)]
        _, fast = optimized.run(sample)
        _, ref = reference.run(sample)
        worst = max(worst, int(np.max(np.abs(fast[0].astype(np.int32) - ref[0].astype(np.int32)))))
    assert worst <= MAX_LSB[name], f"{name}: optimized int8 output differs from BUILTIN_REF by {worst} LSB"
