"""Guard against coremltools 9.0's ``common::int_op_canonicalization`` requantization fold.

For a W8A8 program that pass rewrites dequantize(s1) -> reshape -> quantize(s2) into an integer reshape of the
s1-quantized tensor without checking that s1 == s2 (nor the zero points and int dtypes). What follows still
dequantizes with s2, so every value downstream is scaled by s1/s2: the model is silently wrong.

- ``safe_pass_pipeline()``: ``ct.PassPipeline.DEFAULT`` without that pass (pass it to ``ct.convert``).
- ``find_requantization_folds(program)`` (descriptions) / ``requantization_folds(program)`` (records): the
  damage in a converted program, i.e. a ``quantize`` whose integer output reaches a ``dequantize`` through
  reshapes only, with different quantization parameters. A correct program never has such a chain
  (requantization needs a float step), so each hit is a fold.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np

from edgekit.errors import InternalError, ToolMissingError

log = logging.getLogger(__name__)

FOLDING_PASS = "common::int_op_canonicalization"
_INTEGER_MOVES = {"reshape"}  # ops the pass may place between the quantize and the dequantize


def safe_pass_pipeline(base=None):
    """``base`` (default ``ct.PassPipeline.DEFAULT``) minus FOLDING_PASS, for ``ct.convert(..., pass_pipeline=)``.

    Raises InternalError if coremltools no longer has that pass, so a renamed pass cannot slip back in unnoticed.
    """
    try:
        import coremltools as ct
    except ImportError:
        raise ToolMissingError("coremltools", "pip install coremltools==9.0 (or run `make install`)") from None
    pipeline = base if base is not None else ct.PassPipeline.DEFAULT
    if FOLDING_PASS not in list(pipeline.passes):
        raise InternalError(
            f"coremltools {ct.__version__}'s pass pipeline has no pass {FOLDING_PASS!r} any more; check whether the "
            "dequantize->reshape->quantize fold is gone or renamed (tests/coreml/test_fold_guard.py) and update "
            "edgekit/coreml/fold_guard.py"
        )
    pipeline.remove_passes([FOLDING_PASS])
    log.info("Core ML pass pipeline: %s minus %s (it folds requantizations with different scales)",
             "default" if base is None else "the given pipeline", FOLDING_PASS)
    return pipeline


@dataclass
class RequantizationFold:
    """A quantize(s1) -> reshape... -> dequantize(s2) chain with s1 != s2 (or different zero points/dtypes)."""

    quantize_output: str
    dequantize_output: str
    through: List[str] = field(default_factory=list)
    quantize_scale: Optional[np.ndarray] = None
    dequantize_scale: Optional[np.ndarray] = None
    quantize_zero_point: Optional[np.ndarray] = None
    dequantize_zero_point: Optional[np.ndarray] = None

    def describe(self) -> str:
        path = " -> ".join([f"quantize '{self.quantize_output}'"] + [f"reshape '{n}'" for n in self.through]
                           + [f"dequantize '{self.dequantize_output}'"])
        return (f"{path}: quantized with scale {_short(self.quantize_scale)} zero point {_short(self.quantize_zero_point)}, "
                f"dequantized with scale {_short(self.dequantize_scale)} zero point {_short(self.dequantize_zero_point)}")


def _short(value) -> str:
    if value is None:
        return "none"
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    text = ", ".join(f"{v:.6g}" for v in array[:4])
    return f"[{text}{', ...' if array.size > 4 else ''}]" if array.size > 1 else text


def _same(a, b) -> bool:
    """Equal quantization parameters; a missing zero point equals 0, a scalar equals a vector of itself."""
    a = np.zeros(1) if a is None else np.asarray(a, np.float64).reshape(-1)
    b = np.zeros(1) if b is None else np.asarray(b, np.float64).reshape(-1)
    if a.size != b.size and 1 not in (a.size, b.size):
        return False
    return bool(np.all(a == b))  # broadcasting compares a scalar with every element of a vector


def find_requantization_folds(program) -> List[str]:
    """One description per folded requantization in ``program`` (a MILProgram or an .mlpackage path);
    an empty list for a correct program. ``requantization_folds`` gives the same as structured records."""
    return [fold.describe() for fold in requantization_folds(program)]


def requantization_folds(program) -> List[RequantizationFold]:
    """Every quantize -> reshape... -> dequantize chain of ``program`` whose quantization parameters differ."""
    if isinstance(program, (str, Path)):
        from edgekit.coreml.evaluator import MILProgram

        program = MILProgram.load(Path(program))
    params = program.quantization_parameters()
    producers = {name: op for op in params.values() for name in op["outputs"]}
    folds = []
    for op in params.values():
        if op["type"] != "dequantize":
            continue
        source, through = op["input"], []
        while source in producers and producers[source]["type"] in _INTEGER_MOVES:
            through.append(source)
            source = producers[source]["input"]
        if not through or source not in producers or producers[source]["type"] != "quantize":
            continue
        quantize = producers[source]
        same_dtype = quantize["output_dtype"] == op["input_dtype"]
        if same_dtype and _same(quantize["scale"], op["scale"]) and _same(quantize["zero_point"], op["zero_point"]):
            continue
        folds.append(RequantizationFold(source, op["outputs"][0], list(reversed(through)), quantize["scale"], op["scale"],
                                        quantize["zero_point"], op["zero_point"]))
    return folds
