"""`--ray`, `--ray-address ADDR`, `--workers N` for commands that run models over a dataset."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional, Tuple

from edgekit.errors import UserError
from edgekit.scale.ray_parity import RaySettings
from edgekit.scale.sources import DEFAULT_CHUNK


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("dataset scale (Ray Data; without these flags nothing changes)")
    group.add_argument("--ray", action="store_true", help="run on a local Ray started for this run")
    group.add_argument("--ray-address", metavar="ADDR", help="run on an existing Ray cluster: ray://HOST:10001, HOST:6379 or auto")
    group.add_argument("--workers", type=int, help="Ray actors, each holding one model pair (default: 1 local, 2 on a cluster)")
    group.add_argument("--chunk", type=int, default=DEFAULT_CHUNK,
                       help=f"samples per Ray task (default {DEFAULT_CHUNK}; Parquet: one row group per task)")
    group.add_argument("--column", help="Parquet: the column holding the input (image bytes or a tensor)")


def ray_settings(args: argparse.Namespace) -> Optional[RaySettings]:
    """The Ray settings the flags ask for, None when none is given; contradictions are refused."""
    use = getattr(args, "ray", False) or getattr(args, "ray_address", None)
    if not use:
        for flag, value in (("--workers", getattr(args, "workers", None)), ("--column", getattr(args, "column", None))):
            if value is not None:
                raise UserError(f"{flag} applies to Ray runs only", fix="add --ray (local) or --ray-address ADDR, or drop " + flag)
        return None
    if args.ray and args.ray_address:
        raise UserError("--ray starts a local Ray, --ray-address joins a cluster: give one", fix="drop one of them")
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be at least 1 (got {args.workers})")
    if args.chunk < 1:
        raise UserError(f"--chunk must be at least 1 (got {args.chunk})")
    workers = args.workers or (1 if args.ray else 2)
    if args.ray and workers > (os.cpu_count() or 1):
        raise UserError(f"--workers {workers} exceeds the {os.cpu_count()} CPUs of this machine for a local Ray",
                        fix=f"use --workers {os.cpu_count()} or fewer, or --ray-address for a cluster")
    return RaySettings(address=args.ray_address, workers=workers)


def parity_on_ray(args: argparse.Namespace, tolerance, settings: RaySettings, progress) -> Tuple[object, dict]:
    """`edgekit parity ... --ray`: (ParityReport, data description)."""
    from edgekit.parity.runners import open_runner
    from edgekit.preprocessing.spec import PreprocessSpec
    from edgekit.scale.ray_parity import check_reachable, ray_parity
    from edgekit.scale.sources import list_source

    if args.per_layer:
        raise UserError("--per-layer keeps every tensor of every sample and does not run on Ray",
                        fix="run --per-layer without --ray on a --limit subset")
    if settings.address is not None:
        check_reachable(settings.address)  # before any work: an unreachable cluster fails in seconds
    inputs = open_runner(args.reference).input_specs()
    spec = PreprocessSpec.load(args.preprocess) if args.preprocess else None
    source = list_source(Path(args.data), inputs, spec, chunk=args.chunk, column=args.column, limit=args.limit,
                         seed=args.seed)
    report = ray_parity(args.reference, args.candidate, source, settings=settings, tolerance=tolerance,
                        progress=progress("parity", source.samples))
    return report, report.data["dataset"]
