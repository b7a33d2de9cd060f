"""LiteRT's benchmark_model on Android (`edgekit run M.tflite --device adb --benchmark-binary PATH`): output
parsing on fixtures written from the tool's documented format (fixtures/benchmark_model/README.md), the ABI check
on real ELF files built here, the command line, and CLI refusals. The phone run skips without a phone."""
import shutil
import subprocess
from pathlib import Path

import pytest

from edgekit.errors import UserError
from edgekit.run.runners.benchmark_model import (BinaryInfo, benchmark_arguments, check_binary_for_device,
                                         parse_benchmark_output, read_elf)

FIXTURES = Path(__file__).parent / "fixtures" / "benchmark_model"


def test_parse_xnnpack_run_with_percentiles_and_peak_memory():
    f = parse_benchmark_output((FIXTURES / "xnnpack_arm64.txt").read_text())
    assert (f.init_ms, f.first_inference_ms, f.warmup_avg_ms, f.inference_avg_ms) == \
        pytest.approx((4.215, 1.873, 0.3512, 0.3476))
    assert f.warmup["count"] == 1421 and f.inference["count"] == 2874
    assert f.inference["std"] == pytest.approx(0.021) and f.inference["p50"] == pytest.approx(0.343)
    assert (f.inference["p5"], f.inference["p95"], f.inference["max"]) == pytest.approx((0.333, 0.372, 0.912))
    memory = f.memory_mb.to_dict()
    assert memory == {**memory, "init_delta": 3.21484, "overall_delta": 3.5625, "peak": 9.79688}
    assert [d.to_dict() for d in f.delegates] == [{"name": "TfLiteXNNPackDelegate", "nodes": 13, "of_nodes": 13, "partitions": 1}]
    assert f.xnnpack_delegate_created and not f.gpu_delegate_created


def test_parse_gpu_run():
    f = parse_benchmark_output((FIXTURES / "gpu_arm64.txt").read_text())
    assert f.init_ms == pytest.approx(612.904) and f.first_inference_ms == pytest.approx(9.021)
    assert f.delegates[0].name == "TfLiteGpuDelegateV2" and f.gpu_delegate_created
    assert f.memory_mb.peak == pytest.approx(57.8867)


def test_parse_older_build_without_percentiles_or_prefix():
    f = parse_benchmark_output((FIXTURES / "nnapi_old_format.txt").read_text())
    assert f.inference_avg_ms == pytest.approx(2.21507) and f.nnapi_delegate_created
    assert "p50" not in f.inference and f.inference["count"] == 451
    assert f.memory_mb.init_delta == pytest.approx(12.6367) and f.memory_mb.peak is None


def test_failed_delegate_names_the_tool_errors():
    with pytest.raises(UserError) as err:
        parse_benchmark_output((FIXTURES / "gpu_failed.txt").read_text())
    assert "Failed to apply GPU delegate" in err.value.message and "did not report its timings" in err.value.message


def test_command_line_per_delegate():
    base = ["/data/local/tmp/x/benchmark_model", "--graph=/data/local/tmp/x/model.tflite", "--num_runs=50",
            "--warmup_runs=5", "--num_threads=2", "--report_peak_memory_footprint=true"]
    for delegate, flag in (("gpu", "--use_gpu=true"), ("nnapi", "--use_nnapi=true"), ("xnnpack", "--use_xnnpack=true"),
                           ("cpu", "--use_xnnpack=false")):
        assert benchmark_arguments(base[0], "/data/local/tmp/x/model.tflite", delegate=delegate, num_runs=50,
                                   warmup_runs=5, threads=2) == base + [flag]
    with pytest.raises(UserError, match="--delegate 'npu'"):
        benchmark_arguments(base[0], "m", delegate="npu", num_runs=1, warmup_runs=1, threads=1)


@pytest.fixture(scope="module")
def elves(tmp_path_factory):
    """Real executables linked here: x86-64 for Android's linker (an emulator ABI), x86-64 glibc, 32-bit Arm."""
    folder = tmp_path_factory.mktemp("elf")
    src = folder / "main.c"
    src.write_text("int main(void) { return 0; }\n")
    built = {}
    if shutil.which("gcc"):
        subprocess.run(["gcc", "-o", folder / "android_x86_64", src, "-Wl,--dynamic-linker=/system/bin/linker64"], check=True)
        subprocess.run(["gcc", "-o", folder / "linux_x86_64", src], check=True)
    if shutil.which("arm-none-eabi-gcc"):
        subprocess.run(["arm-none-eabi-gcc", "-o", folder / "arm32", src, "--specs=nosys.specs"], check=True)
    for name in ("android_x86_64", "linux_x86_64", "arm32"):
        if (folder / name).exists():
            built[name] = folder / name
    return built


def test_abi_from_the_elf_header(elves):
    if len(elves) < 3:
        pytest.skip("gcc and arm-none-eabi-gcc are needed to build the test executables (Makefile APT_PACKAGES)")
    android = read_elf(elves["android_x86_64"])
    assert android == BinaryInfo("x86_64", 64, "/system/bin/linker64") and android.runs_on_android
    linux = read_elf(elves["linux_x86_64"])
    assert linux.abi == "x86_64" and linux.interpreter.startswith("/lib") and not linux.runs_on_android
    arm = read_elf(elves["arm32"])
    assert (arm.abi, arm.bits, arm.interpreter) == ("armeabi-v7a", 32, None)

    check_binary_for_device(android, ["x86_64", "x86"], "benchmark_model")  # accepted
    with pytest.raises(UserError) as err:
        check_binary_for_device(android, ["arm64-v8a", "armeabi-v7a", "armeabi"], "benchmark_model")
    assert "built for x86_64, the device runs arm64-v8a" in err.value.message
    assert "android_aarch64_benchmark_model" in err.value.fix
    with pytest.raises(UserError, match="desktop Linux build"):
        check_binary_for_device(linux, ["x86_64"], "benchmark_model")


def test_not_an_elf(tmp_path):
    script = tmp_path / "benchmark_model"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(UserError, match="is not an ELF executable"):
        read_elf(script)


def test_cli_refusals(cli, capsys, tmp_path, kws_int8, elves):
    if "linux_x86_64" not in elves:
        pytest.skip("gcc is needed to build the test executable")
    out = tmp_path / "run"
    assert cli("run", kws_int8, "--device", "host", "--benchmark-binary", elves["linux_x86_64"], "-o", out) == 2
    assert "not on a host device" in capsys.readouterr().err
    assert cli("run", kws_int8, "--device", "adb:emulator-5554", "--benchmark-binary", elves["linux_x86_64"], "-o", out) == 2
    assert "desktop Linux build" in capsys.readouterr().err
    assert cli("run", kws_int8, "--device", "host", "--delegate", "gpu", "-o", out) == 2
    assert "--delegate needs --benchmark-binary" in capsys.readouterr().err
    assert not out.exists()


def test_phone_run_with_benchmark_model(cli, tmp_path, kws_int8):
    """Needs a phone over adb and EDGEKIT_BENCHMARK_MODEL=path/to/android_aarch64_benchmark_model."""
    import os

    binary = os.environ.get("EDGEKIT_BENCHMARK_MODEL")
    if not shutil.which("adb") or not binary:
        pytest.skip("no Android phone with a benchmark_model binary here (set EDGEKIT_BENCHMARK_MODEL and attach a "
                    "phone to run it)")
    from edgekit.run.runners.adb import Adb, parse_adb_devices

    ready = [s for s, state in parse_adb_devices(Adb().call("devices")).items() if state == "device"]
    if not ready:
        pytest.skip("no Android device attached (adb devices lists none ready)")
    out = tmp_path / "run"
    assert cli("run", kws_int8, "--device", f"adb:{ready[0]}", "--benchmark-binary", binary, "-n", "50", "-o", out) == 0
    import json

    run = json.loads((out / "run.json").read_text())
    assert run["extra"]["benchmark_model"]["inference"]["count"] >= 50
