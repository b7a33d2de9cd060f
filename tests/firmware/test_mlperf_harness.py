"""MLPerf Tiny harness firmware on QEMU mps2-an386 (KWS, IC, AD): the device protocol, a malformed-command corpus,
the full performance and accuracy flows through `edgekit run --harness mlperf-tiny`, outputs bit-exact with LiteRT
BUILTIN_REF; real-board builds (NUCLEO-L4R5ZI, performance and energy mode) and the hardware test (skips here).
One firmware is built per model and shared by the module's tests."""
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MLPERF, run_cli

pytestmark = pytest.mark.skipif(not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")),
                                reason="needs arm-none-eabi-gcc and qemu-system-arm (apt-get install gcc-arm-none-eabi "
                                       "libnewlib-arm-none-eabi qemu-system-arm)")

MODELS = {"kws": "kws_ref_model_int8.tflite", "ic": "ic_resnet8_int8.tflite", "ad": "ad_autoencoder_int8.tflite"}
BOARD = "mps2-an386"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """task -> built harness firmware folder for mps2-an386 (built on first use, once per module)."""
    from edgekit.firmware.mlperf import generate_harness_firmware

    if not MLPERF.is_dir():
        pytest.fail(f"MLPerf Tiny fixtures not found at {MLPERF}")
    root = tmp_path_factory.mktemp("harness")
    built = {}

    def get(task: str) -> Path:
        if task not in built:
            out = root / task
            generate_harness_firmware(MLPERF / MODELS[task], BOARD, out, task=task, build=True)
            built[task] = out
        return built[task]

    return get


class Dut:
    """A booted harness firmware under QEMU, spoken to with raw bytes (the corpus must reach the device as is)."""

    def __init__(self, folder: Path) -> None:
        from edgekit.firmware.boards import load_board
        from edgekit.firmware.qemu import QemuProcess
        from edgekit.run.mlperf.harness import HarnessLink, Transcript

        self.qemu = QemuProcess(load_board(BOARD), folder / "build" / "firmware.elf")
        self.link = HarnessLink(self.qemu.transport, Transcript(), timeout_s=20.0)
        self.boot = self.link.read_until_ready(15.0)

    def send(self, raw: bytes, answers: int = 1) -> list:
        self.qemu.transport.write(raw)
        return [self.link.read_until_ready() for _ in range(answers)]

    def cmd(self, text: str) -> list:
        return self.link.command(text)

    def close(self) -> None:
        self.qemu.close()


@pytest.fixture
def kws_dut(harness):
    dut = Dut(harness("kws"))
    yield dut
    dut.close()


def _errors(lines):
    return [line for line in lines if line.startswith("e-[")]


def test_boot_banner_and_identity(kws_dut):
    """ee_benchmark_initialize's banner, then name/profile/help/timestamp as the reference runner reads them."""
    assert kws_dut.boot[0] == "m-timestamp-mode-performance"
    assert re.match(r"^m-lap-us-\d+$", kws_dut.boot[1]) and kws_dut.boot[-2:] == ["m-init-done", "m-ready"]
    assert kws_dut.link.name() == f"edgekit {BOARD}"
    assert kws_dut.link.profile() == {"profile": "ULPMark for tinyML Firmware V0.0.1", "model": "kws01"}
    help_text = kws_dut.cmd("help")
    assert help_text[0] == "ULPMark for tinyML Firmware V0.0.1" and any(l.startswith("infer N") for l in help_text)
    first = int(kws_dut.cmd("timestamp")[0][len("m-lap-us-"):])
    time.sleep(0.05)
    second = int(kws_dut.cmd("timestamp")[0][len("m-lap-us-"):])
    assert second > first  # the CMSDK timer runs (emulated time)


def test_malformed_command_corpus(kws_dut):
    """Every malformed input gets e-[...] or is ignored, always followed by m-ready; `name` still answers."""
    corpus = [
        ("db 0102", "no 'db load"),                        # db before db load
        ("db load 0", "must be >0"),                       # N = 0
        ("db load 99999", "exceeds the input buffer"),     # larger than the input
        ("db load -5", "requires the # of bytes"),
        ("db load 4x", "requires the # of bytes"),
        ("db", "requires a subcommand"),
        ("infer 0", "iterations must be >0"),              # N = 0
        ("infer abc 1", "iterations must be >0"),
        ("infer 1 -1", "warmup must be >=0"),
        ("infer 1 2 3", "Usage: infer N [W]"),
        ("infer 1 0", "the input has 0 of 490"),           # nothing loaded
        ("results", "no inference"),
        ("outputs", "no inference"),
        ("frobnicate now", "Unknown command: frobnicate"),
        ("a b c d e f g h", "Too many arguments"),
    ]
    for command, message in corpus:
        lines = kws_dut.cmd(command)
        assert lines[-1] == "m-ready" and len(_errors(lines)) == 1 and message in _errors(lines)[0], (command, lines)
    # too many hex digits: the load completes and the rest is disregarded (as the reference does)
    assert kws_dut.cmd("db load 4")[0] == "m-[Expecting 4 bytes]"
    lines = kws_dut.cmd("db 01020304aabbccddeeff")
    assert lines == ["m-load-done", "m-ready"]
    assert kws_dut.cmd("db print") == ["m-buffer-01-02-03-04", "m-ready"]
    assert "all announced bytes" in _errors(kws_dut.cmd("db 05"))[0]
    # odd digits and invalid digits store nothing
    kws_dut.cmd("db load 4")
    assert "Insufficient number of hex digits" in _errors(kws_dut.cmd("db 010"))[0]
    assert "Invalid hex digit 'zz'" in _errors(kws_dut.cmd("db 01zz"))[0]
    assert kws_dut.cmd("db print") == ["m-ready"]
    # an over-long line (the reference's EE_CMD_SIZE is 80)
    lines = kws_dut.send(b"db " + b"ab" * 200 + b"%")[0]
    assert "Command too long: 403 bytes, the limit is 80" in _errors(lines)[0] and lines[-1] == "m-ready"
    # binary garbage: every byte value except the terminator, then the terminator
    garbage = bytes(b for b in range(256) if b != ord("%")) * 2
    lines = kws_dut.send(garbage + b"%")[0]
    assert len(_errors(lines)) == 1 and lines[-1] == "m-ready"
    lines = kws_dut.send(bytes([0, 0xFF, 0x80]) + b"%")[0]
    assert "Unknown command: ???" in _errors(lines)[0]
    # a burst of empty commands: one m-ready each
    assert kws_dut.send(b"%" * 5, answers=5) == [["m-ready"]] * 5
    # still alive and well
    assert kws_dut.link.name() == f"edgekit {BOARD}"
    assert kws_dut.qemu.alive()


def test_infer_results_bit_exact_with_litert(kws_dut):
    """One input through db load / infer N W / results / outputs: the raw int8 outputs equal LiteRT BUILTIN_REF's,
    and m-results prints them as the KWS reference does (dequantized, truncated to 3 decimals)."""
    from edgekit.run.runners.mcu import litert_reference

    model = (MLPERF / MODELS["kws"]).read_bytes()
    x = np.random.default_rng(7).integers(-128, 128, 490).astype(np.int8)
    kws_dut.link.load(x.tobytes())
    outcome = kws_dut.link.infer(3, 1)
    assert outcome.iterations == 3 and outcome.elapsed_us > 0
    raw = np.frombuffer(kws_dut.link.outputs(), np.int8)
    ref = litert_reference(model, [[x.reshape(1, 49, 10, 1)]])[0][0].ravel()
    assert (raw == ref).all()
    expected = [int((float(q) + 128.0) / 256.0 * 1000) / 1000 for q in ref]  # scale 1/256, zero point -128
    assert outcome.results == pytest.approx(expected, abs=1e-9)
    assert kws_dut.cmd("results")[0] == "m-results-[" + ",".join(f"{v:.3f}" for v in expected) + "]"


def _run(fw: Path, out: Path, *args) -> dict:
    assert run_cli("run", fw, "--device", f"qemu:{BOARD}", "--harness", "mlperf-tiny", "-o", out, *args) == 0
    return json.loads((out / "run.json").read_text())


def _performance_flow(harness, tmp_path, task, *extra):
    report = _run(harness(task), tmp_path / "perf", "--mode", "performance", "--min-runtime", "0.2", *extra)
    summary = report["summary"]
    assert report["mode"] == "performance" and report["dut"]["model"] == f"{task}01"
    assert len(report["windows"]) == 5 and summary["median_throughput_inf_per_s"] > 0
    assert summary["median_throughput_inf_per_s"] == pytest.approx(
        float(np.median([w["throughput_inf_per_s"] for w in report["windows"]])))
    assert all(w["runtime_s"] >= 0.2 for w in report["windows"])  # N sized until the run lasts --min-runtime
    assert report["timestamps"]["method"] == "measured in emulated time"
    text = (tmp_path / "perf" / "results.txt").read_text()
    # windows under 10 s: the runner's ERROR 2 line, and edgekit's median on a line of its own
    assert "ulp-mlperf: ERROR 2 \u2013 loop exited before 10 seconds elapsed." in text and "emulated time" in text
    assert re.search(r"edgekit: median throughput \d+\.\d{3} inf\./sec\.", text)
    log = (tmp_path / "perf" / "log.txt").read_text()
    assert len(re.findall(r"dut: m-lap-us-\d+", log)) >= 20 and 'host: Command "infer' in log
    return report


def _accuracy_flow(harness, tmp_path, task, count, **extra):
    from edgekit.run.mlperf.dataset import ad_error

    fw = harness(task)
    assert run_cli("mlperf-dataset", fw, "--task", task, "-n", count, "-o", tmp_path / "ds",
                   *[str(a) for kv in extra.items() for a in (f"--{kv[0]}", kv[1])]) == 0
    report = _run(fw, tmp_path / "acc", "--mode", "accuracy", "--dataset", tmp_path / "ds")
    bit_exact = report["outputs_bit_exact"]
    assert bit_exact["value"] is True and bit_exact["differing_elements"] == 0 and bit_exact["total_elements"] > 0
    text = (tmp_path / "acc" / "results.txt").read_text()
    assert "host reference model's predictions" in text
    if task == "ad":
        # the device's m-results are the host's reconstruction errors (same int8 outputs), printed with 3 decimals
        from edgekit.run.runners.mcu import litert_reference
        from edgekit.run.mlperf.dataset import device_input, read_dataset, windows
        from edgekit.firmware.mlperf import TASKS

        info = json.loads((fw / "firmware.json").read_text())["model"]
        (i, o) = info["inputs"][0], info["outputs"][0]
        dataset = read_dataset(tmp_path / "ds", TASKS["ad"], input_bytes=2560)
        for entry, row in zip(dataset.entries, report["files"]):
            wins = windows(dataset.data(entry), entry)
            outs = litert_reference((fw / "model.tflite").read_bytes(),
                                    [[device_input(TASKS["ad"], w, i["scale"], i["zero_point"]).reshape(1, 640)] for w in wins])
            host = [float(f"{ad_error(w, q[0], o['scale'], o['zero_point']):.3f}") for w, q in zip(wins, outs)]
            assert row["score"][0] == pytest.approx(float(np.mean(host)), abs=1e-9)
        assert re.search(r"ulp-mlperf: AUC = \d\.\d\d\d$", text, re.M)
        assert report["summary"]["windows"] == sum(r["windows"] for r in report["files"]) > len(report["files"])
    else:
        # labels are the host model's argmax (classes random inputs never reach: assigned, named in the README) and
        # the outputs are bit-exact: the device agrees on exactly the files labelled by prediction
        files = report["files"]
        agree = float(np.mean([f["predicted"] == f["label"] for f in files]))
        assert report["summary"]["top1"] == pytest.approx(agree)
        assert f"ulp-mlperf: Top 1% = {100 * agree:2.1f}" in text
        assert len({f["label"] for f in files}) == len(files[0]["score"])  # every class has a file
        assert re.search(r"ulp-mlperf: AUC = \d\.\d\d\d$", text, re.M)


def test_kws_performance_flow(harness, tmp_path):
    report = _performance_flow(harness, tmp_path, "kws", "--count-instructions")
    counted = report["summary"]["instructions_per_inference"]
    # every inference was counted: per input 1 probe + 1 warm-up + N timed (+ resized retries)
    assert counted["inferences"] >= sum(w["iterations"] + 2 for w in report["windows"])
    assert 1_000_000 < counted["min"] <= counted["median"] <= counted["max"]


def test_kws_accuracy_flow(harness, tmp_path):
    _accuracy_flow(harness, tmp_path, "kws", 4)


@pytest.mark.slow
def test_ic_performance_and_accuracy_flows(harness, tmp_path):
    _performance_flow(harness, tmp_path / "p", "ic")
    _accuracy_flow(harness, tmp_path / "a", "ic", 3)


@pytest.mark.slow
def test_ad_performance_and_accuracy_flows(harness, tmp_path):
    _performance_flow(harness, tmp_path / "p", "ad")
    _accuracy_flow(harness, tmp_path / "a", "ad", 4, frames=6)


def test_run_refuses_firmware_without_the_harness(harness, tmp_path):
    """A firmware.json without the harness app (edgekit's protocol firmware) is refused before QEMU starts."""
    fw = tmp_path / "plain"
    shutil.copytree(harness("kws"), fw)
    info = json.loads((fw / "firmware.json").read_text())
    del info["app"]
    (fw / "firmware.json").write_text(json.dumps(info))
    assert run_cli("run", fw, "--device", f"qemu:{BOARD}", "--harness", "mlperf-tiny", "-o", tmp_path / "o") == 2
    assert run_cli("run", harness("kws"), "--device", f"qemu:{BOARD}", "--harness", "mlperf-tiny", "--mode",
                   "accuracy", "-o", tmp_path / "o") == 2  # accuracy needs --dataset
    assert run_cli("run", harness("kws"), "--device", "qemu:mps2-an500", "--harness", "mlperf-tiny",
                   "-o", tmp_path / "o") == 2  # built for another board
    assert not (tmp_path / "o").exists()


def test_firmware_cli_checks(tmp_path, capsys):
    assert run_cli("firmware", MLPERF / MODELS["kws"], "--task", "kws", "-o", tmp_path / "a") == 2
    assert run_cli("firmware", MLPERF / MODELS["kws"], "--harness", "mlperf-tiny", "-o", tmp_path / "b") == 2
    # energy mode needs a timestamp pin, which the emulated board has not
    assert run_cli("firmware", MLPERF / MODELS["kws"], "--harness", "mlperf-tiny", "--task", "kws",
                   "--harness-mode", "energy", "-o", tmp_path / "c") == 2
    assert "names no timestamp pin" in capsys.readouterr().err
    # the AD task needs an output that reconstructs the input
    assert run_cli("firmware", MLPERF / MODELS["kws"], "--harness", "mlperf-tiny", "--task", "ad", "-o", tmp_path / "d") == 2
    assert "the ad01 benchmark sends 640 input values per sample (5 frames x 128 mels) and scores 640 outputs; this model takes 490 and gives 12; it matches --task kws" in capsys.readouterr().err
    assert run_cli("firmware", MLPERF / MODELS["kws"], "--harness", "mlperf-tiny", "--task", "ic", "-o", tmp_path / "e") == 2
    assert "ic01 benchmark sends 3072 input values" in capsys.readouterr().err
    assert not any((tmp_path / n).exists() for n in "abcde")


@pytest.mark.parametrize("mode", ["performance", pytest.param("energy", marks=pytest.mark.slow)])
def test_real_board_profile_builds(tmp_path, mode):
    """NUCLEO-L4R5ZI (the board of the MLPerf Tiny reference submissions): DWT timestamps, or the D7 = PF13 pulse
    and the reference's 9600 baud in energy mode; compiled and linked here."""
    from elftools.elf.elffile import ELFFile

    from edgekit.firmware.mlperf import generate_harness_firmware

    result = generate_harness_firmware(MLPERF / MODELS["kws"], "nucleo-l4r5zi", tmp_path / "fw", task="kws",
                                       mode=mode, build=True)
    app = result.info.app
    assert result.fits and app["timer"] == "dwt" and app["mode"] == mode
    config = (result.outdir / "model" / "ek_config.h").read_text()
    with open(result.elf, "rb") as f:
        symbols = {s.name for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols()}
    # the same runtime and prepared model as the normal firmware: no flatbuffer reader or planner on the device
    assert "#define EK_PREPARED 1" in config
    assert "ek_prepared_invoke" in symbols and "ek_prepared_init" in symbols and "ek_init" not in symbols
    if mode == "energy":
        assert app["timestamp_pin"] == "PF13" and app["uart_baud"] == 9600
        assert "#define EK_TS_GPIO_BASE 0x48001400u" in config and "#define EK_TS_GPIO_PIN 13u" in config
        assert "ek_timestamp_pin_pulse" in symbols
        assert "#define EK_UART_BAUD 9600u" in (result.outdir / "board" / "ek_board_config.h").read_text()
    else:
        assert app["uart_baud"] == 115200 and "ek_timestamp_us" in symbols and "ek_timestamp_pin_pulse" not in symbols


def test_harness_on_a_real_board(tmp_path):
    """Hardware test: EDGEKIT_HW_BOARD=nucleo-l4r5zi with the board's ST-LINK attached (flashes and runs KWS)."""
    name = os.environ.get("EDGEKIT_HW_BOARD")
    if name != "nucleo-l4r5zi":
        pytest.skip("no NUCLEO-L4R5ZI here: set EDGEKIT_HW_BOARD=nucleo-l4r5zi with the board attached to run the "
                    "MLPerf Tiny harness on it")
    from edgekit.firmware import flash as F
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.mlperf import generate_harness_firmware

    if not F.list_probes():
        pytest.skip("EDGEKIT_HW_BOARD=nucleo-l4r5zi but no debug probe is attached")
    result = generate_harness_firmware(MLPERF / MODELS["kws"], name, tmp_path / "fw", task="kws", build=True)
    flashed = F.flash_firmware(load_board(name), result.elf)
    assert flashed.serial_port
    report = _run_serial(result.outdir, flashed.serial_port, tmp_path / "perf")
    assert report["summary"]["median_throughput_inf_per_s"] > 0


def _run_serial(fw: Path, port: str, out: Path) -> dict:
    assert run_cli("run", fw, "--device", f"serial:{port}", "--harness", "mlperf-tiny", "--mode", "performance",
                   "--min-runtime", "1", "-o", out) == 0
    return json.loads((out / "run.json").read_text())
