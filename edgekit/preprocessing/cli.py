"""CLI commands ``preprocess-parity`` and ``calib-check`` (registered by edgekit.cli)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, List

from edgekit.errors import UserError
from edgekit.scale.cli import add_ray_arguments, ray_settings


def register(subparsers) -> Dict[str, Callable]:
    p = subparsers.add_parser(
        "preprocess-parity",
        help="compare two preprocessing pipelines on images, diagnose the cause, gate on thresholds",
        description="Run a reference and a candidate preprocessing pipeline over the same images and compare the "
        "model-input tensors. A pipeline is a spec file (Pillow reference), IMPL:spec (pillow, opencv, torchvision, tf, c), "
        "a Python callable package.module:function(image_path) -> array, or a folder of <image stem>.npy tensors.",
    )
    p.add_argument("--reference", required=True, help="reference pipeline (usually the training spec)")
    p.add_argument("--candidate", required=True, help="candidate pipeline (app code, device tensors, another library)")
    p.add_argument("--images", required=True, type=Path, help="folder of images (or one image)")
    p.add_argument("--model", type=Path, help="model (.tflite, .onnx, .pt2, ...): prediction flip rate and output drift")
    p.add_argument("--python-path", type=Path, action="append", default=[], help="folder to import callables from (repeatable)")
    p.add_argument("--max-flip-rate", type=float, help="max share of changed top-1 predictions (default 0.01)")
    p.add_argument("--max-mean-abs-lsb", type=float, help="max mean |difference| in input LSB (default 0.5)")
    p.add_argument("--max-abs-lsb", type=float, help="max |difference| in input LSB on any element (default: not checked)")
    p.add_argument("--min-psnr-db", type=float, help="min PSNR of the candidate tensor in dB (default 40)")
    p.add_argument("--max-mean-abs", type=float, help="max mean |difference| in tensor units (default: not checked)")
    p.add_argument("--allow-unreadable", type=int, default=0, metavar="N",
                   help="pass even though up to N files could not be read by either pipeline (default 0)")
    p.add_argument("--no-diagnose", action="store_true", help="skip the search for the cause of a mismatch")
    p.add_argument("-o", "--outdir", type=Path, help="write parity.json, report.md, worst_diff.png, manifest.json here")
    add_ray_arguments(p)

    c = subparsers.add_parser(
        "calib-check",
        help="is the calibration set representative of live data? ranges, clipping, input distance, verdict",
    )
    c.add_argument("--model", required=True, help="float model (.tflite, .onnx, .pt2, Keras, SavedModel, ...)")
    c.add_argument("--calib", required=True, type=Path, help="calibration data: image folder (with preprocess.json), .npy/.npz, or .npy folder")
    c.add_argument("--live", required=True, type=Path, help="a sample of deployment inputs, same forms as --calib")
    c.add_argument("--preprocess", type=Path, help="preprocessing spec for image folders (default: preprocess.json in each folder)")
    c.add_argument("--method", default="minmax", help="range method the quantizer would use (default minmax)")
    c.add_argument("--percentile", type=float, default=99.99, help="percentile for --method percentile")
    c.add_argument("--limit", type=int, help="use at most N live samples (seeded subset)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--max-clipped", type=float, help="max share of live activations outside the calibrated range (default 0.01)")
    c.add_argument("--max-input-ks", type=float, help="max KS distance of input values per channel (default 0.25)")
    c.add_argument("--effect", action="store_true", help="also quantize with the calibration ranges and with live ranges and "
                   "compare both INT8 models with the float model on the live data")
    c.add_argument("-o", "--outdir", type=Path, help="write calib_check.json, report.md, ranges.png, manifest.json here")
    add_ray_arguments(c)
    return {"preprocess-parity": cmd_preprocess_parity, "calib-check": cmd_calib_check}


def _thresholds(args):
    from edgekit.preprocessing.parity import Thresholds

    defaults = Thresholds()
    values = {}
    for key in ("max_flip_rate", "max_mean_abs_lsb", "max_abs_lsb", "min_psnr_db", "max_mean_abs"):
        given = getattr(args, key)
        if given is not None and given < 0:
            raise UserError(f"--{key.replace('_', '-')} must not be negative")
        values[key] = given if given is not None else getattr(defaults, key)
    if args.allow_unreadable < 0:
        raise UserError(f"--allow-unreadable {args.allow_unreadable} must be 0 or more (a number of files)")
    return Thresholds(**values, allow_unreadable=args.allow_unreadable)


def cmd_preprocess_parity(args) -> int:
    from edgekit.console import say_all
    from edgekit.preprocessing.parity import input_quantization, open_model, read_labels, run_parity
    from edgekit.preprocessing.report import write_reports
    from edgekit.preprocessing.sources import list_images, open_pipeline
    from edgekit.progress import progress_bars

    thresholds = _thresholds(args)
    if args.column is not None:
        raise UserError("--column applies to Parquet data; preprocess-parity reads an image folder", fix="drop --column")
    settings = ray_settings(args)
    if settings is not None and settings.address is not None:
        from edgekit.scale.ray_parity import check_reachable

        check_reachable(settings.address)  # before any work: an unreachable cluster fails in seconds
    images = list_images(args.images)
    with progress_bars(sys.stderr.isatty()) as progress:
        model = None
        if args.model:
            loaded = progress("loading model", 1)  # a Keras / PyTorch model is exported first
            model = open_model(args.model)
            loaded(1)
        if settings is not None:
            from edgekit.scale.ray_preprocess import preprocess_parity_on_ray

            report, ref, cand, _ = preprocess_parity_on_ray(
                args.reference, args.candidate, images, python_path=args.python_path, model_path=args.model, runner=model,
                thresholds=thresholds, labels=read_labels(args.images), diagnose=not args.no_diagnose, settings=settings,
                chunk=args.chunk, progress=progress("preprocessing (ray)", len(images)))
        else:
            quant = input_quantization(model) if model is not None else None
            reference = open_pipeline(args.reference, python_path=args.python_path, input_quantization=quant)
            candidate = open_pipeline(args.candidate, python_path=args.python_path, input_quantization=quant)
            report, ref, cand = run_parity(reference, candidate, images, thresholds=thresholds, model=model,
                                           diagnose=not args.no_diagnose, labels=read_labels(args.images),
                                           progress=progress("preprocessing", 2 * len(images)))
    if args.outdir:
        write_reports(args.outdir, report, ref, cand, images, args.images)
    say_all(_image_errors(report), file=sys.stderr)
    say_all(parity_summary_lines(report))
    if not report.passed:
        say_all([f"preprocessing parity FAILED on {report.aggregate.get('compared', 0)} images:"]
                + [f"  - {failure}" for failure in report.failures], file=sys.stderr)
    if args.outdir:
        say_all([f"wrote {args.outdir}/{_written(args.outdir)} (every image, the pipelines' settings and the "
                 "diagnosis in full: parity.json, report.md)"])
    return 0 if report.passed else 1


FILES_SHOWN = 20  # unreadable / skipped files named on the console (all of them in parity.json / calib_check.json)


def _written(outdir: Path) -> str:
    return ", ".join(sorted(p.name for p in Path(outdir).iterdir()))


def _image_errors(report) -> List[str]:
    """One line per file a pipeline could not process (the same reason from both pipelines said once)."""
    lines = []
    for d in (d for d in report.images if d.errors):
        reasons = {reason: [who for who, r in d.errors.items() if r == reason] for reason in d.errors.values()}
        for reason, who in reasons.items():
            reason = reason if len(reason) <= 90 else reason[:87] + "..."
            lines.append(f"{d.name}: {' and '.join(who)} could not process it: {reason}")
    if len(lines) > FILES_SHOWN:
        lines = lines[:FILES_SHOWN] + [f"... and {len(lines) - FILES_SHOWN} more (all in parity.json)"]
    return lines


def parity_summary_lines(report) -> List[str]:
    """Key figures of a preprocessing-parity run, one short line each."""
    import json

    a = report.aggregate
    lines = []
    if a.get("compared"):
        parts = [f"{k}={a[k]:.4g}" for k in ("max_abs", "mean_abs", "max_abs_lsb", "mean_abs_lsb", "psnr_db") if k in a]
        lines.append(f"{a['compared']} of {a['images']} images compared: " + " ".join(parts))
    if report.model and "flip_rate" in report.model:
        m = report.model
        lines.append(f"model: flip rate {m['flip_rate']:.4f} ({m['flipped']} of {m['images']}), "
                     f"top-1 agreement {m['top1_agreement']:.4f}")
        if m.get("accuracy"):
            acc = m["accuracy"]
            lines.append(f"accuracy on {acc['labels']} labelled images: reference {acc['reference_top1']:.4f}, "
                         f"candidate {acc['candidate_top1']:.4f}")
    if report.diagnosis:
        d = report.diagnosis
        lines.append("diagnosis: " + (d["summary"] if d.get("available") else f"not available ({d.get('reason')})"))
        if d.get("fix"):
            lines.append(f"fix ({d['fix']['implementation']} spec): " + json.dumps(d["fix"]["spec"]))  # wrapped, whole
    e = report.execution
    if e:
        lines.append(f"ran on {e['engine']}, {e['workers']} worker(s): {e['samples']:,} images in {e['wall_time_s']:.1f} s "
                     f"({e['samples_per_s']} images/s)")
    if report.passed:
        lines.append(f"preprocessing parity PASSED on {a.get('compared', 0)} images")
    return lines


def _short(name: str, width: int = 60) -> str:
    """The tail of a long tensor name (exporters prefix module paths)."""
    return name if len(name) <= width else "..." + name[-(width - 3):]


def cmd_calib_check(args) -> int:
    from edgekit.calibration.ranges import RangeOptions
    from edgekit.preprocessing.spec import PreprocessSpec
    from edgekit.preprocessing.calib_check import CalibThresholds, calib_check
    from edgekit.preprocessing.calib_report import write_reports
    from edgekit.progress import progress_bars

    defaults = CalibThresholds()
    thresholds = CalibThresholds(
        max_clipped=args.max_clipped if args.max_clipped is not None else defaults.max_clipped,
        warn_clipped=min(defaults.warn_clipped, args.max_clipped) if args.max_clipped is not None else defaults.warn_clipped,
        max_input_ks=args.max_input_ks if args.max_input_ks is not None else defaults.max_input_ks,
    )
    if args.limit is not None and args.limit <= 0:
        raise UserError("--limit must be positive")
    settings = ray_settings(args)
    spec = PreprocessSpec.load(args.preprocess) if args.preprocess else None
    with progress_bars(sys.stderr.isatty()) as progress:
        report = calib_check(args.model, args.calib, args.live, spec=spec, method=args.method,
                             range_options=RangeOptions(percentile=args.percentile), limit=args.limit, seed=args.seed,
                             thresholds=thresholds, effect=args.effect, progress=progress, scale=settings,
                             chunk=args.chunk, column=args.column)
    if args.outdir:
        write_reports(args.outdir, report)
    from edgekit.console import say_all

    skipped = [f"{where}: skipped {e}" for where, errors in report.errors.items() for e in errors]
    if len(skipped) > FILES_SHOWN:
        skipped = skipped[:FILES_SHOWN] + [f"... and {len(skipped) - FILES_SHOWN} more (all in calib_check.json)"]
    say_all(skipped, file=sys.stderr)
    say_all(calib_summary_lines(report))
    if args.outdir:
        say_all([f"wrote {args.outdir}/{_written(args.outdir)} (every tensor's ranges and clipping, and the "
                 "thresholds: calib_check.json, report.md)"])
    return 0 if report.passed else 1


def calib_summary_lines(report) -> List[str]:
    """Key figures of a calib-check run, one short line each."""
    lines = [f"calib-check: {report.verdict.upper()}"]
    lines += [f"  - {reason}" for reason in report.reasons]
    lines.append("worst tensors: " + ", ".join(f"{_short(t['name'], 40)} ({t['clipped']:.2%} clipped)"
                                               for t in report.worst(3)))
    e = report.execution
    if e and e["engine"] != "in-process":
        lines.append(f"ran on {e['engine']}, {e['workers']} worker(s): {e['samples']:,} live samples in "
                     f"{e['wall_time_s']:.1f} s ({e['samples_per_s']} samples/s)")
    if report.effect and report.effect.get("available"):
        for key in ("with_calibration_set", "with_live_data"):
            e = report.effect[key]
            o = e["outputs"][0]
            acc = f", accuracy {e['accuracy']['candidate_top1']:.4f}" if e.get("accuracy") else ""
            lines.append(f"int8 {key.replace('_', ' ')}: top-1 agreement {o.get('top1_agreement', float('nan')):.4f}, "
                         f"SQNR {o['sqnr_db']:.2f} dB{acc}")
    return lines
