"""`edgekit quantize` options for apps: --io and the TFLite/Core ML metadata fields."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from edgekit.mobile.io_types import IO_TYPES
from edgekit.mobile.tflite_metadata import ModelInfo


def add_quantize_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("mobile packaging (model metadata an app reads)")
    g.add_argument("--io", default="int8", choices=list(IO_TYPES),
                   help="tflite input/output type: int8 (default; firmware), uint8 (camera bitmaps: raw 0..255 pixels "
                        "for image data), float32 (apps with float pipelines); the inside stays int8")
    g.add_argument("--labels", type=Path, help="class names, one per line, line i = output i (default: labels.txt beside "
                                               "the data, else the data's integer class ids)")
    g.add_argument("--model-name", help="model name in the metadata")
    g.add_argument("--description", dest="model_description", help="model description in the metadata")
    g.add_argument("--version", dest="model_version", help="model version in the metadata")
    g.add_argument("--author", help="author in the metadata")
    g.add_argument("--license", dest="model_license", help="license in the metadata (e.g. Apache-2.0)")


def model_info_from_args(args) -> Optional[ModelInfo]:
    info = ModelInfo(name=args.model_name, description=args.model_description, version=args.model_version,
                     author=args.author, license=args.model_license)
    return info if info.given() else None
