"""`edgekit run MODEL.tflite --device adb[:SERIAL] --benchmark-binary PATH [--delegate gpu|nnapi|xnnpack|cpu]`:
LiteRT's benchmark_model on the phone, the way Android developers measure a model.

Steps: read the binary's ELF header (ABI, program interpreter) and refuse one the phone cannot run (its ABI list from
``getprop ro.product.cpu.abilist``); push binary + model to a fresh /data/local/tmp folder; sample battery power
over adb while it runs (as the Termux route does); read ``dumpsys thermalservice`` before and after; parse the tool's
figures (edgekit.run.runners.benchmark_model) into the RunResult; remove the folder.
"""
from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import List

from edgekit.errors import DeviceError, EdgekitError, UserError
from edgekit.run.base import RunRequest, RunResult
from edgekit.run.runners.benchmark_model import (benchmark_arguments, check_binary_for_device, parse_benchmark_output,
                                         read_elf)
from edgekit.run.measurement.energy import energy_from_measurement
from edgekit.run.results import RunMemory, updated
from edgekit.run.measurement.thermal_results import SensorSample

log = logging.getLogger(__name__)

DEVICE_TMP = "/data/local/tmp"


def device_abis(adb) -> List[str]:
    text = adb.shell(["getprop", "ro.product.cpu.abilist"], timeout_s=10, what="reading the ABI list").strip()
    if not text:
        text = adb.shell(["getprop", "ro.product.cpu.abi"], timeout_s=10, what="reading the ABI").strip()
    return [a.strip() for a in text.split(",") if a.strip()]


def check_request(request: RunRequest) -> None:
    problems = []
    if Path(request.artifact).suffix.lower() != ".tflite":
        problems.append(f"benchmark_model runs .tflite models, not {Path(request.artifact).name}")
    if request.sustain_s > 0:
        problems.append("--sustain (benchmark_model reports aggregates, not a per-iteration series; use the Termux "
                        "route without --benchmark-binary for the throttling analysis)")
    if problems:
        raise UserError("--benchmark-binary: " + "; ".join(problems))


def run_benchmark_model(runner, request: RunRequest) -> RunResult:
    from edgekit.run.runners.adb import Adb, parse_dumpsys_battery

    check_request(request)
    binary = Path(str(request.options.benchmark_binary))
    info = read_elf(binary)
    delegate = str(request.options.delegate or "xnnpack")
    adb = Adb(runner.target.address)
    serial = adb.choose_device()
    abis = device_abis(adb)
    check_binary_for_device(info, abis, binary.name)
    remote_dir = f"{DEVICE_TMP}/edgekit-bench-{secrets.token_hex(4)}"
    remote_bin, remote_model = f"{remote_dir}/benchmark_model", f"{remote_dir}/model.tflite"
    argv = benchmark_arguments(remote_bin, remote_model, delegate=delegate, num_runs=request.iterations,
                               warmup_runs=max(1, request.warmup), threads=int(request.options.threads or 1))
    sensors: List[SensorSample] = []
    start = time.monotonic()
    adb.shell(["mkdir", "-p", remote_dir], what="creating a work folder")
    monitor = None
    try:
        adb.call("push", str(binary.resolve()), remote_bin, timeout_s=300, what="pushing benchmark_model")
        adb.shell(["chmod", "755", remote_bin], what="making benchmark_model executable")
        adb.call("push", str(Path(request.artifact).resolve()), remote_model, timeout_s=300, what="pushing the model")
        sensors.append(_thermal_sample(adb, start))
        monitor, energy_note = runner._monitor(request, serial)
        if monitor is not None:
            monitor.begin()
        try:
            output = _run_tool(adb, argv, timeout_s=max(request.timeout_s, 30.0) * 5, serial=serial)
        finally:
            if monitor is not None:
                monitor.stop()
        sensors.append(_thermal_sample(adb, start))
    finally:
        runner._quietly(adb, ["rm", "-rf", remote_dir])
    figures = parse_benchmark_output(output)
    result = RunResult(device=runner.target, runtime={"name": "benchmark_model", "delegate": delegate,
                                                       "binary": binary.name, "abi": info.abi})
    result.load_ms = figures.init_ms
    result.first_inference_ms = figures.first_inference_ms
    peak = figures.memory_mb.peak or figures.memory_mb.overall_delta
    if peak is not None:
        result.memory = RunMemory(peak_rss_bytes=int(peak * 1024 * 1024),
                                  source="benchmark_model's own figure (MB of the tool process; approximate, the tool says)")
    runs = figures.runs()
    if monitor is not None and runs:
        try:
            energy = energy_from_measurement(monitor.measurement(), runs)
            result.energy = updated(energy, note="battery power over the whole benchmark_model process (init, warm-up "
                                                 f"and timed runs) divided by its {runs} inferences")
        except EdgekitError as exc:
            result.extra["energy_unavailable_reason"] = exc.message
        finally:
            monitor.close()
    elif energy_note:
        result.extra["energy_unavailable_reason"] = energy_note
    result.sensors = sensors
    result.extra.update({"adb_serial": serial, "device_abis": abis, "benchmark_model": figures.to_dict(),
                         "benchmark_command": argv})
    try:
        result.extra["battery"] = parse_dumpsys_battery(adb.shell(["dumpsys", "battery"], timeout_s=10)).to_dict()
    except EdgekitError as exc:
        log.debug("dumpsys battery: %s", exc)
    return result


def _thermal_sample(adb, start: float) -> SensorSample:
    try:
        text = adb.shell(["dumpsys", "thermalservice"], timeout_s=10, what="reading the thermal status")
    except EdgekitError as exc:
        log.debug("dumpsys thermalservice: %s", exc)
        text = ""
    return SensorSample(t_s=time.monotonic() - start, dumpsys_thermalservice=text)


def _run_tool(adb, argv: List[str], *, timeout_s: float, serial: str) -> str:
    """benchmark_model's stdout + stderr, also when it fails (the parser names its ERROR lines)."""
    import subprocess

    try:
        done = subprocess.run(adb.shell_argv(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DeviceError(f"benchmark_model on {serial} did not finish within {timeout_s:g} s",
                          fix="lower -n, or check the phone (a GPU driver can hang)") from None
    text = (done.stdout or "") + "\n" + (done.stderr or "")
    if "no devices" in text or "device offline" in text or "not found" in (done.stderr or ""):
        raise DeviceError(f"adb device {serial} disappeared while benchmark_model ran")
    return text
