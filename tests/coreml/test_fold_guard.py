"""The coremltools 9.0 requantization fold (common::int_op_canonicalization) and edgekit's guard against it.

A W8A8 model with a flatten between two differently calibrated activation quantizers (dequantize(s1) -> reshape
-> quantize(s2) in the MIL program) is converted twice:
- with ``safe_pass_pipeline()``: the evaluator must agree with the torch-quantized reference and
  ``find_requantization_folds`` must find nothing. This is the test that fails if the fold comes back into
  edgekit's conversions (e.g. coremltools renames the pass, or another pass starts doing the same).
- with coremltools' DEFAULT pipeline: the evaluator must show the damage and ``find_requantization_folds`` must
  name it. If a future coremltools fixes the pass, this test fails with a message saying so: the guard (and this
  test) can then be reviewed; coremltools is pinned, so that only happens on a deliberate upgrade.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

ct = pytest.importorskip("coremltools", reason="coremltools is needed to convert the W8A8 test model")
torch = pytest.importorskip("torch", reason="torch is needed to build and calibrate the W8A8 test model")

from torch import nn  # noqa: E402

from edgekit.coreml.evaluator import MILProgram  # noqa: E402
from edgekit.coreml.fold_guard import FOLDING_PASS, find_requantization_folds, requantization_folds, safe_pass_pipeline  # noqa: E402

SHAPE = (1, 1, 8, 8)


def _fake_quant(x, qparams):
    scale, zero_point = qparams
    return torch.quantize_per_tensor(x, scale, zero_point, torch.qint8).dequantize()


class FlattenBetweenQuantizers(nn.Module):
    """conv -> relu -> Q(s1) -> flatten -> Q(s2) -> linear: the flatten output has its own calibrated qparams."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(17)
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)
        self.q_in = self.q1 = self.q2 = None  # (scale, zero point) of each int8 activation quantizer

    def float_parts(self, x):
        conv = torch.relu(self.conv(x))
        return conv, torch.flatten(conv, 1)

    def forward(self, x):
        x = _fake_quant(x, self.q_in)
        conv = _fake_quant(torch.relu(self.conv(x)), self.q1)
        flat = _fake_quant(torch.flatten(conv, 1), self.q2)
        return self.fc(flat)


def calibrated_model() -> FlattenBetweenQuantizers:
    """Torch-side calibration with MinMax observers: symmetric int8 for the input and the conv output, affine int8
    for the flatten output (a ReLU output: [0, max] over the full int8 range, so about half the scale and zero
    point -128) — two correct but different quantizations of the same values."""
    from torch.ao.quantization.observer import MinMaxObserver

    model = FlattenBetweenQuantizers().eval()
    observe_in = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
    observe_conv = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
    observe_flat = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_affine)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for _ in range(16):
            x = torch.rand(SHAPE, generator=generator)
            conv, flat = model.float_parts(x)
            observe_in(x), observe_conv(conv), observe_flat(flat)
    model.q_in, model.q1, model.q2 = (
        (float(scale), int(zero_point)) for scale, zero_point in (o.calculate_qparams() for o in (observe_in, observe_conv, observe_flat))
    )
    return model


@pytest.fixture(scope="module")
def w8a8(tmp_path_factory):
    model = calibrated_model()
    assert model.q1 != model.q2, "the test model needs two different activation quantizations around the flatten"
    folder = tmp_path_factory.mktemp("fold_guard")
    traced = torch.jit.trace(model, torch.rand(SHAPE))
    programs = {}
    for name, pipeline in (("default", ct.PassPipeline.DEFAULT), ("safe", safe_pass_pipeline())):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = ct.convert(traced, inputs=[ct.TensorType(name="x", shape=SHAPE)], convert_to="mlprogram",
                                   minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT32,
                                   pass_pipeline=pipeline)
        converted.save(str(folder / f"{name}.mlpackage"))
        programs[name] = MILProgram.load(folder / f"{name}.mlpackage")
    inputs = [np.random.default_rng(i).random(SHAPE, dtype=np.float32) for i in range(8)]
    with torch.no_grad():
        references = [model(torch.from_numpy(x)).numpy().astype(np.float64) for x in inputs]
    return model, programs, inputs, references


def worst_error(program, inputs, references) -> float:
    """Largest |program - torch| relative to the largest |torch| output."""
    scale = max(float(np.max(np.abs(r))) for r in references)
    return max(float(np.max(np.abs(program.predict({"x": x})[program.outputs[0]] - r))) for x, r in zip(inputs, references)) / scale


# Tolerance of the quantized comparison: conv in torch (float32) and in the evaluator (float64) may round a value
# that sits on a .5 boundary of the int8 grid differently; one step of s2 on one of the 512 flattened values
# moves the output by at most s2 * max|fc weight|, far below this bound, while the fold moves it by tens of percent.
QUANTIZED_TOLERANCE = 1e-3


def test_safe_pipeline_removes_only_the_folding_pass():
    default = list(ct.PassPipeline.DEFAULT.passes)
    safe = list(safe_pass_pipeline().passes)
    assert FOLDING_PASS in default and FOLDING_PASS not in safe
    assert [p for p in default if p != FOLDING_PASS] == safe


def test_safe_pipeline_keeps_w8a8_correct(w8a8):
    model, programs, inputs, references = w8a8
    program = programs["safe"]
    assert {"quantize", "dequantize"} <= program.ops_used()
    assert find_requantization_folds(program) == []
    error = worst_error(program, inputs, references)
    print(f"safe pipeline: max error {error:.3g} of the output range (q1={model.q1}, q2={model.q2})")
    assert error <= QUANTIZED_TOLERANCE, (
        f"the W8A8 program converted with safe_pass_pipeline() differs from the torch-quantized model by {error:.3g} "
        "of the output range: a requantization fold is back in edgekit's Core ML conversions"
    )


def test_default_pipeline_still_folds_and_the_guard_sees_it(w8a8):
    model, programs, inputs, references = w8a8
    program = programs["default"]
    error = worst_error(program, inputs, references)
    folds = requantization_folds(program)
    print(f"default pipeline: max error {error:.3g} of the output range; folds: {find_requantization_folds(program)}")
    if not folds and error <= QUANTIZED_TOLERANCE:
        pytest.fail(
            f"coremltools {ct.__version__}'s default pipeline no longer folds dequantize(s1)->reshape->quantize(s2): "
            "the bug this guard works around looks fixed. Review edgekit/coreml/fold_guard.py (safe_pass_pipeline may "
            "no longer be needed) and update this test."
        )
    assert error > 10 * QUANTIZED_TOLERANCE
    assert len(folds) == 1
    fold = folds[0]
    assert np.isclose(float(fold.quantize_scale), model.q1[0]) and np.isclose(float(fold.dequantize_scale), model.q2[0])
    assert int(fold.dequantize_zero_point) == model.q2[1]
    assert "reshape" in fold.describe() and fold.through
    assert find_requantization_folds(program) == [fold.describe()]


def test_safe_pipeline_refuses_a_pipeline_without_the_pass():
    from edgekit.errors import InternalError

    with pytest.raises(InternalError, match=FOLDING_PASS):
        safe_pass_pipeline(ct.PassPipeline.EMPTY)


def test_fold_finder_accepts_a_path_and_finds_nothing_in_a_float_program(tmp_path):
    traced = torch.jit.trace(nn.Sequential(nn.Flatten(), nn.Linear(64, 4)).eval(), torch.rand(SHAPE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct.convert(traced, inputs=[ct.TensorType(name="x", shape=SHAPE)], convert_to="mlprogram",
                   minimum_deployment_target=ct.target.iOS17).save(str(tmp_path / "f.mlpackage"))
    assert find_requantization_folds(tmp_path / "f.mlpackage") == []
