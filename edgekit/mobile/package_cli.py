"""`edgekit package --ios MODEL.mlpackage -o OUT`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict

from edgekit.console import say
from edgekit.errors import UserError


def register(subparsers) -> Dict[str, Callable]:
    p = subparsers.add_parser("package", help="an app-ready bundle: --ios = .mlpackage + Swift (Vision) snippet + README")
    p.add_argument("model", type=Path, help=".mlpackage (from edgekit quantize --format coreml)")
    p.add_argument("--ios", action="store_true", help="iOS: Swift snippet for Vision (VNCoreMLRequest) and a README")
    p.add_argument("-o", "--outdir", type=Path, required=True, help="output folder")
    return {"package": cmd_package}


def cmd_package(args) -> int:
    if not args.ios:
        raise UserError("say which platform to package for", fix="add --ios (Android apps load the .tflite from "
                                                                 "`edgekit quantize` with its metadata as it is)")
    from edgekit.coreml.ios_package import package_ios

    done = package_ios(args.model, args.outdir)
    say(f"wrote {args.outdir}/{args.model.name}, {done.swift}, README.md")
    return 0
