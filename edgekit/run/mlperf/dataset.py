"""MLPerf Tiny dataset folders: the reference runner's layout, read and (from our own inputs) generated.

Layout (MLPerf Tiny benchmark/evaluation/datasets/README.md and benchmark/runner/datasets.py): one folder per
model id (kws01, ic01, vww01, ad01) holding the input files and ``y_labels.csv`` without a header, rows
``file,number of classes,class`` and, for ad01, ``file,2,class(0 normal 1 anomaly),window bytes,stride bytes``
(the runner slides the window over the file; the score of a file is the mean over its windows).
File formats: kws01 int8 features as the model takes them; ic01/vww01 uint8 RGB pixels (HWC); ad01 float32 LE
spectrogram frames of 128 mel bins (a window of 5 frames = 2560 bytes, stride 1 frame = 512 bytes).

The real datasets are not available here. ``generate_dataset`` writes folders in that layout from our own inputs
(given arrays, or seeded synthetic ones) and labels them with the HOST REFERENCE MODEL's predictions (LiteRT
BUILTIN_REF on the same int8 input the device computes): they test the accuracy path end to end; the accuracy
they give says how well the device agrees with the host model, not how good the model is.
"""
from __future__ import annotations

import csv
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import UserError
from edgekit.firmware.mlperf import TASKS, Task
from edgekit.results import Result

log = logging.getLogger(__name__)

LABELS_FILE = "y_labels.csv"
AD_MELS = 128            # ad01 frames: 128 mel bins (FP32LE)
AD_WINDOW_FRAMES = 5     # the model input: 5 frames = 640 values = 2560 bytes
LABEL_SOURCE = ("labels are the host reference model's predictions (LiteRT BUILTIN_REF on the int8 input the "
                "device computes), not ground truth")


class DatasetInfo(Result):
    """a generated MLPerf Tiny runner dataset folder (not the MLPerf Tiny dataset)"""

    SCHEMA: ClassVar[str] = "mlperf-dataset"

    task: str                   # kws | ic | vww | ad
    model_id: str
    files: int
    inputs: str                 # given inputs, or the seeded synthetic ones
    labels: str                 # where the labels come from (the host reference model)
    ad_threshold: Optional[float] = None   # ad01: the reconstruction error above which a file is anomalous


@dataclass(frozen=True)
class Entry:
    """One row of y_labels.csv."""

    file: str
    classes: int
    label: int
    window: Optional[int] = None   # ad01: bytes per inference
    stride: Optional[int] = None   # ad01: bytes between windows


@dataclass(frozen=True)
class Dataset:
    folder: Path
    entries: Tuple[Entry, ...]

    def data(self, entry: Entry) -> bytes:
        return (self.folder / entry.file).read_bytes()


def windows(data: bytes, entry: Entry) -> List[bytes]:
    """The inputs the runner sends for one file: the whole file, or (ad01) every full window along the stride."""
    if entry.window is None:
        return [data]
    out, start = [], 0
    while start + entry.window <= len(data):
        out.append(data[start:start + entry.window])
        start += entry.stride or entry.window
    return out


def dataset_folder(path: Path, task: Task) -> Path:
    """DIR holding y_labels.csv, or DIR/<model id>/ (the runner's --dataset_path)."""
    path = Path(path)
    for folder in (path, path / task.model_id):
        if (folder / LABELS_FILE).is_file():
            return folder
    raise UserError(f"no {LABELS_FILE} in {path} or {path / task.model_id}",
                    fix="pass the dataset folder of the task (edgekit mlperf-dataset writes one)")


def read_dataset(path: Path, task: Task, *, input_bytes: int) -> Dataset:
    """Read and check y_labels.csv and its files; every problem is reported at once."""
    folder = dataset_folder(path, task)
    problems: List[str] = []
    entries: List[Entry] = []
    with open(folder / LABELS_FILE, newline="") as f:
        for n, row in enumerate(csv.reader(f), 1):
            row = [c.strip() for c in row]
            if not row or not any(row):
                continue
            try:
                if task.name == "ad":
                    if len(row) != 5:
                        raise ValueError("ad01 rows are file,classes,class,window bytes,stride bytes")
                    entry = Entry(row[0], int(row[1]), int(row[2]), int(row[3]), int(row[4]))
                    if entry.window != input_bytes or entry.stride <= 0:
                        raise ValueError(f"window must be {input_bytes} bytes and the stride positive")
                else:
                    if len(row) < 3:
                        raise ValueError("rows are file,classes,class")
                    entry = Entry(row[0], int(row[1]), int(row[2]))
                if not 0 <= entry.label < entry.classes:
                    raise ValueError(f"class {entry.label} outside 0..{entry.classes - 1}")
            except ValueError as exc:
                problems.append(f"line {n}: {exc}")
                continue
            path_n = folder / entry.file
            if not path_n.is_file():
                problems.append(f"line {n}: {entry.file} does not exist")
            elif entry.window is None and path_n.stat().st_size != input_bytes:
                problems.append(f"line {n}: {entry.file} has {path_n.stat().st_size} bytes, the model takes {input_bytes}")
            elif entry.window is not None and path_n.stat().st_size < entry.window:
                problems.append(f"line {n}: {entry.file} is shorter than one window ({entry.window} bytes)")
            entries.append(entry)
    if not entries and not problems:
        problems.append("it lists no files")
    if problems:
        raise UserError(f"dataset {folder / LABELS_FILE} has {len(problems)} problem(s):\n"
                        + "\n".join(f"  - {p}" for p in problems[:20]), fix="fix the rows or regenerate the folder")
    return Dataset(folder, tuple(entries))


# ------------------------------------------------------------------ the device's input conversion, on the host


def device_input(task: Task, raw: bytes, scale: float, zero_point: int) -> np.ndarray:
    """The int8 input tensor the harness computes from the bytes the runner sends (firmware/app/mlperf_harness.c,
    load_tensor), bit for bit: ad = roundf(x / scale) (half away from zero) + zero point, saturated."""
    if task.name == "ad":
        x = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q = (x / np.float32(scale)).astype(np.float32).astype(np.float64)
        r = np.where(np.isnan(q), 0.0, np.clip(np.trunc(q + np.copysign(0.5, q)), -1000, 1000))
        return np.clip(r + zero_point, -128, 127).astype(np.int8)
    if task.name in ("ic", "vww"):
        return (np.frombuffer(raw, dtype=np.uint8).astype(np.int16) - 128).astype(np.int8)
    return np.frombuffer(raw, dtype=np.int8).copy()


def ad_error(raw: bytes, output: np.ndarray, scale: float, zero_point: int) -> float:
    """The AD result as the harness computes it: mean squared error of the dequantized output vs the float input
    (float32, summed in order)."""
    x = np.frombuffer(raw, dtype="<f4")
    y = ((output.astype(np.float32).ravel() - np.float32(zero_point)) * np.float32(scale)).astype(np.float32)
    total = np.float32(0.0)
    for d in (y - x).astype(np.float32):
        total = np.float32(total + np.float32(d * d))
    return float(np.float32(total / np.float32(x.size)))


# ------------------------------------------------------------------ generating folders


def _synthetic(task: Task, shape: Sequence[int], count: int, rng: np.random.Generator, frames: int) -> List[bytes]:
    if task.name == "ad":
        # log-mel-like energies: a smooth spectrum per file plus noise; some files get an added band
        out = []
        for i in range(count):
            base = rng.normal(-20.0, 4.0) + 8.0 * np.sin(np.linspace(0, rng.uniform(2, 6), AD_MELS))
            spec = base[None, :] + rng.normal(0.0, 2.0, (frames, AD_MELS))
            if i % 2:
                spec[:, rng.integers(0, AD_MELS - 16):][:, :16] += rng.uniform(5, 15)
            out.append(spec.astype("<f4").tobytes())
        return out
    n = int(np.prod(shape))
    out = []
    for i in range(count):
        # four families of int8-domain inputs: noise, a level plus small noise, a random walk, 8 blocks of levels
        # plus noise (measured on the MLPerf Tiny models, 160 candidates, seed 0: uniform noise alone is predicted
        # as 2 of KWS's 12 classes and 3 of IC's 10; the four families 8 and 6)
        family = i % 4
        if family == 0:
            x = rng.integers(-128, 128, n).astype(np.float64)
        elif family == 1:
            x = float(rng.integers(-128, 128)) + rng.integers(-8, 9, n)
        elif family == 2:
            walk = np.cumsum(rng.normal(0.0, rng.uniform(1.0, 20.0), n))
            x = walk - walk.mean() + rng.normal(0.0, rng.uniform(5.0, 80.0))
        else:
            x = np.repeat(rng.integers(-128, 128, 8), n // 8 + 1)[:n] + rng.integers(-20, 21, n)
        q = np.clip(np.round(x), -128, 127).astype(np.int16)
        out.append((q + 128).astype(np.uint8).tobytes() if task.name in ("ic", "vww") else q.astype(np.int8).tobytes())
    return out


def _from_array(task: Task, array: np.ndarray, shape: Sequence[int], scale: float, zero_point: int) -> List[bytes]:
    """Our own inputs -> the wire format. kws: int8 (or float, quantized with the input scale); ic/vww: uint8 images
    (or float in [0, 1]); ad: float32 spectrograms (N, frames, 128) or windows (N, 640)."""
    n = int(np.prod(shape))
    if task.name == "ad":
        array = np.asarray(array, dtype=np.float32)
        if array.ndim == 2 and array.shape[1] == n:
            array = array.reshape(len(array), AD_WINDOW_FRAMES, AD_MELS)
        if array.ndim != 3 or array.shape[2] != AD_MELS or array.shape[1] < AD_WINDOW_FRAMES:
            raise UserError(f"ad inputs must be (N, frames >= 5, 128) spectrograms or (N, 640) windows, not {array.shape}")
        return [a.astype("<f4").tobytes() for a in array]
    array = np.asarray(array)
    if array.size % n:
        raise UserError(f"{task.name} inputs of shape {array.shape} do not split into samples of {n} values")
    array = array.reshape(-1, n)
    if task.name in ("ic", "vww"):
        if array.dtype.kind == "f":
            array = np.clip(np.round(array * 255.0), 0, 255)
        return [a.astype(np.uint8).tobytes() for a in array]
    if array.dtype.kind == "f":
        array = np.clip(np.round(array / scale) + zero_point, -128, 127)
    return [a.astype(np.int8).tobytes() for a in array]


POOL_PER_CLASS = 16      # synthetic candidates drawn per class before choosing the files


def _cover_classes(samples: List[bytes], scores: np.ndarray, count: int) -> Tuple[List[bytes], List[int], List[int]]:
    """(files, labels, classes labelled by assignment): first one file per class the host model predicts, then
    the remaining candidates in order up to ``count``; a class the model never predicts gets the unused candidate
    with the highest score for it (labelled by assignment, reported)."""
    predicted = [int(np.argmax(row)) for row in scores]
    chosen: List[int] = []
    labels: dict = {}
    assigned: List[int] = []
    for c in range(scores.shape[1]):
        hit = next((i for i, p in enumerate(predicted) if p == c and i not in labels), None)
        if hit is None:
            order = [int(i) for i in np.argsort(-scores[:, c], kind="stable") if int(i) not in labels]
            hit = order[0]
            assigned.append(c)
        labels[hit] = c
        chosen.append(hit)
    for i in range(len(samples)):
        if len(chosen) >= count:
            break
        if i not in labels:
            labels[i] = predicted[i]
            chosen.append(i)
    chosen.sort()
    return [samples[i] for i in chosen], [labels[i] for i in chosen], assigned


def generate_dataset(model: bytes, task_name: str, outdir: Path, *, inputs: Optional[np.ndarray] = None,
                     count: int = 20, seed: int = 0, frames: int = 16) -> Dataset:
    """Write ``outdir/<model id>/`` (y_labels.csv, the input files, README.md) labelled by the host reference model."""
    from edgekit.atomic import atomic_output_dir
    from edgekit.run.runners.mcu import litert_reference
    from edgekit.tflite_model import TFLiteModel

    task = TASKS[task_name] if task_name in TASKS else None
    if task is None:
        raise UserError(f"unknown MLPerf Tiny task {task_name!r}", fix=f"use one of {', '.join(TASKS)}")
    if count <= 0 or frames < AD_WINDOW_FRAMES:
        raise UserError("count must be positive and frames at least 5")
    interp = TFLiteModel(model, source="model").interpreter("reference")
    din, dout = interp.get_input_details()[0], interp.get_output_details()[0]
    scale, zp = (din["quantization"][0] or 1.0), int(din["quantization"][1])
    oscale, ozp = (dout["quantization"][0] or 1.0), int(dout["quantization"][1])
    shape = list(din["shape"])
    from edgekit.firmware.mlperf import task_model_problems

    problems = task_model_problems(task, int(np.prod(shape)), int(np.prod(dout["shape"])))
    if problems:
        raise UserError(f"the model cannot make a {task.model_id} dataset: {problems[0]}",
                        fix="pass the MLPerf Tiny model of the task, or the --task the model is for")
    rng = np.random.default_rng(seed)
    samples = _from_array(task, inputs, shape, scale, zp) if inputs is not None else \
        _synthetic(task, shape, count, rng, frames)
    window = int(np.prod(shape)) * 4
    labels: List[int] = []
    coverage_note = ""
    if task.name == "ad":
        errors = []
        for raw in samples:
            entry = Entry("", 2, 0, window, AD_MELS * 4)
            wins = windows(raw, entry)
            outs = litert_reference(model, [[device_input(task, w, scale, zp).reshape(shape)] for w in wins])
            errors.append(float(np.mean([ad_error(w, o[0], oscale, ozp) for w, o in zip(wins, outs)])))
        threshold = float(np.median(errors))
        labels = [int(e > threshold) for e in errors]
        classes = 2
    else:
        classes = int(np.prod(dout["shape"]))
        if inputs is None:
            # a pool of candidates so that every class can get a file (the runner's AUC needs every class)
            samples += _synthetic(task, shape, max(0, POOL_PER_CLASS * classes - len(samples)), rng, frames)
        outs = litert_reference(model, [[device_input(task, raw, scale, zp).reshape(shape)] for raw in samples])
        scores = np.array([o[0].astype(np.float64).ravel() for o in outs])
        if inputs is None:
            samples, labels, assigned = _cover_classes(samples, scores, max(count, classes))
        else:
            labels, assigned = [int(np.argmax(row)) for row in scores], []
            missing = sorted(set(range(classes)) - set(labels))
            if missing:
                log.warning("the given inputs leave class(es) %s without a file: the MLPerf Tiny runner's AUC "
                            "needs every class", ", ".join(map(str, missing)))
                coverage_note = (f" Class(es) {', '.join(map(str, missing))} have no file: the reference runner's "
                                 "accuracy mode needs every class.")
        if assigned:
            coverage_note = (f" Class(es) {', '.join(str(c) for c in assigned)} were never the host model's "
                             f"prediction on {len(scores)} seeded candidates: one file each carries that class by "
                             "assignment (the candidate with the highest score for it), so the device is not "
                             "expected to agree on it.")
    entries = []
    with atomic_output_dir(Path(outdir) / task.model_id) as stage:
        for i, (raw, label) in enumerate(zip(samples, labels)):
            name = (f"edgekit_{i:06d}_{'anomaly' if label else 'normal'}.bin" if task.name == "ad"
                    else f"edgekit_{i:06d}_{label}.bin")
            (stage / name).write_bytes(raw)
            entries.append(Entry(name, classes, label, window if task.name == "ad" else None,
                                 AD_MELS * 4 if task.name == "ad" else None))
        with open(stage / LABELS_FILE, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            for e in entries:
                writer.writerow([e.file, e.classes, e.label] + ([e.window, e.stride] if e.window else []))
        how = "given inputs" if inputs is not None else f"seeded synthetic inputs (numpy default_rng({seed}))"
        rule = (" ad01: a file is labelled anomalous (1) when its mean reconstruction error on the host is above the "
                f"median of the set ({threshold:.4f})" if task.name == "ad" else "")
        (stage / "README.md").write_text(
            f"# {task.model_id}: generated by edgekit (not the MLPerf Tiny dataset)\n\n"
            f"{len(entries)} files from {how}, in the MLPerf Tiny runner layout ({LABELS_FILE} without a header).\n\n"
            f"**{LABEL_SOURCE}.**{rule}{coverage_note}\n\nAn accuracy measured on this folder says how often the device agrees with "
            "the host reference model, not how accurate the model is.\n")
        (stage / "dataset.json").write_text(DatasetInfo(
            task=task.name, model_id=task.model_id, files=len(entries), inputs=how, labels=LABEL_SOURCE + coverage_note,
            ad_threshold=threshold if task.name == "ad" else None).dumps())
    log.info("wrote %d files to %s", len(entries), Path(outdir) / task.model_id)
    return Dataset(Path(outdir) / task.model_id, tuple(entries))
