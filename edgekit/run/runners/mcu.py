"""Microcontroller runners: ``qemu:BOARD`` (emulated, exact instruction counts) and ``serial:PORT`` (a real board).

The artifact is a .tflite (generated and built once into the firmware cache), a firmware project folder
(firmware.json + build/firmware.elf; built in a temporary copy if it has no ELF yet), or a firmware .elf.
Each input sample is sent over the edgekit UART protocol; the device's int8 outputs are compared with
LiteRT's reference kernels (BUILTIN_REF) and with the TFLM python runtime on the same int8 inputs.

What is measured and what is estimated:
- QEMU: instructions per inference and per operator are exact (the ekcount TCG plugin between the firmware's
  markers); QEMU is not cycle-accurate, so latency and energy are ``estimated`` from the board profile's
  ``cycle_model`` (cycles per instruction) at its real clock and ``power_model`` (active power), with sources.
  Host wall-clock times of the emulator are not device latencies and are not reported as such.
- serial: a real board; where its DWT cycle counter works, device cycles per inference are measured and give
  the latency at the firmware's clock; energy is ``estimated`` from that time and the profile's active power.
"""
from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from edgekit import __version__
from edgekit.errors import DeviceError, EdgekitError, InvalidModelError, UserError
from edgekit.profiles import Profile
from edgekit.progress import step_progress
from pydantic import ValidationError

from edgekit.firmware.cycle_model import CycleEstimate, estimate_cycles
from edgekit.firmware.results import FirmwareInfo, read_firmware_info
from edgekit.results import Figure, estimated, unavailable
from edgekit.run.base import RUNNERS, DeviceTarget, RunRequest, RunResult, Runner
from edgekit.run.results import (BitExactness, InstructionCount, OpInstructions, OutputComparison, RunMemory, RunWork,
                                 updated)

log = logging.getLogger(__name__)

FIRMWARE_JSON = "firmware.json"
MODEL_FILE = "model.tflite"
BOOT_TIMEOUT_S = 20.0
SERIAL_SETTLE_S = 1.0   # how long to listen for a BOOT frame after opening a port to a running board


# --- the firmware to run -----------------------------------------------------------------------------------

def per_op_entries(op_counts: Sequence[int], ops: Sequence[Mapping[str, Any]],  # why: firmware.json rows as written
                   groups: Sequence[Mapping[str, Any]]) -> List[OpInstructions]:  # (FirmwareInfo.ops, plan: firmware/'s shape)
    """The device's per-op instruction counts (one per op hook, in execution order) as entries naming their ops: a
    row-streamed group (firmware.json plan.streamed_groups) runs its ops together and is counted once, as one entry
    spanning them."""
    spans = {int(g["first_op"]): int(g["last_op"]) for g in groups}
    entries: List[OpInstructions] = []
    index = 0
    for n in op_counts:
        last = spans.get(index, index)
        names = [ops[i]["name"] if i < len(ops) else None for i in range(index, last + 1)]
        macs = [ops[i]["macs"] for i in range(index, last + 1) if i < len(ops) and ops[i].get("macs") is not None]
        group = {"last_index": last, "ops": names, "row_streamed": True} if last > index else {}
        entries.append(OpInstructions(index=index, op=names[0], instructions=n, macs=sum(macs) if macs else None,
                                      **group))
        index = last + 1
    return entries


@dataclass
class Firmware:
    elf: Path
    model: Optional[bytes]             # the model the firmware embeds (for reference outputs)
    info: Optional[FirmwareInfo]       # firmware.json (None for a bare ELF)
    origin: str                        # how we got it (for run.json)
    cleanup: List[Path] = field(default_factory=list)

    def close(self) -> None:
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)


def _project_of(path: Path) -> Optional[Path]:
    """The firmware project folder holding ``path`` (itself, or the parent of its build/ folder)."""
    for folder in (path, path.parent, path.parent.parent):
        if (folder / FIRMWARE_JSON).is_file():
            return folder
    return None


def _read_info(project: Optional[Path]) -> Optional[FirmwareInfo]:
    if project is None:
        return None
    try:
        return read_firmware_info(json.loads((project / FIRMWARE_JSON).read_text()))
    except (OSError, json.JSONDecodeError, ValidationError) as exc:
        raise InvalidModelError(f"{project / FIRMWARE_JSON} cannot be read: {exc}",
                                fix="regenerate the project with edgekit firmware") from exc


def refuse_harness_firmware(firmware: "Firmware", artifact: object) -> None:
    """A firmware built as an MLPerf Tiny device under test (firmware.json app.harness) speaks the runner's
    protocol, not edgekit's: say so at once instead of waiting for a HELLO that never comes."""
    app = firmware.info.app if firmware.info is not None else None
    if app is not None and app.get("harness"):
        raise UserError(f"{artifact} is {app['harness']} harness firmware ({app.get('model_id', '?')}): it answers the "
                        "MLPerf Tiny runner's commands, not edgekit's protocol",
                        fix="add --harness mlperf-tiny (and --mode performance|accuracy), or build the firmware "
                            "without --harness for a plain `edgekit run`")


def resolve_firmware(artifact: Path, board_name: str) -> Firmware:
    """A .tflite, a project folder or an ELF -> the ELF to run, the model it embeds and its firmware.json."""
    artifact = Path(artifact)
    if not artifact.exists():
        raise InvalidModelError(f"artifact {artifact} does not exist")
    if artifact.is_file() and artifact.suffix.lower() == ".tflite":
        from edgekit.firmware.generate import cached_firmware

        data = artifact.read_bytes()
        built = cached_firmware(data, board_name, source=str(artifact))
        return Firmware(built.elf, data, built.info, f"generated from {artifact} (cached build {built.outdir})")
    if artifact.is_file() and artifact.suffix.lower() == ".elf":
        project = _project_of(artifact)
        model = (project / MODEL_FILE).read_bytes() if project and (project / MODEL_FILE).is_file() else None
        return Firmware(artifact, model, _read_info(project), f"ELF {artifact}")
    if artifact.is_dir():
        project = _project_of(artifact)
        if project is None:
            raise InvalidModelError(f"{artifact} is not a firmware project (no {FIRMWARE_JSON})",
                                    fix="pass a .tflite, a folder made by `edgekit firmware`, or a firmware .elf")
        info = _read_info(project)
        if info is not None and info.runtime == "tflm":
            raise UserError(f"{project} is a TensorFlow Lite Micro project; it builds only against a TFLM checkout "
                            "(TFLM_DIR), which this machine does not have",
                            fix="build it with `make TFLM_DIR=...` and pass the .elf, or run the edgekit-runtime project")
        model = (project / MODEL_FILE).read_bytes() if (project / MODEL_FILE).is_file() else None
        elf = project / "build" / "firmware.elf"
        if elf.is_file():
            return Firmware(elf, model, info, f"project {project}")
        from edgekit.firmware.build import make_project

        work = Path(tempfile.mkdtemp(prefix="ek-fw-"))
        copy = work / "project"
        shutil.copytree(project, copy)
        elf = make_project(copy, board=board_name)
        return Firmware(elf, model, info, f"project {project} (built in a temporary copy)", [work])
    raise InvalidModelError(f"{artifact} is not something an MCU runner can run",
                            fix="pass a .tflite, a firmware project folder or a firmware .elf")


# --- references --------------------------------------------------------------------------------------------

def litert_reference(model: bytes, samples: Sequence[Sequence[np.ndarray]]) -> List[List[np.ndarray]]:
    """LiteRT with TFLite's reference kernels (BUILTIN_REF) on the same int8 inputs."""
    from edgekit.tflite_model import TFLiteModel

    interp = TFLiteModel(model, source="firmware model").interpreter("reference")
    details_in, details_out = interp.get_input_details(), interp.get_output_details()
    outputs = []
    for sample in samples:
        for d, x in zip(details_in, sample):
            interp.set_tensor(d["index"], np.asarray(x, dtype=d["dtype"]).reshape(d["shape"]))
        interp.invoke()
        outputs.append([interp.get_tensor(d["index"]).copy() for d in details_out])
    return outputs


def tflm_reference(model: bytes, samples: Sequence[Sequence[np.ndarray]]) -> List[List[np.ndarray]]:
    """The TFLM python runtime (its reference kernels) on the same inputs."""
    from edgekit.firmware import tflm

    interp = tflm.make_interpreter(model, max(1 << 20, len(model) * 10))
    if interp is None:
        raise InvalidModelError("the TFLM python runtime cannot load this model")
    return [tflm.invoke(interp, list(sample)) for sample in samples]


def compare(device: Sequence[Sequence[np.ndarray]], reference: Sequence[Sequence[np.ndarray]]) -> OutputComparison:
    """Element-wise comparison of integer outputs over all samples."""
    differing = total = 0
    max_diff = 0
    per_sample = []
    for d_sample, r_sample in zip(device, reference):
        n = 0
        for d, r in zip(d_sample, r_sample):
            d64, r64 = np.asarray(d).astype(np.int64).ravel(), np.asarray(r).astype(np.int64).ravel()
            if d64.shape != r64.shape:
                raise DeviceError(f"device output has {d64.size} elements, the reference {r64.size}")
            diff = np.abs(d64 - r64)
            n += int(np.count_nonzero(diff))
            total += diff.size
            max_diff = max(max_diff, int(diff.max()) if diff.size else 0)
        differing += n
        per_sample.append(n)
    return OutputComparison(bit_exact=differing == 0, differing_elements=differing, total_elements=total,
                            max_abs_diff_lsb=max_diff, differing_per_sample=per_sample)


def bit_exactness(model: Optional[bytes], samples: List[List[np.ndarray]], outputs: List[List[np.ndarray]]) -> BitExactness:
    """outputs_bit_exact: device vs LiteRT BUILTIN_REF (the reference), also vs the TFLM python runtime."""
    if model is None:
        return BitExactness(value=None, reason="the firmware's model.tflite was not found next to the ELF: no reference")
    vs_ref = compare(outputs, litert_reference(model, samples))
    try:
        vs_tflm = compare(outputs, tflm_reference(model, samples))
    except EdgekitError as exc:
        vs_tflm = OutputComparison(bit_exact=None, reason=str(exc))
    matches = [name for name, r in (("LiteRT BUILTIN_REF", vs_ref), ("TFLM python runtime", vs_tflm)) if r.bit_exact]
    note = {}
    if vs_tflm.bit_exact is False and vs_ref.bit_exact:
        note["note"] = ("LiteRT BUILTIN_REF and TFLM disagree on this model (known for FULLY_CONNECTED stacks such as "
                        "the MLPerf AD autoencoder); the device matches BUILTIN_REF")
    elif vs_tflm.bit_exact and not vs_ref.bit_exact:
        note["note"] = "the device matches the TFLM python runtime, not LiteRT BUILTIN_REF"
    return BitExactness(value=vs_ref.bit_exact, reference="LiteRT OpResolverType.BUILTIN_REF", samples=len(samples),
                        **vs_ref.model_dump(exclude_unset=True), vs_tflm_python=vs_tflm,
                        matches=" and ".join(matches) if matches else "neither", **note)


# --- estimates -----------------------------------------------------------------------------------------------

def cycle_estimate(classes: Optional[Mapping[str, int]], profile: Profile) -> Optional[CycleEstimate]:
    """The per-class cycle estimate of one inference at the board's clock, or None without class counts."""
    if not classes:
        return None
    clock = profile.get("clock_hz")
    memory = (profile.get("cycle_model") or {}).get("memory")
    return estimate_cycles(classes, str(profile.get("cpu") or "cortex-m4"), memory=memory,
                           clock_hz=int(clock) if clock else None)


def estimate_latency_energy(instructions: float, profile: Profile,
                            cycles: Optional[CycleEstimate] = None) -> Tuple[Figure, Figure]:
    """(latency ms, energy uJ) per inference at the board's real clock (labelled estimates): from the per-class
    cycle estimate when the plugin counted classes, else from instructions x the profile's flat cycles/instruction;
    ``profile`` is the board's parsed profile YAML."""
    cycle_model = profile.get("cycle_model") or {}
    power_model = profile.get("power_model") or {}
    cpi, clock = cycle_model.get("cycles_per_instruction"), profile.get("clock_hz")
    if cycles is not None and clock:
        seconds = cycles.cycles / float(clock)
        latency = estimated(seconds * 1e3, "ms", f"{cycles.cycles:,.0f} cycles ({cycles.source}) / "
                            f"{clock / 1e6:g} MHz (profile clock_hz)", cycles=cycles.cycles,
                            cycles_per_instruction=cycles.cycles_per_instruction, clock_hz=int(clock))
    elif not cpi or not clock:
        return (unavailable("the board profile has no cycle_model.cycles_per_instruction or clock_hz"),
                unavailable("no latency estimate", "uJ"))
    else:
        flat = instructions * float(cpi)
        seconds = flat / float(clock)
        latency = estimated(seconds * 1e3, "ms",
                            f"{instructions:,.0f} instructions (exact, QEMU plugin) x {cpi} cycles/instruction "
                            f"(profile cycle_model: {cycle_model.get('source', 'no source')}) / {clock / 1e6:g} MHz "
                            "(profile clock_hz)", cycles=flat, cycles_per_instruction=float(cpi), clock_hz=int(clock))
    active_mw = power_model.get("active_mw")
    if not active_mw:
        return latency, unavailable("the board profile has no power_model.active_mw", "uJ")
    return latency, estimated(float(active_mw) * 1e-3 * seconds * 1e6, "uJ",
                              f"estimated latency x {active_mw} mW active power (profile power_model: "
                              f"{power_model.get('source', 'no source')})")


# --- sessions ----------------------------------------------------------------------------------------------------

class SerialSession:
    """A real board on a serial port: optional pyocd flash, then HELLO/INFER like QemuSession (no instruction counts)."""

    def __init__(self, board, elf: Path, port: str, *, flash: bool, timeout_s: float) -> None:
        from edgekit.firmware.protocol import DeviceClient
        from edgekit.firmware.transport import SerialTransport

        if flash:
            from edgekit.firmware import flash as flasher

            flasher.flash(board, elf)
        self.transport = SerialTransport(port, board.uart.baud)
        self.client = DeviceClient(self.transport, timeout_s=timeout_s)
        try:
            self.info = self._hello(flashed=flash)
        except BaseException:
            self.close()
            raise

    def _hello(self, *, flashed: bool):
        """A board that was just reset (flashed) or whose port just opened may announce itself with a BOOT frame
        that lands in the middle of HELLO: wait briefly for it first, and ask HELLO a second time if it raced."""
        try:
            self.client.wait_boot(timeout_s=5.0 if flashed else SERIAL_SETTLE_S)
        except DeviceError:
            log.debug("no BOOT frame from %s (a board already running does not send one)", self.transport.description)
        try:
            return self.client.hello(timeout_s=BOOT_TIMEOUT_S)
        except DeviceError as exc:
            log.info("HELLO failed once (%s); asking again", exc.message.splitlines()[0])
            return self.client.hello(timeout_s=BOOT_TIMEOUT_S)

    def infer(self, inputs, timeout_s=None):
        from edgekit.run.faults import DISCONNECTED, HUNG, fault_of, with_fault

        try:
            result = self.client.infer(inputs, timeout_s)
        except DeviceError as exc:
            fault = fault_of(exc)
            kind = fault.kind if fault else None
            timeout = self.client.timeout_s if timeout_s is None else timeout_s
            headline = {HUNG: f"the board on {self.transport.description} sent no reply within {timeout:g} s",
                        DISCONNECTED: f"the board on {self.transport.description} disconnected"}.get(kind)
            if headline is None:
                raise
            raise with_fault(DeviceError(f"{headline}\n  detail: {exc.message}", fix=exc.fix), kind, headline) from exc
        result.instructions = None
        result.op_instructions = None
        return result

    def close(self) -> None:
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- the runners -------------------------------------------------------------------------------------------------

class McuRunner(Runner):
    """Shared by qemu and serial: resolve the firmware, run every sample, compare, estimate."""

    @classmethod
    def model_inputs(cls, artifact: Path):
        """The input specs of the model a firmware artifact embeds (for `edgekit run` input preparation)."""
        from edgekit.run.inputs import model_inputs

        artifact = Path(artifact)
        if artifact.suffix.lower() == ".tflite":
            return model_inputs(artifact)
        project = _project_of(artifact)
        if project is None or not (project / MODEL_FILE).is_file():
            raise InvalidModelError(f"cannot find the model of {artifact} (no {MODEL_FILE} in its project folder)",
                                    fix="pass the firmware project folder made by `edgekit firmware`")
        return model_inputs(project / MODEL_FILE)

    def board(self, request: RunRequest):
        raise NotImplementedError

    def open_session(self, board, firmware: Firmware, request: RunRequest):
        raise NotImplementedError

    def run(self, request: RunRequest) -> RunResult:
        board = self.board(request)
        firmware = resolve_firmware(Path(request.artifact), board.name)
        try:
            refuse_harness_firmware(firmware, request.artifact)
            return self._run(board, firmware, request)
        finally:
            firmware.close()

    def _check_board(self, board, firmware: Firmware) -> None:
        built_for = firmware.info.board.board if firmware.info else None
        if built_for and built_for != board.name:
            raise UserError(f"the firmware was built for {built_for}, the device is {board.name}",
                            fix=f"regenerate it with edgekit firmware MODEL --board {board.name}")

    def _run(self, board, firmware: Firmware, request: RunRequest) -> RunResult:
        self._check_board(board, firmware)
        if request.runtime not in ("auto", "", "edgekit", None):
            raise UserError(f"--runtime {request.runtime} cannot run on {self.kind}:{board.name}: the firmware runs the "
                            "edgekit runtime (TFLM projects cannot be built here)", fix="drop --runtime or use edgekit")
        profile = dict(self.target.profile or board.profile)
        result = RunResult(device=DeviceTarget(self.target.kind, self.target.address, profile, self.target.name),
                           runtime={"name": "edgekit-rt", "edgekit": __version__}, complete=False)
        result.extra["firmware"] = {"origin": firmware.origin, "elf": str(firmware.elf)}
        samples = [[np.asarray(a) for a in sample.values()] for sample in request.inputs]
        if not samples:
            raise UserError("no input samples to run")
        outputs: List[List[np.ndarray]] = []
        counts: List[int] = []
        op_counts: Optional[List[int]] = None
        classes: List[Mapping[str, int]] = []  # per counted inference, when the plugin counted classes
        cycles: List[int] = []
        stack_used = 0
        done = 0
        started = time.monotonic()
        booted = step_progress("device boot", 1)  # QEMU start (+ plugin), BOOT frame and HELLO: seconds
        try:
            with self.open_session(board, firmware, request) as session:
                booted(1)
                info = session.info
                result.runtime = {"name": info.runtime, "edgekit": __version__, "board": info.board,
                                  "model_crc32": f"{info.model_crc32:08x}"}
                result.extra["boot_s_host"] = round(time.monotonic() - started, 3)
                result.memory = self._device_memory(info, firmware)
                stack_used = info.stack_used
                total = max(request.iterations, len(samples))
                for i in range(total):
                    sample = samples[i % len(samples)]
                    answer = session.infer(sample, request.timeout_s)
                    done = i + 1
                    if i < len(samples):
                        outputs.append(answer.outputs)
                        result.outputs.append({f"output_{k}": o for k, o in enumerate(answer.outputs)})
                    if answer.instructions is not None:
                        counts.append(int(answer.instructions))
                        if getattr(answer, "instruction_classes", None):
                            classes.append(answer.instruction_classes)
                        if op_counts is None and answer.op_instructions:
                            op_counts = list(answer.op_instructions)
                    if answer.cycles is not None:
                        cycles.append(int(answer.cycles))
                    stack_used = max(stack_used, int(answer.stack_used))
                    if request.progress:
                        request.progress(1)
        except DeviceError as exc:
            from edgekit.run.faults import fault_record

            self._finish(result, firmware, board, samples, outputs, counts, op_counts, cycles, stack_used, classes)
            result.complete = False
            result.incomplete_reason = exc.message.splitlines()[0]
            result.fault = fault_record(exc, done)
            exc.partial = result  # type: ignore[attr-defined]
            raise
        self._finish(result, firmware, board, samples, outputs, counts, op_counts, cycles, stack_used, classes)
        result.complete = True
        return result

    def _device_memory(self, info, firmware: Firmware) -> RunMemory:
        flash = firmware.info.flash_bytes if firmware.info else None
        if flash is None:
            from edgekit.firmware.sizes import elf_sizes

            flash = elf_sizes(firmware.elf).flash_bytes
        return RunMemory(arena_bytes=info.arena_bytes, arena_used_bytes=info.arena_used, state_bytes=info.state_bytes,
                         state_used_bytes=info.state_used, stack_bytes=info.stack_bytes, flash_bytes=flash)

    def _finish(self, result: RunResult, firmware: Firmware, board, samples, outputs, counts, op_counts, cycles,
                stack_used: int, classes: Sequence[Mapping[str, int]] = ()) -> None:
        result.memory = updated(result.memory, stack_used_bytes=stack_used)
        ram = (firmware.info.ram if firmware.info else None) or {}
        if ram.get("bytes") is not None and (ram.get("stack") or {}).get("bytes") is not None and stack_used:
            result.memory = updated(result.memory, ram_bytes=ram["bytes"] - ram["stack"]["bytes"] + stack_used,
                                    ram_method="linked .data/.bss (arena + state + other) + stack high-water mark "
                                               "measured on the device (painted stack)")
        work = RunWork(board=board.name, arena_bytes=result.memory.arena_bytes,
                       flash_bytes=result.memory.flash_bytes)  # the other fields filled as measured
        if counts:
            per_inference = int(np.median(counts))
            profile = result.device.profile or board.profile
            # the class counts of an inference with the median instruction count (inferences are deterministic)
            median_classes = next((c for n, c in zip(counts, classes) if n == per_inference), None)
            cycles_est = cycle_estimate(median_classes, profile)
            latency, result.energy = estimate_latency_energy(per_inference, profile, cycles_est)
            work = updated(work, instructions_per_inference=per_inference, latency_ms_estimated=latency,
                           cycles_estimated=cycles_est,
                           instructions=InstructionCount(
                               median=per_inference, min=min(counts), max=max(counts), inferences=len(counts),
                               method="exact: QEMU TCG plugin (ekcount) between the firmware's inference markers"))
            ops = firmware.info.ops if firmware.info else []
            macs = int((firmware.info.macs if firmware.info else None) or 0)
            if macs:
                work = updated(work, macs_per_inference=macs, instructions_per_mac=per_inference / macs)
            if op_counts is not None:
                groups = ((firmware.info.plan if firmware.info else None) or {}).get("streamed_groups") or []
                work = updated(work, per_op_instructions=per_op_entries(op_counts, ops, groups))
        if cycles:
            clock = board.firmware_clock_hz
            result.latencies_ms = [c / clock * 1e3 for c in cycles]
            result.timestamps_s = [0.0] * len(cycles)
            work = updated(work, cycles_per_inference=int(np.median(cycles)),
                           latency_method=f"measured: DWT cycle counter at the firmware clock {clock / 1e6:g} MHz")
            power = board.power_model.active_mw
            if power and result.energy is None:
                seconds = float(np.median(cycles)) / clock
                result.energy = estimated(float(power) * 1e-3 * seconds * 1e6, "uJ",
                                          f"measured device time x {power} mW (profile power_model: "
                                          f"{board.power_model.source})")
        if outputs:
            work = updated(work, outputs_bit_exact=bit_exactness(firmware.model, samples[:len(outputs)], outputs))
        result.work = work


@RUNNERS.register("qemu")
class QemuRunner(McuRunner):
    """qemu:BOARD — the firmware on QEMU's model of the board, instructions counted by the ekcount plugin."""

    kind = "qemu"
    options = frozenset({"boot_timeout_s"})

    def board(self, request: RunRequest):
        from edgekit.firmware.boards import load_board, qemu_board_names

        board = load_board(self.target.address)
        if not board.is_qemu:
            raise UserError(f"{board.name} is a real board, not a QEMU machine",
                            fix=f"use --device serial:PORT --profile {board.name}, or one of: {', '.join(qemu_board_names())}")
        return board

    def open_session(self, board, firmware: Firmware, request: RunRequest):
        from edgekit.firmware.qemu import QemuSession

        return QemuSession(board, firmware.elf, count_instructions=True, timeout_s=request.timeout_s,
                           boot_timeout_s=float(request.options.boot_timeout_s or BOOT_TIMEOUT_S))


@RUNNERS.register("serial")
class SerialRunner(McuRunner):
    """serial:PORT — a real board over pyserial (flashed with pyocd first when the `flash` option is set)."""

    kind = "serial"
    options = frozenset({"flash", "boot_timeout_s"})

    def board(self, request: RunRequest):
        from edgekit.firmware.boards import board_from_profile, mcu_board_names

        profile = self.target.profile
        if not profile:
            project = _project_of(Path(request.artifact))
            info = _read_info(project)
            name = info.board.board if info else None
            if not name:
                raise UserError(f"--device serial:{self.target.address} needs the board's profile",
                                fix=f"add --profile BOARD (one of: {', '.join(mcu_board_names())})")
            from edgekit.profiles import load_profile

            profile = load_profile(name)
        return board_from_profile(profile)

    def open_session(self, board, firmware: Firmware, request: RunRequest):
        return SerialSession(board, firmware.elf, self.target.address, flash=bool(request.options.flash),
                             timeout_s=request.timeout_s)
