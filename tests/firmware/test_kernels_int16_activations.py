"""int16 (16x8) LOGISTIC and TANH of the edgekit C runtime against LiteRT BUILTIN_REF, bit for bit (issue 25).

Every one of the 65,536 int16 input values, through the host build of the runtime on the in-place .tflite path and as
a prepared model with the overlapped plan, demanding 0 differing elements, on the scales that pick each of LiteRT's
parameter paths (activations.cc SigmoidPrepare / TanhPrepare): the power-of-two case (input scale 2^-12, what
TFLite's 16x8 quantizer uses; 2^-11 for TANH; a scale within CheckedLog2's 1e-3 of 2^-12), and the general case
(2^-13, 2^-11 for LOGISTIC, 1/6144, 0.01, seeded log-uniform scales from 1e-7 to 5, the largest and the tiniest
scales prepare() accepts). Plus the sigmoid table recovered from BUILTIN_REF, what prepare() refuses (and that
LiteRT refuses the same models), versions, a 16x8 FULLY_CONNECTED -> LOGISTIC / TANH graph, the support check, and
prepare + eval compiled for Cortex-M4 on QEMU mps2-an386 (all inputs, hashes equal to BUILTIN_REF's).
"""
from __future__ import annotations

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
    """A GRU-like gate in 16x8: X int16 -> FULLY_CONNECTED (int8 weights) -> LOGISTIC and TANH, plus TANH on X."""
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


DEVICE_SIGMOID16_C = r"""
/* prepare() + eval of int16 LOGISTIC and TANH over all 65,536 inputs for each input scale of SCALES; prints one
 * FNV-1a hash of the int16 outputs (little-endian bytes) per (op, scale), or "refused". */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

void out_str(const char *s);

static const float SCALES[] = {SCALE_LIST};
static int16_t in16[65536], out16[65536];
static ek_tensor tensors[2];
static uint64_t user_data[64];

static void report(uint32_t hash, int ok) {
  char line[16];
  int k = 0;
  if (!ok) { out_str("refused\n"); return; }
  for (int i = 7; i >= 0; --i) line[k++] = "0123456789abcdef"[(hash >> (4 * i)) & 15u];
  line[k++] = '\n';
  line[k] = 0;
  out_str(line);
}

static void run(const ek_kernel *k, float si) {
  ek_context ctx;
  ek_op op;
  static const int32_t ins[1] = {0}, outs[1] = {1};
  memset(&ctx, 0, sizeof ctx);
  memset(&op, 0, sizeof op);
  memset(tensors, 0, sizeof tensors);
  memset(user_data, 0, sizeof user_data);
  for (int i = 0; i < 2; ++i) {
    tensors[i].data = i ? (void *)out16 : (void *)in16;
    tensors[i].ndim = 1;
    tensors[i].dims[0] = 65536;
    tensors[i].bytes = 2 * 65536;
    tensors[i].type = EK_INT16;
    tensors[i].num_scales = 1;
  }
  tensors[0].scale = si;
  tensors[1].scale = 1.0f / 32768;
  ctx.tensors = tensors;
  ctx.num_tensors = 2;
  op.opcode = k->opcode;
  op.version = 3;
  op.num_inputs = 1;
  op.num_outputs = 1;
  op.inputs = ins;
  op.outputs = outs;
  op.user_data = user_data;
  if (k->persistent_bytes(&ctx, &op) > sizeof user_data || k->prepare(&ctx, &op) != EK_OK) { report(0, 0); return; }
  k->eval(&ctx, &op);
  uint32_t hash = 2166136261u;
  for (int i = 0; i < 65536; ++i) {
    const uint16_t v = (uint16_t)out16[i];
    hash = (hash ^ (v & 0xFFu)) * 16777619u;
    hash = (hash ^ (v >> 8)) * 16777619u;
  }
  report(hash, 1);
}

int main(void) {
  for (int i = 0; i < 65536; ++i) in16[i] = (int16_t)(i - 32768);
  for (unsigned s = 0; s < sizeof SCALES / sizeof SCALES[0]; ++s) {
    run(&ek_kernel_logistic, SCALES[s]);
    run(&ek_kernel_tanh, SCALES[s]);
  }
  return 0;
}
"""


def _fnv1a(data: bytes) -> str:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return f"{h:08x}"


def test_device_eval_equals_builtin_ref_on_cortex_m4(tmp_path):
    """The kernels compiled for Cortex-M4F (arm-none-eabi-gcc, newlib logf in CheckedLog2) on QEMU mps2-an386: prepare
    and eval on the device over all 65,536 inputs per scale, hashes equal to those of LiteRT BUILTIN_REF's outputs.
    (`edgekit run` cannot drive an int16-input graph: it takes int8 or float32 model inputs only.)"""
    import subprocess

    from tests.firmware.test_kernels_elementwise import DEVICE_LINKER_SCRIPT, DEVICE_STARTUP_C

    missing = [tool for tool in ("arm-none-eabi-gcc", "qemu-system-arm") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    scales = [float(np.float32(s)) for s, _ in FIXED_SCALES] + [10.0]  # 10.0: refused on both sides of the test
    runtime = Path(__file__).resolve().parents[2] / "firmware" / "runtime"
    source = DEVICE_SIGMOID16_C.replace("SCALE_LIST", ", ".join(f"{s.hex()}f" for s in scales))
    for name, text in (("sigmoid16.c", source), ("startup.c", DEVICE_STARTUP_C), ("board.ld", DEVICE_LINKER_SCRIPT)):
        (tmp_path / name).write_text(text)
    subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-O2", "-ffp-contract=off", f"-I{runtime / 'include'}",
                    f"-I{runtime / 'src'}", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                    "-nostartfiles", "-T", str(tmp_path / "board.ld"), "--specs=nano.specs", "-o", str(tmp_path / "m4.elf"),
                    str(tmp_path / "sigmoid16.c"), str(tmp_path / "startup.c"), str(LOGISTIC_C),
                    str(runtime / "src" / "ek_util.c"), "-lm", "-lc", "-lgcc"], check=True, capture_output=True, timeout=120)
    board = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-semihosting-config",
                            "enable=on,target=native", "-kernel", str(tmp_path / "m4.elf")],
                           capture_output=True, text=True, timeout=300)
    assert board.returncode == 0, board.stdout + board.stderr
    lines = [line for line in (board.stdout + board.stderr).splitlines() if line.strip()]
    want = []
    for s in scales:
        for op in ("LOGISTIC", "TANH"):
            if s == 10.0:
                want.append("refused")
                continue
            got = reference(_model(op, s, shape=(65536,)), [ALL_INT16.ravel()])[0]
            want.append(_fnv1a(got.astype("<i2").tobytes()))
    assert len(want) == 2 * len(scales) and lines == want, (lines, want)
