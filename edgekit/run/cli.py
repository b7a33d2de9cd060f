"""`edgekit run` and `edgekit devices`."""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Callable, Dict

from edgekit.errors import DeviceError, EdgekitError, InvalidModelError, UserError

log = logging.getLogger(__name__)


def register(subparsers) -> Dict[str, Callable]:
    r = subparsers.add_parser("run", help="run an artifact on a device: cold start, latency tail, memory, energy, throttling")
    r.add_argument("artifact", type=Path, help=".tflite, .onnx, .mlpackage, or a firmware folder/ELF for MCU boards")
    r.add_argument("--device", required=True,
                   help="host | macos | ssh://USER@HOST[:PORT] | adb[:SERIAL] | qemu:BOARD | serial:PORT | a profile name (edgekit devices)")
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
    r.add_argument("--pipeline", type=Path, metavar="PIPELINE.yaml",
                   help="time the whole input pipeline (decode, preprocess, inference, post-process) per phase on the "
                        "device: the budget table (edgekit.run.pipeline); --inputs are the files as the app receives them")
    r.add_argument("-o", "--outdir", type=Path, default=Path("out/run"), help="output folder (default out/run)")

    d = subparsers.add_parser("devices", help="list device profiles with their key figures")
    d.add_argument("--json", action="store_true", help="machine-readable output")
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
    if args.threads is not None and args.threads <= 0:
        problems.append("--threads must be positive")
    if not 0 < args.throttle_threshold < 10:
        problems.append("--throttle-threshold must be between 0 and 10")
    if problems:
        raise UserError("; ".join(problems))


COMPUTE_UNIT_DEVICES = ("host", "macos")  # local runners, which run one process per compute unit setting


def compute_units_option(args, target) -> list:
    """--compute-units as a list of settings ([] when not given); every problem with it in one error."""
    if not getattr(args, "compute_units", None):
        return []
    from edgekit.coreml.macos import parse_compute_units
    from edgekit.run.host import COREML_SUFFIXES

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
    elif target.kind not in COMPUTE_UNIT_DEVICES + ("ssh",):
        problems.append(f"--compute-units needs --device macos (or host on a Mac, or ssh:// to a Mac), not a {target.kind} device")
    if problems:
        raise UserError("; ".join(problems))
    return units


def build_request(args, runner_cls, target):
    from edgekit.run.base import RunRequest
    from edgekit.run.inputs import prepare_inputs

    compute_units = compute_units_option(args, target)
    if not args.artifact.exists():
        raise InvalidModelError(f"artifact {args.artifact} does not exist")
    specs = runner_cls.model_inputs(args.artifact) if hasattr(runner_cls, "model_inputs") else None
    samples, described = prepare_inputs(args.artifact, args.inputs, limit=args.input_limit, specs=specs)
    options = {"threads": args.threads if args.threads is not None else 1, "power_monitor": args.power_monitor,
               "remote_python": args.remote_python, "ssh_identity": str(args.ssh_identity) if args.ssh_identity else None,
               "ssh_options": list(args.ssh_option), "arena_bytes": args.arena_bytes,
               "flash": True if args.flash else None, "compute_units": compute_units}
    request = RunRequest(artifact=args.artifact, inputs=samples, iterations=args.iterations, warmup=args.warmup,
                         sustain_s=args.sustain, window_s=args.window, timeout_s=args.timeout, runtime=args.runtime,
                         options={k: v for k, v in options.items() if v not in (None, [])})
    return request, described


def write_results(outdir: Path, result, request, described, threshold: float) -> dict:
    from edgekit.atomic import atomic_output_dir
    from edgekit.run.report import build_run_json, write_run_outputs
    from edgekit.run.thermal import ThrottleCriteria

    report = build_run_json(result, request, inputs_description=described, criteria=ThrottleCriteria(threshold=threshold))
    with atomic_output_dir(outdir) as stage:
        write_run_outputs(stage, result, report)
    return report


def cmd_run(args) -> int:
    from edgekit.progress import progress_bars
    from edgekit.run.resolve import resolve_device
    from edgekit.run.runners import runner_class

    _check_numbers(args)
    target = resolve_device(args.device, args.profile)
    if args.pipeline is not None:
        from edgekit.run.pipeline import cmd_pipeline

        return cmd_pipeline(args, target)
    runner_cls = runner_class(target.kind)
    request, described = build_request(args, runner_cls, target)
    with progress_bars(sys.stderr.isatty() and not args.sustain) as progress:
        request.progress = progress("run", request.iterations * max(1, len(request.options.get("compute_units", []))))
        try:
            result = runner_cls(target).run(request)
        except EdgekitError as exc:
            partial = getattr(exc, "partial", None)
            if isinstance(exc, DeviceError) and partial is not None and (partial.load_ms is not None or partial.latencies_ms):
                write_results(args.outdir, partial, request, described, args.throttle_threshold)
                print(f"edgekit run: partial results (marked incomplete) written to {args.outdir}", file=sys.stderr)
            raise
    report = write_results(args.outdir, result, request, described, args.throttle_threshold)
    _print_summary(report)
    print(f"wrote {args.outdir}/run.json, report.md" + (", plots" if report.get("plots") else ""))
    return 0


def _print_summary(report: dict) -> None:
    lat, cold, energy = report["latency_ms"], report["cold_start_ms"], report["energy_uj_per_inference"]
    if cold["load"] is not None:
        print(f"cold start: load {cold['load']:.3g} ms, first inference {cold['first_inference']:.3g} ms")
    if lat["count"]:
        print(f"latency over {lat['count']} warm iterations: p50 {lat['p50']:.4g} ms, p90 {lat['p90']:.4g} ms, "
              f"p99 {lat['p99']:.4g} ms, max {lat['max']:.4g} ms")
    for row in (report.get("coreml") or {}).get("compute_units", []):
        if row.get("error"):
            print(f"  Core ML {row['compute_units']}: failed: {row['error']}")
        elif row["latency_ms"]["count"]:
            print(f"  Core ML {row['compute_units']}: load {row['load_ms']:.4g} ms, first {row['first_inference_ms']:.4g} ms, "
                  f"p50 {row['latency_ms']['p50']:.4g} ms, p99 {row['latency_ms']['p99']:.4g} ms")
    if energy["method"] == "unavailable":
        print(f"energy: unavailable ({energy['reason']})")
    else:
        print(f"energy: {energy['value']:.4g} uJ per inference ({energy['method']}: {energy['source']})")
    thermal = report["thermal"]
    if thermal.get("sustained"):
        v = thermal["verdict"]
        if v["throttling_detected"]:
            print(f"thermal: throttling detected at {v['onset_s']:.1f} s ({v['first_signal']}); "
                  f"sustained/peak throughput {v['sustained_to_peak']:.2f}")
        else:
            print(f"thermal: {'no throttling detected' if v['throttling_detected'] is False else 'undetermined'}"
                  + (f"; sustained/peak throughput {v['sustained_to_peak']:.2f}" if v["sustained_to_peak"] else ""))


def cmd_devices(args) -> int:
    from edgekit.run.devices import device_rows, format_table

    rows = device_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_table(rows))
    return 0
