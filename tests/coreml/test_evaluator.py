"""The numpy MIL evaluator against torch (float programs), hand-computed quantization values, and bad packages."""
from __future__ import annotations

import shutil
import sys
import warnings

import numpy as np
import pytest

ct = pytest.importorskip("coremltools", reason="coremltools is needed to convert test models to .mlpackage")
torch = pytest.importorskip("torch", reason="torch is needed to build the reference models")

from edgekit.coreml.evaluator import MILProgram  # noqa: E402
from edgekit.coreml.ops import OPS, OpCall, dequantize_values, quantize_values  # noqa: E402
from edgekit.errors import CalibrationDataError, InvalidModelError, UnsupportedOpError  # noqa: E402
from tests.conftest import DEMO_MODEL  # noqa: E402

FLOAT_TOLERANCE = 1e-5  # max |evaluator - torch| / max |torch| on fp32 programs

nn = torch.nn
F = torch.nn.functional


def mlp() -> nn.Module:
    """Flatten -> Linear -> ReLU -> Linear -> Softmax on a (1, 1, 8, 8) input."""
    torch.manual_seed(3)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10), nn.Softmax(dim=1)).eval()


class OpZoo(nn.Module):
    """Many ops coremltools maps to distinct MIL ops: conv variants, pools, activations, shape ops, norms."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(11)
        self.conv_same = nn.Conv2d(4, 8, 3, padding="same", dilation=2)
        self.conv_group = nn.Conv2d(8, 8, 3, stride=2, padding=(1, 2), groups=2)
        self.conv_dw = nn.Conv2d(8, 8, 5, padding=2, groups=8, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.ln = nn.LayerNorm(10)
        self.fc = nn.Linear(16, 10)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        a = F.relu6(self.conv_same(x) * 3.0)
        b = self.conv_group(a)  # (1, 8, 8, 9)
        b = F.pad(b, (0, 1, 1, 0), mode="reflect")  # (1, 8, 9, 10)
        c = torch.sigmoid(b) - torch.tanh(b) / 2 + F.silu(b) + F.gelu(b) + F.leaky_relu(b, 0.1) + F.elu(b)
        c = c / (1.5 + torch.abs(b)) + F.hardsigmoid(b) * F.hardtanh(b, -0.5, 0.5)
        d = self.conv_dw(c)
        e = torch.cat([F.max_pool2d(c, 2, ceil_mode=True), F.avg_pool2d(d, 3, stride=2, padding=1, count_include_pad=False,
                                                                         ceil_mode=True)], dim=1)  # (1, 16, 5, 5)
        e = F.avg_pool2d(self.bn(e), 2, stride=1, padding=1)  # (1, 16, 6, 6), padding counted
        f = F.interpolate(e, scale_factor=2, mode="nearest")  # (1, 16, 12, 12)
        g = f.permute(0, 2, 3, 1).mean(dim=(1, 2))  # (1, 16)
        h = self.ln(self.fc(g))
        m = torch.matmul(h.unsqueeze(2), h.unsqueeze(1))  # (1, 10, 10)
        s = torch.softmax(m.squeeze(0)[2:7, ::2].reshape(1, -1), dim=-1)  # (1, 25)
        return torch.cat([h, s.max(dim=-1, keepdim=True).values - s.mean(dim=-1, keepdim=True), s[:, :3]], dim=1)


ZOO_INPUT_SHAPE = (1, 4, 16, 18)


def op_zoo() -> nn.Module:
    return OpZoo().eval()


def _mobilenet():
    from tests.firmware.mobilenet_like import mobilenet_like

    return mobilenet_like().eval()


def _digits():
    if not DEMO_MODEL.is_file():
        pytest.skip(f"demo model {DEMO_MODEL} is missing")
    return torch.export.load(str(DEMO_MODEL)).module()


MODELS = {
    "digits": (_digits, (1, 1, 8, 8)),
    "mobilenet_like": (_mobilenet, (1, 3, 32, 32)),
    "mlp": (mlp, (1, 1, 8, 8)),
    "op_zoo": (op_zoo, ZOO_INPUT_SHAPE),
}


def convert(module, shape, path, *, target=None, precision=None, inputs=None, **kwargs):
    """torch.jit.trace -> ct.convert -> save; returns the saved path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, torch.rand(shape))
        model = ct.convert(
            traced,
            inputs=inputs or [ct.TensorType(name="x", shape=shape)],
            convert_to="mlprogram",
            minimum_deployment_target=target or ct.target.iOS17,
            compute_precision=precision or ct.precision.FLOAT32,
            **kwargs,
        )
    model.save(str(path))
    return path


@pytest.fixture(scope="module")
def float_programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coreml_float")
    made = {}
    for name, (factory, shape) in MODELS.items():
        module = factory()
        made[name] = (module, shape, convert(module, shape, folder / f"{name}.mlpackage"))
    return made


def relative_error(actual, expected) -> float:
    return float(np.max(np.abs(np.asarray(actual, np.float64) - expected)) / np.max(np.abs(expected)))


@pytest.mark.parametrize("name", list(MODELS))
def test_float_program_matches_torch(float_programs, name):
    module, shape, path = float_programs[name]
    program = MILProgram.load(path)
    program.check_supported()
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(4):
        x = rng.standard_normal(shape).astype(np.float32)
        with torch.no_grad():
            expected = module(torch.from_numpy(x)).numpy().astype(np.float64)
        out = program.predict({"x": x})
        assert list(out) == program.outputs
        worst = max(worst, relative_error(out[program.outputs[0]], expected))
    print(f"{name}: max |evaluator - torch| / max |torch| = {worst:.3g} over 4 inputs; ops {sorted(program.ops_used())}")
    assert worst <= FLOAT_TOLERANCE


def test_op_zoo_covers_the_common_ops(float_programs):
    program = MILProgram.load(float_programs["op_zoo"][2])
    expected = {"conv", "linear", "matmul", "add", "sub", "mul", "real_div", "relu6", "clip", "sigmoid", "sigmoid_hard",
                "tanh", "silu", "gelu", "elu", "leaky_relu", "softmax", "reduce_mean", "reduce_max", "avg_pool",
                "max_pool", "reshape", "transpose", "squeeze", "expand_dims", "concat", "slice_by_index", "pad",
                "batch_norm", "layer_norm", "upsample_nearest_neighbor"}
    assert expected <= program.ops_used(), expected - program.ops_used()


def test_keep_intermediates_returns_every_value(float_programs):
    program = MILProgram.load(float_programs["mlp"][2])
    values = program.predict({"x": np.ones((1, 1, 8, 8), np.float32)}, keep_intermediates=True)
    assert "x" in values and program.outputs[0] in values and len(values) > 5


# ---------------------------------------------------------------- quantization semantics
def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 300.0, -300.0], np.float32)
    q = quantize_values(x, np.float32(1.0), None, None, "int8")
    assert q.dtype == np.int8
    assert q.tolist() == [0, 2, 2, 0, -2, -2, 0, 127, -128]
    q = quantize_values(np.array([0.0, 0.25, 0.75, -100.0, 100.0], np.float32), np.float32(0.5), np.uint8(128), None, "uint8")
    assert q.dtype == np.uint8
    assert q.tolist() == [128, 128, 130, 0, 255]  # 0.5 -> 0 (even), 1.5 -> 2


def test_per_channel_quantize_and_dequantize_follow_axis():
    x = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], np.float32)
    scale = np.array([0.5, 0.25], np.float32)
    zero_point = np.array([-1, 3], np.int8)
    q = quantize_values(x, scale, zero_point, 0, "int8")
    assert q.tolist() == [[1, 3, 5], [7, 11, 15]]
    back = dequantize_values(q, scale, zero_point, 0)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, x)
    q = np.array([[10, -10], [0, 127]], np.int8)
    out = dequantize_values(q, np.array([0.1, 2.0], np.float16), np.array([2, -1], np.int8), 1)
    assert out.dtype == np.float16  # coremltools: the result has the scale's dtype
    np.testing.assert_array_equal(out, np.array([[0.8, -18.0], [-0.2, 256.0]], np.float32).astype(np.float16))


def test_constexpr_blockwise_shift_scale_repeats_scales_per_block():
    data = np.arange(8, dtype=np.int8).reshape(2, 4)
    scale = np.array([[1.0, 10.0], [100.0, 1000.0]], np.float32)
    offset = np.array([[1, 0], [0, 1]], np.int8)
    call = OpCall("constexpr_blockwise_shift_scale", "w", {"data": [data], "scale": [scale], "offset": [offset]}, [None], {})
    out = OPS["constexpr_blockwise_shift_scale"](call)
    np.testing.assert_array_equal(out, [[-1.0, 0.0, 20.0, 30.0], [400.0, 500.0, 5000.0, 6000.0]])


def test_quantize_dequantize_program_from_the_mil_builder(tmp_path):
    """A real iOS17 program (quantize -> dequantize per channel) read from disk gives the hand-computed values."""
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 2, 3))], opset_version=ct.target.iOS17)
    def prog(x):
        q = mb.quantize(input=x, scale=np.array([0.5, 2.0], np.float32), zero_point=np.array([1, -3], np.int8),
                        axis=1, output_dtype="int8")
        return mb.dequantize(input=q, scale=np.array([0.5, 2.0], np.float32), zero_point=np.array([1, -3], np.int8), axis=1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                           compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY)
    model.save(str(tmp_path / "qdq.mlpackage"))
    program = MILProgram.load(tmp_path / "qdq.mlpackage")
    assert {"quantize", "dequantize"} <= program.ops_used()
    x = np.array([[[0.25, 0.75, 70.0], [3.0, 5.0, -1000.0]]], np.float32)
    out = program.predict({program.inputs[0].name: x})[program.outputs[0]]
    # channel 0: round(x/0.5)+1 = [1 (0.5->0), 3 (1.5->2), 127 (141 saturated)] -> 0.5*(q-1)
    # channel 1: round(x/2)-3 = [-1 (1.5->2), -1 (2.5->2), -128 (-503 saturated)] -> 2*(q+3)
    np.testing.assert_array_equal(out, [[[0.0, 1.0, 63.0], [4.0, 4.0, -250.0]]])


def _per_channel_int8(weight: np.ndarray) -> np.ndarray:
    """Symmetric per-output-channel int8 fake quantization, computed independently of coremltools."""
    scale = np.abs(weight.reshape(weight.shape[0], -1)).max(axis=1).reshape([-1] + [1] * (weight.ndim - 1)) / 127.0
    return np.clip(np.round(weight / scale), -127, 127) * scale


@pytest.mark.parametrize("target", ["iOS16", "iOS18"])
def test_w8_program_equals_torch_with_int8_weights(float_programs, tmp_path, target):
    """linear_quantize_weights (per-channel symmetric int8) read back: same weights and outputs as numpy's own."""
    import coremltools.optimize as cto

    module, shape, _ = float_programs["mlp"]
    path = convert(module, shape, tmp_path / "f.mlpackage", target=getattr(ct.target, target))
    config = cto.coreml.OptimizationConfig(global_config=cto.coreml.OpLinearQuantizerConfig(
        mode="linear_symmetric", granularity="per_channel", weight_threshold=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cto.coreml.linear_quantize_weights(ct.models.MLModel(str(path), skip_model_load=True), config).save(
            str(tmp_path / "w8.mlpackage"))
    program = MILProgram.load(tmp_path / "w8.mlpackage")
    assert ("constexpr_affine_dequantize" if target == "iOS16" else "constexpr_blockwise_shift_scale") in program.ops_used()
    quantized = mlp()
    with torch.no_grad():
        for layer in quantized.modules():
            if isinstance(layer, torch.nn.Linear):
                layer.weight.copy_(torch.from_numpy(_per_channel_int8(layer.weight.numpy())))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    values = program.predict({"x": x}, keep_intermediates=True)
    for layer in quantized.modules():
        if isinstance(layer, torch.nn.Linear):
            decoded = [v for v in values.values() if isinstance(v, np.ndarray) and v.shape == tuple(layer.weight.shape)]
            assert decoded and np.max(np.abs(decoded[0] - layer.weight.detach().numpy())) <= 1e-7
    with torch.no_grad():
        expected = quantized(torch.from_numpy(x)).numpy()
    assert relative_error(values[program.outputs[0]], expected) <= FLOAT_TOLERANCE
    assert relative_error(values[program.outputs[0]], module(torch.from_numpy(x)).detach().numpy()) > 1e-5  # really int8


@pytest.mark.parametrize("pad_type, pads", [("same", (0, 1, 1, 2)), ("same_lower", (1, 0, 2, 1))])
def test_conv_and_pool_same_padding_put_the_odd_pixel_where_the_spec_says(pad_type, pads):
    """MIL 'same' pads the extra pixel after, 'same_lower' before (height 6, width 7, kernel 3x4, stride 2)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    top, bottom, left, right = pads
    call = OpCall("conv", "c", {"x": [x], "weight": [w], "strides": [np.array([2, 2])], "pad_type": [pad_type]}, [None], {})
    expected = F.conv2d(F.pad(torch.from_numpy(x), (left, right, top, bottom)), torch.from_numpy(w), stride=2).numpy()
    np.testing.assert_allclose(OPS["conv"](call), expected, rtol=1e-5, atol=1e-5)
    call = OpCall("max_pool", "p", {"x": [x], "kernel_sizes": [np.array([3, 4])], "strides": [np.array([2, 2])],
                                    "pad_type": [pad_type]}, [None], {})
    expected = F.max_pool2d(F.pad(torch.from_numpy(x), (left, right, top, bottom), value=-np.inf), (3, 4), 2).numpy()
    np.testing.assert_array_equal(OPS["max_pool"](call), expected)


def test_fp16_program_rounds_every_result_to_fp16(tmp_path):
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(4,), dtype=ct.converters.mil.mil.types.fp16)], opset_version=ct.target.iOS17)
    def prog(x):
        y = mb.mul(x=x, y=np.float16(3.0))
        return mb.add(x=y, y=np.float16(0.0001))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                           pass_pipeline=ct.PassPipeline.EMPTY)
    model.save(str(tmp_path / "fp16.mlpackage"))
    program = MILProgram.load(tmp_path / "fp16.mlpackage")
    x = np.array([1.0009766, 2049.0, 0.1, -7.3], np.float16)
    out = program.predict({program.inputs[0].name: x})[program.outputs[0]]
    assert out.dtype == np.float16
    expected = (x * np.float16(3.0)).astype(np.float16) + np.float16(0.0001)
    np.testing.assert_array_equal(out, expected.astype(np.float16))


# ---------------------------------------------------------------- image inputs and classifiers
def test_image_input_preprocessing_is_in_the_program(float_programs, tmp_path):
    module, shape, _ = float_programs["mobilenet_like"]
    scale, bias = 1 / 127.5, [-1.0, -0.5, 0.25]
    path = convert(module, shape, tmp_path / "img.mlpackage",
                   inputs=[ct.ImageType(name="image", shape=shape, scale=scale, bias=bias, color_layout=ct.colorlayout.BGR)])
    program = MILProgram.load(path)
    (image,) = program.inputs
    assert image.is_image and image.color_layout == "BGR" and image.shape == shape
    pixels = np.random.default_rng(3).integers(0, 256, shape).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(pixels * np.float32(scale) + np.array(bias, np.float32).reshape(1, 3, 1, 1)))
    out = program.predict({"image": pixels})[program.outputs[0]]
    assert relative_error(out, expected.numpy()) <= FLOAT_TOLERANCE
    # a pixel buffer holds uint8: fractional or out-of-range feeds are rounded and clipped like one
    np.testing.assert_array_equal(program.predict({"image": pixels + 0.2})[program.outputs[0]], out)


def test_classifier_reports_probabilities_in_class_order_and_the_label(float_programs, tmp_path):
    module, shape, _ = float_programs["mlp"]
    labels = [f"digit{i}" for i in range(10)]
    path = convert(module, shape, tmp_path / "cls.mlpackage", classifier_config=ct.ClassifierConfig(labels))
    program = MILProgram.load(path)
    assert program.class_labels == labels
    (label_output,) = program.label_outputs
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    out = program.predict({"x": x})
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    probabilities = [name for name in program.outputs if name != label_output]
    assert len(probabilities) == 1
    assert relative_error(out[probabilities[0]].reshape(expected.shape), expected) <= FLOAT_TOLERANCE
    assert str(out[label_output]) == labels[int(np.argmax(expected))]


# ---------------------------------------------------------------- every op against coremltools' own value inference
# Ops without a value inference in coremltools (conv, pools, batch_norm, silu, upsample_nearest_neighbor) are checked
# against torch through the converted programs above.
def _value_inference_cases():
    from coremltools.converters.mil.mil import types

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4, 5)) * 2).astype(np.float32)
    pos = np.abs(x) + 0.1
    y = (rng.standard_normal((2, 3, 4, 5))).astype(np.float32)
    m = rng.standard_normal((3, 4)).astype(np.float32)
    CASES = [
     ("relu", dict(x=x)), ("relu6", dict(x=x)), ("clip", dict(x=x, alpha=-1.0, beta=2.0)), ("sigmoid", dict(x=x)),
     ("sigmoid_hard", dict(x=x, alpha=0.2, beta=0.4)), ("tanh", dict(x=x)),
     ("thresholded_relu", dict(x=x, alpha=0.5)), ("clamped_relu", dict(x=x, alpha=0.3, beta=1.5)), ("leaky_relu", dict(x=x, alpha=0.1)),
     ("elu", dict(x=x, alpha=0.7)), ("softplus", dict(x=x)), ("softsign", dict(x=x)), ("linear_activation", dict(x=x, alpha=1.5, beta=-0.5)),
     ("scaled_tanh", dict(x=x, alpha=1.5, beta=0.5)), ("prelu", dict(x=x, alpha=np.array([0.1, 0.2, 0.3], np.float32))),
     ("gelu", dict(x=x, mode="EXACT")), ("gelu", dict(x=x, mode="TANH_APPROXIMATION")), ("gelu", dict(x=x, mode="SIGMOID_APPROXIMATION")),
     ("softmax", dict(x=x, axis=1)), ("exp", dict(x=x)), ("exp2", dict(x=x)), ("log", dict(x=pos)), ("sqrt", dict(x=pos)), ("rsqrt", dict(x=pos)),
     ("inverse", dict(x=pos)), ("square", dict(x=x)), ("abs", dict(x=x)), ("sign", dict(x=x)), ("floor", dict(x=x)), ("ceil", dict(x=x)),
     ("round", dict(x=x)), ("erf", dict(x=x)),
     ("add", dict(x=x, y=y)), ("sub", dict(x=x, y=y)), ("mul", dict(x=x, y=y)), ("real_div", dict(x=x, y=pos)), ("maximum", dict(x=x, y=y)),
     ("minimum", dict(x=x, y=y)), ("pow", dict(x=pos, y=y)), ("floor_div", dict(x=x, y=pos)), ("mod", dict(x=x, y=pos)),
     ("equal", dict(x=x, y=np.round(x))), ("less", dict(x=x, y=y)), ("greater_equal", dict(x=x, y=y)),
     ("reduce_mean", dict(x=x, axes=[1, 3], keep_dims=True)), ("reduce_sum", dict(x=x, axes=[0], keep_dims=False)),
     ("reduce_max", dict(x=x, axes=[-1], keep_dims=False)), ("reduce_min", dict(x=x, axes=[2], keep_dims=True)),
     ("reduce_prod", dict(x=pos, axes=[3], keep_dims=False)), ("reduce_l2_norm", dict(x=x, axes=[1], keep_dims=False)),
     ("reduce_sum_square", dict(x=x, axes=[1], keep_dims=False)), ("reduce_log_sum_exp", dict(x=x, axes=[1], keep_dims=False)),
     ("reduce_argmax", dict(x=x, axis=2, keep_dims=False)), ("reduce_argmin", dict(x=x, axis=-1, keep_dims=True)),
     ("transpose", dict(x=x, perm=[0, 2, 3, 1])), ("reshape", dict(x=x, shape=[6, -1])), ("squeeze", dict(x=x[:, :1], axes=[1])),
     ("expand_dims", dict(x=m, axes=[0, -1])), ("concat", dict(values=(x, y), axis=2)), ("tile", dict(x=m, reps=[2, 1])),
     ("pad", dict(x=x, pad=np.array([1, 2, 0, 1], np.int32), mode="constant", constant_val=0.5)),
     ("pad", dict(x=x, pad=np.array([1, 2, 2, 1], np.int32), mode="reflect")), ("pad", dict(x=x, pad=np.array([1, 2, 0, 1], np.int32), mode="replicate")),
     ("slice_by_index", dict(x=x, begin=[0, 1, 0, 4], end=[1, 3, 4, 0], stride=[1, 1, 2, -1], begin_mask=[False, False, True, False],
                             end_mask=[False, False, True, True], squeeze_mask=[True, False, False, False])),
     ("slice_by_size", dict(x=x, begin=[0, 1, 1, 0], size=[1, -1, 2, 5])),
     ("gather", dict(x=x, indices=np.array([2, 0, -1], np.int32), axis=1)),
     ("matmul", dict(x=m, y=m, transpose_x=False, transpose_y=True)), ("matmul", dict(x=x, y=np.swapaxes(y, -1, -2), transpose_x=False, transpose_y=False)),
     ("linear", dict(x=m, weight=m[:2], bias=np.array([1.0, -1.0], np.float32))),
     ("select", dict(cond=x > 0, a=x, b=y)), ("cast", dict(x=x, dtype="int32")), ("cast", dict(x=x, dtype="fp16")),
     ("split", dict(x=x, num_splits=2, axis=0)), ("split", dict(x=x, split_sizes=[1, 3], axis=2)),
     ("layer_norm", dict(x=x, axes=[2, 3], epsilon=1e-5)),
     ("shape", dict(x=x)),
    ]
    CASES = [(name, kw, ct.target.iOS17) for name, kw in CASES]
    q8 = rng.integers(-128, 128, (4, 6)).astype(np.int8)
    Q = [
     ("quantize", dict(input=x, scale=np.float32(0.03), output_dtype="int8"), ct.target.iOS17),
     ("quantize", dict(input=x, scale=np.float32(0.02), zero_point=np.uint8(100), output_dtype="uint8"), ct.target.iOS17),
     ("quantize", dict(input=x, scale=np.array([0.01, 0.02, 0.05], np.float32), zero_point=np.array([1, -2, 3], np.int8), axis=1, output_dtype="int8"), ct.target.iOS17),
     ("dequantize", dict(input=q8, scale=np.array([0.1, 0.2, 0.3, 0.4], np.float32), zero_point=np.array([1, -2, 3, 0], np.int8), axis=0), ct.target.iOS17),
     ("dequantize", dict(input=q8, scale=np.float16(0.1)), ct.target.iOS17),
     ("constexpr_affine_dequantize", dict(quantized_data=q8, scale=np.array([0.5, 0.25, 1, 2, 3, 4], np.float16), zero_point=np.array([0, 1, 2, 3, 4, 5], np.int8), axis=1), ct.target.iOS16),
     ("constexpr_blockwise_shift_scale", dict(data=q8, scale=rng.random((2, 3)).astype(np.float16), offset=rng.integers(-3, 3, (2, 3)).astype(np.int8)), ct.target.iOS18),
     ("constexpr_blockwise_shift_scale", dict(data=q8, scale=rng.random((4, 1)).astype(np.float32)), ct.target.iOS18),
     ("constexpr_cast", dict(source_val=x.astype(np.float16), output_dtype="fp32"), ct.target.iOS16),
     ("constexpr_lut_to_dense", dict(indices=rng.integers(0, 4, (4, 6)).astype(types.np_uint2_dtype),
                                     lut=rng.random((2, 1, 4, 1)).astype(np.float16)), ct.target.iOS18),
     ("constexpr_lut_to_dense", dict(lut=rng.random(4).astype(np.float32), shape=np.array([4, 6], np.uint32),
                                     indices=np.packbits(rng.integers(0, 2, 48).astype(np.uint8), bitorder="little")),
      ct.target.iOS16),
     ("constexpr_sparse_to_dense", dict(nonzero_data=np.array([3.0, 5.0, 4.0], np.float32),
                                        mask=np.array([[1, 0, 1], [0, 1, 0]]).astype(types.np_uint1_dtype)), ct.target.iOS18),
     ("constexpr_sparse_to_dense", dict(nonzero_data=np.array([3.0, 5.0, 4.0], np.float32),
                                        mask=np.array([0b10100010], np.uint8), shape=np.array([2, 4], np.uint32)), ct.target.iOS16),
    ]
    return CASES + Q


VALUE_CASES = _value_inference_cases()


@pytest.mark.parametrize("index", range(len(VALUE_CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(VALUE_CASES)])
def test_op_matches_coremltools_value_inference(index):
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import Function

    name, kwargs, target = VALUE_CASES[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Function({}, opset_version=target):
            built = getattr(mb, name)(**kwargs)
    built = list(built) if isinstance(built, (list, tuple)) else [built]
    expected = [v.val if v.val is not None else v.op.materialized_val_inference() for v in built]
    inputs = {k: (list(v) if k == "values" else [v]) for k, v in kwargs.items()}
    ours = OPS[name](OpCall(name, name, inputs, [None] * len(built), {}))
    ours = list(ours) if isinstance(ours, tuple) else [ours]
    assert len(ours) == len(expected)
    for mine, theirs in zip(ours, expected):
        mine, theirs = np.asarray(mine), np.asarray(theirs)
        assert mine.shape == theirs.shape
        if name.startswith(("quantize", "dequantize", "constexpr_")):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)  # bit-exact, same dtype
        else:
            np.testing.assert_allclose(mine.astype(np.float64), theirs.astype(np.float64), rtol=1e-5, atol=1e-6)



def test_instance_norm_matches_torch():
    """instance_norm has no value inference in coremltools: check it against torch."""
    x = np.random.default_rng(8).standard_normal((2, 3, 5, 4)).astype(np.float32)
    gamma, beta = np.array([0.5, 1.0, 2.0], np.float32), np.array([0.1, -0.2, 0.3], np.float32)
    ours = OPS["instance_norm"](OpCall("instance_norm", "n", {"x": [x], "gamma": [gamma], "beta": [beta],
                                                                "epsilon": [np.float32(1e-5)]}, [None], {}))
    expected = F.instance_norm(torch.from_numpy(x), weight=torch.from_numpy(gamma), bias=torch.from_numpy(beta), eps=1e-5)
    np.testing.assert_allclose(ours, expected.numpy(), rtol=1e-5, atol=1e-5)

# ---------------------------------------------------------------- runner
def test_coreml_runner_runs_the_program_and_describes_itself(float_programs):
    from edgekit.coreml.runner import CoreMLRunner
    from edgekit.parity.runners import open_runner

    module, shape, path = float_programs["digits"]
    runner = open_runner(path)
    assert isinstance(runner, CoreMLRunner)
    (spec,) = runner.input_specs()
    assert spec.shape == shape and runner.output_names() == MILProgram.load(path).outputs
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    floats, raw = runner.run([x])
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    assert floats[0].dtype == np.float32 and relative_error(floats[0], expected) <= FLOAT_TOLERANCE
    assert raw[0].dtype == np.float32 and np.array_equal(raw[0], floats[0])  # a float program: stored == float
    described = runner.describe()
    assert described["runtime"].startswith("edgekit MIL evaluator (numpy) on coremltools ")
    assert described["format"] == "coreml" and len(described["sha256"]) == 64
    with pytest.raises(CalibrationDataError, match="2 tensor"):
        runner.run([x, x])
    with pytest.raises(CalibrationDataError, match="shape"):
        runner.run([np.zeros((1, 8, 8), np.float32)])


@pytest.mark.skipif(sys.platform != "darwin", reason="the real Core ML runtime exists only on macOS")
def test_runner_compares_with_core_ml_on_macos(float_programs):  # pragma: no cover - macOS only
    from edgekit.coreml.runner import CoreMLRunner

    _, shape, path = float_programs["mlp"]
    runner = CoreMLRunner(path)
    runner.run([np.random.default_rng(0).standard_normal(shape).astype(np.float32)])
    diffs = runner.describe()["coreml_runtime"]["max_abs_diff_vs_evaluator"]
    assert diffs and all(d < 1e-3 for d in diffs.values())


# ---------------------------------------------------------------- unsupported ops and bad packages
def test_unsupported_ops_are_all_named(tmp_path):
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=ct.target.iOS17)
    def prog(x):
        y = mb.sin(x=x, name="my_sine")
        y = mb.relu(x=y)
        return mb.cumsum(x=y, axis=1, name="running_total")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                   compute_precision=ct.precision.FLOAT32).save(str(tmp_path / "odd.mlpackage"))
    program = MILProgram.load(tmp_path / "odd.mlpackage")
    with pytest.raises(UnsupportedOpError) as caught:
        program.check_supported()
    message = str(caught.value)
    assert "sin at op #" in message and "'my_sine'" in message
    assert "cumsum at op #" in message and "'running_total'" in message
    assert sorted(o.op for o in caught.value.report.rejected) == ["cumsum", "sin"]
    with pytest.raises(UnsupportedOpError):  # predict never skips an op
        program.predict({program.inputs[0].name: np.zeros((1, 4), np.float32)})


def test_damaged_packages_give_one_clear_error(float_programs, tmp_path):
    source = float_programs["mobilenet_like"][2]

    def copy(name):
        return shutil.copytree(source, tmp_path / name)

    with pytest.raises(InvalidModelError, match="not an .mlpackage folder"):
        MILProgram.load(tmp_path / "missing.mlpackage")
    spec_truncated = copy("spec.mlpackage")
    spec_file = spec_truncated / "Data" / "com.apple.CoreML" / "model.mlmodel"
    spec_file.write_bytes(spec_file.read_bytes()[:700])
    with pytest.raises(InvalidModelError, match="truncated or corrupt"):
        MILProgram.load(spec_truncated)
    weights_truncated = copy("weights.mlpackage")
    weights = weights_truncated / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(InvalidModelError, match="truncated"):
        MILProgram.load(weights_truncated).predict({"x": np.zeros((1, 3, 32, 32), np.float32)})
    weights_corrupt = copy("corrupt.mlpackage")
    weights = weights_corrupt / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    weights.write_bytes(weights.read_bytes()[:64] + b"\0" * (weights.stat().st_size - 64))
    with pytest.raises(InvalidModelError, match="corrupt weights"):
        MILProgram.load(weights_corrupt).predict({"x": np.zeros((1, 3, 32, 32), np.float32)})
    no_manifest = copy("manifest.mlpackage")
    (no_manifest / "Manifest.json").unlink()
    with pytest.raises(InvalidModelError, match="no Manifest.json"):
        MILProgram.load(no_manifest)
    with pytest.raises(CalibrationDataError, match="is not fed"):
        MILProgram.load(source).predict({})
