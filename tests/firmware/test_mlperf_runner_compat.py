"""Issue 27: what the MLPerf Tiny reference runner (mlcommons/tiny benchmark/runner) needs from edgekit.

- results.txt in the runner's format (main.py / script.py lines, MMDD.HHMMSS stamps, Top 1% = x.x, AUC = x.xxx);
- accuracy metrics computed as the runner's main.py calculate_accuracy / calculate_auc;
- generated datasets hold every class (the runner's AUC needs them);
- a performance N per board for 10..30 s windows, written as tests_performance.yaml in the stock file's form;
- NUCLEO-L4R5ZI energy mode: USART3 on Arduino D0/D1, open-drain timestamp pin, 120 MHz (compile-tested here;
  the open-drain pin setup also run on the host against a register image)."""
import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import yaml

from edgekit.firmware.mlperf import TASKS
from edgekit.run.mlperf import metrics as M
from tests.conftest import MLPERF

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 3, 13, 4, 5)
needs_arm = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="needs arm-none-eabi-gcc")


# ------------------------------------------------------------------ metrics as the runner computes them


def test_runner_auc_hand_computed():
    # AD: scores 0,1,2,3 with labels 0,1,0,1; thresholds min..max in 101 steps; (fpr, tpr) = (1,1) forced,
    # (.5,1) below 1, (.5,.5) in [1,2), (0,.5) in [2,3), (0,0) at 3 -> area .5 + .25 = .75 (= the pair count 3/4)
    assert M.runner_auc(np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 1, 0, 1])) == pytest.approx(0.75)
    # classification, perfectly separated normalized scores: every class reaches (0, 1) -> 1.0
    scores = np.array([[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.0, 0.2, 0.8], [0.7, 0.2, 0.1]])
    assert M.runner_auc(scores, np.array([0, 1, 2, 0])) == pytest.approx(1.0)
    # reversed AD scores: 0
    assert M.runner_auc(np.array([[3.0], [2.0], [1.0], [0.0]]), np.array([0, 0, 1, 1])) == pytest.approx(0.0)


def test_runner_accuracy_and_normalization():
    assert M.normalize([1.0, 3.0]) == [0.25, 0.75] and M.normalize([5.0]) == [5.0]
    assert M.file_scores([[1.0, 3.0], [3.0, 1.0]]).tolist() == [0.5, 0.5]
    scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    assert M.runner_accuracy(scores, np.array([0, 1, 1])) == pytest.approx(100 * 2 / 3)
    # AD: the best (precision + recall) / 2 over the thresholds; separable -> 100
    assert M.runner_accuracy(np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1])) == pytest.approx(100, abs=1e-5)
    assert M.missing_classes([0, 0, 2], 3) == [1] and M.missing_classes([1, 0], 2) == []


# ------------------------------------------------------------------ results.txt


def _run(mode, task="kws", runtime_s=20.5):
    from edgekit.run.mlperf.harness import HarnessRun
    from edgekit.run.mlperf.results import HarnessSummary, HarnessWindow

    run = HarnessRun(mode, TASKS[task], "qemu:mps2-an386", {"timer_source": "emulated time (test)"})  # type: ignore[typeddict-item]
    if mode == "performance":
        run.windows = [HarnessWindow(input=f"in{i}", iterations=400 + i, warmups=1, elapsed_us=int(runtime_s * 1e6),
                                     runtime_s=runtime_s, throughput_inf_per_s=20.0 + i, latency_ms=50.0,
                                     results=[0.25, 0.75], meets_mlperf_runtime=runtime_s >= 10) for i in range(5)]
        run.summary = HarnessSummary(median_throughput_inf_per_s=22.0, min_runtime_s=10.0)
    else:
        run.summary = HarnessSummary(top1=0.957, auc=0.9876)
    return run


def test_results_txt_is_the_runner_format():
    from edgekit.run.mlperf.harness import results_text

    text = results_text(_run("accuracy"), NOW)
    assert "1203.130405 ulp-mlperf: Top 1% = 95.7\n" in text and "1203.130405 ulp-mlperf: AUC = 0.988\n" in text
    assert "Top-1:" not in text and "00000.000" not in text
    perf = results_text(_run("performance"), NOW)
    assert len(re.findall(r"^1203\.130405 ulp-mlperf: Performance results for window \d:$", perf, re.M)) == 5
    assert "1203.130405 ulp-mlperf:   # Inferences :           402\n" in perf
    assert "1203.130405 ulp-mlperf:   Runtime      :     20.500 sec.\n" in perf
    assert "1203.130405 ulp-mlperf:   Throughput   :     22.000 inf./sec.\n" in perf
    assert "1203.130405 ulp-mlperf:   m-results    : [0.25, 0.75]\n" in perf
    assert "1203.130405 ulp-mlperf: Median throughput is     22.000 inf./sec.\n" in perf
    short = results_text(_run("performance", runtime_s=2.0), NOW)
    assert "ulp-mlperf: ERROR 2 \u2013 loop exited before 10 seconds elapsed." in short and "Median throughput" not in short
    # without a fixed time the stamp is the wall clock in the runner's form
    assert re.match(r"^\d{4}\.\d{6} ulp-mlperf: Top 1% = ", results_text(_run("accuracy")))


# ------------------------------------------------------------------ datasets


def test_generated_datasets_cover_every_class(tmp_path):
    from edgekit.run.mlperf import dataset as D

    for task, name, classes in (("kws", "kws_ref_model_int8.tflite", 12), ("ic", "ic_resnet8_int8.tflite", 10)):
        dataset = D.generate_dataset((MLPERF / name).read_bytes(), task, tmp_path / task, count=3, seed=4)
        labels = [e.label for e in dataset.entries]
        assert sorted(set(labels)) == list(range(classes)), task
        # the runner's AUC is defined (no class without positives): a perfect one-hot prediction scores 1
        onehot = np.eye(classes)[labels]
        assert M.runner_auc(onehot, np.array(labels)) == pytest.approx(1.0)
        readme = (dataset.folder / "README.md").read_text()
        assert "host reference model's predictions" in readme
        if "by assignment" in readme:  # classes random inputs never reach are said to be assigned
            assert re.search(r"Class\(es\) [\d, ]+ were never the host model's prediction", readme)


# ------------------------------------------------------------------ performance N


def test_performance_n_lands_in_the_runner_window(tmp_path):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.mlperf_perf import (RUNNER_MAX_WINDOW_S, RUNNER_MIN_WINDOW_S, STOCK, iterations_for,
                                              performance_n, performance_yaml)

    assert iterations_for(0.034) == 588 and iterations_for(45.0) == 1
    board = load_board("nucleo-l4r5zi")
    perf = performance_n("kws01", board, 2_656_768)
    assert perf.in_range and RUNNER_MIN_WINDOW_S <= perf.iterations * perf.per_inference_s <= RUNNER_MAX_WINDOW_S
    assert perf.per_inference_s == pytest.approx(2_656_768 * 1.1 * 1.4 / 120e6) and "estimated" in perf.method
    m55 = performance_n("kws01", load_board("mps3-an547"), 2_656_768)  # Helium: the M55's own instructions/MAC
    assert "0.47 instructions/MAC" in m55.method and "emulated time" in m55.method and m55.in_range
    parsed = yaml.safe_load(performance_yaml(perf))
    assert parsed["kws01"]["script"] == [{"loop 5": ["download", f"infer {perf.iterations} 10"]}]
    assert parsed["ic01"]["script"] == [{"loop 5": ["download", "infer 20 5"]}]  # the stock file's other entries
    assert parsed["sww01"]["script"] == ["stream"] and set(STOCK) | {"sww01"} == set(parsed)
    # a counted run's cycle estimate takes precedence
    run_json = tmp_path / "run.json"
    run_json.write_text('{"work": {"cycles_estimated": {"cycles": 6000000}}}')
    from edgekit.firmware.mlperf_perf import cycles_from_file

    counted = performance_n("kws01", board, 1, cycles=cycles_from_file(run_json), cycles_source="run.json")
    assert counted.iterations == 400 and counted.window_s == pytest.approx(20.0)


# ------------------------------------------------------------------ NUCLEO-L4R5ZI energy mode


@needs_arm
@pytest.mark.parametrize("mode", ["energy", "performance"])
def test_l4r5_uart_clock_and_pin(tmp_path, mode):
    """Compile-tested here, not run (no NUCLEO-L4R5ZI / interface board): energy mode on USART3 (Arduino D0/D1 =
    PD9/PD8) at 9600 baud, performance mode on LPUART1 (ST-LINK VCP); both at 120 MHz (PLLCFGR MSI /1 x60 /2)."""
    from elftools.elf.elffile import ELFFile

    from edgekit.firmware.mlperf import generate_harness_firmware

    result = generate_harness_firmware(MLPERF / "kws_ref_model_int8.tflite", "nucleo-l4r5zi", tmp_path / "fw",
                                       task="kws", mode=mode, build=True)
    config = (result.outdir / "board" / "ek_board_config.h").read_text()
    assert "#define EK_CPU_HZ 120000000u" in config and "#define EK_UART_CLOCK_HZ 120000000u" in config
    with open(result.elf, "rb") as f:
        elf = ELFFile(f)
        text = elf.get_section_by_name(".text").data()
        symbols = {s.name for s in elf.get_section_by_name(".symtab").iter_symbols()}
    assert (0x01003C01).to_bytes(4, "little") in text  # RCC_PLLCFGR: PLLREN | N 60 | M /1 | MSI
    if mode == "energy":
        assert "#define EK_UART_BASE 0x40004800u" in config and "#define EK_UART_BAUD 9600u" in config
        assert "#define EK_UART_LPUART 0" in config and "ek_timestamp_pin_pulse" in symbols
    else:
        assert "#define EK_UART_BASE 0x40008000u" in config and "#define EK_UART_LPUART 1" in config
    assert (result.outdir / "tests_performance.yaml").is_file()


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
def test_timestamp_pin_is_open_drain(tmp_path):
    """firmware/boards/timestamp/ts_gpio_stm32.c run on the host against a GPIO/RCC register image: PF13 becomes an
    open-drain output (OTYPER bit 13), released high, and the pulse pulls it low then releases it."""
    (tmp_path / "ek_board_config.h").write_text("#define EK_CPU_HZ 120000000u\n")
    (tmp_path / "ek_config.h").write_text(
        "#include <stdint.h>\nextern uint32_t gpio[16], rcc;\n#define EK_TS_GPIO_BASE ((uintptr_t)gpio)\n"
        "#define EK_TS_GPIO_PIN 13u\n#define EK_TS_GPIO_RCC_ENR ((uintptr_t)&rcc)\n#define EK_TS_GPIO_RCC_BIT 5u\n")
    (tmp_path / "main.c").write_text(r'''
#include <stdio.h>
#include "ek_config.h"
#include "ek_timestamp.h"
uint32_t gpio[16], rcc;
int main(void) {
  gpio[1] = 0; gpio[0] = 0xFFFFFFFFu;
  ek_timestamp_pin_init();
  printf("%u %u %u %08x\n", (unsigned)((gpio[1] >> 13) & 1u), (unsigned)((gpio[0] >> 26) & 3u),
         (unsigned)((rcc >> 5) & 1u), (unsigned)gpio[6]);
  ek_timestamp_pin_pulse();
  printf("%08x\n", (unsigned)gpio[6]);
  return 0;
}
''')
    exe = tmp_path / "ts"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-I", str(tmp_path),
                    "-I", str(REPO / "firmware/boards/common"), str(tmp_path / "main.c"),
                    str(REPO / "firmware/boards/timestamp/ts_gpio_stm32.c"), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    # OTYPER13 = 1 (open-drain), MODER13 = 01 (output), GPIOFEN, BSRR last written: set 13 (released)
    assert lines[:3] == ["1", "1", "1"] and lines[3] == f"{1 << 13:08x}" and lines[4] == f"{1 << 13:08x}"


def test_firmware_command_prints_and_writes_the_performance_n(tmp_path, capsys):
    """`edgekit firmware --harness` says the N, how it was estimated, and writes tests_performance.yaml; a file
    without a cycle estimate given to --cycles-from is refused with one clear message."""
    from tests.conftest import run_cli

    model = MLPERF / "kws_ref_model_int8.tflite"
    assert run_cli("firmware", model, "--board", "nucleo-l4r5zi", "--harness", "mlperf-tiny", "--task", "kws",
                   "-o", tmp_path / "fw") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"performance N for kws01: infer \d+ 10 \([\d.]+ ms per inference, 2\d\.\d s window; "
                     r"estimated: 2,656,768 MACs", out), out
    n = int(re.search(r"infer (\d+) 10", out).group(1))
    parsed = yaml.safe_load((tmp_path / "fw" / "tests_performance.yaml").read_text())
    assert parsed["kws01"]["script"][0]["loop 5"][1] == f"infer {n} 10"
    bad = tmp_path / "deploy.json"
    bad.write_text('{"estimates": {}}')
    assert run_cli("firmware", model, "--board", "nucleo-l4r5zi", "--harness", "mlperf-tiny", "--task", "kws",
                   "--cycles-from", bad, "-o", tmp_path / "fw2") != 0
    assert "holds no cycle estimate" in capsys.readouterr().err and not (tmp_path / "fw2").exists()


def test_given_inputs_missing_classes_are_reported(tmp_path, caplog):
    """With the user's own inputs edgekit cannot add files: the classes without one are named (README, dataset.json,
    a warning), since the reference runner's accuracy mode needs every class."""
    import json

    from edgekit.run.mlperf import dataset as D

    inputs = np.zeros((3, 490), dtype=np.int8)  # one input, three times: one predicted class
    with caplog.at_level("WARNING"):
        dataset = D.generate_dataset((MLPERF / "kws_ref_model_int8.tflite").read_bytes(), "kws", tmp_path,
                                     inputs=inputs)
    assert len(dataset.entries) == 3 and len({e.label for e in dataset.entries}) == 1
    assert "have no file: the reference runner's accuracy mode needs every class" in \
        (dataset.folder / "README.md").read_text()
    assert "have no file" in json.loads((dataset.folder / "dataset.json").read_text())["labels"]
    assert "without a file" in caplog.text
