"""`edgekit run` and `edgekit devices`."""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List

from edgekit.errors import DeviceError, EdgekitError, InvalidModelError, UserError

if TYPE_CHECKING:
    from edgekit.run.results import RunReport

log = logging.getLogger(__name__)


def register(subparsers) -> Dict[str, Callable]:
    r = subparsers.add_parser("run", help="run an artifact on a device: cold start, latency tail, memory, energy, throttling")
    r.add_argument("artifact", type=Path, help=".tflite, .onnx, .mlpackage, or a firmware folder/ELF for MCU boards")
    r.add_argument("--device", required=True,
                   help="host | macos | ssh://USER@HOST[:PORT] | adb[:SERIAL] | qemu:BOARD | serial:PORT | labgrid:PLACE | "
                        "a profile name (edgekit devices)")
    r.add_argument("--coordinator", metavar="HOST:PORT",
                   help="labgrid:PLACE: the labgrid coordinator (default: $LG_COORDINATOR, else 127.0.0.1:20408)")
    r.add_argument("--lock-timeout", type=float, metavar="SECONDS",
                   help="labgrid:PLACE: wait this long for a place someone else holds, then say who (default 60)")
    r.add_argument("--profile", help="attach this device profile (power model, thermal limits) to a connection")
    r.add_argument("--inputs", type=Path, help="input data: image folder (with preprocess.json), .npy/.npz, folder of .npy "
                                               "(default: seeded random inputs)")
    r.add_argument("--input-limit", type=int, default=16, help="use at most N samples of --inputs (default 16)")
    r.add_argument("-n", "--iterations", type=int, default=100, help="warm iterations (default 100; ignored with --sustain)")
    r.add_argument("--warmup", type=int, default=5, help="untimed iterations before the warm ones (default 5)")
    r.add_argument("--sustain", type=float, default=0.0, metavar="SECONDS",
                   help="run back to back for SECONDS and analyse throttling per window")
    r.add_argument("--window", type=float, default=5.0, metavar="SECONDS", help="window length for --sustain (default 5)")
    r.add_argument("--throttle-threshold", type=float, default=0.25,
                   help="relative rise of window mean latency counted as throttling (default 0.25 = 25%%)")
    r.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="longest silence from the device once the model is loaded (default 60)")
    r.add_argument("--runtime", default="auto", help="auto | litert | onnxruntime | tflm | coreml (MCU: edgekit | tflm)")
    r.add_argument("--threads", type=int, help="runtime threads (default: 1)")
    r.add_argument("--compute-units", metavar="LIST",
                   help="Core ML (.mlpackage, macos/host on a Mac): cpu_only | cpu_and_gpu | cpu_and_ne | all, comma-separated "
                        "for one run per setting in one table, or each (all four); default all")
    r.add_argument("--power-monitor", metavar="SPEC", help="rapl | ppk2:PORT | joulescope[:SERIAL] | ina219:BUS@ADDR,shunt_ohm=R | ...")
    r.add_argument("--remote-python", help="python on the ssh/adb device (default: the profile's, else python3)")
    r.add_argument("--ssh-identity", type=Path, help="private key for ssh (default: ssh's own configuration)")
    r.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE", help="extra ssh -o option (repeatable)")
    r.add_argument("--arena-bytes", type=int, help="TFLM arena size for --runtime tflm")
    r.add_argument("--flash", action="store_true", help="serial:PORT boards: flash the firmware with pyocd first")
    r.add_argument("--benchmark-binary", type=Path, metavar="PATH",
                   help="adb devices: run LiteRT's benchmark_model (built for the phone's ABI) instead of a python runner")
    r.add_argument("--delegate", choices=["xnnpack", "gpu", "nnapi", "cpu"],
                   help="with --benchmark-binary: --use_xnnpack (default) | --use_gpu | --use_nnapi | cpu (no delegate)")
    r.add_argument("--pipeline", type=Path, metavar="PIPELINE.yaml",
                   help="time the whole input pipeline (decode, preprocess, inference, post-process) per phase on the "
                        "device: the budget table (edgekit.run.pipeline.budget); --inputs are the files as the app receives them")
    r.add_argument("-o", "--outdir", type=Path, default=Path("out/run"), help="output folder (default out/run)")
    r.add_argument("--allow-mismatch", action="store_true",
                   help="exit 0 even when the device's outputs are not bit-exact with the reference (default: exit 1)")
    h = r.add_argument_group("MLPerf Tiny harness (firmware built with --harness mlperf-tiny; qemu:BOARD or serial:PORT)")
    h.add_argument("--harness", choices=("mlperf-tiny",), help="drive the device as the MLPerf Tiny runner does")
    h.add_argument("--mode", choices=("performance", "accuracy"), default="performance",
                   help="performance: median throughput over 5 inputs; accuracy: top-1 / AUC over --dataset")
    h.add_argument("--dataset", type=Path, help="dataset folder in the runner's layout (y_labels.csv + inputs)")
    h.add_argument("--min-runtime", type=float, default=10.0, metavar="SECONDS",
                   help="performance mode: seconds of inferences per input (MLPerf Tiny requires 10, the default)")
    h.add_argument("--count-instructions", action="store_true", help="qemu: exact instructions per inference (plugin)")

    d = subparsers.add_parser("devices", help="list device profiles with their key figures")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.add_argument("--coordinator", metavar="HOST:PORT",
                   help="also list the places of this labgrid lab (board tag, holder); run them with --device labgrid:PLACE")
    return {"run": cmd_run, "devices": cmd_devices}


def _check_numbers(args) -> None:
    problems = []
    if args.iterations <= 0:
        problems.append("-n must be positive")
    if args.warmup < 0:
        problems.append("--warmup must be >= 0")
    if args.sustain < 0:
        problems.append("--sustain must be >= 0")
    if args.window <= 0:
        problems.append("--window must be positive")
    if args.timeout <= 0:
        problems.append("--timeout must be positive")
    if args.input_limit <= 0:
        problems.append("--input-limit must be positive")
    if getattr(args, "lock_timeout", 0) is not None and getattr(args, "lock_timeout", 0) < 0:
        problems.append("--lock-timeout must be >= 0")
    if args.threads is not None and args.threads <= 0:
        problems.append("--threads must be positive")
    if not 0 < args.throttle_threshold < 10:
        problems.append("--throttle-threshold must be between 0 and 10")
    if getattr(args, "delegate", None) and not getattr(args, "benchmark_binary", None):
        problems.append("--delegate needs --benchmark-binary (it picks benchmark_model's --use_gpu/--use_nnapi/--use_xnnpack)")
    if problems:
        raise UserError("; ".join(problems))


def compute_units_option(args, target, runner_cls=None) -> list:
    """--compute-units as a list of settings ([] when not given); every problem with it in one error."""
    if not getattr(args, "compute_units", None):
        return []
    from edgekit.coreml.macos import parse_compute_units
    from edgekit.run.runners.host import COREML_SUFFIXES

    problems = []
    try:
        units = parse_compute_units(args.compute_units)
    except UserError as exc:
        problems.append(exc.message)
        units = []
    if args.artifact.suffix.lower() not in COREML_SUFFIXES:
        problems.append(f"--compute-units applies to Core ML models (.mlpackage), not {args.artifact.name}")
    if target.kind == "ssh" and len(units) > 1:
        problems.append("over ssh --compute-units takes one setting per run (the sweep runs locally on a Mac: --device macos)")
    elif runner_cls is not None and "compute_units" not in runner_cls.options:  # the runner says what it takes
        problems.append(f"--compute-units needs --device macos (or host on a Mac, or ssh:// to a Mac), not a {target.kind} device")
    if problems:
        raise UserError("; ".join(problems))
    return units


def given_options(args) -> List[str]:
    """The RunOptions the user set on the command line (defaults filled in by the CLI are not counted)."""
    given = {"threads": args.threads, "power_monitor": args.power_monitor, "remote_python": args.remote_python,
             "ssh_identity": args.ssh_identity, "ssh_options": args.ssh_option or None, "arena_bytes": args.arena_bytes,
             "flash": args.flash or None, "compute_units": getattr(args, "compute_units", None),
             "benchmark_binary": getattr(args, "benchmark_binary", None), "delegate": getattr(args, "delegate", None),
             "coordinator": getattr(args, "coordinator", None), "lock_timeout": getattr(args, "lock_timeout", None)}
    return [name for name, value in given.items() if value is not None]


def check_runner_options(args, runner_cls) -> None:
    """Every flag the chosen runner does not take, in one UserError (the runner says which it takes)."""
    problems = runner_cls.option_problems(given_options(args))
    if problems:
        raise UserError("; ".join(problems), fix="leave those flags out, or choose the device they are for")


def build_request(args, runner_cls, target):
    from edgekit.run.base import RunRequest
    from edgekit.run.inputs import prepare_inputs
    from edgekit.run.results import RunOptions

    compute_units = compute_units_option(args, target, runner_cls)
    check_runner_options(args, runner_cls)
    if not args.artifact.exists():
        raise InvalidModelError(f"artifact {args.artifact} does not exist")
    specs = runner_cls.model_inputs(args.artifact) if hasattr(runner_cls, "model_inputs") else None
    samples, described = prepare_inputs(args.artifact, args.inputs, limit=args.input_limit, specs=specs)
    options = RunOptions(threads=args.threads if args.threads is not None else 1, power_monitor=args.power_monitor,
                         remote_python=args.remote_python,
                         ssh_identity=str(args.ssh_identity) if args.ssh_identity else None,
                         ssh_options=list(args.ssh_option), arena_bytes=args.arena_bytes,
                         flash=True if args.flash else None, compute_units=compute_units,
                         benchmark_binary=str(args.benchmark_binary) if getattr(args, "benchmark_binary", None) else None,
                         delegate=getattr(args, "delegate", None), coordinator=getattr(args, "coordinator", None),
                         lock_timeout=getattr(args, "lock_timeout", None))
    request = RunRequest(artifact=args.artifact, inputs=samples, iterations=args.iterations, warmup=args.warmup,
                         sustain_s=args.sustain, window_s=args.window, timeout_s=args.timeout, runtime=args.runtime,
                         options=options)
    return request, described


def write_results(outdir: Path, result, request, described, threshold: float) -> "RunReport":
    from edgekit.atomic import atomic_output_dir
    from edgekit.run.report import build_run_report, write_run_outputs
    from edgekit.run.measurement.thermal import ThrottleCriteria

    report = build_run_report(result, request, inputs_description=described, criteria=ThrottleCriteria(threshold=threshold))
    with atomic_output_dir(outdir) as stage:
        report = write_run_outputs(stage, result, report)
    return report


def _check_benchmark_binary(args, target) -> None:
    """--benchmark-binary: an adb device and an Android executable, checked before connecting."""
    from edgekit.run.runners.benchmark_model import read_elf

    if target.kind != "adb":
        raise UserError(f"--benchmark-binary runs LiteRT's benchmark_model on Android phones (--device adb[:SERIAL]), "
                        f"not on a {target.kind} device")
    if args.artifact.suffix.lower() != ".tflite":
        raise UserError(f"--benchmark-binary: benchmark_model runs .tflite models, not {args.artifact.name}")
    info = read_elf(args.benchmark_binary)
    if not info.runs_on_android:
        raise UserError(f"--benchmark-binary {args.benchmark_binary.name} is a desktop Linux build (program interpreter "
                        f"{info.interpreter}); Android needs /system/bin/linker64",
                        fix="use the android_aarch64 (or android_arm) build of benchmark_model")


def cmd_run(args) -> int:
    if args.harness:
        from edgekit.run.mlperf.cli import cmd_run_harness

        return cmd_run_harness(args)
    from edgekit.progress import progress_bars
    from edgekit.run.resolve import resolve_device
    from edgekit.run.runners import runner_class

    _check_numbers(args)
    target = resolve_device(args.device, args.profile)
    if getattr(args, "benchmark_binary", None):
        _check_benchmark_binary(args, target)
    if args.pipeline is not None:
        from edgekit.run.pipeline.budget import cmd_pipeline

        with progress_bars(sys.stderr.isatty()):  # firmware build, QEMU boot, device setup: seconds each
            return cmd_pipeline(args, target)
    runner_cls = runner_class(target.kind)
    request, described = build_request(args, runner_cls, target)
    warn_if_changed(args.artifact, "run")
    with progress_bars(sys.stderr.isatty() and not args.sustain) as progress:
        request.progress = progress("run", request.iterations * max(1, len(request.options.compute_units)))
        try:
            result = runner_cls(target).run(request)
        except EdgekitError as exc:
            partial = getattr(exc, "partial", None)
            if isinstance(exc, DeviceError) and partial is not None and _measured_anything(partial):
                from edgekit.console import say_all

                say_all(summary_lines(write_results(args.outdir, partial, request, described, args.throttle_threshold)),
                        file=sys.stderr)
                done = partial.fault.inferences_completed if partial.fault else None
                counted = f"{done} inference(s) measured before the fault, " if done is not None else ""
                say_all([f"edgekit run: partial results ({counted}marked complete: false) written to "
                         f"{args.outdir}/run.json"], file=sys.stderr)
            raise
    report = write_results(args.outdir, result, request, described, args.throttle_threshold)
    _print_summary(report)
    from edgekit.console import say

    say(f"wrote {args.outdir}/run.json, report.md" + (", plots" if report.plots else "")
        + " (methods and sources of every figure)")
    return mismatch_exit_code(report, args)


def mismatch_exit_code(report: RunReport, args) -> int:
    """1 when the device's outputs are NOT bit-exact with the reference (the run.json is written either way),
    unless --allow-mismatch; else 0."""
    exact = report.work.outputs_bit_exact
    if exact is None or exact.value is not False or getattr(args, "allow_mismatch", False):
        return 0
    print(f"edgekit run: error: the device's outputs are NOT bit-exact with {exact.reference or 'the reference'} "
          f"({exact.differing_elements} of {exact.total_elements} elements differ)\n"
          "Fix: this is a wrong result on the device (see run.json outputs_bit_exact); pass --allow-mismatch to "
          "exit 0 anyway (e.g. a runtime known to round differently)", file=sys.stderr)
    return 1


def warn_if_changed(artifact: Path, command: str) -> None:
    """A warning (not an error: the user may have changed it on purpose) when the artifact no longer has the sha256
    its manifest.json or firmware.json recorded."""
    from edgekit.verify import stale_warnings

    for warning in stale_warnings(artifact):
        print(f"edgekit {command}: warning: {warning}; `edgekit verify FOLDER` checks the whole folder", file=sys.stderr)


def _measured_anything(result) -> bool:
    """A partial result worth writing: the model loaded, or at least one inference answered."""
    return bool(result.load_ms is not None or result.latencies_ms or result.outputs or result.work.instructions)


def summary_lines(report: RunReport) -> List[str]:
    """The run's key figures, one short line each; sources and methods in full are in run.json and report.md."""
    lat, cold, energy = report.latency_ms, report.cold_start_ms, report.energy_uj_per_inference
    lines = []
    if not report.complete:
        fault = report.fault
        done = fault.inferences_completed if fault and fault.inferences_completed is not None else "?"
        lines.append(f"INCOMPLETE: {fault.kind if fault else 'fault'} after {done} "
                     "inference(s); figures cover what was measured before")
    if cold.load is not None:
        lines.append(f"cold start: load {cold.load:.3g} ms, first inference {cold.first_inference:.3g} ms")
    if lat.count:
        lines.append(f"latency over {lat.count} warm iterations: p50 {lat.p50:.4g} ms, p90 {lat.p90:.4g} ms, "
                     f"p99 {lat.p99:.4g} ms, max {lat.max:.4g} ms")
    instructions = report.work.instructions
    if instructions:
        lines.append(f"instructions: {instructions.median:,} per inference (exact, QEMU plugin; "
                     f"{instructions.inferences} inferences, min {instructions.min:,}, max {instructions.max:,})")
    estimated = report.work.latency_ms_estimated
    if estimated is not None and estimated.value is not None:
        details = estimated.model_extra or {}
        lines.append(f"latency: {estimated.value:.4g} ms per inference (estimated: {details['cycles_per_instruction']:g} "
                     f"cycles/instruction at {details['clock_hz'] / 1e6:g} MHz; not measured)")
    if report.work.cycles_per_inference:
        lines.append(f"device cycles: {report.work.cycles_per_inference:,} per inference ({report.work.latency_method or 'measured'})")
    exact = report.work.outputs_bit_exact
    if exact and exact.value is not None:
        verdict = "bit-exact" if exact.value else (f"NOT bit-exact ({exact.differing_elements} of "
                                                  f"{exact.total_elements} elements differ, max {exact.max_abs_diff_lsb} LSB)")
        lines.append(f"outputs: {verdict} vs {exact.reference or 'the reference'} on {exact.samples} sample(s)")
    memory = report.memory.present()
    parts = [f"{label} {memory[key]:,} B" for key, label in (("arena_bytes", "arena"), ("flash_bytes", "flash"),
                                                              ("ram_bytes", "RAM"), ("peak_rss_bytes", "peak RSS"))
             if memory.get(key)]
    if parts:
        lines.append("memory: " + ", ".join(parts))
    for row in report.coreml.compute_units if report.coreml else []:
        if row.error:
            lines.append(f"  Core ML {row.compute_units}: failed: {row.error}")
        elif row.latency_ms.count:
            lines.append(f"  Core ML {row.compute_units}: load {row.load_ms:.4g} ms, first {row.first_inference_ms:.4g} ms, "
                         f"p50 {row.latency_ms.p50:.4g} ms, p99 {row.latency_ms.p99:.4g} ms")
    if energy.method == "unavailable":
        lines.append(f"energy: unavailable ({energy.reason})")
    else:
        lines.append(f"energy: {energy.value:.4g} uJ per inference ({energy.method}; source in run.json and report.md)")
    thermal = report.thermal
    if thermal.sustained:
        v = thermal.verdict
        if v.throttling_detected:
            lines.append(f"thermal: throttling detected at {v.onset_s:.1f} s ({v.first_signal}); "
                         f"sustained/peak throughput {v.sustained_to_peak:.2f}")
        else:
            lines.append(f"thermal: {'no throttling detected' if v.throttling_detected is False else 'undetermined'}"
                         + (f"; sustained/peak throughput {v.sustained_to_peak:.2f}" if v.sustained_to_peak else ""))
    return lines


def _print_summary(report: dict) -> None:
    from edgekit.console import say_all

    say_all(summary_lines(report))


def cmd_devices(args) -> int:
    from edgekit.run.devices import device_rows, format_table

    rows = device_rows()
    places = None
    if getattr(args, "coordinator", None):
        from edgekit.boardlab.place import coordinator_address, lab_places

        places = lab_places(coordinator_address(args.coordinator))
    if args.json:
        print(json.dumps(rows if places is None else {"profiles": rows, "lab_places": places}, indent=2))
        return 0
    print(format_table(rows))
    if places is not None:
        print(f"\nlab places on {args.coordinator}:" if places else f"\nno places on {args.coordinator}")
        for row in places:
            held = f"held by {row['holder']}" if row["holder"] else "free"
            print(f"  {row['device']:<28} board {row['board'] or '(no board tag)':<16} {held}")
    return 0
