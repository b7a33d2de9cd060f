"""What a reference or candidate can be, and the images to run them on.

A pipeline is given as one string:

    spec.json | spec.yaml          the Pillow reference applied to that spec
    IMPL:spec.json                 implementation IMPL (pillow, opencv, torchvision, tf, c) on the spec;
    IMPL[key=value,...]:spec.json  with options, e.g. opencv[nearest=legacy], tf[jpeg_idct=fast]
    package.module:function        a Python callable: function(image_path: str) -> model-input array
                                   (--python-path DIR to find the module)
    DIR                            a folder of tensors an app or device wrote: <image stem>.npy per image
"""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import (ImageReadError, PipelineDescription, Preprocessor, SpecPreprocessor, implementation,
                                       load_implementations)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm")
SPEC_SUFFIXES = (".json", ".yaml", ".yml")
FORMS = ("a spec file (.json/.yaml)", "IMPL:spec.json with IMPL one of {impls}", "package.module:function",
         "a folder of .npy tensors")
_IMPL_RE = re.compile(r"^(?P<name>[a-z][a-z0-9-]*)(?:\[(?P<options>[^\]]*)\])?:(?P<spec>.+)$")
_CALLABLE_RE = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_]\w*)$")


class PythonCallablePreprocessor(Preprocessor):
    """A user's function(image_path: str) -> array, e.g. the app's real serving code."""

    kind = "python"
    read_errors = (Exception,)  # whatever user code raises for a file is reported for that file

    def __init__(self, target: str, function: Callable[[str], object]) -> None:
        self.target = target
        self.function = function

    @property
    def label(self) -> str:
        return f"python:{self.target}"

    def _run(self, path: Path) -> np.ndarray:
        return np.asarray(self.function(str(path)))

    def describe(self) -> PipelineDescription:
        return {**super().describe(), "callable": self.target}


class TensorFolderPreprocessor(Preprocessor):
    """Tensors an app or device produced: <folder>/<image stem>.npy for each image."""

    kind = "tensors"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.files = {p.stem: p for p in self.folder.glob("*.npy")}
        if not self.files:
            raise UserError(f"tensor folder {self.folder} holds no .npy files",
                            fix="write one <image stem>.npy per image (np.save), or pass a spec or callable")

    @property
    def label(self) -> str:
        return f"tensors:{self.folder}"

    def _run(self, path: Path) -> np.ndarray:
        file = self.files.get(Path(path).stem)
        if file is None:
            raise UserError(f"no tensor {Path(path).stem}.npy in {self.folder}")
        return np.load(file, allow_pickle=False)

    def describe(self) -> PipelineDescription:
        return {**super().describe(), "folder": str(self.folder), "tensors": len(self.files)}


def _parse_options(text: Optional[str]) -> dict:
    options = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"implementation option {item!r} must be key=value")
        options[key.strip()] = value.strip()
    return options


def _load_callable(module: str, attr: str, python_path: Sequence[Path]) -> Callable[[str], object]:
    for folder in reversed([str(Path(p).resolve()) for p in python_path]):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        function = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        raise UserError(f"cannot import module {module!r} for {module}:{attr}: {exc}",
                        fix="pass --python-path DIR (the folder that holds the module)") from exc
    except AttributeError:
        raise UserError(f"module {module!r} has no function {attr!r}") from None
    except Exception as exc:  # the user's module failed at import
        raise UserError(f"importing {module!r} failed: {type(exc).__name__}: {exc}") from exc
    if not callable(function):
        raise UserError(f"{module}:{attr} is not callable")
    return function


def resolve_spec(spec: PreprocessSpec, input_quantization: Optional[Tuple[float, int]]) -> PreprocessSpec:
    """Fill in quantization: model from the model input's (scale, zero_point)."""
    if spec.quant_from_model and input_quantization is not None:
        return spec.with_quantization(*input_quantization)
    return spec


def open_pipeline(
    text: str, *, python_path: Sequence[Path] = (), input_quantization: Optional[Tuple[float, int]] = None,
) -> Preprocessor:
    """A Preprocessor for a reference/candidate string (see the module docstring)."""
    names = load_implementations().names()
    match = _IMPL_RE.match(text)
    if match and match.group("name") in names:
        spec_path = Path(match.group("spec"))
        spec = resolve_spec(PreprocessSpec.load(spec_path), input_quantization)
        return implementation(match.group("name"), spec, **_parse_options(match.group("options")))
    path = Path(text)
    if path.is_dir():
        return TensorFolderPreprocessor(path)
    if path.is_file() and path.suffix.lower() in SPEC_SUFFIXES:
        return implementation("pillow", resolve_spec(PreprocessSpec.load(path), input_quantization))
    if match and Path(match.group("spec")).suffix.lower() in SPEC_SUFFIXES:
        raise UserError(f"unknown implementation {match.group('name')!r} in {text!r}; implementations: {', '.join(names)}")
    if path.suffix.lower() in SPEC_SUFFIXES:
        raise UserError(f"spec file {path} does not exist")
    match = _CALLABLE_RE.match(text)
    if match:  # implementation names were taken above
        return PythonCallablePreprocessor(text, _load_callable(match.group("module"), match.group("attr"), python_path))
    raise UserError(
        f"{text!r} is not a pipeline: give " + "; ".join(FORMS).format(impls=", ".join(names)),
        fix="e.g. --reference preprocess.json --candidate opencv:preprocess.json",
    )


def list_images(path: Path) -> List[Path]:
    """Image files of a folder (sorted by name), or the one image given."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"images {path} do not exist")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise UserError(f"no images in {path} (looked for {', '.join(IMAGE_SUFFIXES)})")
    return files


def spec_of(pipeline: Preprocessor) -> Optional[PreprocessSpec]:
    return pipeline.spec if isinstance(pipeline, SpecPreprocessor) else None


__all__ = ["ImageReadError", "list_images", "open_pipeline", "spec_of", "resolve_spec",
           "PythonCallablePreprocessor", "TensorFolderPreprocessor"]
