"""The `edgekit` command line: user errors become one clear message and a non-zero exit."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import traceback
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Tuple

from edgekit import __version__
from edgekit.errors import EdgekitError, InternalError, UserError
from edgekit.progress import progress_bars as _progress_bars

log = logging.getLogger("edgekit")


def _shape(text: str) -> Tuple[int, ...]:
    try:
        dims = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 1,3,224,224") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r} must be positive integers like 1,3,224,224")
    return dims


def _add_batch_axis(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-axis", action="append", metavar="INPUT=AXIS", default=None,
                   help="where input INPUT has its batch (an axis of size 1 or dynamic; 'none': the data holds the "
                        "whole input). Default: axis 0 if it is 1, else the first axis of size 1 (a state [2, 1, 128] "
                        "-> 1); the data always has samples on its first axis")


def _add_tolerance(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--min-cosine", type=float, help=f"minimum cosine similarity per output ({default})")
    p.add_argument("--min-top1", type=float, help=f"minimum top-1 agreement for classification outputs ({default})")
    p.add_argument("--min-sqnr-db", type=float, help=f"minimum SQNR in dB per output ({default})")
    p.add_argument("--min-topk", type=float, help="minimum share of the top-10 anchors kept, detection-score outputs")
    p.add_argument("--min-iou", type=float, help="minimum foreground IoU, mask outputs")
    p.add_argument("--output-kind", action="append", metavar="NAME=KIND", default=None,
                   help="how output NAME is judged: class_scores, regression, boxes, detection_scores, mask or "
                        "scalar (default: detected from its shape and values; the report says which)")


def _add_mobile_quantize_options(parser: argparse.ArgumentParser) -> None:
    from edgekit.mobile.options import add_quantize_options

    add_quantize_options(parser)


def _model_info(args):
    from edgekit.mobile.options import model_info_from_args

    return model_info_from_args(args)


def build_parser() -> argparse.ArgumentParser:
    from edgekit.calibration.ranges import RANGE_METHODS

    parser = argparse.ArgumentParser(prog="edgekit", description="Take a trained model to an edge device and prove it still works there.")
    parser.add_argument("--version", action="version", version=f"edgekit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show converter logs and tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    q = sub.add_parser("quantize", help="float model + calibration data -> INT8 model (TFLite, Core ML, ONNX QDQ) + parity report")
    q.add_argument("model", help="float .tflite, .onnx, .h5/.keras, SavedModel folder, .pt2, TorchScript, or package.module:factory")
    q.add_argument("--calib", required=True, type=Path, help="folder of images (with preprocess.json), .npy/.npz, or folder of .npy")
    q.add_argument("--method", default="minmax", help=f"activation range method: {', '.join(RANGE_METHODS.names())} (default minmax)")
    q.add_argument("--percentile", type=float, default=99.99, help="percentile for --method percentile (default 99.99)")
    q.add_argument("--format", default="tflite", help="output format: tflite (default), coreml (.mlpackage), onnx (QDQ)")
    q.add_argument("--calib-size", type=int, help="use at most N calibration samples (seeded subset)")
    q.add_argument("--seed", type=int, default=0, help="seed of the calibration subset and held-out split")
    q.add_argument("--eval-data", type=Path, help="held-out data for parity (default: 20%% of --calib held out)")
    q.add_argument("--preprocess", type=Path, help="preprocessing spec JSON for image folders (default: preprocess.json in the folder)")
    q.add_argument("--input-shape", type=_shape, help="input shape, e.g. 1,3,224,224 (TorchScript / factories)")
    q.add_argument("-o", "--outdir", type=Path, default=Path("out/quantize"), help="output folder (default out/quantize)")
    _add_tolerance(q, "defaults: cosine 0.98, top-1 0.95")
    _add_batch_axis(q)
    from edgekit.scale.cli import add_ray_arguments

    add_ray_arguments(q)
    prec = q.add_argument_group("precision (each --format accepts a subset; others are refused with the reason)")
    prec.add_argument("--weights", default="int8", choices=["int8"], help="weight precision (default int8)")
    prec.add_argument("--activations", default="int8", choices=["int8", "int16", "float16"],
                      help="activation precision: int8 (default); tflite int16 = 16x8 mode; coreml float16 = W8 only")
    prec.add_argument("--engine", help="onnx: ort (onnxruntime quantize_static, default) | nncf")
    prec.add_argument("--deployment-target", help="coreml: iOS16 | iOS17 | iOS18 (default: the minimum the precision needs)")
    prec.add_argument("--compute-units", default="all", help="coreml: all | cpu_and_ne | cpu_only (recorded in the model)")
    _add_mobile_quantize_options(q)
    dbg = q.add_argument_group("per-layer analysis and mixed precision")
    dbg.add_argument("--debug", action="store_true", help="compare every intermediate tensor float vs quantized (layers.json/md/png)")
    dbg.add_argument("--fallback", default="none", choices=["none", "auto"],
                     help="auto: keep the most damaged layers out of int8 until --min-sqnr-db / --min-cosine is met")
    dbg.add_argument("--fallback-to", default="float", choices=["float", "int16"],
                     help="what --fallback uses: float per layer, or int16 = the whole model in 16x8 (TF's 16x8 quantizer has no per-op selection)")
    dbg.add_argument("--keep-float", action="append", default=[], metavar="NAME|OPTYPE",
                     help="keep ops in float: an op type (SOFTMAX), a whole output tensor name, or a unique name part such as conv2; repeatable")

    p = sub.add_parser("parity", help="compare a candidate model with a reference on the same inputs")
    p.add_argument("reference", type=Path, help="reference model (.tflite, .onnx or .mlpackage)")
    p.add_argument("candidate", type=Path, help="candidate model (.tflite, .onnx or .mlpackage)")
    p.add_argument("--data", required=True, type=Path, help="inputs: folder of images (with preprocess.json), .npy/.npz, or folder of .npy")
    p.add_argument("--preprocess", type=Path, help="preprocessing spec JSON for image folders")
    p.add_argument("--limit", type=int, help="use at most N samples (seeded subset)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--outdir", type=Path, help="write parity.json and report.md here")
    p.add_argument("--per-layer", action="store_true", help="also compare every intermediate tensor (two .tflite, two .onnx or two .mlpackage models; needs -o)")
    _add_tolerance(p, "default: not checked")
    _add_batch_axis(p)
    add_ray_arguments(p)

    for module in _command_modules():
        COMMANDS.update(module.register(sub))
    return parser


# Modules that add subcommands: each has register(subparsers) -> {command name: handler(args) -> exit code}.
COMMAND_MODULES = (
    "edgekit.firmware.cli",      # firmware, deploy
    "edgekit.firmware.qemu_cli", # qemu FIRMWARE --serial pty (UART0 for an external runner)
    "edgekit.run.cli",           # run, devices
    "edgekit.preprocessing.cli", # preprocess-parity, calib-check
    "edgekit.compile.cli",       # compile (Arm Ethos-U via Vela)
    "edgekit.verify_cli",        # verify
    "edgekit.mobile.inspect_cli",  # inspect (TFLite metadata, I/O, ops)
    "edgekit.mobile.package_cli",  # package --ios (Swift/Vision snippet + README)
    "edgekit.run.mlperf.cli",    # mlperf-dataset (MLPerf Tiny harness: dataset folders)
    "edgekit.lab.cli",           # lab (models x boards matrix)
    "edgekit.schema_cli",        # schema (JSON Schemas of the JSON files edgekit writes)
    "edgekit.firmware.ops_cli",  # ops (the edgekit runtime's operator table, from the kernel sources)
)


def _command_modules():
    import importlib

    return [importlib.import_module(name) for name in COMMAND_MODULES]


def _tolerance(args, default):
    from edgekit.parity.tolerance import Tolerance

    from dataclasses import replace

    from edgekit.parity.output_kind import parse_output_kinds

    given = {"min_cosine": args.min_cosine, "min_top1": args.min_top1, "min_sqnr_db": args.min_sqnr_db,
             "min_topk": getattr(args, "min_topk", None), "min_iou": getattr(args, "min_iou", None)}
    kinds = parse_output_kinds(getattr(args, "output_kind", None))
    tolerance = default if all(v is None for v in given.values()) else Tolerance(**given)
    return replace(tolerance, output_kinds=kinds) if kinds else tolerance


def cmd_quantize(args) -> int:
    from edgekit.calibration.ranges import RangeOptions
    from edgekit.parity.tolerance import QUANTIZE_DEFAULT
    from edgekit.calibration.dataset import parse_batch_axes
    from edgekit.quantize import QuantizeOptions, quantize
    from edgekit.scale.cli import ray_settings

    options = QuantizeOptions(
        method=args.method, range_options=RangeOptions(percentile=args.percentile), format=args.format,
        calib_size=args.calib_size, seed=args.seed, input_shape=args.input_shape, preprocess=args.preprocess,
        eval_data=args.eval_data, tolerance=_tolerance(args, QUANTIZE_DEFAULT),
        weights=args.weights, activations=args.activations, engine=args.engine, deployment_target=args.deployment_target,
        compute_units=args.compute_units, debug=args.debug, fallback=args.fallback, fallback_to=args.fallback_to,
        keep_float=tuple(args.keep_float), batch_axes=parse_batch_axes(args.batch_axis),
        scale=ray_settings(args), scale_chunk=args.chunk,
        scale_column=args.column,
        io=args.io, labels=args.labels, model_info=_model_info(args),
    )
    if args.calib_size is not None and args.calib_size <= 0:
        raise UserError("--calib-size must be positive")
    with _progress_bars(sys.stderr.isatty()) as progress:
        result = quantize(args.model, args.calib, args.outdir, options, progress=progress)
    _print_parity(result.parity)
    from edgekit.console import say

    say(f"wrote {result.outdir}/{result.main_file}, parity.json, report.md, manifest.json")
    return 0 if result.parity.passed else 1


def cmd_parity(args) -> int:
    from edgekit.artifact import Artifact, Manifest
    from edgekit.atomic import atomic_output_dir
    from edgekit.calibration import dataset as data
    from edgekit.parity.compare import compare
    from edgekit.parity.runners import open_runner
    from edgekit.parity.tolerance import Tolerance
    from edgekit.preprocessing.spec import PreprocessSpec
    from edgekit.report import fmt, parity_section

    tolerance = _tolerance(args, Tolerance())
    if args.per_layer and not args.outdir:
        raise UserError("--per-layer writes layers.json/md/png and needs an output folder", fix="add -o OUTDIR")
    if args.per_layer:
        from edgekit.parity.layers import check_per_layer_models

        check_per_layer_models(args.reference, args.candidate)  # refuse before the parity run
    from edgekit.scale.cli import parity_on_ray, ray_settings
    from edgekit.scale.report import execution_lines

    scale = ray_settings(args)
    if scale is not None and args.batch_axis:
        raise UserError("--batch-axis applies to in-process data only: Ray shards are read batch-first",
                        fix="drop --ray, or store the data with each input's batch axis first")
    if scale is not None:
        with _progress_bars(sys.stderr.isatty()) as progress:
            report, described = parity_on_ray(args, tolerance, scale, progress)
    else:
        reference, candidate = open_runner(args.reference), open_runner(args.candidate)
        inputs = data.with_batch_axes(reference.input_specs(), data.parse_batch_axes(args.batch_axis))
        spec = PreprocessSpec.load(args.preprocess) if args.preprocess else None
        dataset = data.whole(data.open_source(args.data, [i.name for i in inputs], spec), limit=args.limit, seed=args.seed)
        samples = dataset.samples(inputs)
        with _progress_bars(sys.stderr.isatty()) as progress:
            report = compare(reference, candidate, samples, tolerance=tolerance, labels=dataset.labels, progress=progress("parity", len(samples)))
        described = dataset.describe()
        report = report.with_data(described)
    layers = None
    if args.per_layer:
        from edgekit.parity.layers import per_layer_report

        with _progress_bars(sys.stderr.isatty()) as progress:
            layers = per_layer_report(args.reference, args.candidate, samples, progress=progress)
    if args.outdir:
        with atomic_output_dir(args.outdir) as stage:
            (stage / "parity.json").write_text(report.dumps())
            manifest = Manifest(command="parity", extra={"data": described})
            manifest.add(Artifact.from_file(stage / "parity.json", format="parity-report", stage="parity", params={"thresholds": tolerance.to_json()}))
            layer_files = layers.write(stage) if layers is not None else []
            for name in layer_files:
                manifest.add(Artifact.from_file(stage / name, format=Path(name).suffix.lstrip("."), stage="per-layer"))
            lines = ["# edgekit parity", "", *parity_section(report), *execution_lines(report.data)]
            if layers is not None:
                lines += ["", "## Per layer", "", "Every intermediate tensor compared: " + ", ".join(f"`{n}`" for n in layer_files),
                          "", "Layers adding the most noise (lowest local SQNR):", ""]
                lines += [f"- #{r['index']} {r['op']} `{r['tensor']}`: local SQNR {fmt(r.get('local_sqnr_db'))} dB, "
                          f"output SQNR {fmt(r.get('sqnr_db'))} dB" for r in layers.ranked(5)]
            (stage / "report.md").write_text("\n".join(lines) + "\n")
            from edgekit.report_html.page import write_page
            from edgekit.report_html.parity import parity_page

            write_page(stage / "report.html", parity_page(report))
            manifest.write(stage / "manifest.json")
    _print_parity(report)
    if args.outdir:
        from edgekit.console import say

        say(f"wrote {args.outdir}/parity.json, report.md, report.html, manifest.json" + (", layers.*" if layers is not None else "")
            + " (data, thresholds and runtimes of every figure)")
    return 0 if report.passed else 1


def _print_parity(report) -> None:
    from edgekit.console import say

    for o in report.outputs:
        values = o.metrics()
        parts = [f"{k}={values[k]:.4f}" for k in ("top1_agreement", "topk_agreement", "mask_iou", "cosine", "sqnr_db",
                                                  "max_abs", "bit_exact_fraction") if k in values]
        say(f"{o.name}{f' ({o.kind})' if o.kind else ''}: {' '.join(parts)}")
    if report.accuracy:
        a = report.accuracy
        say(f"accuracy: reference {a.reference_top1:.4f}, candidate {a.candidate_top1:.4f} on {a.labels} labelled samples")
    run = (report.data or {}).get("execution") if isinstance(report.data, dict) else None
    if run:
        corrupt = report.data.get("corrupt", {}).get("count", 0)
        say(f"ran on {run['engine']} with {run['workers']} worker(s): {run['samples_per_s']} samples/s, "
              f"{run['wall_time_s']:.1f} s" + (f"; {corrupt} corrupt sample(s) skipped (see parity.json)" if corrupt else ""))
    if report.passed:
        say(f"parity PASSED on {report.samples} samples")
    else:
        say(f"parity FAILED on {report.samples} samples:", file=sys.stderr)
        for failure in report.failures:
            say(f"  - {failure}", file=sys.stderr)


COMMANDS: Dict[str, Callable] = {"quantize": cmd_quantize, "parity": cmd_parity}


def _check_outdir(args) -> None:
    """Every command with -o: refuse an output location that cannot be (or must not be replaced by) a folder,
    before any work."""
    from edgekit.atomic import check_output_dir

    outdir = getattr(args, "outdir", None)
    if outdir is None:
        return
    inputs = [Path(v) for k, v in vars(args).items()
              if k != "outdir" and (isinstance(v, Path) or (k == "model" and isinstance(v, str))) and Path(v).exists()]
    check_output_dir(Path(outdir), inputs=inputs)


def _locked_outdir(args, argv: Optional[Sequence[str]]):
    """The output folder's lock for the whole command (edgekit.outlock): a second run on the same -o fails at once."""
    import contextlib

    from edgekit.outlock import output_lock

    outdir = getattr(args, "outdir", None)
    if outdir is None:
        return contextlib.nullcontext()
    words = list(argv) if argv is not None else sys.argv[1:]
    return output_lock(Path(outdir), command=" ".join(["edgekit", *map(str, words)]))


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of the record (not the stream of the first call)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _print_traceback(exc: BaseException) -> None:
    """The traceback with every cause, including the ones a `raise ... from None` kept out of the one-line message."""
    seen, link = set(), exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__suppress_context__ = False
        link = link.__cause__ or link.__context__
    traceback.print_exception(exc, file=sys.stderr)


def _raise_disk_error(exc: Exception, args) -> None:
    """Raise a DiskSpaceError when ``exc`` is (or was caused by) ENOSPC, EDQUOT, EFBIG or EROFS; else return."""
    from edgekit.diskspace import DiskSpaceError, disk_error_in, from_oserror

    if isinstance(exc, DiskSpaceError):
        return
    disk = disk_error_in(exc)
    if disk is not None:
        outdir = getattr(args, "outdir", None)
        raise from_oserror(disk, target=Path(outdir) if outdir else None) from exc


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s",
                        handlers=[_StderrHandler()])
    if not args.verbose:
        import os

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from edgekit.interrupts import interrupt_signal, signal_name, signals_as_interrupt

    try:
        with signals_as_interrupt():
            try:
                _check_outdir(args)
                with _locked_outdir(args, argv):
                    return COMMANDS[args.command](args)
            except Exception as exc:  # a full disk / quota / ulimit -f / read-only mount anywhere: one message
                _raise_disk_error(exc, args)
                raise
    except EdgekitError as exc:
        internal = isinstance(exc, InternalError)
        if args.verbose or internal:
            _print_traceback(exc)
        from edgekit.tool_messages import strip_ansi

        print(f"edgekit {args.command}: error: {strip_ansi(str(exc))}", file=sys.stderr)
        if internal:
            print("this is a bug in edgekit: please report it with the traceback above", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (edgekit.interrupts): everything was cleaned up on the way here
        signum = interrupt_signal(exc)
        how = "interrupted" if signum == signal.SIGINT else f"stopped by {signal_name(signum)}"
        print(f"edgekit {args.command}: {how}; no output written", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
