"""`edgekit deploy`: quantize -> firmware -> build -> run on the board (QEMU) -> one signed report.

OUTDIR/
  quantize/   model_float.tflite, model_int8.tflite, parity.json, report.md (edgekit quantize's output)
  firmware/   the generated project with build/firmware.elf and firmware.json (edgekit firmware --build)
  run/        run.json, report.md of the device run (edgekit run)
  deploy.json, report.md, report.html (the same with charts; self-contained), per_op_instructions.png, manifest.json
Everything is written into a staging folder and moved into place only when complete.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from edgekit.artifact import Artifact, Manifest
from edgekit.atomic import atomic_output_dir
from edgekit.errors import UserError
from edgekit.provenance import host_info, tool_versions, utc_now
from edgekit.firmware.results import (DeployDevice, DeployFirmware, DeployModel, DeployReport, Estimates, FirmwareInfo,
                                      Fits)
from edgekit.report import fmt, json_safe, parity_section
from edgekit.report_html.deploy import deploy_page
from edgekit.report_html.page import write_page
from edgekit.results import unavailable
from edgekit.run.results import BitExactness, Json, Signature, updated

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str, int], Callable[[int], None]]
# the registry entries deploy chains: CONVERTERS[QUANTIZER] -> CONVERTERS[FIRMWARE_CONVERTER] (runtime
# FIRMWARE_RUNTIME) -> RUNNERS[DEVICE_KIND]
QUANTIZER, FIRMWARE_CONVERTER, FIRMWARE_RUNTIME, DEVICE_KIND = "tflite", "firmware", "edgekit", "qemu"
DEPLOY_TOOLS = ("edgekit", "numpy", "torch", "litert-torch", "tensorflow-cpu", "ai-edge-litert", "tflite-micro",
                "pyelftools", "matplotlib")


def _no_progress(label: str, total: int) -> Callable[[int], None]:
    return lambda n: None


@dataclass(frozen=True)
class DeployOptions:
    board: str = "mps2-an386"
    method: str = "minmax"
    calib_size: Optional[int] = None
    seed: int = 0
    eval_data: Optional[Path] = None
    input_shape: Optional[Tuple[int, ...]] = None
    device_samples: int = 8
    timeout_s: float = 120.0
    optimize: str = "balanced"

    @property
    def firmware_options(self) -> Dict[str, str]:
        """The options handed to the firmware backend (the edgekit runtime owns --optimize)."""
        return {"optimize": self.optimize}

    def __post_init__(self) -> None:
        """Refuse values a run cannot honour (`edgekit run` refuses the same), all at once."""
        problems = []
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            problems.append(f"--timeout {self.timeout_s:g} must be a positive number of seconds (e.g. 120)")
        if self.device_samples <= 0:
            problems.append(f"--device-samples {self.device_samples} must be a positive integer")
        if self.calib_size is not None and self.calib_size <= 0:
            problems.append(f"--calib-size {self.calib_size} must be a positive integer")
        if problems:
            raise UserError("; ".join(problems))


@dataclass
class DeployResult:
    outdir: Path
    report: DeployReport
    failures: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary_lines(self) -> List[str]:
        r = self.report
        lines = []
        p = r.parity
        first = (p["outputs"] or [{}])[0]
        metrics = ", ".join(f"{k} {_metric(first[k])}" for k in ("top1_agreement", "cosine", "sqnr_db") if k in first)
        lines.append(f"parity FP32 vs INT8: {'PASSED' if p['passed'] else 'FAILED'} on {p['samples']} samples ({metrics})")
        if p.get("accuracy"):
            a = p["accuracy"]
            lines.append(f"accuracy: float {a['reference_top1']:.2%}, int8 {a['candidate_top1']:.2%}")
        f = r.firmware
        lines.append(f"firmware for {r.board.board}: flash {f.flash_bytes:,} / {f.fits.flash.available:,} B, "
                     f"RAM {f.ram_bytes:,} / {f.fits.ram.available:,} B (arena {f.arena_bytes:,} B) — "
                     + ("fits" if f.fits_board else "DOES NOT FIT"))
        d = r.device
        be = d.outputs_bit_exact
        lines.append(f"device ({d.device}): outputs {'bit-exact' if be.value else 'NOT bit-exact'} with "
                     f"{be.reference or 'the reference'} on {be.samples or 0} samples "
                     f"({_known(be.differing_elements)} of {_known(be.total_elements)} elements differ; "
                     f"matches {_known(be.matches)})")
        if d.instructions_per_inference:
            per_mac = f", {d.instructions_per_mac:.2f} per MAC" if d.instructions_per_mac else ""
            lines.append(f"instructions per inference: {d.instructions_per_inference:,} (exact, QEMU plugin{per_mac})")
        latency, energy = r.estimates.latency_ms, r.estimates.energy_uj
        if latency.value is not None:
            lines.append(f"ESTIMATED at {r.board.clock_hz / 1e6:g} MHz: {latency.value:.3g} ms"
                         + (f", {energy.value:.3g} uJ per inference" if energy.value is not None else "")
                         + " (profile cycle_model and power_model; not measured)")
        for failure in self.failures:
            lines.append(f"FAILED: {failure}")
        return lines


def _device_inputs(int8_model: Path, data: Path, limit: int, seed: int):
    """Samples for the device: the data quantized with the int8 model's own input scale/zero point."""
    from edgekit.run.inputs import load_inputs, model_inputs

    return load_inputs(data, model_inputs(int8_model), limit=limit, seed=seed)


def deploy(model: str, calib: Path, outdir: Path, options: DeployOptions = DeployOptions(), *,
           progress: ProgressFactory = _no_progress) -> DeployResult:
    from edgekit.calibration.ranges import RangeOptions
    from edgekit.converters import load_backends as load_converters
    from edgekit.firmware.boards import load_board, qemu_board_names
    from edgekit.quantize import QuantizeOptions, quantize
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.report import build_run_report, write_run_outputs
    from edgekit.run.runners import runner_class

    board = load_board(options.board)
    if not board.is_qemu:
        raise UserError(f"edgekit deploy runs the firmware on an emulated board; {board.name} is real hardware",
                        fix=f"deploy to one of {', '.join(qemu_board_names())}, then flash the project with "
                            f"`edgekit run FIRMWARE --device serial:PORT --profile {board.name}`")
    outdir = Path(outdir)
    with atomic_output_dir(outdir) as stage:
        # quantize: the "tflite" converter of CONVERTERS (edgekit.quantize drives it)
        q_options = QuantizeOptions(method=options.method, range_options=RangeOptions(), calib_size=options.calib_size,
                                    seed=options.seed, input_shape=options.input_shape, eval_data=options.eval_data,
                                    format=QUANTIZER)
        quantized = quantize(model, calib, stage / "quantize", q_options, progress=progress)
        int8_path = stage / "quantize" / quantized.main_file

        # compile: the firmware backend of CONVERTERS, the edgekit runtime with its own options
        firmware = load_converters().get(FIRMWARE_CONVERTER)().convert(
            int8_path, board=board.name, outdir=stage / "firmware", runtime=FIRMWARE_RUNTIME, build=True,
            **options.firmware_options)

        data = options.eval_data or calib
        samples, described = _device_inputs(int8_path, Path(data), options.device_samples, options.seed)
        # run: the device runner of RUNNERS for the emulated board
        target = DeviceTarget(DEVICE_KIND, board.name, dict(board.profile), f"{DEVICE_KIND}:{board.name}")
        request = RunRequest(artifact=stage / "firmware", inputs=samples, iterations=len(samples), warmup=0,
                             timeout_s=options.timeout_s, runtime=FIRMWARE_RUNTIME,
                             progress=progress("device run", len(samples)))
        run = runner_class(DEVICE_KIND)(target).run(request)
        (stage / "run").mkdir()
        write_run_outputs(stage / "run", run, build_run_report(run, request, inputs_description=described))

        report, failures = deploy_report(model, quantized, firmware.info, run, board, inputs=described)
        plot = per_op_plot(stage / "per_op_instructions.png", report)
        if plot:
            report = updated(report, plots=[plot])
        (stage / "deploy.json").write_text(report.dumps())
        (stage / "report.md").write_text(markdown(report, quantized.parity))
        write_page(stage / "report.html", deploy_page(report, firmware.info, quantized.parity))
        _manifest(stage, model, quantized, firmware.info).write(stage / "manifest.json")
    return DeployResult(outdir, report, failures)


def _split_lines(f: DeployFirmware) -> List[str]:
    """report.md lines: --optimize mode, runtime RAM split, flash split, planned overlaps."""
    lines = []
    r, sp = f.runtime_ram or {}, f.flash_split or {}
    if r.get("bytes") is not None:
        stack = r.get("stack_high_water_device")
        lines.append(f"- runtime RAM (--optimize {f.optimize}): {r['bytes']:,} B = arena {r['arena']:,} + mutable "
                     f"state {r['mutable_state']:,}" + (f"; stack high-water {stack:,} B (device)" if stack else ""))
    if sp:
        lines.append(f"- flash split: model {sp['model']:,} B, prepared model {sp['prepared']:,} B, runtime code "
                     f"{sp['runtime_code']:,} B (core {sp['runtime_core']:,} + kernels {sp['runtime_kernels']:,}), "
                     f"model API {sp.get('model_api', 0):,} B, startup/protocol {sp['startup_protocol']:,} B, libc {sp['libc']:,} B")
    for o in f.overlaps or []:
        lines.append(f"- plan: op {o['op']} {o['op_name']} output over input {o['input']}: {o['rule']} ({o['why']})")
    for g in f.streamed_groups or []:
        windows = ", ".join(f"{w['tensor']}: {w['rows']} rows" for w in g["windows"])
        lines.append(f"- plan: ops {g['ops']} row-streamed in a {g['region_bytes']:,} B region ({windows})")
    return lines


def deploy_report(model: str, quantized, fw: FirmwareInfo, run, board, *,
                  inputs: Optional[Dict[str, Json]] = None) -> Tuple[DeployReport, List[str]]:
    """deploy.json content and the list of failed checks."""
    work, memory = run.work, run.memory
    bit_exact = work.outputs_bit_exact or BitExactness(value=None, reason="the device returned no outputs")
    fits = fw.fits
    ram_measured = memory.ram_bytes
    ram, plan = fw.ram or {}, fw.plan or {}
    if ram_measured is not None:
        fits = Fits(flash=fits.flash, ram=updated(fits.ram, used=ram_measured, free=fits.ram.available - ram_measured,
                                                  fits=ram_measured <= fits.ram.available))
    device = DeployDevice(
        device=f"{DEVICE_KIND}:{board.name}", runtime=run.runtime, outputs_bit_exact=bit_exact,
        instructions_per_inference=work.instructions_per_inference, instructions=work.instructions,
        instructions_per_mac=work.instructions_per_mac, macs_per_inference=work.macs_per_inference,
        per_op_instructions=work.per_op_instructions or [], memory=memory, **({"inputs": inputs} if inputs else {}))
    estimates = Estimates(latency_ms=work.latency_ms_estimated or unavailable("no instruction count from the device"),
                          energy_uj=run.energy or unavailable("no latency estimate", "uJ"),
                          cycles=work.cycles_estimated)
    firmware = DeployFirmware(
        arena_bytes=fw.arena_bytes, state_bytes=fw.state_bytes, state_used_on_device_bytes=memory.state_used_bytes,
        flash_bytes=fw.flash_bytes, flash=fw.flash or {},
        ram_bytes=ram_measured if ram_measured is not None else fw.ram_bytes,
        ram_method=memory.ram_method or ram["method"], ram_static_estimate_bytes=fw.ram_bytes, ram=ram,
        fits=fits, fits_board=fits.all_fit, ops=fw.op_counts or {}, kernels=fw.kernels or [], macs=fw.macs or 0,
        optimize=fw.optimize, runtime_code_bytes=fw.runtime_code_bytes,
        runtime_ram={**(ram.get("runtime") or {}), "stack_high_water_device": memory.stack_used_bytes},
        flash_split=(fw.flash or {}).get("split"), overlaps=plan.get("overlaps"),
        streamed_groups=plan.get("streamed_groups"), vs_tflm=fw.vs_tflm)
    failures = []
    if not quantized.parity.passed:
        failures.append("parity FP32 vs INT8: " + "; ".join(quantized.parity.failures))
    if not firmware.fits_board:
        failures.append(f"the firmware does not fit {board.name}")
    if bit_exact.value is not True:
        failures.append(f"device outputs differ from {bit_exact.reference or 'the host reference'}: "
                        f"{_known(bit_exact.differing_elements)} of {_known(bit_exact.total_elements)} elements"
                        if bit_exact.value is False else f"no bit-exactness verdict ({bit_exact.reason})")
    report = DeployReport(
        edgekit_deploy=1,
        passed=not failures,
        failures=failures,
        model=DeployModel(source=str(model), int8_sha256=fw.model.sha256, int8_bytes=fw.model.bytes,
                          float_sha256=quantized.artifacts["export"].sha256 if "export" in quantized.artifacts else None),
        board=fw.board,
        parity=json_safe(quantized.parity.to_json()),
        firmware=firmware,
        device=device,
        estimates=estimates,
        signature=Signature(model_sha256=fw.model.sha256, board_profile=board.profile.get("_path"),
                            tools=tool_versions(DEPLOY_TOOLS), toolchain=fw.build.get("toolchain"),
                            host=host_info(), created=utc_now()),
    )
    return report, failures


def _known(value) -> str:
    return "?" if value is None else str(value)


def per_op_plot(path: Path, report: DeployReport) -> Optional[str]:
    """Horizontal bars: instructions per operator (exact counts from the QEMU plugin)."""
    ops = report.device.per_op_instructions
    if not ops:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"#{o.index}-{o.last_index} {'+'.join(map(str, o.ops))}" if o.ops else f"#{o.index} {o.op}" for o in ops]
    values = [o.instructions for o in ops]
    kinds = sorted({str(o.op) for o in ops})
    colors = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.28 * len(ops) + 1)))
    ax.barh(range(len(ops)), values, color=[colors(kinds.index(str(o.op)) % 10) for o in ops])
    ax.set_yticks(range(len(ops)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("instructions (exact, QEMU ekcount plugin)")
    ax.set_title(f"instructions per operator on {report.board.board} "
                 f"({report.device.instructions_per_inference:,} per inference)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def markdown(report: DeployReport, parity) -> str:
    """report.md, rendered from the typed deploy report (and the quantize stage's ParityReport)."""
    b, f, d, e = report.board, report.firmware, report.device, report.estimates
    be = d.outputs_bit_exact
    sig = report.signature
    tools = sig.tools
    lines = [
        f"# edgekit deploy: {Path(str(report.model.source)).name} on {b.board}",
        "",
        f"**{'PASSED' if report.passed else 'FAILED'}**" + ("" if report.passed else ": " + "; ".join(report.failures)),
        "",
        f"- INT8 model sha256 `{report.model.int8_sha256}` ({report.model.int8_bytes:,} bytes)",
        f"- Board `{b.board}` ({b.core}, {b.clock_hz / 1e6:g} MHz, flash {b.flash_bytes:,} B, RAM {b.ram_bytes:,} B), "
        f"profile `{(sig.model_extra or {}).get('board_profile')}`",
        f"- Signed {sig.created} on {sig.host.get('hostname')} ({sig.host.get('platform')}); toolchain {(sig.model_extra or {}).get('toolchain')}; "
        + ", ".join(f"{k} {v}" for k, v in tools.items()),
        "",
        "## 1. Parity: float32 vs int8 (LiteRT reference kernels, held-out data)",
        "",
        *parity_section(parity),
        "",
        "Details: `quantize/report.md`, `quantize/parity.json`.",
        "",
        "## 2. Firmware fit",
        "",
        "| | used | available | free | |",
        "|---|---|---|---|---|",
    ]
    for key in ("flash", "ram"):
        v = getattr(f.fits, key)
        lines.append(f"| {key} | {v.used:,} | {v.available:,} | {v.free:,} | {'fits' if v.fits else '**does not fit**'} |")
    lines += [
        "",
        f"- tensor arena: {f.arena_bytes:,} B (offline plan); runtime state: {f.state_bytes:,} B reserved, "
        f"{fmt(f.state_used_on_device_bytes)} B used on the device",
        f"- flash: {f.flash['method']}; model array {f.flash.get('model', 0):,} B, code and constants "
        f"{f.flash.get('code_and_rodata', 0):,} B",
        f"- RAM: {f.ram_method}",
        *_split_lines(f),
        "- operators: " + ", ".join(f"{k} x{v}" for k, v in f.ops.items()) + f"; kernels linked: {', '.join(f.kernels)}",
        "",
        "Project: `firmware/` (builds on its own with `make`), figures in `firmware/firmware.json`.",
        "",
        "## 3. Device outputs vs the host reference",
        "",
        f"Ran {be.samples or 0} samples on `{d.device}` ({d.runtime.get('name')}): "
        f"**{'bit-exact' if be.value else 'NOT bit-exact'}** with {be.reference} "
        f"({be.differing_elements} of {be.total_elements} output elements differ, "
        f"max {be.max_abs_diff_lsb} LSB).",
    ]
    tflm = be.vs_tflm_python
    if tflm is not None and tflm.bit_exact is not None:
        lines.append(f"Against the TFLM python runtime: {tflm.differing_elements} of {tflm.total_elements} "
                     f"elements differ. The device matches: {be.matches}.")
    if be.note:
        lines.append(be.note + ".")
    lines += ["", "## 4. Work per inference (exact instruction counts, QEMU)", ""]
    if d.instructions_per_inference:
        lines.append(f"**{d.instructions_per_inference:,} instructions per inference**"
                     + (f", {d.macs_per_inference:,} MACs, {d.instructions_per_mac:.2f} instructions per MAC"
                        if d.instructions_per_mac else "")
                     + f". {d.instructions.method}.")
        lines += ["", "| # | operator | instructions | share | MACs | instr/MAC |", "|---|---|---|---|---|---|"]
        total = sum(o.instructions for o in d.per_op_instructions) or 1
        for o in d.per_op_instructions:
            per_mac = f"{o.instructions / o.macs:.2f}" if o.macs else "–"
            index, name = (f"{o.index}-{o.last_index}", " + ".join(map(str, o.ops)) + " (row-streamed)") if o.ops \
                else (o.index, o.op)
            lines.append(f"| {index} | {name} | {o.instructions:,} | {o.instructions / total:.1%} | "
                         f"{(o.macs or 0):,} | {per_mac} |")
        if report.plots:
            lines += ["", f"![instructions per operator]({report.plots[0]})"]
    else:
        lines.append("Not counted.")
    lines += ["", f"## 5. Latency and energy at {b.clock_hz / 1e6:g} MHz — ESTIMATES, not measurements", ""]
    lat, en = e.latency_ms, e.energy_uj
    if lat.value is not None:
        lines.append(f"- latency per inference: **{lat.value:.4g} ms (estimated)** = {lat.source}")
    else:
        lines.append(f"- latency: unavailable ({lat.reason})")
    if en.value is not None:
        lines.append(f"- energy per inference: **{en.value:.4g} µJ (estimated)** = {en.source}")
    else:
        lines.append(f"- energy: unavailable ({en.reason})")
    if e.cycles is not None:
        lines += ["", f"Estimated cycles per instruction class ({e.cycles.core}, {e.cycles.memory}):", "",
                  "| class | executed | cycles each | cycles |", "|---|---|---|---|"]
        lines += [f"| {name} | {row.count:,} | {row.cycles_each:g} | {row.cycles:,.0f} |"
                  for name, row in e.cycles.classes.items() if row.count]
        lines.append(f"| all | {e.cycles.instructions:,} instructions | {e.cycles.cycles_per_instruction:.3f} "
                     f"per instruction | {e.cycles.cycles:,.0f} |")
    lines += ["", "QEMU is not cycle-accurate: only the instruction counts above are exact.", "",
              "Device run details: `run/run.json`, `run/report.md`. Machine-readable summary: `deploy.json`."]
    return "\n".join(lines) + "\n"


def _manifest(stage: Path, model: str, quantized, fw: FirmwareInfo) -> Manifest:
    manifest = Manifest(command="deploy", extra={"board": fw.board.board})
    source = Path(model)
    parent = manifest.add(Artifact.from_file(source, format="source", stage="source")) if source.is_file() else None
    float_art = manifest.add(Artifact.from_file(stage / "quantize" / "model_float.tflite", format="tflite-float32",
                                                stage="export", parent=parent))
    int8_art = manifest.add(Artifact.from_file(stage / "quantize" / "model_int8.tflite", format="tflite-int8",
                                               stage="quantize", parent=float_art))
    manifest.add(Artifact.from_file(stage / "quantize" / "parity.json", format="parity-report", stage="parity",
                                    parent=int8_art))
    fw_art = manifest.add(Artifact.from_file(stage / "firmware" / "firmware.json", format="firmware-info", stage="compile",
                                             parent=int8_art, params={"board": fw.board.board, "runtime": fw.runtime}))
    elf = stage / "firmware" / "build" / "firmware.elf"
    if elf.is_file():
        manifest.add(Artifact.from_file(elf, format="elf", stage="compile", parent=int8_art))
    run_art = manifest.add(Artifact.from_file(stage / "run" / "run.json", format="run-report", stage="run", parent=fw_art))
    manifest.add(Artifact.from_file(stage / "deploy.json", format="deploy-report", stage="report", parent=run_art))
    manifest.add(Artifact.from_file(stage / "report.md", format="markdown", stage="report", parent=run_art))
    manifest.add(Artifact.from_file(stage / "report.html", format="html", stage="report", parent=run_art))
    return manifest


def _metric(value: object) -> str:
    """A parity metric for the console: 4 decimals, or "inf" / "nan" as parity.json stores them (strings)."""
    return f"{value:.4f}" if isinstance(value, (int, float)) else str(value)
