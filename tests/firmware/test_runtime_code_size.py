"""Issue 25: the runtime code linked into the MLPerf Tiny KWS firmware on Cortex-M4 (mps2-an386) is <= 25 KB
(runtime core + linked kernels, from the linker map, as tests/benchmarks/bench_firmware_mlperf.py reads it), and
the optional kernel paths that keep it there (edgekit/firmware/kernel_paths.py): compiled only for a model that
uses them, refused (never misrun) where they are compiled out, still bit-exact where the generator asked for them."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware.kernel_paths import MODEL_PATHS, needed_paths
from edgekit.tflite_graph import read_graph
from tests.firmware.opmodels import T, build_graph, reference

REPO = Path(__file__).resolve().parents[2]
KWS = REPO / "tests" / "fixtures" / "mlperf_tiny" / "kws_ref_model_int8.tflite"
RUNTIME_CODE_LIMIT = 25 * 1024  # bench_firmware_mlperf.RUNTIME_CODE_TARGET["KWS"]

needs_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("make") is None,
                               reason="arm-none-eabi-gcc or make is not installed")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")


def cast_fc16_model(seed: int = 7) -> bytes:
    """int8 input -> CAST int16 -> 16x8 FULLY_CONNECTED (int8 weights, int64 bias) -> int16 output: a 16x8 model a
    firmware can take (firmware inputs are int8)."""
    rng = np.random.default_rng(seed)
    units, depth, s_in, s_w = 6, 12, 2e-3, 0.01
    tensors = [T((2, depth), "int8", 0.05, 0), T((2, depth), "int16", s_in, 0),
               T((units, depth), "int8", s_w, 0, data=rng.integers(-127, 128, (units, depth))),
               T((units,), "int64", s_in * s_w, 0, data=rng.integers(-20000, 20000, (units,))),
               T((2, units), "int16", 1e-3, 0)]
    ops = [("CAST", [0], [1], None), ("FULLY_CONNECTED", [1, 2, 3], [4], {"fused_activation_function": "NONE"})]
    return build_graph(tensors, ops, [0], [4])


def makefile_defines(project: Path) -> list:
    return re.search(r"^DEFINES :=(.*)$", (project / "Makefile").read_text(), re.M).group(1).split()


def test_the_generator_asks_for_the_16x8_path_only_when_the_model_has_one():
    assert needed_paths(read_graph(KWS.read_bytes())) == []
    assert needed_paths(read_graph(cast_fc16_model())) == ["EK_NEED_FC_INT16"]


@needs_gcc
def test_kws_runtime_code_on_cortex_m4_is_at_most_25_kb(tmp_path):
    from edgekit.firmware.generate import generate_firmware

    result = generate_firmware(KWS, "mps2-an386", tmp_path / "kws", build=False)
    split = result.info.to_dict()["flash"]["split"]
    assert split["runtime_code"] == split["runtime_core"] + split["runtime_kernels"] > 0
    assert split["runtime_code"] <= RUNTIME_CODE_LIMIT, (
        f"measured runtime code {split['runtime_code']:,} B (core {split['runtime_core']:,} + kernels "
        f"{split['runtime_kernels']:,}) > {RUNTIME_CODE_LIMIT:,} B")
    defines = makefile_defines(tmp_path / "kws")
    assert f"-D{MODEL_PATHS}" in defines and not any(d.startswith("-DEK_NEED_") for d in defines)


def test_a_build_without_the_16x8_path_refuses_an_int16_fully_connected(tmp_path):
    """The in-place path (prepare on the device) of a runtime built with EK_MODEL_PATHS and no EK_NEED_FC_INT16:
    the int16 FULLY_CONNECTED is refused with a message naming the macro; an int8 model still runs bit-exact."""
    from edgekit.firmware.host_runtime import build_driver
    from tests.firmware.opmodels import build_model

    driver = build_driver(defines=[MODEL_PATHS])
    model = tmp_path / "fc16.tflite"
    model.write_bytes(cast_fc16_model())
    (tmp_path / "x.bin").write_bytes(np.zeros((2, 12), np.int8).tobytes())
    done = subprocess.run([str(driver), str(model), "run", str(tmp_path / "out"), str(tmp_path / "x.bin")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: UNSUPPORTED op 1: ") and "EK_NEED_FC_INT16" in done.stderr

    rng = np.random.default_rng(3)
    fc8 = build_model("FULLY_CONNECTED", [T((1, 16), "int8", 0.05, 3),
                                          T((4, 16), "int8", 0.02, 0, data=rng.integers(-127, 128, (4, 16))), None],
                      [T((1, 4), "int8", 0.1, -2)], {"fused_activation_function": "NONE"})
    (tmp_path / "fc8.tflite").write_bytes(fc8)
    x = rng.integers(-128, 128, (1, 16), dtype=np.int8)
    (tmp_path / "x8.bin").write_bytes(x.tobytes())
    out = tmp_path / "out8"
    out.mkdir()
    done = subprocess.run([str(driver), str(tmp_path / "fc8.tflite"), "run", str(out), str(tmp_path / "x8.bin")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    got = np.frombuffer((out / "output_0.bin").read_bytes(), np.int8)
    assert np.array_equal(got, reference(fc8, [x])[0].reshape(-1))


@pytest.mark.slow
@needs_qemu
def test_a_16x8_fully_connected_runs_bit_exact_on_cortex_m4_where_the_generator_asked_for_it(tmp_path, cli):
    from edgekit.firmware.generate import generate_firmware

    model = tmp_path / "fc16.tflite"
    model.write_bytes(cast_fc16_model())
    generate_firmware(model, "mps2-an386", tmp_path / "project", build=False)
    assert {f"-D{MODEL_PATHS}", "-DEK_NEED_FC_INT16"} <= set(makefile_defines(tmp_path / "project"))
    out = tmp_path / "run"
    assert cli("run", model, "--device", "qemu:mps2-an386", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0
    assert exact["total_elements"] > 0 and exact["total_elements"] % 12 == 0  # 2 x 6 int16 outputs per sample
