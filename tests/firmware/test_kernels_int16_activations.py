"""int16 (16x8) LOGISTIC and TANH of the edgekit C runtime against LiteRT BUILTIN_REF, bit for bit (issue 25).

Every one of the 65,536 int16 input values, through the host build of the runtime on the in-place .tflite path and as
a prepared model with the overlapped plan, demanding 0 differing elements, on the scales that pick each of LiteRT's
parameter paths (activations.cc SigmoidPrepare / TanhPrepare): the power-of-two case (input scale 2^-12, what
TFLite's 16x8 quantizer uses; 2^-11 for TANH; a scale within CheckedLog2's 1e-3 of 2^-12), and the general case
(2^-13, 2^-11 for LOGISTIC, 1/6144, 0.01, seeded log-uniform scales from 1e-7 to 5, the largest and the tiniest
scales prepare() accepts). Plus the sigmoid table recovered from BUILTIN_REF, what prepare() refuses (and that
LiteRT refuses the same models), the support check, and one graph on QEMU mps2-an386 (Cortex-M4).
"""
from __future__ import annotations

import json
import re
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_graph, build_model, reference
from tests.firmware.test_kernels_elementwise import assert_bit_exact, log_uniform

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)
OUT_SCALE = 1 / 32768
LOGISTIC_C = Path(__file__).resolve().parents[2] / "firmware" / "runtime" / "src" / "kernels" / "logistic.c"

# (input scale, which LiteRT path it takes)
FIXED_SCALES = [
    (2.0 ** -12, "power of two, shift 0"),
    (2.0 ** -11, "TANH: power of two, shift 1; LOGISTIC: general"),
    (2.0 ** -12 * 1.0004, "within CheckedLog2's 1e-3 of 2^-12: power of two"),
    (2.0 ** -13, "general (power of two below the fast range)"),
    (1 / 6144, "general, v = 2x exactly"),
    (0.01, "general"),
    (1 / 3000, "general"),
    (5.3, "general, multiplier 65126 (near the int32 limit)"),
    (1e-9, "general, shift 31"),
]


def _model(op: str, s_in: float, s_out: float = OUT_SCALE, z_in: int = 0, z_out: int = 0, shape=(256, 256),
           version: int = 1) -> bytes:
    return build_model(op, [T(list(shape), dtype="int16", scale=s_in, zero_point=z_in)],
                       [T(list(shape), dtype="int16", scale=s_out, zero_point=z_out)], version=version)


@pytest.mark.parametrize("s_in,path", FIXED_SCALES, ids=[p for _, p in FIXED_SCALES])
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_every_int16_input_on_each_parameter_path(op, s_in, path):
    assert_bit_exact(_model(op, s_in), [ALL_INT16], f"{op} int16 input scale {s_in} ({path})")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_every_int16_input_on_seeded_scales(op, seed):
    rng = np.random.default_rng(zlib.crc32(f"int16 sigmoid {op} {seed}".encode()))
    s_in = log_uniform(rng, 1e-7, 5.0)
    assert_bit_exact(_model(op, s_in), [ALL_INT16], f"{op} int16 input scale {s_in}")


def test_tanh_takes_an_output_scale_near_two_to_the_minus_15_as_litert_does():
    """TanhPrepare only asks CheckedLog2(output scale) == -15; LOGISTIC needs exactly 1/32768 (refused below)."""
    assert_bit_exact(_model("TANH", 2.0 ** -12, s_out=OUT_SCALE * 1.0003), [ALL_INT16], "TANH output scale 1.0003/32768")


def test_the_sigmoid_table_is_the_one_builtin_ref_interpolates():
    """TANH at input scale 1/6144 maps x = 128 i onto table entry i with no interpolation: output = entry - 32768."""
    x = (128 * np.arange(255)).astype(np.int16)
    got = reference(_model("TANH", 1 / 6144, shape=(255,)), [x])[0].astype(np.int64) + 32768
    body = re.search(r"sigmoid16_table\[256\] = \{([^}]*)\}", LOGISTIC_C.read_text()).group(1)
    table = np.array([int(v) for v in body.replace(",", " ").split()], np.int64)
    assert table.size == 256 and table[255] == 65535
    assert np.array_equal(table[:255], got), np.nonzero(table[:255] != got)


# (op, input scale, output scale, zero points, LiteRT refuses too, our message)
REFUSED = [
    ("LOGISTIC", 2.0 ** -12, OUT_SCALE, (1, 0), True, "LOGISTIC int16 needs zero points 0"),
    ("TANH", 2.0 ** -12, OUT_SCALE, (0, -1), True, "TANH int16 needs zero points 0"),
    ("LOGISTIC", 2.0 ** -12, OUT_SCALE * 1.0003, (0, 0), True, "LOGISTIC int16 output scale must be exactly 1/32768"),
    ("LOGISTIC", 2.0 ** -12, 2.0 ** -14, (0, 0), True, "LOGISTIC int16 output scale must be exactly 1/32768"),
    ("TANH", 2.0 ** -12, 2.0 ** -14, (0, 0), True, "TANH int16 output scale must be 2\\^-15"),
    ("TANH", 2.0 ** -12, OUT_SCALE * 1.01, (0, 0), True, "TANH int16 output scale must be 2\\^-15"),
    ("TANH", 10.0, OUT_SCALE, (0, 0), False, "TANH int16 input scale above 65535/12288"),
    ("LOGISTIC", 6.0, OUT_SCALE, (0, 0), False, "LOGISTIC int16 input scale above 65535/12288"),
    ("LOGISTIC", 1e-30, OUT_SCALE, (0, 0), False, "LOGISTIC int16 input scale below"),
]


@pytest.mark.parametrize("op,s_in,s_out,zps,litert_refuses,message", REFUSED)
def test_prepare_refuses_what_litert_refuses_or_overflows_on(op, s_in, s_out, zps, litert_refuses, message):
    model = _model(op, s_in, s_out, *zps, shape=(8,))
    with pytest.raises(EdgekitError, match=message):
        HostRuntime(model)
    if litert_refuses:
        with pytest.raises(RuntimeError):
            reference(model, [np.zeros(8, np.int16)])
    else:  # LiteRT runs it, with int32 overflow in x * multiplier (undefined behaviour in its C++)
        reference(model, [np.zeros(8, np.int16)])


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_versions(op):
    for version in (1, 2, 3):  # TFLite writes version 3 for int16; LiteRT's kernel ignores the number
        assert_bit_exact(_model(op, 2.0 ** -12, shape=(64,), version=version),
                         [np.arange(-32768, 32768, 1024, dtype=np.int16)], f"{op} int16 version {version}")
    with pytest.raises(EdgekitError, match=f"{op} operator version not supported"):
        HostRuntime(_model(op, 2.0 ** -12, shape=(8,), version=4))
    int8 = build_model(op, [T([8], scale=0.05, zero_point=0)], [T([8], scale=1 / 256, zero_point=-128)], version=3)
    with pytest.raises(EdgekitError, match=f"{op} operator version not supported"):
        HostRuntime(int8)


def gate_graph() -> bytes:
    """A GRU-like gate in 16x8: X int16 -> FULLY_CONNECTED (int8 weights) -> LOGISTIC and TANH -> MUL-free outputs,
    plus TANH and LOGISTIC straight on the input at a general (non power-of-two) scale."""
    rng = np.random.default_rng(25)
    tensors = [
        T([2, 16], "int16", 2.0 ** -12, 0),                                                       # 0 X
        T([24, 16], "int8", 0.01, 0, data=rng.integers(-127, 128, (24, 16))),                     # 1 W
        T([24], "int64", 2.0 ** -12 * 0.01, 0, data=rng.integers(-20000, 20000, (24,))),          # 2 bias
        T([2, 24], "int16", 2.0 ** -12, 0),                                                       # 3 FC out
        T([2, 24], "int16", OUT_SCALE, 0),                                                        # 4 LOGISTIC(fc)
        T([2, 24], "int16", OUT_SCALE, 0),                                                        # 5 TANH(fc)
        T([2, 16], "int16", OUT_SCALE, 0),                                                        # 6 TANH(X)
    ]
    ops = [
        ("FULLY_CONNECTED", [0, 1, 2], [3], None),
        ("LOGISTIC", [3], [4], None),
        ("TANH", [3], [5], None),
        ("TANH", [0], [6], None),
    ]
    return build_graph(tensors, ops, [0], [4, 5, 6])


def test_gate_graph_is_bit_exact_on_the_host():
    model = gate_graph()
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-32768, 32768, (2, 16)).astype(np.int16)
        assert_bit_exact(model, [x], f"int16 gate graph seed {seed}")


def test_support_check_accepts_int16_logistic_and_tanh():
    from edgekit.firmware.support import check_support
    from edgekit.tflite_graph import read_graph

    report = check_support(read_graph(gate_graph()))
    assert report.ok, [o.describe() for o in report.rejected]
    mixed = build_model("TANH", [T([4], "int16", 2.0 ** -12, 0)], [T([4], "int8", 1 / 128, 0)])
    report = check_support(read_graph(mixed))
    assert not report.ok and "INT8 tensor(s)" in report.rejected[0].reason
    report = check_support(read_graph(_model("EXP", 2.0 ** -12, shape=(4,))))
    assert not report.ok and "INT16 tensor(s)" in report.rejected[0].reason


needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")


@pytest.mark.slow
@needs_qemu
def test_gate_graph_is_bit_exact_on_cortex_m4_in_qemu(tmp_path, cli):
    model = tmp_path / "gate16.tflite"
    model.write_bytes(gate_graph())
    out = tmp_path / "run"
    assert cli("run", model, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0
    assert exact["total_elements"] > 0
