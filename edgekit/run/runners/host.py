"""Runs on this machine: the runner script in a child process (clean peak RSS, killable on a hang).

Runtimes: LiteRT for .tflite (default resolver with XNNPACK), onnxruntime for .onnx, the TFLM python
interpreter with ``--runtime tflm``, Core ML for .mlpackage on macOS (``--device macos``). Energy: Linux
RAPL package counters when this host exposes them readable; otherwise the reason is recorded.

Core ML runs once per compute unit setting given with ``--compute-units`` (cpu_only, cpu_and_gpu, cpu_and_ne,
all; ``each`` = all four), each in its own runner process (clean load time and peak RSS). The returned result is
the ``all`` run when it was asked for (what an app gets by default), else the first one; every setting's figures
and Core ML's per-op placement go to ``extra["coreml"]`` (run.json ``coreml``, one table in report.md).
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from edgekit.errors import DeviceError, DeviceNotFoundError, EdgekitError, InvalidModelError, UserError
from edgekit.report import json_safe
from edgekit.run.base import RUNNERS, RunRequest, RunResult, Runner
from edgekit.run.results import CoremlRow, CoremlSection, LatencySummary
from edgekit.run.runners.session import RUNNER_PROCESS_OPTIONS
from edgekit.run.measurement.energy import PowerMonitor, RaplMonitor, RaplReader, open_monitor
from edgekit.run.inputs import model_file
from edgekit.run.runners.session import RUNNER_SCRIPT, StreamingProcess, runner_arguments, run_streaming, write_inputs

log = logging.getLogger(__name__)

COREML_SUFFIXES = (".mlpackage", ".mlmodel")
RUNTIMES_BY_SUFFIX = {".tflite": ("litert", "tflm"), ".onnx": ("onnxruntime",), ".mlpackage": ("coreml",), ".mlmodel": ("coreml",)}


def choose_runtime(model: Path, requested: str) -> str:
    """'auto' -> the runtime for the file type; a named one must fit the file type."""
    allowed = RUNTIMES_BY_SUFFIX.get(model.suffix.lower())
    if not allowed:
        raise UserError(f"{model} is not a model this runner executes (.tflite, .onnx, .mlpackage)")
    if requested in ("auto", "", None):
        return allowed[0]
    if requested not in allowed:
        raise UserError(f"--runtime {requested} cannot run {model.suffix} files; choose {' or '.join(allowed)}")
    return requested


def host_monitor(request: RunRequest) -> tuple[Optional[PowerMonitor], str]:
    """The requested monitor, else RAPL when readable; else (None, reason)."""
    spec = request.options.power_monitor
    if spec:
        return open_monitor(spec), ""
    reason = RaplReader().unavailable_reason()
    if reason is None:
        monitor = RaplMonitor("rapl", {})
        monitor.open()
        return monitor, ""
    return None, reason


class LocalRunner(Runner):
    """The runner script as a child of this process."""

    options = RUNNER_PROCESS_OPTIONS | {"compute_units"}

    describe = "the local runner process"

    @staticmethod
    def model_inputs(artifact: Path):
        """The model's inputs (Core ML packages read from their spec, which works on every OS)."""
        model = model_file(artifact)
        if model.suffix.lower() in COREML_SUFFIXES:
            from edgekit.coreml.macos import coreml_inputs

            return coreml_inputs(model)
        from edgekit.run.inputs import model_inputs

        return model_inputs(artifact)

    def run(self, request: RunRequest) -> RunResult:
        model = model_file(request.artifact)
        runtime = choose_runtime(model, request.runtime)
        request.runtime = runtime
        if runtime == "coreml":
            return self.run_coreml(model, request)
        return self.run_once(model, request)

    def run_once(self, model: Path, request: RunRequest, extra_args: Sequence[str] = ()) -> RunResult:
        monitor, reason = host_monitor(request)
        with tempfile.TemporaryDirectory(prefix="edgekit-run-") as work:
            inputs = Path(work) / "inputs.npz"
            write_inputs(inputs, request.inputs)
            argv = [sys.executable, "-u", str(RUNNER_SCRIPT), *runner_arguments(request, str(model.resolve()), str(inputs)),
                    *extra_args]
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
            result = run_streaming(lambda: StreamingProcess(argv, describe=self.describe, cwd=Path(work), env=env),
                                   self.target, request, monitor)
        if reason and result.energy is None:
            result.extra["energy_unavailable_reason"] = reason
        return result

    def run_coreml(self, model: Path, request: RunRequest) -> RunResult:
        """One runner process per compute unit setting; a setting that fails is recorded and the others still run."""
        from edgekit.coreml.macos import require_macos

        require_macos(f"Core ML ({model.name})")
        units: List[str] = list(request.options.compute_units or ["all"])
        results: Dict[str, RunResult] = {}
        errors: Dict[str, EdgekitError] = {}
        for unit in units:
            log.info("Core ML run on compute units %s", unit)
            try:
                results[unit] = self.run_once(model, request, ("--compute-units", unit))
            except (DeviceError, InvalidModelError) as exc:
                if len(units) == 1:
                    raise
                log.warning("Core ML on %s failed: %s", unit, exc.message)
                errors[unit] = exc
        if not results:
            raise errors[units[0]]
        primary = primary_unit(units, results)
        result = results[primary]
        result.extra["coreml"] = coreml_section(units, results, {u: e.message for u, e in errors.items()}, primary)
        return result


def primary_unit(units: Sequence[str], results: Dict[str, RunResult]) -> str:
    """The setting whose run is the main result: 'all' (an app's default) when it ran, else the first that ran."""
    return "all" if "all" in units and "all" in results else next(u for u in units if u in results)


def outputs_max_abs_diff(a: Sequence[Dict[str, np.ndarray]], b: Sequence[Dict[str, np.ndarray]]) -> Optional[float]:
    """Largest |a - b| over every numeric output tensor both runs produced (None when none compare)."""
    worst = None
    for sa, sb in zip(a, b):
        for name in sa.keys() & sb.keys():
            x, y = np.asarray(sa[name]), np.asarray(sb[name])
            if x.shape != y.shape or not (np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number)):
                continue
            diff = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
            worst = diff if worst is None else max(worst, diff)
    return worst


def coreml_row(unit: str, result: RunResult, reference: Optional[RunResult]) -> CoremlRow:
    """One compute unit setting's figures for run.json (the per-op placement moved out of the runtime record)."""
    from edgekit.coreml.macos import summarise_placement
    from edgekit.run.measurement.stats import latency_summary, throughput

    placement = dict(result.runtime.pop("placement", None) or {"available": False, "reason": "the runner reported no placement"})
    if placement.get("available"):
        placement["summary"] = summarise_placement(placement.get("ops", []))
    return CoremlRow(compute_units=unit, complete=result.complete, load_ms=result.load_ms,
                     first_inference_ms=result.first_inference_ms,
                     latency_ms=LatencySummary(**latency_summary(result.latencies_ms)),
                     throughput_ips=throughput(len(result.latencies_ms), result.extra.get("warm_wall_s")),
                     peak_rss_bytes=result.memory.peak_rss_bytes,
                     outputs_max_abs_diff=outputs_max_abs_diff(result.outputs, reference.outputs) if reference is not None else None,
                     placement=json_safe(placement))


def coreml_section(units: Sequence[str], results: Dict[str, RunResult], errors: Dict[str, str], primary: str) -> CoremlSection:
    from edgekit.coreml.macos import PLACEMENT_SOURCE

    reference_unit = next(u for u in units if u in results)
    rows = []
    for unit in units:
        if unit in results:
            rows.append(coreml_row(unit, results[unit], results[reference_unit] if unit != reference_unit else None))
        else:
            rows.append(CoremlRow(compute_units=unit, complete=False, error=errors[unit]))
    return CoremlSection(compute_units=rows, primary=primary, outputs_reference=reference_unit,
                         placement_source=PLACEMENT_SOURCE,
                         note="each setting ran in its own runner process; load = MLModel(path, compute_units) (compile + "
                              "load); latency = MLModel.predict; outputs_max_abs_diff compares every sample's outputs "
                              f"with the {reference_unit} run")


@RUNNERS.register("host")
class HostRunner(LocalRunner):
    kind = "host"
    describe = "the host runner process"


@RUNNERS.register("macos")
class MacRunner(LocalRunner):
    """This Mac (Core ML .mlpackage, or LiteRT / onnxruntime). Elsewhere: a clear error, never a fake run."""

    kind = "macos"
    describe = "the macOS runner process"

    def run(self, request: RunRequest) -> RunResult:
        if sys.platform != "darwin":
            raise DeviceNotFoundError(
                f"--device macos runs on this machine, which is {sys.platform}, not macOS (Core ML predicts only on macOS)",
                fix="run edgekit on the Mac itself, or reach it with --device ssh://USER@MAC --runtime coreml",
            )
        return super().run(request)
