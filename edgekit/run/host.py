"""Runs on this machine: the runner script in a child process (clean peak RSS, killable on a hang).

Runtimes: LiteRT for .tflite (default resolver with XNNPACK), onnxruntime for .onnx, the TFLM python
interpreter with ``--runtime tflm``, Core ML for .mlpackage on macOS (``--device macos``). Energy: Linux
RAPL package counters when this host exposes them readable; otherwise the reason is recorded.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Optional

from edgekit.errors import DeviceNotFoundError, UserError
from edgekit.run.base import RUNNERS, RunRequest, RunResult, Runner
from edgekit.run.energy import PowerMonitor, RaplMonitor, RaplReader, open_monitor
from edgekit.run.inputs import model_file
from edgekit.run.session import RUNNER_SCRIPT, StreamingProcess, runner_arguments, run_streaming, write_inputs

log = logging.getLogger(__name__)

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
    spec = request.options.get("power_monitor")
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

    describe = "the local runner process"

    def run(self, request: RunRequest) -> RunResult:
        model = model_file(request.artifact)
        runtime = choose_runtime(model, request.runtime)
        request.runtime = runtime
        monitor, reason = host_monitor(request)
        with tempfile.TemporaryDirectory(prefix="edgekit-run-") as work:
            inputs = Path(work) / "inputs.npz"
            write_inputs(inputs, request.inputs)
            argv = [sys.executable, "-u", str(RUNNER_SCRIPT), *runner_arguments(request, str(model.resolve()), str(inputs))]
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
            result = run_streaming(lambda: StreamingProcess(argv, describe=self.describe, cwd=Path(work), env=env),
                                   self.target, request, monitor)
        if reason and not result.energy:
            result.extra["energy_unavailable_reason"] = reason
        return result


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
