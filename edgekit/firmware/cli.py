"""`edgekit firmware` and `edgekit deploy`."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict

from edgekit.console import say
from edgekit.errors import UserError

DEFAULT_BOARD = "mps2-an386"


def register(subparsers) -> Dict[str, Callable]:
    f = subparsers.add_parser("firmware", help="int8 .tflite -> Cortex-M firmware project sized for a board")
    f.add_argument("model", type=Path, help="full-int8 .tflite (e.g. model_int8.tflite from edgekit quantize)")
    f.add_argument("--board", help=f"MCU board profile from devices/ (default {DEFAULT_BOARD}; "
                                    "`edgekit devices` lists them)")
    f.add_argument("--emit", choices=("app", "library"), default="app",
                   help="app: a whole firmware project (default); library: the model + runtime as a C library for "
                        "your own firmware (include/<name>.h, CMake, Zephyr, Arduino, Makefile, prebuilt lib<name>.a)")
    f.add_argument("--name", help="--emit library: the library's name, a C identifier prefixing its API and symbols "
                                  "(default: from the model file)")
    f.add_argument("--cpu", help="--emit library: the core instead of --board: cortex-m4, cortex-m7, cortex-m33, "
                                 "cortex-m55")
    f.add_argument("--fpu", help="--emit library with --cpu: the FPU (e.g. fpv4-sp-d16, fpv5-d16, auto, none)")
    f.add_argument("--float-abi", choices=("hard", "softfp", "soft"), help="--emit library with --cpu: the float "
                                                                          "ABI (default hard with an FPU)")
    f.add_argument("--arena-section", help="--emit library: NAME[:BYTES] linker section of the arena by default; "
                                           "with BYTES the arena must fit it")
    f.add_argument("--runtime", choices=("edgekit", "tflm"), default="edgekit",
                   help="edgekit: edgekit's own int8 runtime (default); tflm: a TensorFlow Lite Micro project")
    f.add_argument("-o", "--outdir", type=Path, help="project folder (default out/firmware/<model>-<board>)")
    f.add_argument("--build", action="store_true", help="also compile build/firmware.elf with arm-none-eabi-gcc")
    f.add_argument("--optimize", choices=("speed", "balanced", "ram"),
                   help="where RAM and speed trade (an option of the edgekit runtime): ram = smallest-scratch kernels, "
                        "speed = fastest kernels, balanced (default) = the fast kernel unless its scratch exceeds the "
                        "op's tensors")
    f.add_argument("--weights", choices=("auto", "int8", "relaid"),
                   help="what the weights cost in flash (an option of the edgekit runtime): int8 = kept int8 "
                        "(smallest flash, slower kernels on Cortex-M4), relaid = re-laid-out copies for the fastest "
                        "kernels (their originals left out), auto (default) = the re-laid-out copies that fit a "
                        "flash budget of 1.2x the .tflite (and the board's flash), per op by estimated speed per byte")
    f.add_argument("--harness", choices=("mlperf-tiny",), help="mlperf-tiny: an MLPerf Tiny (EEMBC ULPMark-ML) device "
                                                               "under test instead of edgekit's protocol (needs --task)")
    f.add_argument("--task", choices=("kws", "ic", "vww", "ad"), help="--harness mlperf-tiny: the benchmark")
    f.add_argument("--cycles-from", type=Path, metavar="JSON",
                   help="--harness mlperf-tiny: size the performance N from this run.json/deploy.json cycle estimate")
    f.add_argument("--harness-mode", choices=("performance", "energy"), default="performance",
                   help="--harness mlperf-tiny: m-lap-us timestamps (default) or GPIO pulses for the interface board")

    d = subparsers.add_parser("deploy", help="quantize -> firmware -> build -> run on the board (QEMU) -> one report")
    d.add_argument("model", help="float model: .pt2, .onnx, .tflite, SavedModel, ... (as for edgekit quantize)")
    d.add_argument("--calib", required=True, type=Path, help="calibration data (as for edgekit quantize)")
    d.add_argument("--eval-data", type=Path, help="held-out data for parity and the device run (default: 20%% of --calib)")
    d.add_argument("--board", default=DEFAULT_BOARD, help=f"QEMU board profile (default {DEFAULT_BOARD})")
    d.add_argument("--optimize", choices=("speed", "balanced", "ram"), default="balanced",
                   help="firmware trade-off between RAM and speed (default balanced; see edgekit firmware --help)")
    d.add_argument("--method", default="minmax", help="calibration range method (default minmax)")
    d.add_argument("--calib-size", type=int, help="use at most N calibration samples")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--input-shape", help="input shape for TorchScript / factories, e.g. 1,3,32,32")
    d.add_argument("--device-samples", type=int, default=8, help="samples run on the device (default 8)")
    d.add_argument("--timeout", type=float, default=120.0, help="seconds per device operation (default 120)")
    d.add_argument("-o", "--outdir", type=Path, default=Path("out/deploy"), help="output folder (default out/deploy)")
    return {"firmware": cmd_firmware, "deploy": cmd_deploy}


def cmd_firmware(args) -> int:
    from edgekit.progress import progress_bars

    if args.emit == "library":
        return cmd_library(args)
    given = [f"--{k.replace('_', '-')}" for k in ("name", "cpu", "fpu", "float_abi", "arena_section")
             if getattr(args, k)]
    if given:
        raise UserError(f"{', '.join(given)}: only with --emit library (the application project takes --board)",
                        fix="add --emit library, or drop them")
    args.board = args.board or DEFAULT_BOARD

    if args.harness or args.task:
        from edgekit.firmware.mlperf import harness_command

        with progress_bars(sys.stderr.isatty()):  # the arm-none-eabi-gcc build takes seconds
            return harness_command(args)
    from edgekit.converters import CONVERTERS
    import edgekit.converters.firmware  # noqa: F401  (registers "firmware")

    from edgekit.run.cli import warn_if_changed

    warn_if_changed(args.model, "firmware")
    converter = CONVERTERS.get("firmware")()
    runtime_options = {"optimize": args.optimize, "weights": args.weights}  # the chosen runtime refuses the given ones it does not take
    with progress_bars(sys.stderr.isatty()):  # the size build (arm-none-eabi-gcc) and --build take seconds
        result = converter.convert(args.model, board=args.board, outdir=args.outdir, runtime=args.runtime,
                                   build=args.build, **{k: v for k, v in runtime_options.items() if v is not None})
    info = result.info
    if info.runtime == "ethos-u":  # NPU board: placement only (edgekit.firmware.ethosu)
        from edgekit.firmware.ethosu import summary_lines

        say(f"wrote {result.outdir}")
        say("\n".join(summary_lines(info)))
        return 0
    from edgekit.console import say_all

    lines = [f"wrote {result.outdir} ({info.runtime} runtime, board {info.board.board})"]
    ops = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in info.op_names().items())
    lines.append(f"operators: {ops}")
    for key, f in (("flash", info.fits.flash), ("ram", info.fits.ram)):
        note = f"; {f.method}" if f.method else ""
        lines.append(f"{key}: {f.used:,} of {f.available:,} bytes ({'fits' if f.fits else 'DOES NOT FIT'}{note})")
    lines.append(f"arena: {info.arena_bytes:,} bytes" + (f", runtime state {info.state_bytes:,} bytes" if info.state_bytes else ""))
    if info.optimize:
        lines.append(f"--optimize {info.optimize}: prepared model {(info.plan or {})['prepared_bytes']:,} bytes in flash")
    layouts = (info.plan or {}).get("weight_layouts") or {}
    if "constants_bytes" in layouts:
        budget = layouts.get("flash_budget")
        what = ("re-laid-out weights" if layouts["flash_layouts"] else "int8 weights")
        if budget is not None:  # --weights auto over its flash budget: a per-op choice
            what = (f"re-laid-out weights for {len(layouts.get('relaid_ops') or [])} op(s), the rest int8, within a "
                    f"flash budget of {budget['limit_bytes']:,} B ({budget['limit_ratio']}x the .tflite): model flash "
                    f"{budget['flash_bytes']:,} B (int8 {budget['int8_flash_bytes']:,} B, all re-laid out "
                    f"{budget['relaid_flash_bytes']:,} B), estimated {budget['estimated_instructions_saved']:,} of "
                    f"{budget['estimated_instructions_saved_relaid']:,} instructions saved per inference (estimated)")
        lines.append(f"--weights {layouts.get('weights', 'auto')}: " + what
                     + f", {layouts['constants_bytes']:,} B of the model's constants in flash, "
                       f"{layouts['originals_dropped_bytes']:,} B of originals left out (measured)")
    if info.runtime_code_bytes is not None:
        lines.append(f"runtime code (core + kernels): {info.runtime_code_bytes:,} bytes")
    if result.elf is not None:
        lines.append(f"built {result.elf}")
    lines.append(f"methods and sources of every figure: {result.outdir}/firmware.json, README.md")
    say_all(lines)
    return 0


def cmd_library(args) -> int:
    """`edgekit firmware MODEL --emit library`: the model + runtime as a C library folder."""
    from edgekit.console import say_all
    from edgekit.firmware.library import generate_library
    from edgekit.progress import progress_bars

    if args.harness or args.task or args.runtime != "edgekit" or args.build:
        raise UserError("--emit library takes the edgekit runtime, without --harness/--task/--build",
                        fix="drop those options (the library is always compiled: lib<name>.a)")
    with progress_bars(sys.stderr.isatty()):
        result = generate_library(args.model, args.outdir, name=args.name, board=args.board, cpu=args.cpu,
                                  fpu=args.fpu, float_abi=args.float_abi, optimize=args.optimize,
                                  arena_section=args.arena_section, weights=args.weights)
    info = result.info
    m = info.memory
    say_all([f"wrote {result.outdir} (library {info.name}, {info.core.cpu}, fpu {info.core.fpu}, "
             f"float ABI {info.core.float_abi})",
             f"API: include/{info.name}.h ({info.name}_init, _input, _invoke, _output, _message)",
             f"RAM: arena {m.arena_bytes:,} + state {m.state_bytes:,} bytes (offline plan); flash: constants "
             f"{m.model_bytes:,} (of the {m.tflite_bytes:,}-byte .tflite: what the prepared path reads) + prepared "
             f"{m.prepared_bytes:,} bytes + runtime code",
             f"prebuilt: {info.prebuilt.path} ({' '.join(info.prebuilt.cflags or [])}); "
             f"{info.prebuilt.prefixed_symbols} runtime symbols prefixed {info.name}_",
             f"integration: {result.outdir}/README.md; files, sizes, flags: {result.outdir}/library.json"])
    return 0


def cmd_deploy(args) -> int:
    from edgekit.firmware.deploy import DeployOptions, deploy
    from edgekit.progress import progress_bars

    if args.device_samples <= 0:
        raise UserError("--device-samples must be positive")
    shape = None
    if args.input_shape:
        try:
            shape = tuple(int(v) for v in args.input_shape.replace("x", ",").split(","))
        except ValueError:
            raise UserError(f"--input-shape {args.input_shape!r} is not a shape like 1,3,32,32") from None
    options = DeployOptions(board=args.board, method=args.method, calib_size=args.calib_size, seed=args.seed,
                            eval_data=args.eval_data, input_shape=shape, device_samples=args.device_samples,
                            timeout_s=args.timeout, optimize=args.optimize)
    with progress_bars(sys.stderr.isatty()) as progress:
        result = deploy(args.model, args.calib, args.outdir, options, progress=progress)
    from edgekit.console import say_all

    say_all(result.summary_lines())
    say(f"report: {result.outdir / 'report.md'}")
    return 0 if result.passed else 1
