"""Preprocessor: turns an image file into the model-input tensor; the registry of implementations.

Every implementation of a spec subclasses :class:`SpecPreprocessor` and registers itself in
``IMPLEMENTATIONS`` by name (pillow, opencv, torchvision, tf, c). Other preprocessors (a user's
Python callable, a folder of tensors an app or device wrote) subclass :class:`Preprocessor`.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Type, Union

import numpy as np
from pydantic import ConfigDict
from typing_extensions import TypedDict

from edgekit.errors import CalibrationDataError, EdgekitError, UserError
from edgekit.preprocessing.spec import PreprocessSpec, SpecDict
from edgekit.registry import Registry

log = logging.getLogger(__name__)


class ImageReadError(CalibrationDataError):
    """One image could not be turned into a tensor; names the file."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason.strip().splitlines()[0][:300] if reason.strip() else "unknown error"
        super().__init__(f"cannot preprocess {self.path}: {self.reason}")


Result = Union[np.ndarray, ImageReadError]


class PipelineDescription(TypedDict, total=False):
    """One preprocessing pipeline (``Preprocessor.describe``): its kind and label, plus what each kind adds."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    kind: str
    label: str
    notes: List[str]
    implementation: str                            # spec implementations
    library: str
    options: Dict[str, str]                        # IMPL[key=value,...] options, as given
    spec: SpecDict
    tools: Dict[str, str]
    callable: str                                  # a Python callable
    folder: str                                    # a folder of tensors
    tensors: int


class Preprocessor:
    """Image file -> model-input tensor (no batch dimension)."""

    kind = "abstract"
    spec: PreprocessSpec | None = None
    # exceptions that mean "this file cannot be read" (named per file, the rest go on)
    read_errors: Tuple[Type[BaseException], ...] = (OSError, ValueError, SyntaxError, EOFError, UserError)

    @property
    def label(self) -> str:
        return self.kind

    def _run(self, path: Path) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, path: Path) -> np.ndarray:
        path = Path(path)
        try:
            return np.asarray(self._run(path))
        except ImageReadError:
            raise
        except EdgekitError as exc:
            raise ImageReadError(path, exc.message) from exc
        except self.read_errors as exc:
            raise ImageReadError(path, f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            from PIL import Image

            if isinstance(exc, Image.DecompressionBombError):  # not an OSError: Pillow refuses huge images
                raise ImageReadError(path, f"the image is too large to decode safely ({exc}); resize it first") from exc
            raise

    def run_many(self, paths: Sequence[Path]) -> List[Result]:
        """Tensors for many files; a file that fails gives its ImageReadError in its place."""
        out: List[Result] = []
        for path in paths:
            try:
                out.append(self(path))
            except ImageReadError as exc:
                log.info("%s", exc)
                out.append(exc)
        return out

    def notes(self) -> List[str]:
        """Known, by-design deviations of this implementation from the spec (shown in reports)."""
        return []

    def with_spec(self, spec: PreprocessSpec) -> "Preprocessor | None":
        """The same implementation on another spec (None when not spec-driven)."""
        return None

    def describe(self) -> PipelineDescription:  # each implementation adds its own facts (library versions, spec)
        return {"kind": self.kind, "label": self.label, "notes": self.notes()}


class SpecPreprocessor(Preprocessor):
    """An implementation of a PreprocessSpec with one library."""

    kind = "spec"
    library = "?"
    tools: Tuple[str, ...] = ()

    def __init__(self, spec: PreprocessSpec, **options: Any) -> None:
        if spec.quantized and spec.quant_scale is None:
            raise UserError(
                f"spec {spec.name!r} takes its input quantization from the model, but no model was given",
                fix="pass --model MODEL (its input scale/zero-point are used) or write them into the spec",
            )
        self.spec = spec
        self.options = dict(options)
        self.check_supported(spec)

    @property
    def label(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.kind}[{extra}]" if extra else self.kind

    def check_supported(self, spec: PreprocessSpec) -> None:
        """Raise UserError when this library cannot express the spec at all."""

    def with_spec(self, spec: PreprocessSpec) -> "SpecPreprocessor":
        return type(self)(spec, **self.options)

    def describe(self) -> PipelineDescription:
        from edgekit.provenance import tool_versions

        return {
            **super().describe(),
            "implementation": self.kind,
            "library": self.library,
            "options": self.options,
            "spec": self.spec.to_dict(),
            "tools": tool_versions(self.tools),
        }


IMPLEMENTATIONS: Registry[Type[SpecPreprocessor]] = Registry("preprocessing implementation")


def load_implementations() -> Registry[Type[SpecPreprocessor]]:
    """Import the implementation modules (each registers itself); heavy libraries load lazily."""
    from edgekit.preprocessing import c_impl, opencv_impl, pillow_impl, tf_impl, torchvision_impl  # noqa: F401

    return IMPLEMENTATIONS


def implementation(name: str, spec: PreprocessSpec, **options: Any) -> SpecPreprocessor:
    return load_implementations().get(name)(spec, **options)
