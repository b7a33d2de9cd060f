"""MATRIX.yaml -> Matrix: the models (an int8 .tflite, or a float model with calibration data to quantize once),
the boards (QEMU boards, labgrid places, serial ports) and the run settings. Every problem is reported at once.

    models:
      - {name: kws, model: kws_int8.tflite}                      # already int8: used as is
      - {name: digits, model: digits.pt2, calibration: calib/}   # quantized once (edgekit quantize)
    boards:
      - {qemu: mps2-an386, instances: 2}          # instances: how many emulators may run at once
      - {labgrid: rack-3, coordinator: lab:20408}
      - {serial: /dev/ttyACM0, profile: nucleo-l4r5zi}
    iterations: 5        # warm inferences per cell
    inputs: 4            # seeded random input samples per cell
    parallel: 2          # cells at once (across free boards)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, TypedDict

from pydantic import Field, PositiveFloat, PositiveInt

from edgekit.errors import UserError
from edgekit.userconfig import ConfigSection, Problems, load_yaml, validate

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
BOARD_KINDS = ("qemu", "labgrid", "serial")


@dataclass(frozen=True)
class ModelEntry:
    name: str
    model: Path
    calibration: Optional[Path] = None       # given: quantize once; absent: the model is already int8 .tflite


class BoardOptions(TypedDict, total=False):
    """A matrix board's optional keys, passed on to `edgekit run` (the labgrid coordinator, lock wait, profile)."""

    coordinator: str
    lock_timeout: float
    profile: str
    flash: bool


@dataclass(frozen=True)
class BoardEntry:
    name: str                                  # column name in the table
    kind: str                                  # qemu | labgrid | serial
    address: str                               # board profile / place / port
    instances: int = 1                         # cells this board may run at once
    options: BoardOptions = field(default_factory=lambda: BoardOptions())   # as given in the YAML

    @property
    def device(self) -> str:
        return f"{self.kind}:{self.address}"


@dataclass(frozen=True)
class Matrix:
    models: List[ModelEntry]
    boards: List[BoardEntry]
    iterations: int = 5
    inputs: int = 4
    parallel: int = 1
    timeout_s: float = 60.0
    source: Optional[Path] = None


# ------------------------------------------------------------------ the declared schema of MATRIX.yaml
class MatrixModelSpec(ConfigSection):
    """models[i]: an int8 .tflite, or a float model with calibration data (quantized once)."""

    model: str
    name: Optional[str] = None
    calibration: Optional[str] = None


class MatrixBoardSpec(ConfigSection):
    """boards[i]: exactly one of qemu / labgrid / serial, and the options passed on to `edgekit run`."""

    qemu: Optional[str] = None
    labgrid: Optional[str] = None
    serial: Optional[str] = None
    name: Optional[str] = None
    instances: PositiveInt = 1
    coordinator: Optional[str] = None
    lock_timeout: Optional[PositiveFloat] = None
    profile: Optional[str] = None
    flash: bool = False


class MatrixFile(ConfigSection):
    """The whole MATRIX.yaml (see the module docstring)."""

    models: List[MatrixModelSpec] = Field(min_length=1)
    boards: List[MatrixBoardSpec] = Field(min_length=1)
    iterations: PositiveInt = 5
    inputs: PositiveInt = 4
    parallel: PositiveInt = 1
    timeout: PositiveFloat = 60.0


def default_board_name(address: str) -> str:
    """A column name from an address: /dev/ttyACM0 -> dev_ttyACM0 (the name rule wants a letter or digit first)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", address).strip("._-")[:64] or "board"


def _model(spec: MatrixModelSpec, i: int, base: Path, problems: Problems) -> ModelEntry:
    model = (base / spec.model).resolve()
    name = spec.name or model.stem
    calibration = (base / spec.calibration).resolve() if spec.calibration else None
    loc = ("models", i)
    if not NAME.match(name):
        problems.add(loc + ("name",), f"name {name!r} (letters, digits, . _ - only)")
    if not model.exists():
        problems.add(loc + ("model",), f"{name}: {model} does not exist")
    elif calibration is None and model.suffix.lower() != ".tflite":
        problems.add(loc + ("model",), f"{name}: {model.name} is not an int8 .tflite; add calibration: DATA to quantize it")
    if calibration is not None and not calibration.exists():
        problems.add(loc + ("calibration",), f"{name}: calibration {calibration} does not exist")
    return ModelEntry(name, model, calibration)


def _board(spec: MatrixBoardSpec, i: int, problems: Problems) -> Optional[BoardEntry]:
    loc = ("boards", i)
    kinds = [k for k in BOARD_KINDS if getattr(spec, k) is not None]
    if len(kinds) != 1:
        problems.add(loc, f"give exactly one of {', '.join(k + ': ...' for k in BOARD_KINDS)}")
        return None
    kind = kinds[0]
    address = getattr(spec, kind)
    if spec.instances > 1 and kind != "qemu":
        problems.add(loc + ("instances",), f"{address}: instances > 1 only for qemu boards (a real board runs one thing)")
    given = spec.model_dump(exclude_unset=True)
    options: BoardOptions = {k: given[k] for k in BoardOptions.__annotations__ if k in given}  # type: ignore[misc]
    if kind == "qemu":
        from edgekit.firmware.boards import qemu_board_names

        if address not in qemu_board_names():
            problems.add(loc + ("qemu",), f"qemu: {address!r} is not a QEMU board ({', '.join(qemu_board_names())})")
    name = spec.name or default_board_name(address)
    if not NAME.match(name):
        problems.add(loc + ("name",), f"name {name!r} (letters, digits, . _ - only; set name:)")
    return BoardEntry(name, kind, address, spec.instances, options)


def _valid_items(schema, items) -> list:
    """(index, spec) of the list items that are valid by themselves (their problems are reported by the schema)."""
    from pydantic import ValidationError

    found = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        try:
            found.append((i, schema.model_validate(item)))
        except ValidationError:
            pass
    return found


def load_matrix(path: Path) -> Matrix:
    """MATRIX.yaml checked against ``MatrixFile``; every problem (schema, missing files, names) with file:line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"matrix file {path} does not exist", fix="write a MATRIX.yaml (see `edgekit lab --help`)")
    doc = load_yaml(path, "matrix file")
    problems = Problems(doc, "matrix file")
    spec = validate(MatrixFile, doc, problems)
    data = doc.data if isinstance(doc.data, dict) else {}
    # the checks past the schema run on every entry that is valid by itself, so all problems come in one message
    model_specs = list(enumerate(spec.models)) if spec else _valid_items(MatrixModelSpec, data.get("models"))
    board_specs = list(enumerate(spec.boards)) if spec else _valid_items(MatrixBoardSpec, data.get("boards"))
    models = [_model(m, i, path.parent, problems) for i, m in model_specs]
    boards = [b for i, e in board_specs if (b := _board(e, i, problems))]
    for what, key, names in (("model", "models", [m.name for m in models]), ("board", "boards", [b.name for b in boards])):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            problems.add((key,), f"{what} names used twice: {', '.join(duplicates)} (set name: to tell them apart)")
    problems.raise_if_any(fix="correct the matrix file (docs/commands/lab.md: the matrix file)")
    assert spec is not None
    return Matrix(models, boards, iterations=spec.iterations, inputs=spec.inputs, parallel=spec.parallel,
                  timeout_s=spec.timeout, source=path)
