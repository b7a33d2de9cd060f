"""labels.csv beside a data folder: ``file,label`` rows, a label being a class index or a class name.

Class names are mapped to indices through the folder's label list, ``classes.txt`` (one class name per line, in
the order of the model's output). Anything that cannot be mapped is refused with the file and line named.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from edgekit.errors import CalibrationDataError

LABELS_FILE = "labels.csv"
CLASS_LIST_FILE = "classes.txt"


def read_class_list(folder: Path) -> Optional[List[str]]:
    """The class names of ``folder/classes.txt`` (index = line), or None when there is none."""
    path = Path(folder) / CLASS_LIST_FILE
    if not path.is_file():
        return None
    names = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    while names and not names[-1]:
        names.pop()
    return names


def read_labels_csv(path: Path) -> Dict[str, int]:
    """{file name: class index} from a labels.csv; every bad row named with its line, reported at once."""
    path = Path(path)
    classes = read_class_list(path.parent)
    index = {name: i for i, name in enumerate(classes)} if classes else {}
    problems: list[str] = []
    rows: Dict[str, int] = {}
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or not {"file", "label"} <= set(reader.fieldnames):
                raise CalibrationDataError(
                    f"{path} must start with the header 'file,label' (found {reader.fieldnames})",
                    fix="write labels.csv as 'file,label' then one row per file, e.g. '0001.png,3'",
                )
            for row in reader:
                line = reader.line_num
                name, raw = (row.get("file") or "").strip(), (row.get("label") or "").strip()
                label = _parse_label(raw, index)
                if not name:
                    problems.append(f"{path}:{line}: no file name")
                elif label is None:
                    problems.append(f"{path}:{line}: label {raw!r} of {name} is not a class index (0, 1, ...)"
                                    + (f" nor a class name in {CLASS_LIST_FILE}" if classes else ""))
                else:
                    rows[name] = label
    except OSError as exc:
        raise CalibrationDataError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if problems:
        shown = problems[:10] + ([f"... and {len(problems) - 10} more"] if len(problems) > 10 else [])
        fix = (f"use class indices, or the class names listed in {path.parent / CLASS_LIST_FILE}" if classes else
               f"use class indices (0 .. classes-1), or put the model's class names, one per line in output order, "
               f"in {path.parent / CLASS_LIST_FILE}")
        raise CalibrationDataError(shown, fix=fix)
    return rows


def _parse_label(raw: str, index: Dict[str, int]) -> Optional[int]:
    if raw in index:
        return index[raw]
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


def labels_for(folder: Path, names: Sequence[str]) -> Optional[List[int]]:
    """Labels of ``names`` from ``folder/labels.csv`` (None without one); every file must have a row."""
    path = Path(folder) / LABELS_FILE
    if not path.is_file():
        return None
    rows = read_labels_csv(path)
    missing = [n for n in names if n not in rows]
    if missing:
        raise CalibrationDataError(
            f"{path} has no label for {len(missing)} file(s), e.g. {missing[:3]}",
            fix="add a row 'file,label' for every image or remove labels.csv",
        )
    return [rows[n] for n in names]


def check_label_range(labels: Sequence[int], classes: int, source: str) -> None:
    """Refuse labels the model cannot predict (outside 0 .. classes-1), naming how many and which."""
    bad = sorted({int(v) for v in labels if not 0 <= int(v) < classes})
    if bad:
        count = sum(1 for v in labels if not 0 <= int(v) < classes)
        raise CalibrationDataError(
            f"{count} label(s) in {source} are outside the model's class range 0..{classes - 1} "
            f"(the model has {classes} outputs): {bad[:10]}",
            fix="label with class indices of this model's output (0-based), or pass data labelled for this model",
        )
