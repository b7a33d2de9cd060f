"""Drive one remote_runner process (local, over ssh or over adb) and turn its JSON-line stream into a RunResult.

Every transport gives us a process whose stdout carries ``EKR1 {...}`` lines. A reader thread queues them;
the collector waits at most ``timeout_s`` for the next line once the model is loaded (longer before: imports
and model load on a slow board), so a hung inference or a vanished device is reported, never waited on
forever. Whatever was measured before a failure stays in the result (``complete = False``), attached to
the DeviceError as ``partial``.
"""
from __future__ import annotations

import base64
import collections
import json
import logging
import queue
import subprocess
import threading
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from edgekit.errors import DeviceError, EdgekitError, InvalidModelError, ToolMissingError
from edgekit.run import faults
from edgekit.run.base import DeviceTarget, RunRequest, RunResult
from edgekit.run.results import updated

log = logging.getLogger(__name__)

PREFIX = "EKR1 "
RUNNER_SCRIPT = Path(__file__).with_name("remote_runner.py")
STARTUP_ALLOWANCE_S = 120.0  # imports + model load before the first line may take this long on a slow board


def write_inputs(path: Path, inputs: Sequence[Dict[str, np.ndarray]]) -> None:
    """Samples as one .npz (keys s<sample>_in<input>, inputs in the model's order)."""
    arrays = {f"s{i}_in{k}": np.ascontiguousarray(a) for i, sample in enumerate(inputs) for k, a in enumerate(sample.values())}
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def runner_arguments(request: RunRequest, model: str, inputs: str, *, dumpsys: bool = False) -> List[str]:
    """The remote_runner command-line options for a request (paths as the device sees them)."""
    runtime = request.runtime
    args = ["--model", model, "--inputs", inputs, "--runtime", runtime,
            "--iterations", str(request.iterations), "--warmup", str(request.warmup),
            "--sustain-s", str(request.sustain_s),
            "--sensor-interval-s", str(request.options.sensor_interval_s or min(1.0, request.window_s))]
    if request.options.threads is not None:
        args += ["--threads", str(int(request.options.threads))]
    if request.options.resolver:
        args += ["--resolver", str(request.options.resolver)]
    if runtime == "tflm":
        args += ["--num-outputs", str(int(request.options.num_outputs or 1))]
        if request.options.arena_bytes:
            args += ["--arena-bytes", str(int(request.options.arena_bytes))]
    units = request.options.compute_units
    if runtime == "coreml" and len(units) == 1:  # a local macOS sweep passes its own per-process setting
        args += ["--compute-units", units[0]]
    if dumpsys:
        args.append("--dumpsys")
    return args


class StreamingProcess:
    """A subprocess whose stdout lines and stderr tail are read by background threads."""

    def __init__(self, argv: Sequence[str], *, describe: str, cwd: Optional[Path] = None, env=None) -> None:
        self.describe = describe
        self.argv = list(argv)
        log.debug("starting %s: %s", describe, self.argv)
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         cwd=cwd, env=env, start_new_session=True)
        except FileNotFoundError:
            raise ToolMissingError(self.argv[0], f"install {self.argv[0]} or put it on PATH") from None
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.stderr_tail: collections.deque = collections.deque(maxlen=40)
        self._threads = [threading.Thread(target=self._pump_stdout, daemon=True),
                         threading.Thread(target=self._pump_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump_stdout(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        for raw in self.proc.stderr:
            text = raw.decode("utf-8", "replace").rstrip()
            if text:
                self.stderr_tail.append(text)

    def next_line(self, timeout: float) -> Optional[str]:
        """The next stdout line; None at end of stream; raises queue.Empty after ``timeout`` seconds of silence."""
        return self.lines.get(timeout=timeout)

    def stderr_text(self) -> str:
        return "\n".join(self.stderr_tail)

    def stop(self, grace_s: float = 0.0) -> None:
        """Let the process exit on its own for ``grace_s`` (its output has ended), else kill it and its
        process group; reap it."""
        if grace_s > 0:
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            import os
            import signal

            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
            log.warning("%s did not exit after SIGKILL", self.describe)
        for t in self._threads:
            t.join(timeout=2)

    def returncode(self) -> Optional[int]:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None


def unpack_floats(text: str) -> List[float]:
    return np.frombuffer(base64.b64decode(text), dtype="<f8").tolist()


def decode_tensor(item: dict) -> np.ndarray:
    data = base64.b64decode(item["b64"])
    return np.frombuffer(data, dtype=np.dtype(item["dtype"])).reshape(item["shape"]).copy()


# RunOptions the runner script (edgekit/run/runners/remote_runner.py) and its session read, wherever it runs
RUNNER_PROCESS_OPTIONS = frozenset({"threads", "power_monitor", "arena_bytes", "resolver", "num_outputs", "sensor_interval_s",
                         "startup_timeout_s"})


class Collector:
    """Turns runner events into a RunResult; calls hooks on the warm phase (power monitors)."""

    def __init__(self, target: DeviceTarget, request: RunRequest, *, on_warm_start: Optional[Callable[[], None]] = None,
                 on_warm_end: Optional[Callable[[], None]] = None) -> None:
        self.request = request
        self.result = RunResult(device=target, runtime={}, complete=False)
        self.on_warm_start = on_warm_start
        self.on_warm_end = on_warm_end
        self.phase = "startup"
        self.loaded = False
        self.done = False
        self.error: Optional[dict] = None
        self.outputs: Dict[int, Dict[str, np.ndarray]] = {}
        self.warm_wall_s: Optional[float] = None

    def handle(self, event: dict) -> None:
        kind = event.get("event")
        r = self.result
        if kind == "hello":
            r.extra["device_python"] = {k: event.get(k) for k in ("python", "executable", "platform", "machine", "pid")}
        elif kind == "loaded":
            self.loaded = True
            self.phase = "first inference"
            r.load_ms = float(event["load_ms"])
            if event.get("runtime_import_ms") is not None:
                r.extra["runtime_import_ms"] = float(event["runtime_import_ms"])
            r.runtime = dict(event.get("runtime") or {})
            for key in ("rss_before_load_bytes", "rss_after_load_bytes"):
                if event.get(key) is not None:
                    r.memory = updated(r.memory, **{key: int(event[key])})
            r.extra["sensors_available"] = list(event.get("sensors_available") or [])
        elif kind == "first":
            r.first_inference_ms = float(event["first_inference_ms"])
            self.phase = "first pass over the inputs"
        elif kind == "outputs":
            self.outputs[int(event["sample"])] = {t["name"]: decode_tensor(t) for t in event["tensors"]}
        elif kind == "warm_start":
            self.phase = "warm iterations"
            if event.get("sensors"):
                r.sensors.append({"t_s": 0.0, **event["sensors"]})
            if self.on_warm_start:
                self.on_warm_start()
        elif kind == "batch":
            starts, latencies = unpack_floats(event["t_s"]), unpack_floats(event["ms"])
            if len(starts) != len(latencies):
                raise ValueError("batch with unequal start and latency counts")
            r.timestamps_s.extend(starts)
            r.latencies_ms.extend(latencies)
            if self.request.progress:
                self.request.progress(len(latencies))
        elif kind == "sensors":
            r.sensors.append({k: v for k, v in event.items() if k != "event"})
        elif kind == "warm_end":
            if self.on_warm_end:
                self.on_warm_end()
            self.warm_wall_s = float(event["wall_s"])
            r.extra["warm_wall_s"] = self.warm_wall_s
            if event.get("sensors"):
                r.sensors.append({"t_s": self.warm_wall_s, **event["sensors"]})
            self.phase = "shutdown"
        elif kind == "done":
            if event.get("peak_rss_bytes") is not None:
                r.memory = updated(r.memory, peak_rss_bytes=int(event["peak_rss_bytes"]))
            self.done = True
        elif kind == "error":
            self.error = event
        r.outputs = [self.outputs[i] for i in sorted(self.outputs)]


def collect(process: StreamingProcess, collector: Collector, *, timeout_s: float,
            startup_timeout_s: float = STARTUP_ALLOWANCE_S, classify: Optional[Callable[[StreamingProcess, Collector], Optional[EdgekitError]]] = None) -> RunResult:
    """Read the process to its end; return the complete result or raise with ``partial`` attached."""
    ended = False
    try:
        while True:
            wait = timeout_s if collector.loaded else max(startup_timeout_s, timeout_s)
            try:
                line = process.next_line(wait)
            except queue.Empty:
                state = " (its process is stopped: SIGSTOP)" if faults.stopped(process.pid) else ""
                raise _attach(faults.with_fault(DeviceError(
                    f"{process.describe} sent nothing for {wait:g} s during the {collector.phase} "
                    f"(hung inference or stalled device{state}); stopped it",
                    fix="raise --timeout if one inference really takes this long, or check the device",
                ), faults.HUNG, f"no reply within {wait:g} s{state}"), collector) from None
            if line is None:
                ended = True
                break
            if not line.startswith(PREFIX):
                log.debug("%s: %s", process.describe, line)
                continue
            try:
                collector.handle(json.loads(line[len(PREFIX):]))
            except (ValueError, KeyError, TypeError):  # bad JSON, base64 or fields
                raise _attach(DeviceError(f"{process.describe} sent a garbled result line: {line[:120]!r}"), collector) from None
    finally:
        process.stop(grace_s=10.0 if ended else 0.0)
    code = process.returncode()
    if collector.error:
        raise _attach(_runner_error(process, collector.error), collector)
    if not collector.done:
        problem = classify(process, collector) if classify else None
        if problem is not None:
            if isinstance(problem, DeviceError) and faults.fault_of(problem) is None:
                faults.with_fault(problem, faults.DISCONNECTED if "lost" in problem.message or "disappeared"
                                  in problem.message else faults.DEVICE, problem.message.splitlines()[0])
            raise _attach(problem, collector)
        tail = process.stderr_text().splitlines()[-1:] or ["no message"]
        how = faults.exit_text(code) if code is not None else "did not exit"
        raise _attach(faults.with_fault(DeviceError(
            f"{process.describe} stopped during the {collector.phase}: {how}: {tail[0]}",
            fix="check that the device is still connected and powered; results so far were kept",
        ), faults.DIED if code is not None and code != 0 else faults.DISCONNECTED, f"the runner process {how}"),
            collector)
    collector.result.complete = True
    return collector.result


def _runner_error(process: StreamingProcess, error: dict) -> EdgekitError:
    kind, message = error.get("kind"), error.get("message", "")
    if kind == "runtime_missing" and "macOS" in message:
        return ToolMissingError(f"Core ML on {process.describe} ({message})",
                                "run Core ML models on a Mac: edgekit run M.mlpackage --device macos, or ssh://USER@MAC")
    if kind == "runtime_missing":
        return ToolMissingError(f"the runtime on {process.describe} ({message})",
                                "install it on the device: pip install ai-edge-litert (or tflite-runtime) numpy; "
                                "onnxruntime for .onnx")
    if kind == "model_load":
        return InvalidModelError(message, fix="check that the file is a valid model for this runtime")
    return DeviceError(f"inference failed on {process.describe}: {message}")


def _attach(error: EdgekitError, collector: Collector) -> EdgekitError:
    result = collector.result
    result.complete = False
    result.incomplete_reason = str(error.message)
    result.fault = faults.fault_record(error, len(result.latencies_ms))
    error.partial = result  # type: ignore[attr-defined]
    return error


def run_streaming(start: Callable[[], StreamingProcess], target: DeviceTarget, request: RunRequest, monitor=None,
                  *, classify: Optional[Callable[[StreamingProcess, Collector], Optional[EdgekitError]]] = None) -> RunResult:
    """Start the runner process, collect its results, and add the power monitor's energy (if any)."""
    from edgekit.run.measurement.energy import energy_from_measurement

    state = {"begun": False, "stopped": False}

    def begin() -> None:
        monitor.begin()
        state["begun"] = True

    def stop() -> None:
        if state["begun"] and not state["stopped"]:
            monitor.stop()
            state["stopped"] = True

    collector = Collector(target, request, on_warm_start=begin if monitor else None, on_warm_end=stop if monitor else None)
    try:
        process = start()
        result = collect(process, collector, timeout_s=request.timeout_s,
                         startup_timeout_s=float(request.options.startup_timeout_s or STARTUP_ALLOWANCE_S), classify=classify)
    finally:
        if monitor:
            stop()
            monitor.close()
    if monitor:
        try:
            measurement = monitor.measurement()
        except DeviceError as exc:
            raise _attach(exc, collector) from None
        result.energy = energy_from_measurement(measurement, len(result.latencies_ms))
    return result
