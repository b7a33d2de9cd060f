"""Unary int8 kernels of the edgekit C runtime against LiteRT BUILTIN_REF, bit for bit (issue 25).

RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, PRELU, TANH, EXP, LOG, SQRT, RSQRT, GELU (both `approximate` settings),
ABS, NEG:
every one of the 256 int8 input values on many seeded random scales and zero points, through the host build of
the runtime on the in-place .tflite path and as a prepared model with the overlapped plan (the output planned over
its dying input), demanding 0 differing elements. PRELU also with broadcast per-channel alpha constants (MediaPipe's
layout), and a Keras model through TFLiteConverter. int16 (16x8) RELU, RELU6, LEAKY_RELU, ABS, NEG on all 65,536 inputs. Plus the versions prepare() refuses, and one multi-op graph on QEMU mps2-an386 (Cortex-M4).
"""
from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_graph, build_model, random_input, reference
from tests.firmware.test_kernels_elementwise import all_int8_values, assert_bit_exact, log_uniform, zp

SEEDS = range(24)


def _scales(rng: np.random.Generator, lo: float = 1e-3, hi: float = 1.0, ratio=(0.05, 20.0)):
    s_in = log_uniform(rng, lo, hi)
    return s_in, s_in * log_uniform(rng, *ratio)


def _one(op: str, seed: int, options=None, in_zp=None, ratio=(0.05, 20.0), in_range=(1e-3, 1.0)) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{op} {seed} {options}".encode()))  # stable across runs
    s_in, s_out = _scales(rng, *in_range, ratio=ratio)
    z_in = zp(rng) if in_zp is None else in_zp
    model = build_model(op, [T([2, 128], scale=s_in, zero_point=z_in)], [T([2, 128], scale=s_out, zero_point=zp(rng))],
                        options)
    assert_bit_exact(model, [all_int8_values().reshape(2, 128)], f"{op} {options} in {s_in}/{z_in} out {s_out}")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1", "ABS"])
def test_relu_family_and_abs_every_input_value(op, seed):
    _one(op, seed)


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1", "ABS"])
def test_equal_scales_and_extreme_zero_points(op):
    for z_in, z_out in ((-128, -128), (127, 127), (-128, 127), (0, 0)):
        model = build_model(op, [T([256], scale=0.05, zero_point=z_in)], [T([256], scale=0.05, zero_point=z_out)])
        assert_bit_exact(model, [all_int8_values()], f"{op} equal scales zp {z_in}/{z_out}")


@pytest.mark.parametrize("seed", SEEDS)
def test_leaky_relu_every_input_value(seed):
    rng = np.random.default_rng(900 + seed)
    alpha = float(rng.choice([0.01, 0.1, 0.2, 0.3, -0.25, 1.5, float(rng.uniform(-2, 2))]))
    _one("LEAKY_RELU", seed, {"alpha": alpha})


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", ["TANH", "EXP", "LOG"])
def test_float_table_ops_every_input_value(op, seed):
    # EXP over wide input scales: overflowing (saturating) entries included
    _one(op, seed, in_range=(1e-3, 1.0) if op != "EXP" else (1e-3, 0.6))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_every_input_value(seed, approximate):
    _one("GELU", seed, {"approximate": approximate}, in_range=(1e-3, 0.3))


@pytest.mark.parametrize("seed", SEEDS)
def test_sqrt_every_input_value(seed):
    """LiteRT fails SQRT on a negative dequantized input, so the zero point is -128 (every input >= 0)."""
    _one("SQRT", seed, in_zp=-128, ratio=(1e-4, 10.0) if seed % 3 else (1e-9, 1e-6))


@pytest.mark.parametrize("seed", SEEDS)
def test_rsqrt_every_input_value(seed):
    """LiteRT fails RSQRT on q < zp_in, so the zero point is -128 (q = -128 is the value 0: 127 by definition)."""
    _one("RSQRT", seed, in_zp=-128, ratio=(1e-2, 100.0), in_range=(1e-4, 10.0))


@pytest.mark.parametrize("seed", range(4))
def test_neg_every_input_value(seed):
    rng = np.random.default_rng(70 + seed)
    model = build_model("NEG", [T([256], scale=log_uniform(rng, 1e-3, 1), zero_point=zp(rng))],
                        [T([256], scale=log_uniform(rng, 1e-3, 1), zero_point=zp(rng))])
    assert_bit_exact(model, [all_int8_values()], "NEG")


@pytest.mark.parametrize("seed", range(16))
def test_prelu_broadcast_alpha_every_input_value(seed):
    """x over all 256 values per channel; alpha [C], [1, 1, C], [1, 1, 1, C], full shape or a scalar."""
    rng = np.random.default_rng(600 + seed)
    c = int(rng.integers(1, 9))
    x_shape = [1, 256, 1, c] if seed % 2 else [256, c]
    # alpha's rank never exceeds x's: LiteRT refuses a broadcast that changes the output shape (so does prepare)
    alpha_shape = [[c], [1, 1, c] if len(x_shape) == 4 else [1, c], [1, 1, 1, c] if len(x_shape) == 4 else [c],
                   x_shape, []][seed % 5]
    alpha = rng.integers(-128, 128, size=alpha_shape).astype(np.int8)
    s_in, s_out = _scales(rng)
    a = T(alpha_shape, scale=log_uniform(rng, 1e-3, 0.1), zero_point=zp(rng), data=alpha)
    model = build_model("PRELU", [T(x_shape, scale=s_in, zero_point=zp(rng)), a], [T(x_shape, scale=s_out, zero_point=zp(rng))])
    x = np.repeat(all_int8_values()[:, None], c, axis=1).reshape(x_shape)
    assert_bit_exact(model, [x], f"PRELU {x_shape} alpha {alpha_shape}")


def test_prelu_with_an_activation_alpha():
    rng = np.random.default_rng(5)
    model = build_model("PRELU", [T([4, 64], scale=0.03, zero_point=-4), T([64], scale=0.01, zero_point=3)],
                        [T([4, 64], scale=0.02, zero_point=7)])
    assert_bit_exact(model, random_input(model, rng), "PRELU alpha input")


def tflm_outputs(model: bytes, inputs):
    """Outputs of the TensorFlow Lite Micro python interpreter (the oracle for ops LiteRT's BUILTIN_REF lacks)."""
    from tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model, arena_size=64 * 1024)
    for i, x in enumerate(inputs):
        interp.set_input(x, i)
    interp.invoke()
    return [interp.get_output(0)]


@pytest.mark.parametrize("seed", SEEDS)
def test_elu_every_input_value_against_tflm(seed):
    """ELU is not registered in LiteRT's BUILTIN_REF resolver: TFLM's reference ELU (python interpreter) is the oracle."""
    pytest.importorskip("tflite_micro", reason="the tflite-micro python package is the ELU oracle")
    rng = np.random.default_rng(800 + seed)
    s_in, s_out = _scales(rng, ratio=(0.05, 5.0))
    model = build_model("ELU", [T([256], scale=s_in, zero_point=zp(rng))], [T([256], scale=s_out, zero_point=zp(rng))])
    x = [all_int8_values()]
    want = tflm_outputs(model, x)[0]
    for optimize in (None, "ram"):
        got = HostRuntime(model, optimize=optimize).invoke(x)[0]
        assert int(np.count_nonzero(want != got)) == 0, f"ELU in {s_in} out {s_out} (optimize={optimize})"


ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("op,options", [("RELU", None), ("RELU6", None), ("LEAKY_RELU", {"alpha": 0.2}),
                                        ("LEAKY_RELU", {"alpha": -0.7}), ("ABS", None), ("NEG", None)])
def test_int16_every_input_value(op, options, seed):
    """16x8 activations: all 65,536 int16 inputs, zero points 0 (LiteRT's int16 kernels require them)."""
    rng = np.random.default_rng(zlib.crc32(f"int16 {op} {options} {seed}".encode()))
    s_in = log_uniform(rng, 1e-5, 1e-2)
    s_out = s_in * (1.0 if seed == 0 else log_uniform(rng, 0.05, 20.0))
    z_in = z_out = 0
    model = build_model(op, [T([256, 256], dtype="int16", scale=s_in, zero_point=z_in)],
                        [T([256, 256], dtype="int16", scale=s_out, zero_point=z_out)], options)
    assert_bit_exact(model, [ALL_INT16], f"{op} int16 {options} in {s_in}/{z_in} out {s_out}/{z_out}")


@pytest.mark.parametrize("op,version", [("RELU", 3), ("TANH", 3), ("LEAKY_RELU", 2), ("GELU", 3), ("NEG", 2),
                                        ("ABS", 3), ("SQRT", 2), ("RSQRT", 3)])
def test_prepare_refuses_versions_it_does_not_implement(op, version):
    model = build_model(op, [T([8], scale=0.05, zero_point=0)], [T([8], scale=0.05, zero_point=0)], version=version)
    with pytest.raises(EdgekitError, match=f"{op} operator version not supported"):
        HostRuntime(model)


def test_int16_versions_and_zero_points_refused():
    model = build_model("RELU", [T([8], dtype="int16", scale=1e-3)], [T([8], dtype="int16", scale=1e-3)], version=4)
    with pytest.raises(EdgekitError, match="RELU operator version not supported"):
        HostRuntime(model)
    model = build_model("ABS", [T([8], dtype="int16", scale=1e-3, zero_point=5)], [T([8], dtype="int16", scale=1e-3)])
    with pytest.raises(EdgekitError, match="ABS int16 needs zero points 0"):
        HostRuntime(model)
    model = build_model("RELU_N1_TO_1", [T([8], dtype="int16", scale=1e-3)], [T([8], dtype="int16", scale=1e-3)])
    with pytest.raises(EdgekitError, match="RELU_N1_TO_1 supports int8 only"):
        HostRuntime(model)


def test_prepare_rejects_int16_and_per_channel():
    model = build_model("EXP", [T([8], dtype="int16", scale=1 / 4096, zero_point=0)],
                        [T([8], dtype="int16", scale=1 / 32768, zero_point=0)])
    with pytest.raises(EdgekitError, match="EXP supports int8 only"):
        HostRuntime(model)
    model = build_model("PRELU", [T([2, 3], scale=0.05), T([3], scale=[0.1, 0.2, 0.3], data=np.ones(3, np.int8))],
                        [T([2, 3], scale=0.05)])
    with pytest.raises(EdgekitError, match="PRELU needs per-tensor quantized tensors"):
        HostRuntime(model)


def test_unary_outputs_are_planned_over_their_dying_inputs():
    model = unary_graph()
    rt = HostRuntime(model, optimize="ram")
    names = rt.op_names
    overlapped = {names[o["op"]] for o in rt.prepared["overlaps"]}
    assert {"LEAKY_RELU", "GELU", "ABS", "SQRT", "LOG", "EXP", "NEG", "RELU"} <= overlapped, overlapped


def unary_graph() -> bytes:
    """X [1, 6, 5, 8] through a chain of every unary op (PRELU with per-channel alpha, as MediaPipe); 2 outputs."""
    rng = np.random.default_rng(25)
    shape = [1, 6, 5, 8]
    tensors = [T(shape, scale=0.04, zero_point=-3)]
    ops = []

    def add(op, src, scale, z, options=None, extra=()):
        tensors.append(T(shape, scale=scale, zero_point=z))
        ops.append((op, [src, *extra], [len(tensors) - 1], options))
        return len(tensors) - 1

    alpha = len(tensors)
    tensors.append(T([1, 1, 8], scale=0.004, zero_point=-20, data=rng.integers(-128, 128, size=(1, 1, 8)).astype(np.int8)))
    a = add("PRELU", 0, 0.03, -10, extra=[alpha])
    b = add("LEAKY_RELU", a, 0.025, 5, {"alpha": 0.2})
    c = add("TANH", b, 1 / 128, 0)
    d = add("GELU", c, 0.006, -30, {"approximate": True})
    e = add("GELU", d, 0.005, -40)
    f = add("ABS", e, 0.004, -128)
    g0 = add("SQRT", f, 0.01, -128)
    g = add("RSQRT", g0, 0.02, -128)
    h = add("LOG", g, 0.05, 60)
    i = add("EXP", h, 0.03, -128)
    j = add("NEG", i, 0.03, -1)
    k = add("RELU", j, 0.02, -100)
    m = add("RELU6", b, 0.03, -128)
    n = add("RELU_N1_TO_1", m, 1 / 100, 0)
    return build_graph(tensors, ops, [0], [k, n])


def test_unary_graph_is_bit_exact_on_the_host():
    model = unary_graph()
    assert_bit_exact(model, random_input(model, np.random.default_rng(3)), "unary graph")


needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")


@pytest.mark.slow
@needs_qemu
def test_unary_graph_is_bit_exact_on_cortex_m4_in_qemu(tmp_path, cli):
    model = tmp_path / "unary.tflite"
    model.write_bytes(unary_graph())
    out = tmp_path / "run"
    assert cli("run", model, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0
    assert exact["total_elements"] > 0 and exact["total_elements"] % (2 * 240) == 0  # both outputs of every sample


# --- the tables a device builds itself (in-place .tflite path: prepare runs there, with newlib's libm) ----------

DEVICE_TABLES_C = r"""
/* Builds every unary kernel's table over seeded random scales and zero points and prints one FNV-1a hash per op,
 * on the host (glibc) and on Cortex-M4 (newlib), so a test can compare them. */
#include <stdint.h>
#include <string.h>

#include "ek_kernels.h"

void out_str(const char *s);

static uint32_t rng_state = 88172645u;
static uint32_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 17; rng_state ^= rng_state << 5; return rng_state; }
static float rnd_scale(int emin, int emax) { /* from bits: no libm */
  const uint32_t e = (uint32_t)(127 + emin + (int)(rnd() % (uint32_t)(emax - emin + 1)));
  const uint32_t bits = (e << 23) | (rnd() & 0x7fffffu);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static uint32_t hash = 2166136261u;
static void mix(const void *p, size_t n) { const uint8_t *b = (const uint8_t *)p; for (size_t i = 0; i < n; ++i) { hash ^= b[i]; hash *= 16777619u; } }
static void report(const char *name, int failures) {
  char line[64];
  size_t k = 0;
  while (name[k] && k < 32) { line[k] = name[k]; ++k; }
  line[k++] = ' ';
  for (int i = 7; i >= 0; --i) line[k++] = "0123456789abcdef"[(hash >> (4 * i)) & 15u];
  line[k++] = ' ';
  line[k++] = (char)('0' + (failures > 9 ? 9 : failures));
  line[k++] = '\n';
  line[k] = 0;
  out_str(line);
  hash = 2166136261u;
}
static int8_t in8[256], out8[256];
static ek_tensor tensors[2];
static uint64_t user_data[64];

static int run(const ek_kernel *k, float si, int32_t zi, float so, int32_t zo, float alpha, int approximate) {
  ek_context ctx;
  ek_op op;
  static const int32_t ins[1] = {0}, outs[1] = {1};
  memset(&ctx, 0, sizeof ctx);
  memset(&op, 0, sizeof op);
  memset(tensors, 0, sizeof tensors);
  memset(user_data, 0, sizeof user_data);
  for (int i = 0; i < 2; ++i) {
    tensors[i].data = i ? (void *)out8 : (void *)in8;
    tensors[i].ndim = 1;
    tensors[i].dims[0] = 256;
    tensors[i].bytes = 256;
    tensors[i].type = EK_INT8;
    tensors[i].num_scales = 1;
  }
  tensors[0].scale = si; tensors[0].zero_point = zi;
  tensors[1].scale = so; tensors[1].zero_point = zo;
  ctx.tensors = tensors;
  ctx.num_tensors = 2;
  op.opcode = k->opcode;
  op.version = 1;
  op.num_inputs = 1;
  op.num_outputs = 1;
  op.inputs = ins;
  op.outputs = outs;
  op.params.alpha = alpha;
  op.params.approximate = (uint8_t)approximate;
  op.user_data = user_data;
  if (k->prepare(&ctx, &op) != EK_OK) return 1;
  k->eval(&ctx, &op);
  mix(out8, 256);
  return 0;
}

int main(void) {
  for (int i = 0; i < 256; ++i) in8[i] = (int8_t)(i - 128);
  const ek_kernel *kernels[] = {&ek_kernel_tanh, &ek_kernel_exp, &ek_kernel_log, &ek_kernel_sqrt, &ek_kernel_gelu,
                                &ek_kernel_gelu, &ek_kernel_rsqrt, &ek_kernel_leaky_relu, &ek_kernel_relu6, &ek_kernel_abs};
  const char *names[] = {"TANH", "EXP", "LOG", "SQRT", "GELU", "GELU_APPROXIMATE", "RSQRT", "LEAKY_RELU", "RELU6", "ABS"};
  for (int k = 0; k < 10; ++k) {
    int failures = 0;
    for (int it = 0; it < 2000; ++it) {
      const float si = rnd_scale(-12, 0), so = rnd_scale(-12, 1);
      const int32_t zi = (int32_t)(rnd() % 256u) - 128, zo = (int32_t)(rnd() % 256u) - 128;
      const float alpha = rnd_scale(-8, 1) * ((rnd() & 1u) ? -1.0f : 1.0f);
      failures += run(kernels[k], si, zi, so, zo, alpha, k == 5);
    }
    report(names[k], failures);
  }
  return 0;
}
"""

UNARY_KERNELS = ["lut_math", "logistic", "rsqrt", "relu", "abs_neg"]


def test_device_built_tables_equal_the_host_ones_on_cortex_m4(tmp_path):
    """prepare() on Cortex-M4 (newlib tanhf/logf/erfcf, software double) against the host (glibc), 2,000 seeded
    scale and zero-point sets per op: the in-place path's tables on the device."""
    import subprocess

    from tests.firmware.test_kernels_elementwise import DEVICE_LINKER_SCRIPT, DEVICE_STARTUP_C, HOST_MAIN_C

    missing = [tool for tool in ("gcc", "arm-none-eabi-gcc", "qemu-system-arm") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    runtime = Path(__file__).resolve().parents[2] / "firmware" / "runtime"
    sources = [str(runtime / "src" / "kernels" / f"{k}.c") for k in UNARY_KERNELS] + [str(runtime / "src" / "ek_util.c")]
    includes = [f"-I{runtime / 'include'}", f"-I{runtime / 'src'}"]
    for name, text in (("tables.c", DEVICE_TABLES_C), ("startup.c", DEVICE_STARTUP_C), ("board.ld", DEVICE_LINKER_SCRIPT),
                       ("host_main.c", HOST_MAIN_C)):
        (tmp_path / name).write_text(text)
    common = ["-std=c99", "-O2", "-ffp-contract=off", *includes]
    subprocess.run(["gcc", *common, "-o", str(tmp_path / "host"), str(tmp_path / "tables.c"), str(tmp_path / "host_main.c"),
                    *sources, "-lm"], check=True, capture_output=True, timeout=120)
    subprocess.run(["arm-none-eabi-gcc", *common, "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                    "-nostartfiles", "-T", str(tmp_path / "board.ld"), "--specs=nano.specs", "-o", str(tmp_path / "m4.elf"),
                    str(tmp_path / "tables.c"), str(tmp_path / "startup.c"), *sources, "-lm", "-lc", "-lgcc"],
                   check=True, capture_output=True, timeout=120)
    host = subprocess.run([str(tmp_path / "host")], check=True, capture_output=True, text=True, timeout=60).stdout
    board = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-semihosting-config",
                            "enable=on,target=native", "-kernel", str(tmp_path / "m4.elf")],
                           capture_output=True, text=True, timeout=300)
    lines = [line for line in (board.stdout + board.stderr).splitlines() if line.strip()]
    assert board.returncode == 0, board.stdout + board.stderr
    assert len(host.splitlines()) == 10
    differing = [h.split()[0] for h, b in zip(host.splitlines(), lines) if h != b]
    assert differing == [], f"device tables differ from the host's for {differing}"


# --- a converter-made model ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_keras_prelu_leaky_relu_tanh_relu6_model_from_the_tflite_converter_is_bit_exact():
    """Keras PReLU(shared_axes=[1, 2]) (MediaPipe's per-channel alpha layout), LeakyReLU, tanh, ReLU(6) through
    TFLiteConverter full-int8 (~20 s): the converter's alpha constant, op versions and options, in place and
    prepared."""
    tf = pytest.importorskip("tensorflow")
    from edgekit.firmware.host_runtime import op_codes, op_name

    rng = np.random.default_rng(0)
    inp = tf.keras.Input((16, 16, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(8, 3, padding="same")(inp)
    prelu = tf.keras.layers.PReLU(shared_axes=[1, 2])
    x = prelu(x)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same")(x)
    x = tf.keras.layers.LeakyReLU(0.1)(x)
    x = tf.keras.layers.Conv2D(8, 1)(x)
    x = tf.keras.layers.Activation("tanh")(x)
    x = tf.keras.layers.ReLU(6.0)(x)
    model = tf.keras.Model(inp, x)
    prelu.set_weights([rng.uniform(0.05, 0.5, size=(1, 1, 8)).astype(np.float32)])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([rng.standard_normal((1, 16, 16, 3)).astype(np.float32)] for _ in range(20))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    tflite = converter.convert()
    assert [op_name(c) for c in op_codes(tflite)] == ["CONV_2D", "PRELU", "DEPTHWISE_CONV_2D", "LEAKY_RELU", "CONV_2D",
                                                      "TANH", "RELU6"]
    for seed in range(3):
        assert_bit_exact(tflite, random_input(tflite, np.random.default_rng(seed)), f"keras model, input seed {seed}")
