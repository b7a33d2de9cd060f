"""`edgekit firmware` and `edgekit run --device qemu:BOARD`: generation, standalone builds, sizes, bad input,
and end-to-end QEMU runs checked bit for bit against LiteRT BUILTIN_REF.

Real parts only: the generated Makefile is built with arm-none-eabi-gcc, sizes are read from the linked ELF,
the firmware boots in qemu-system-arm and is counted by the ekcount plugin. Tests that need the toolchain,
QEMU or the MLPerf Tiny models skip with the reason when they are absent.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import DoesNotFitError, UnknownNameError, UnsupportedOpError
from tests.conftest import DIGITS
from tests.firmware.opmodels import T, build_graph

needs_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                               reason="arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi)")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="qemu-system-arm or arm-none-eabi-gcc is not installed")

KWS = "kws_ref_model_int8.tflite"
IC = "ic_resnet8_int8.tflite"
AD = "ad_autoencoder_int8.tflite"


def c_array_bytes(source: str) -> bytes:
    """The bytes of the ek_model_data initializer in a generated model_data.c."""
    body = source.split("= {", 1)[1].split("};", 1)[0]
    return bytes(int(h, 16) for h in re.findall(r"0x([0-9a-f]{2})", body))


@pytest.fixture(scope="module")
def demo_int8(demo_quantized_80) -> Path:
    """The demo model quantized once by edgekit quantize (the PyTorch path; calib_size=80: 64 calibrate, 16 held
    out; once per session, tests/conftest.py)."""
    return demo_quantized_80 / "model_int8.tflite"


@pytest.fixture(scope="module")
def kws_project(tmp_path_factory) -> Path:
    from tests.conftest import MLPERF

    model = MLPERF / KWS
    if not model.is_file():
        pytest.skip(f"MLPerf Tiny model {model} not found")
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("kws") / "fw"
    assert run_cli("firmware", model, "--board", "mps2-an386", "-o", out, "--build") == 0
    return out


# --- generation and build ---------------------------------------------------------------------------------

@needs_gcc
def test_kws_project_is_complete_and_sized_from_the_elf(kws_project, mlperf):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import choose_memory_plan
    from edgekit.firmware.sizes import elf_sizes
    from edgekit.tflite_graph import read_graph

    info = json.loads((kws_project / "firmware.json").read_text())
    model = (mlperf / KWS).read_bytes()
    # the default firmware runs the prepared model: sized from the generator's host plan (--optimize balanced,
    # --weights auto: the re-laid-out copies within the flash budget)
    plan = choose_memory_plan(model, read_graph(model), str(mlperf / KWS), "balanced", load_board("mps2-an386"))
    assert (plan["weight_layouts"]["constants_bytes"] + plan["prepared_bytes"]) / len(model) <= 1.2
    assert info["arena_bytes"] == plan["arena_bytes"] and info["state_bytes"] == plan["state_bytes"]
    sizes = elf_sizes(kws_project / "build" / "firmware.elf")
    assert info["flash_bytes"] == sizes.flash_bytes == sizes.text + sizes.rodata + sizes.data
    # the ek_model_data symbol holds only what the prepared path reads of the .tflite (issue 29)
    in_flash = info["model"]["in_flash"]
    assert sizes.model == in_flash["bytes"] < len(model) and in_flash["why"]
    ram = info["ram"]
    assert ram["bytes"] == sizes.static_ram_bytes + ram["stack"]["bytes"]
    assert ram["arena"] + ram["state"] + ram["other_static"] == sizes.static_ram_bytes
    stack = ram["stack"]
    if shutil.which("qemu-system-arm"):  # --build on a QEMU board boots it once: the stack is measured
        assert stack["estimated"] is False and stack["method"].startswith("measured: high-water mark")
        assert 0 < stack["bytes"] <= stack["static_estimate"]["bytes"]  # the static estimate bounds the real use
        assert ram["state_used_on_device"] <= ram["state"]  # the host's 64-bit state bounds the 32-bit device's
        stack = stack["static_estimate"]
    assert stack["estimated"] and "static estimate" in stack["method"] and stack["bytes"] > 104
    assert info["fits"]["flash"]["fits"] and info["fits"]["ram"]["fits"]
    assert [op["name"] for op in info["ops"]][:2] == ["CONV_2D", "DEPTHWISE_CONV_2D"] and len(info["ops"]) == 13
    assert info["macs"] == 2_656_768
    assert {t["index"] for t in info["plan"]["tensors"]} and all(t["offset"] % 16 == 0 for t in info["plan"]["tensors"])
    sig = info["signature"]
    assert sig["model_sha256"] == info["model"]["sha256"] and sig["tools"]["edgekit"] and sig["host"]["hostname"]
    # only the model's kernels are in the project
    kernels = sorted(p.name for p in (kws_project / "runtime" / "src" / "kernels").glob("*.c"))
    assert kernels == sorted(info["kernels"] + ["registry.c"])
    assert "add.c" not in kernels and "conv_2d.c" in kernels
    # the embedded array is the model's constants the prepared blob reads, 16-byte aligned
    from edgekit.firmware.constants import compact_constants

    source = (kws_project / "model" / "model_data.c").read_text()
    blob = c_array_bytes((kws_project / "model" / "prepared_data.c").read_text())
    assert "__attribute__((aligned(16)))" in source
    assert c_array_bytes(source) == compact_constants(model, plan["prepared_blob"]).data
    assert compact_constants(model, plan["prepared_blob"]).blob == blob
    assert (kws_project / "model.tflite").read_bytes() == model
    config = (kws_project / "model" / "ek_config.h").read_text()
    assert f"#define EK_ARENA_BYTES {plan['arena_bytes']}u" in config
    readme = (kws_project / "README.md").read_text()
    assert "Trade-off" in readme and f"{info['arena_bytes']:,}" in readme


@needs_gcc
def test_generated_makefile_builds_on_its_own(kws_project, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(kws_project, copy, ignore=shutil.ignore_patterns("build"))
    done = subprocess.run(["make", "-C", str(copy), "-j2"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    flags = (copy / "Makefile").read_text()
    for flag in ("-O2", "-ffp-contract=off", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections",
                 "-fstack-usage"):
        assert flag in flags
    assert (copy / "build" / "firmware.elf").is_file() and list((copy / "build").rglob("*.su"))
    assert "warning:" not in done.stderr


@needs_gcc
def test_demo_model_from_quantize_generates_and_builds(demo_int8, tmp_path, cli):
    out = tmp_path / "demo-fw"
    assert cli("firmware", demo_int8, "-o", out, "--build") == 0
    info = json.loads((out / "firmware.json").read_text())
    assert (out / "build" / "firmware.elf").is_file()
    assert {"CONV_2D", "FULLY_CONNECTED"} <= set(info["op_counts"])
    assert info["board"]["board"] == "mps2-an386" and info["flash"]["method"].startswith("measured")


def test_converter_is_registered_and_reports_every_op(mlperf):
    import edgekit.converters.firmware  # noqa: F401
    from edgekit.converters import CONVERTERS

    converter = CONVERTERS.get("firmware")()
    report = converter.check_support(mlperf / IC)
    assert report.ok and len(report.ops) == 16 and all(o.location.startswith("op #") for o in report.ops)
    tflm = converter.check_support(mlperf / IC, "tflm")
    assert tflm.ok and tflm.target == "firmware-tflm"


# --- bad input: one clear error, nothing written ---------------------------------------------------------------

def _unsupported_model() -> bytes:
    """ADD (supported) followed by LOCAL_RESPONSE_NORMALIZATION and FLOOR_MOD (TFLite builtins, not in the edgekit runtime)."""
    tensors = [T([1, 8], name="x"), T([1, 8], name="y"), T([1, 8], name="sum"), T([1, 8], name="lrn_out"),
               T([1, 8], name="floor_mod_out")]
    ops = [("ADD", [0, 1], [2], None), ("LOCAL_RESPONSE_NORMALIZATION", [2], [3], None), ("FLOOR_MOD", [3, 2], [4], None)]
    return build_graph(tensors, ops, inputs=[0, 1], outputs=[4])


def test_unsupported_ops_are_all_listed_before_anything_is_written(tmp_path, cli, capsys):
    from edgekit.firmware.generate import generate_firmware

    model = tmp_path / "unsupported.tflite"
    model.write_bytes(_unsupported_model())
    out = tmp_path / "never"
    with pytest.raises(UnsupportedOpError) as err:
        generate_firmware(model, "mps2-an386", out)
    rejected = err.value.report.rejected
    assert [(o.op, o.location) for o in rejected] == [("LOCAL_RESPONSE_NORMALIZATION", "op #1 -> tensor 'lrn_out'"),
                                                       ("FLOOR_MOD", "op #2 -> tensor 'floor_mod_out'")]
    assert len(err.value.report.ops) == 3 and err.value.report.ops[0].supported
    assert not out.exists() and list(tmp_path.iterdir()) == [model]
    assert cli("firmware", model, "-o", out) == 2
    message = capsys.readouterr().err
    assert "2 operator(s)" in message and "LOCAL_RESPONSE_NORMALIZATION at op #1" in message and "FLOOR_MOD at op #2" in message
    assert "--runtime tflm" in message and not out.exists()


def test_float_model_is_refused_as_not_int8(tmp_path, cli, capsys):
    model = tmp_path / "float.tflite"
    model.write_bytes(build_graph([T([1, 4], "float32", None), T([1, 4], "float32", None), T([1, 4], "float32", None)],
                                  [("ADD", [0, 1], [2], None)], [0, 1], [2]))
    assert cli("firmware", model, "-o", tmp_path / "out") == 2
    message = capsys.readouterr().err
    assert "not full-int8" in message and "FLOAT32" in message and "edgekit quantize" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not_tflite", "empty"])
def test_damaged_model_gives_one_clear_error(mlperf, tmp_path, cli, capsys, damage):
    data = (mlperf / KWS).read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 3]
    elif damage == "corrupt":
        rng = np.random.default_rng(7)
        damaged = bytearray(data)
        damaged[8:4096] = rng.integers(0, 256, 4088, dtype=np.uint8).tobytes()  # header tables, keep 'TFL3'
        data = bytes(damaged)
    elif damage == "not_tflite":
        data = b"PK\x03\x04 this is a zip file, not a model" * 10
    else:
        data = b""
    model = tmp_path / f"{damage}.tflite"
    model.write_bytes(data)
    out = tmp_path / "out"
    assert cli("firmware", model, "-o", out) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("edgekit firmware: error:") and "Traceback" not in message
    assert any(w in message for w in ("truncated", "corrupt", "not a TFLite", "not a readable")), message
    assert not out.exists()


def test_unknown_board_lists_the_known_ones(mlperf, tmp_path):
    from edgekit.firmware.generate import generate_firmware

    with pytest.raises(UnknownNameError) as err:
        generate_firmware(mlperf / AD, "arduino-uno", tmp_path / "out")
    assert "mps2-an386" in str(err.value) and not (tmp_path / "out").exists()


def _small_board(folder: Path, name: str, flash: int, ram: int, stack: int = 4096) -> None:
    """A real-board profile (NUCLEO-L4R5ZI's) shrunk to the given memory, in a user profile folder."""
    import yaml

    from edgekit.profiles import BUILTIN_DIR

    profile = yaml.safe_load((BUILTIN_DIR / "nucleo-l4r5zi.yaml").read_text())
    profile.update(name=name, description=f"test board with {flash} B flash and {ram} B RAM", stack_bytes=stack)
    profile["memory"] = {"flash": {"origin": 0x08000000, "bytes": flash}, "ram": {"origin": 0x20000000, "bytes": ram}}
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(profile))


def test_model_too_large_for_the_ram_fails_with_the_byte_count(mlperf, tmp_path, monkeypatch):
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.host_runtime import HostRuntime

    _small_board(tmp_path / "boards", "tiny-ram", flash=1 << 20, ram=16 * 1024)  # IC needs ~26 KB streamed
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(tmp_path / "boards"))
    plan = HostRuntime((mlperf / IC).read_bytes()).plan
    need = plan["arena_bytes"] + plan["state_bytes"] + 4096
    out = tmp_path / "out"
    with pytest.raises(DoesNotFitError) as err:
        generate_firmware(mlperf / IC, "tiny-ram", out)
    message = str(err.value)
    assert "RAM" in message and f"{need - 16 * 1024:,} bytes too many" in message
    assert not out.exists()


def test_model_larger_than_the_flash_fails_with_the_byte_count(mlperf, tmp_path, monkeypatch):
    from edgekit.firmware.generate import generate_firmware

    size = (mlperf / IC).stat().st_size
    _small_board(tmp_path / "boards", "tiny-flash", flash=64 * 1024, ram=512 * 1024)
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(tmp_path / "boards"))
    with pytest.raises(DoesNotFitError) as err:
        generate_firmware(mlperf / IC, "tiny-flash", tmp_path / "out")
    assert f"at least {size - 64 * 1024:,} bytes too many" in str(err.value)
    assert not (tmp_path / "out").exists()


@needs_gcc
def test_code_that_overflows_the_flash_is_caught_at_link_time(mlperf, tmp_path, monkeypatch):
    """The model alone fits, model + runtime does not: the linker's overflow becomes DoesNotFitError."""
    from edgekit.firmware.generate import generate_firmware

    size = (mlperf / AD).stat().st_size
    _small_board(tmp_path / "boards", "almost", flash=size + 4096, ram=256 * 1024)
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(tmp_path / "boards"))
    with pytest.raises(DoesNotFitError) as err:
        generate_firmware(mlperf / AD, "almost", tmp_path / "out")
    assert re.search(r"FLASH overflowed by [\d,]+ bytes", str(err.value)), str(err.value)
    assert not (tmp_path / "out").exists()


# --- end to end on QEMU ------------------------------------------------------------------------------------------

def _run(cli, artifact: Path, out: Path, *extra) -> dict:
    assert cli("run", artifact, "--device", "qemu:mps2-an386", "-n", "2", "-o", out, *extra) == 0
    return json.loads((out / "run.json").read_text())


def _check_run(run: dict, model: bytes) -> None:
    from edgekit.tflite_graph import read_graph

    graph = read_graph(model)
    assert run["board"] == "mps2-an386" and run["device"]["kind"] == "qemu"
    assert run["instructions_per_inference"] > sum(graph.macs().values()) * 0.5
    per_op = run["per_op_instructions"]  # a row-streamed group is one entry naming all its ops
    assert [name for o in per_op for name in o.get("ops", [o["op"]])] == [op.name for op in graph.ops]
    assert sum(o["instructions"] for o in per_op) < run["instructions_per_inference"]
    exact = run["outputs_bit_exact"]
    assert exact["value"] is True and exact["differing_elements"] == 0 and exact["total_elements"] > 0
    assert exact["reference"] == "LiteRT OpResolverType.BUILTIN_REF"
    assert run["arena_bytes"] > 0 and run["flash_bytes"] > len(model)
    assert run["energy_uj_per_inference"]["method"] == "estimated"
    latency = run["latency_ms_estimated"]
    assert latency["method"] == "estimated" and latency["clock_hz"] == 25_000_000
    assert latency["value"] == pytest.approx(run["instructions_per_inference"] * latency["cycles_per_instruction"] / 25e3)
    assert run["latency_ms"]["count"] == 0  # emulator wall time is never reported as device latency
    assert run["memory"]["stack_used_bytes"] > 0 and run["memory"]["state_used_bytes"] <= run["memory"]["state_bytes"]


@pytest.mark.slow
@needs_qemu
def test_demo_runs_bit_exact_on_qemu(demo_int8, tmp_path, cli):
    run = _run(cli, demo_int8, tmp_path / "run", "--inputs", DIGITS / "eval", "--input-limit", "4")
    _check_run(run, demo_int8.read_bytes())
    assert run["outputs_bit_exact"]["samples"] == 4


@pytest.mark.slow
@needs_qemu
def test_firmware_project_folder_runs_on_qemu(kws_project, mlperf, tmp_path, cli):
    run = _run(cli, kws_project, tmp_path / "run")
    _check_run(run, (mlperf / KWS).read_bytes())
    assert run["outputs_bit_exact"]["vs_tflm_python"]["bit_exact"] is True


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("name", [IC, AD])
def test_mlperf_models_run_bit_exact_on_qemu(mlperf, tmp_path, cli, name):
    model = mlperf / name
    run = _run(cli, model, tmp_path / "run")
    _check_run(run, model.read_bytes())
    exact = run["outputs_bit_exact"]
    if name == AD:  # LiteRT BUILTIN_REF and TFLM disagree on this FC stack (TOOLCHAIN.md); we match BUILTIN_REF
        assert exact["matches"].startswith("LiteRT BUILTIN_REF")
        tflm = exact["vs_tflm_python"]
        assert tflm["bit_exact"] is False and tflm["differing_elements"] > 0 and "note" in exact


# --- serial:PORT ---------------------------------------------------------------------------------------------------

@pytest.mark.slow
@needs_qemu
def test_serial_runner_talks_pyserial_to_a_qemu_uart_pty(kws_project, mlperf):
    """The serial runner end to end over a real pty (QEMU's UART0 with -serial pty), through pyserial."""
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.qemu import PTY_LINE, QemuProcess
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.runners.mcu import SerialRunner
    from edgekit.run.resolve import resolve_device

    board = load_board("mps2-an386")
    with QemuProcess(board, kws_project / "build" / "firmware.elf", uart="pty") as qemu:
        qemu.transport.close()  # hand the pty over to the runner
        port = PTY_LINE.search(qemu.log_text()).group(1)
        target = resolve_device(f"serial:{port}", "mps2-an386")
        assert isinstance(target, DeviceTarget) and target.kind == "serial"
        rng = np.random.default_rng(5)
        inputs = [{"input": rng.integers(-128, 128, size=(1, 49, 10, 1), dtype=np.int8)}]
        result = SerialRunner(target).run(RunRequest(artifact=kws_project, inputs=inputs, iterations=1, timeout_s=60))
    exact = result.work.outputs_bit_exact
    assert result.complete and exact.value is True and exact.differing_elements == 0
    assert "instructions_per_inference" not in result.work.present()  # no instruction counter on a serial link
    assert result.latencies_ms == []  # QEMU's DWT does not count: no invented device latency


@pytest.mark.skipif(not (os.environ.get("EDGEKIT_SERIAL_PORT") and os.environ.get("EDGEKIT_SERIAL_BOARD")),
                    reason="no real board attached: set EDGEKIT_SERIAL_PORT (e.g. /dev/ttyACM0) and EDGEKIT_SERIAL_BOARD "
                           "(e.g. nucleo-l4r5zi) with the board connected through its debug probe")
def test_real_board_over_serial_with_flash(mlperf, tmp_path, cli):
    out = tmp_path / "run"
    code = cli("run", mlperf / KWS, "--device", f"serial:{os.environ['EDGEKIT_SERIAL_PORT']}",
               "--profile", os.environ["EDGEKIT_SERIAL_BOARD"], "--flash", "-n", "4", "-o", out)
    assert code == 0
    run = json.loads((out / "run.json").read_text())
    assert run["outputs_bit_exact"]["value"] is True and run["energy_uj_per_inference"]["method"] == "estimated"


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("shape", [dict(h=40, w=3, c=20, act="RELU6", out_zp=7), dict(h=6, w=4, c=44, act="NONE",
                                                                                      out_zp=-5)])
def test_helium_small_map_depthwise_is_bit_exact(tmp_path, cli, shape):
    """DEPTHWISE_CONV_2D's Helium small-map path (KWS's layers run it in the test below) on the cases KWS does not
    have: a partial channel group, a clamp narrower than int8, even row width, several accumulator blocks."""
    from tests.benchmarks.bench_kernels_qemu import dw_model

    model = tmp_path / "dw.tflite"
    model.write_bytes(dw_model(np.random.default_rng(3), **shape))
    out = tmp_path / "run"
    assert cli("run", model, "--device", "qemu:mps3-an547", "-n", "2", "-o", out) == 0
    exact = json.loads((out / "run.json").read_text())["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("name", [KWS, IC, AD])
def test_mlperf_models_run_bit_exact_on_cortex_m55_helium(mlperf, tmp_path, cli, name):
    """The Helium (MVE) kernel paths only exist in the Cortex-M55 build: run them on mps3-an547 in CI."""
    out = tmp_path / "run"
    assert cli("run", mlperf / name, "--device", "qemu:mps3-an547", "-n", "1", "-o", out) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["board"] == "mps3-an547"
    exact = run["outputs_bit_exact"]
    assert exact["bit_exact"] is True and exact["differing_elements"] == 0
    assert exact["reference"] == "LiteRT OpResolverType.BUILTIN_REF"


@pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                    reason="qemu-system-arm and arm-none-eabi-gcc are needed")
@pytest.mark.slow
def test_build_and_boot_report_progress(cli, capsys, tmp_path):
    """Every arm-none-eabi-gcc compile/link step of the build, the QEMU boot of the stack check and of a run are
    reported to the CLI's progress display (the library draws nothing itself)."""
    from edgekit.progress import reporting_to
    from tests.conftest import MLPERF

    events = []

    def factory(label, total):
        events.append(("total", label, total))
        return lambda n: events.append(("done", label, n))

    with reporting_to(factory):
        assert cli("firmware", MLPERF / "ad_autoencoder_int8.tflite", "--build", "-o", tmp_path / "fw") == 0
        assert cli("run", tmp_path / "fw", "--device", "qemu:mps2-an386", "-n", "1", "-o", tmp_path / "run") == 0
    capsys.readouterr()
    totals = {label: total for kind, label, total in events if kind == "total"}
    done = {label: sum(n for kind, lbl, n in events if kind == "done" and lbl == label) for label in totals}
    assert totals["building firmware"] >= 10 and done["building firmware"] == totals["building firmware"]
    assert done["memory plan"] == 1 and done["QEMU boot + 1 inference"] == 1 and done["device boot"] == 1


def test_weights_stay_int8_when_their_flash_layout_would_not_fit_the_board(mlperf):
    """Re-laid-out CONV_2D weights (faster on Cortex-M4) grow the prepared blob; on a board whose flash holds just the
    int8-weight model + the code reserve, --weights auto keeps them int8 and says why (same outputs); with a little
    more flash it gives the copies that fit to some ops only (the budget: tests/firmware/test_weight_budget.py)."""
    from dataclasses import replace

    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import FLASH_CODE_RESERVE, choose_memory_plan, memory_plan
    from edgekit.tflite_graph import read_graph

    model = (mlperf / KWS).read_bytes()
    graph = read_graph(model)
    board = load_board("mps2-an386")
    roomy = choose_memory_plan(model, graph, "kws", "balanced", board)
    compact = memory_plan(model, graph, "kws", "balanced", board, flash_layouts=False)
    assert roomy["weight_layouts"]["flash_layouts"] is True
    assert compact["prepared_bytes"] < roomy["prepared_bytes"]  # the int16 weight records cost flash
    int8_flash = compact["weight_layouts"]["constants_bytes"] + compact["prepared_bytes"]
    limit = int8_flash + FLASH_CODE_RESERVE  # fits only with int8 weights
    small = replace(board, flash=replace(board.flash, bytes=limit))
    chosen = choose_memory_plan(model, graph, "kws", "balanced", small)
    assert chosen["weight_layouts"]["flash_layouts"] is False and chosen["weight_layouts"]["relaid_ops"] == []
    assert chosen["prepared_bytes"] == compact["prepared_bytes"]
    assert f"{board.name}'s {limit:,} B flash" in chosen["weight_layouts"]["note"]
    assert (chosen["arena_bytes"], chosen["state_bytes"]) == (compact["arena_bytes"], compact["state_bytes"])
    some = replace(board, flash=replace(board.flash, bytes=limit + 5000))
    mixed = choose_memory_plan(model, graph, "kws", "balanced", some)["weight_layouts"]
    assert 0 < len(mixed["relaid_ops"]) < len(roomy["weight_layouts"]["relaid_ops"])
    assert mixed["flash_budget"]["flash_bytes"] <= mixed["flash_budget"]["limit_bytes"] == limit + 5000 - FLASH_CODE_RESERVE
