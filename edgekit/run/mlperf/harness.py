"""Host side of the MLPerf Tiny (EEMBC ULPMark-ML) runner protocol: `edgekit run FIRMWARE --harness mlperf-tiny`.

Written from the public MLPerf Tiny runner (github.com/mlcommons/tiny benchmark/runner): device_under_test.py
(`name`, `profile`, `db load N` then `db HEX` with 31 bytes per line, `infer N W`), serial_device.py (commands end
with '%', a response ends at the line containing "m-ready"), script.py (^m-results-\\[([^]]+)\\]$ and two
^m-lap-us-([0-9]+)$ lines per infer: elapsed = second - first; AD files are sent as windows along the stride),
tests.yaml (5 inputs in performance mode) and the EEMBC runner's results.txt / log.txt as kept in the published
MLPerf Tiny results; results.txt and the accuracy metrics follow the runner's main.py (edgekit/run/mlperf/metrics.py).

Performance mode: for each of 5 inputs, one timed calibration inference sizes N so that the N inferences run at
least --min-runtime seconds (MLPerf Tiny requires 10 s), then `infer N 1`; throughput = N / elapsed from the
device's own m-lap-us timestamps; the result is the median over the inputs. Accuracy mode: every file of the
dataset (AD: every window), the runner's top-1 and AUC against y_labels.csv, and the raw outputs (edgekit's `outputs`
command) compared with LiteRT BUILTIN_REF on the same int8 input.
"""
from __future__ import annotations

import json
import logging
import math
import re
import time
from datetime import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import DeviceError, UserError
from edgekit.firmware.mlperf import HARNESS, TASKS, Task
from edgekit.firmware.results import FirmwareInfo, TensorInfo
from edgekit.firmware.plan_types import HarnessApp
from edgekit.run.mlperf.results import (HarnessFile, HarnessFirmware, HarnessSummary, HarnessWindow, MlperfRun,
                                        Timestamps)
from edgekit.run.results import BitExactness, InstructionCount, updated
from edgekit import schemas

log = logging.getLogger(__name__)

READY = "m-ready"
DB_BYTES_PER_LINE = 31          # DUT._max_bytes of the reference runner (26 with a power manager)
PERFORMANCE_INPUTS = 5          # tests.yaml: loop 5 (ic01, kws01; the runner flags another count as "error 1")
MLPERF_MIN_RUNTIME_S = 10.0     # the runner flags a performance window shorter than 10 s ("error 2")
RESULTS = re.compile(r"^m-results-\[([^]]+)\]$")
LAP = re.compile(r"^m-lap-us-([0-9]+)$")
OUTPUTS = re.compile(r"^m-outputs-\[([0-9a-f]*)\]$")
MODES = ("performance", "accuracy")


class Transcript:
    """The protocol transcript in the EEMBC runner's log.txt form: "SSSSS.mmm who: text"."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.lines: List[str] = []

    def add(self, who: str, text: str) -> None:
        self.lines.append(f"{time.monotonic() - self.start:09.3f} {who}: {text}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class HarnessLink:
    """Commands to the device under test over a byte transport (QEMU socket or serial port)."""

    def __init__(self, transport, transcript: Transcript, *, timeout_s: float = 60.0, pipelined: bool = False) -> None:
        """``pipelined``: send all `db` lines of a load before reading their answers. Only where the link has flow
        control (QEMU's UART chardev reads from the socket only when the UART can take a byte); a polled UART
        without FIFO on a real board would lose bytes that arrive while it is printing."""
        self.transport, self.log, self.timeout_s, self.pipelined = transport, transcript, timeout_s, pipelined
        self._buffer = b""

    def _line(self, deadline: float) -> str:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeviceError(f"{self.transport.description}: no answer within {self.timeout_s:.0f} s",
                                  fix="check the firmware was built with --harness mlperf-tiny and the board is running it")
            self._buffer += self.transport.read(min(remaining, 0.5))
        line, _, self._buffer = self._buffer.partition(b"\n")
        text = line.decode("ascii", errors="replace").strip("\r\0")
        self.log.add("dut", text)
        return text

    def read_until_ready(self, timeout_s: Optional[float] = None) -> List[str]:
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        lines = []
        while True:
            line = self._line(deadline)
            if line:
                lines.append(line)
            if READY in line:
                return lines

    def command(self, text: str, timeout_s: Optional[float] = None, *, quiet: bool = False) -> List[str]:
        if not quiet:
            self.log.add("host", f'Command "{text}"')
        self.transport.write((text + "%").encode("ascii"))
        return self.read_until_ready(timeout_s)

    def sync(self, boot_timeout_s: float = 15.0) -> None:
        """Wait for the boot banner's m-ready, or (banner missed: serial port opened late) get one with an empty
        command."""
        try:
            self.read_until_ready(min(boot_timeout_s, 3.0))
            return
        except DeviceError:
            pass
        self.command("", boot_timeout_s)

    # --- the runner's DUT operations (device_under_test.py)

    def name(self) -> str:
        return _match_one(self.command("name"), r"^m-name-dut-\[([^]]+)\]$", "name")

    def profile(self) -> Dict[str, str]:
        lines = self.command("profile")
        return {"profile": _match_one(lines, r"^m-profile-\[([^]]+)\]$", "profile"),
                "model": _match_one(lines, r"^m-model-\[([^]]+)\]$", "profile")}

    def load(self, data: bytes) -> None:
        lines = self.command(f"db load {len(data)}")
        _raise_errors(lines, "db load")
        self.log.add("host", f"Sending {len(data)} bytes")
        chunks = ["db " + data[i:i + DB_BYTES_PER_LINE].hex() for i in range(0, len(data), DB_BYTES_PER_LINE)]
        if self.pipelined:
            self.transport.write("".join(c + "%" for c in chunks).encode("ascii"))
            answers = [self.read_until_ready() for _ in chunks]
        else:
            answers = [self.command(c, quiet=True) for c in chunks]
        for lines in answers:
            _raise_errors(lines, "db")
        if not any(line.startswith("m-load-done") for line in lines):
            raise DeviceError(f"the device did not confirm loading {len(data)} bytes (no m-load-done)")

    def infer(self, iterations: int, warmups: int, timeout_s: Optional[float] = None) -> "InferOutcome":
        lines = self.command(f"infer {iterations} {warmups}", timeout_s)
        _raise_errors(lines, "infer")
        laps = [int(m.group(1)) for m in (LAP.match(line) for line in lines) if m]
        results = [m.group(1) for m in (RESULTS.match(line) for line in lines) if m]
        if len(laps) != 2 or len(results) != 1:
            raise DeviceError(f"infer {iterations} {warmups}: expected two m-lap-us lines and one m-results line, got: "
                              + " | ".join(lines[-8:]))
        elapsed = (laps[1] - laps[0]) % (1 << 32)  # %lu of a 32-bit microsecond counter wraps
        return InferOutcome(iterations, warmups, elapsed, [float(v) for v in results[0].split(",") if v.strip()])

    def outputs(self) -> bytes:
        return bytes.fromhex(_match_one(self.command("outputs"), OUTPUTS.pattern, "outputs"))


@dataclass
class InferOutcome:
    iterations: int
    warmups: int
    elapsed_us: int
    results: List[float]

    @property
    def throughput(self) -> float:
        return self.iterations / (self.elapsed_us / 1e6) if self.elapsed_us > 0 else float("inf")


def _match_one(lines: Sequence[str], pattern: str, what: str) -> str:
    for line in lines:
        m = re.match(pattern, line)
        if m:
            return m.group(1)
    _raise_errors(lines, what)
    raise DeviceError(f"`{what}`: the device's answer has no line matching {pattern}: " + " | ".join(lines))


def _raise_errors(lines: Sequence[str], what: str) -> None:
    errors = [line for line in lines if line.startswith("e-[")]
    if errors:
        raise DeviceError(f"`{what}`: the device answered {errors[0]}")


# ------------------------------------------------------------------ metrics


# (the accuracy metrics are the reference runner's: edgekit/run/mlperf/metrics.py)


# ------------------------------------------------------------------ the run


@dataclass
class HarnessRun:
    """Everything a harness run measured (becomes run.json, results.txt and log.txt)."""

    mode: str
    task: Task
    device: str
    app: HarnessApp                                                # firmware.json app
    firmware: HarnessFirmware = field(default_factory=HarnessFirmware)
    dut: Dict[str, str] = field(default_factory=dict)
    windows: List[HarnessWindow] = field(default_factory=list)    # performance: one per input
    files: List[HarnessFile] = field(default_factory=list)        # accuracy: one per dataset file
    summary: HarnessSummary = field(default_factory=HarnessSummary)
    bit_exact: Optional[BitExactness] = None
    transcript: Transcript = field(default_factory=Transcript)


def _performance_inputs(task: Task, dataset, input_bytes: int, seed: int = 0) -> List[tuple]:
    """(name, bytes) of the 5 performance inputs: the dataset's first files (AD: their first window, as the runner
    does), else seeded synthetic inputs in the task's wire format."""
    from edgekit.run.mlperf.dataset import windows

    if dataset is not None:
        chosen = []
        for entry in dataset.entries[:PERFORMANCE_INPUTS]:
            chosen.append((entry.file, windows(dataset.data(entry), entry)[0]))
        return chosen
    rng = np.random.default_rng(seed)
    out = []
    for i in range(PERFORMANCE_INPUTS):
        if task.name == "ad":
            raw = rng.normal(-20.0, 5.0, input_bytes // 4).astype("<f4").tobytes()
        else:
            raw = rng.integers(0, 256, input_bytes, dtype=np.uint8).tobytes()
        out.append((f"synthetic_{i}", raw))
    return out


def run_performance(link: HarnessLink, run: HarnessRun, inputs: List[tuple], *, min_runtime_s: float,
                    progress: Optional[Callable[[], None]] = None) -> None:
    for name, raw in inputs:
        link.load(raw)
        probe = link.infer(1, 0)
        per_inference_s = max(probe.elapsed_us, 1) / 1e6
        for _attempt in range(4):  # size N so that the run lasts min_runtime_s; a slow probe can undersize it
            iterations = max(1, math.ceil(1.1 * min_runtime_s / per_inference_s))
            timeout = max(link.timeout_s, 20.0 * iterations * per_inference_s + 30.0)
            outcome = link.infer(iterations, 1, timeout)
            if outcome.elapsed_us / 1e6 >= min_runtime_s:
                break
            per_inference_s = max(outcome.elapsed_us, 1) / 1e6 / iterations
        run.windows.append(HarnessWindow(
            input=name, iterations=iterations, warmups=1, elapsed_us=outcome.elapsed_us,
            runtime_s=outcome.elapsed_us / 1e6, throughput_inf_per_s=outcome.throughput,
            latency_ms=outcome.elapsed_us / 1e3 / iterations, results=outcome.results,
            meets_mlperf_runtime=outcome.elapsed_us / 1e6 >= MLPERF_MIN_RUNTIME_S))
        if progress:
            progress()
    throughputs = [w.throughput_inf_per_s for w in run.windows]
    median = float(np.median(throughputs))
    run.summary = HarnessSummary(
        median_throughput_inf_per_s=median, latency_ms=1e3 / median if median > 0 else None,
        latency_ms_per_input=[w.latency_ms for w in run.windows],
        inputs=len(run.windows), min_runtime_s=min_runtime_s,
        mlperf_runtime_met=all(w.meets_mlperf_runtime for w in run.windows),
        method="measured: the device's m-lap-us timestamps around N back-to-back inferences, median "
               "throughput over 5 inputs (MLPerf Tiny performance mode)")


def run_accuracy(link: HarnessLink, run: HarnessRun, dataset, model: Optional[bytes], in_q, out_q,
                 progress: Optional[Callable[[], None]] = None) -> None:
    from edgekit.run.runners.mcu import bit_exactness
    from edgekit.run.mlperf.dataset import device_input, windows

    task = run.task
    samples, outputs, per_file = [], [], []
    for entry in dataset.entries:
        scores = []
        for raw in windows(dataset.data(entry), entry):
            link.load(raw)
            outcome = link.infer(1, 0)
            scores.append(outcome.results)
            raw_out = np.frombuffer(link.outputs(), dtype=np.int8)
            samples.append([device_input(task, raw, *in_q)])
            outputs.append([raw_out.copy()])
        per_file.append(scores)
        mean = np.mean(np.asarray(scores, dtype=np.float64), axis=0)
        run.files.append(HarnessFile(file=entry.file, label=entry.label, windows=len(scores), score=mean.tolist(),
                                     predicted=None if task.name == "ad" else int(np.argmax(mean))))
        if progress:
            progress()
    from edgekit.run.mlperf.metrics import file_scores, missing_classes, runner_accuracy, runner_auc

    labels = np.array([f.label for f in run.files])
    y_pred = np.array([file_scores(w) for w in per_file])
    missing = missing_classes(labels, 2 if task.name == "ad" else y_pred.shape[1])
    value = None if missing else runner_auc(y_pred, labels)
    if task.name == "ad":
        run.summary = HarnessSummary(
            auc=value, top1=runner_accuracy(y_pred, labels) / 100.0, files=len(run.files), windows=len(samples),
            method="the MLPerf Tiny runner's metrics (benchmark/runner/main.py calculate_auc / calculate_accuracy): "
                   "simplified ROC AUC over 101 thresholds of the mean reconstruction error per file, and the best "
                   "(precision + recall) / 2 as its accuracy")
    else:
        run.summary = HarnessSummary(
            top1=runner_accuracy(y_pred, labels) / 100.0, auc=value, files=len(run.files), windows=len(samples),
            method="the MLPerf Tiny runner's metrics (benchmark/runner/main.py): top-1 of the normalized device "
                   "m-results per file vs y_labels.csv; simplified ROC AUC over 101 thresholds, mean over classes")
    if missing:
        run.summary = updated(run.summary, labels_note=(
            f"AUC undefined: no file of class(es) {', '.join(map(str, missing))} (the reference runner needs every "
            "class; regenerate the dataset with `edgekit mlperf-dataset`)"))
    if model is not None:
        shapes = _model_input_shape(model)
        samples = [[s[0].reshape(shapes)] for s in samples]
    run.bit_exact = bit_exactness(model, samples, outputs)


def _model_input_shape(model: bytes) -> List[int]:
    from edgekit.tflite_model import TFLiteModel

    return list(TFLiteModel(model, source="firmware model").interpreter("reference").get_input_details()[0]["shape"])


# ------------------------------------------------------------------ outputs


def results_text(run: HarnessRun, now: Optional[datetime] = None) -> str:
    """results.txt in the MLPerf Tiny reference runner's form (benchmark/runner/script.py _print_AP_results and
    main.py summarize_result, see edgekit/run/mlperf/metrics.py), then edgekit's notes on lines of their own."""
    from edgekit.run.mlperf.metrics import accuracy_lines, median_lines, stamp, window_lines

    lines: List[str] = []
    if run.mode == "performance":
        for i, w in enumerate(run.windows, 1):
            lines += window_lines(i, w.iterations, w.runtime_s, w.throughput_inf_per_s, w.results, now)
        summary, _ok = median_lines(run.summary.median_throughput_inf_per_s, [w.runtime_s for w in run.windows],
                                    len(run.windows), now)
        lines += summary
        if not _ok:
            lines.append(f"{stamp(now)} edgekit: median throughput {run.summary.median_throughput_inf_per_s:.3f} "
                         f"inf./sec. (windows below {MLPERF_MIN_RUNTIME_S:g} s: not a valid MLPerf Tiny result)")
    else:
        s = run.summary
        auc_value = s.auc if s.auc is not None else float("nan")
        lines += accuracy_lines(100.0 * (s.top1 or 0.0), auc_value, now)
    lines.append(f"{stamp(now)} edgekit: timestamps: {run.app['timer_source']}")
    if run.mode == "accuracy" and run.summary.labels_note:
        lines.append(f"{stamp(now)} edgekit: {run.summary.labels_note}")
    return "\n".join(lines) + "\n"


def run_json(run: HarnessRun) -> MlperfRun:
    """run.json of the run (schema mlperf-run)."""
    emulated = "emulated" in run.app["timer_source"]
    return MlperfRun(
        edgekit_run=1, harness=HARNESS, mode=run.mode, task=run.task.name, model_id=run.task.model_id,
        device=run.device, dut=run.dut, firmware=run.firmware, harness_firmware=run.app,
        timestamps=Timestamps(source=run.app["timer_source"], method="measured" + (" in emulated time" if emulated else ""),
                              note="QEMU runs the guest as fast as the host allows: emulated-time figures are not the "
                                   "board's real speed" if emulated else None),
        summary=run.summary, windows=run.windows, files=run.files,
        outputs_bit_exact=run.bit_exact, transcript="log.txt",
    )


def write_outputs(outdir: Path, run: HarnessRun) -> None:
    from edgekit.atomic import atomic_output_dir
    from edgekit.report import json_safe

    with atomic_output_dir(outdir) as stage:
        (stage / "results.txt").write_text(results_text(run))
        (stage / "run.json").write_text(schemas.dumps("mlperf-run", json_safe(run_json(run).to_dict())))
        (stage / "log.txt").write_text(run.transcript.text())


# ------------------------------------------------------------------ entry point


def run_harness(artifact: Path, device: str, mode: str, outdir: Path, *, dataset_dir: Optional[Path] = None,
                min_runtime_s: float = MLPERF_MIN_RUNTIME_S, timeout_s: float = 60.0, count_instructions: bool = False,
                progress: Optional[Callable[[], None]] = None) -> HarnessRun:
    """Run the MLPerf Tiny procedure of ``mode`` against harness firmware on ``device`` (qemu:BOARD | serial:PORT)."""
    from edgekit.run.runners.mcu import resolve_firmware
    from edgekit.run.mlperf.dataset import read_dataset

    if mode not in MODES:
        raise UserError(f"unknown --mode {mode!r}", fix=f"use --mode {'|'.join(MODES)}")
    if min_runtime_s <= 0 or timeout_s <= 0:
        raise UserError("--min-runtime and --timeout must be positive")
    kind, _, target = device.partition(":")
    if kind not in ("qemu", "serial") or not target:
        raise UserError(f"--device {device!r}: the MLPerf Tiny harness runs on qemu:BOARD or serial:PORT")
    if count_instructions and kind != "qemu":
        raise UserError("--count-instructions needs a QEMU board (it uses edgekit's QEMU instruction-count plugin)")
    if mode == "accuracy" and dataset_dir is None:
        raise UserError("accuracy mode needs --dataset DIR (the runner's layout: y_labels.csv and input files)",
                        fix="write one from your inputs with `edgekit mlperf-dataset`")
    firmware = resolve_firmware(Path(artifact), target if kind == "qemu" else "mps2-an386")
    try:
        info = firmware.info
        app = info.app if info else None
        if not app or app.get("harness") != HARNESS:
            raise UserError(f"{artifact} is not MLPerf Tiny harness firmware (its firmware.json has no app.harness)",
                            fix="build it with `edgekit firmware MODEL --harness mlperf-tiny --task TASK --build`")
        if app["mode"] == "energy":
            raise UserError(f"{artifact} is energy-mode firmware: its timestamps are GPIO pulses for the EEMBC "
                            "interface board, which edgekit cannot read", fix="build --harness-mode performance")
        task = TASKS[app["task"]]
        dataset = read_dataset(dataset_dir, task, input_bytes=app["input_bytes"]) if dataset_dir else None
        built_for = info.board.board if info else None
        if kind == "qemu" and built_for and built_for != target:
            raise UserError(f"the firmware was built for {built_for}, not {target}", fix=f"use --device qemu:{built_for}")
        run = HarnessRun(mode, task, device, app, firmware_facts(info) if info else HarnessFirmware())
        connection = _connect(kind, target, firmware, app, count_instructions=count_instructions)
        with connection as transport:
            link = HarnessLink(transport, run.transcript, timeout_s=timeout_s, pipelined=kind == "qemu")
            link.sync()
            run.dut = {"name": link.name(), **link.profile()}
            if run.dut["model"] != task.model_id:
                raise DeviceError(f"the device reports model {run.dut['model']}, the firmware.json {task.model_id}")
            if mode == "performance":
                inputs = _performance_inputs(task, dataset, app["input_bytes"])
                run_performance(link, run, inputs, min_runtime_s=min_runtime_s, progress=progress)
            else:
                in_q = _quantization(info.model.inputs)
                run_accuracy(link, run, dataset, firmware.model, in_q, _quantization(info.model.outputs),
                             progress=progress)
                if (dataset.folder / "dataset.json").is_file():
                    note = json.loads((dataset.folder / "dataset.json").read_text()).get("labels")
                    if run.summary.labels_note:
                        note = f"{run.summary.labels_note}; {note}"
                    run.summary = updated(run.summary, labels_note=note)
            if count_instructions:
                run.summary = updated(run.summary, instructions_per_inference=connection.instructions())
        write_outputs(outdir, run)
        return run
    finally:
        firmware.close()


def firmware_facts(info: FirmwareInfo) -> HarnessFirmware:
    """What run.json repeats from firmware.json."""
    return HarnessFirmware(model=info.model, board=info.board, arena_bytes=info.arena_bytes,
                           flash_bytes=info.flash_bytes, ram_bytes=info.ram_bytes)


def _quantization(tensors: Optional[List[TensorInfo]]) -> Tuple[float, int]:
    """(scale, zero point) of the first tensor as firmware.json records it."""
    facts = (tensors[0].model_extra or {}) if tensors else {}
    return (facts.get("scale") or 1.0, facts.get("zero_point") or 0)


class _connect:
    """The transport to the device: QEMU (booted here, killed on exit) or a serial port."""

    def __init__(self, kind: str, target: str, firmware, app: HarnessApp, *, count_instructions: bool = False) -> None:
        self.kind, self.target, self.firmware, self.app = kind, target, firmware, app
        self.qemu = None
        self.transport = None
        self.counts_dir: Optional[Path] = None
        self.count_instructions = count_instructions

    def __enter__(self):
        if self.kind == "qemu":
            from edgekit.firmware.boards import load_board
            from edgekit.firmware.qemu import QemuProcess

            plugin = None
            if self.count_instructions:
                import tempfile

                from edgekit.firmware.plugin import build_plugin, marker_addresses, plugin_argument

                self.counts_dir = Path(tempfile.mkdtemp(prefix="ekc-", dir="/tmp"))
                plugin = plugin_argument(build_plugin(), self.counts_dir / "counts.txt",
                                         marker_addresses(self.firmware.elf), "tb")
            self.qemu = QemuProcess(load_board(self.target), self.firmware.elf, plugin=plugin)
            self.transport = self.qemu.transport
        else:
            from edgekit.firmware.transport import SerialTransport

            self.transport = SerialTransport(self.target, self.app["uart_baud"])
        return self.transport

    def instructions(self) -> InstructionCount:
        """Exact instructions per inference counted by the QEMU plugin between ek_marker_infer_begin/end."""
        from edgekit.firmware.plugin import parse_counts

        counts = [c.instructions for c in parse_counts(self.counts_dir / "counts.txt").inferences]
        if not counts:
            raise DeviceError("the instruction-count plugin recorded no inference")
        return InstructionCount(median=int(np.median(counts)), min=min(counts), max=max(counts), inferences=len(counts),
                                method="measured: exact instruction count (edgekit's QEMU TCG plugin) between "
                                       "ek_marker_infer_begin/end, i.e. ek_invoke only; the plugin slows emulated time ~1.5x")

    def __exit__(self, *exc) -> None:
        if self.qemu is not None:
            self.qemu.close()
        if self.counts_dir is not None:
            import shutil

            shutil.rmtree(self.counts_dir, ignore_errors=True)
        elif self.transport is not None:
            self.transport.close()
