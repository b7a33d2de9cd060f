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

from edgekit.errors import UserError

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


def _positive_int(data: Dict[str, Any], key: str, default: int, problems: List[str]) -> int:  # data: parsed YAML
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        problems.append(f"{key}: {value!r} is not a positive whole number")
        return default
    return value


def _model(entry: Any, i: int, base: Path, problems: List[str]) -> Optional[ModelEntry]:
    if not isinstance(entry, dict) or "model" not in entry:
        problems.append(f"models[{i}]: give a mapping with at least model: PATH")
        return None
    model = (base / str(entry["model"])).resolve()
    name = str(entry.get("name") or model.stem)
    calibration = (base / str(entry["calibration"])).resolve() if entry.get("calibration") else None
    if not NAME.match(name):
        problems.append(f"models[{i}]: name {name!r} (letters, digits, . _ - only)")
    if not model.exists():
        problems.append(f"models[{i}] {name}: {model} does not exist")
    elif calibration is None and model.suffix.lower() != ".tflite":
        problems.append(f"models[{i}] {name}: {model.name} is not an int8 .tflite; add calibration: DATA to quantize it")
    if calibration is not None and not calibration.exists():
        problems.append(f"models[{i}] {name}: calibration {calibration} does not exist")
    unknown = set(entry) - {"name", "model", "calibration"}
    if unknown:
        problems.append(f"models[{i}] {name}: unknown keys {', '.join(sorted(unknown))} (name, model, calibration)")
    return ModelEntry(name, model, calibration)


def _board(entry: Any, i: int, problems: List[str]) -> Optional[BoardEntry]:
    kinds = [k for k in BOARD_KINDS if isinstance(entry, dict) and k in entry]
    if len(kinds) != 1:
        problems.append(f"boards[{i}]: give exactly one of {', '.join(k + ': ...' for k in BOARD_KINDS)}")
        return None
    kind = kinds[0]
    address = str(entry[kind])
    instances = _positive_int(entry, "instances", 1, problems)
    if instances > 1 and kind != "qemu":
        problems.append(f"boards[{i}] {address}: instances > 1 only for qemu boards (a real board runs one thing)")
    options: BoardOptions = {k: entry[k] for k in BoardOptions.__annotations__ if k in entry}  # type: ignore[misc]
    unknown = set(entry) - {kind, "name", "instances", *options}
    if unknown:
        problems.append(f"boards[{i}] {address}: unknown keys {', '.join(sorted(unknown))}")
    if kind == "qemu":
        from edgekit.firmware.boards import qemu_board_names

        if address not in qemu_board_names():
            problems.append(f"boards[{i}]: qemu: {address!r} is not a QEMU board ({', '.join(qemu_board_names())})")
    name = str(entry.get("name") or address.replace("/", "_"))
    if not NAME.match(name):
        problems.append(f"boards[{i}]: name {name!r} (letters, digits, . _ - only; set name:)")
    return BoardEntry(name, kind, address, instances, options)


def load_matrix(path: Path) -> Matrix:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UserError(f"matrix file {path} does not exist", fix="write a MATRIX.yaml (see `edgekit lab --help`)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: the matrix must be a mapping with models: and boards:")
    problems: List[str] = []
    base = path.parent
    models = [m for i, e in enumerate(data.get("models") or []) if (m := _model(e, i, base, problems))]
    boards = [b for i, e in enumerate(data.get("boards") or []) if (b := _board(e, i, problems))]
    if not data.get("models"):
        problems.append("models: none given")
    if not data.get("boards"):
        problems.append("boards: none given")
    for what, names in (("model", [m.name for m in models]), ("board", [b.name for b in boards])):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            problems.append(f"{what} names used twice: {', '.join(duplicates)} (set name: to tell them apart)")
    unknown = set(data) - {"models", "boards", "iterations", "inputs", "parallel", "timeout"}
    if unknown:
        problems.append(f"unknown keys {', '.join(sorted(unknown))} (models, boards, iterations, inputs, parallel, timeout)")
    matrix = Matrix(models, boards, iterations=_positive_int(data, "iterations", 5, problems),
                    inputs=_positive_int(data, "inputs", 4, problems),
                    parallel=_positive_int(data, "parallel", 1, problems),
                    timeout_s=float(data.get("timeout", 60.0)), source=path)
    if problems:
        raise UserError(f"{path}: " + "; ".join(problems), fix="correct the matrix file")
    return matrix
