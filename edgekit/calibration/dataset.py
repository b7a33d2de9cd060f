"""CalibrationSet: raw items from a source + one transform, consumed by index, fingerprinted.

Sources: a folder of images (decoded through a PreprocessSpec), a ``.npy``/``.npz`` file of
arrays, or a folder of ``.npy`` files (one sample each).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from edgekit.calibration.labels import labels_for
from edgekit.errors import CalibrationDataError
from edgekit.preprocessing.spec import PreprocessSpec, find_spec, load_image

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
LABEL_KEYS = ("labels", "label", "y")
Sample = List[np.ndarray]  # one array per model input, batch dimension included


AUTO_BATCH_AXIS = -1  # InputSpec.batch_axis: detect it from the shape (batch_axis_of)


@dataclass(frozen=True)
class InputSpec:
    """One model input: name, shape (batch included), numpy dtype, and where its batch axis is (an axis index,
    None for an input without one, e.g. a sample-rate scalar, or AUTO_BATCH_AXIS to detect it)."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    batch_axis: Optional[int] = AUTO_BATCH_AXIS


def batch_axis_of(spec: InputSpec) -> Optional[int]:
    """The input's batch axis: the one given, else axis 0 when it is 1 or dynamic, else the first axis of size 1
    or dynamic (a recurrent state [2, batch, 128] has it at 1), else None (the data holds whole inputs)."""
    if spec.batch_axis != AUTO_BATCH_AXIS:
        return spec.batch_axis
    for axis, dim in enumerate(spec.shape):
        if dim <= 1:
            return axis
    return None


def with_batch_axes(inputs: Sequence[InputSpec], given: Sequence[Tuple[str, str]]) -> List[InputSpec]:
    """``--batch-axis NAME=AXIS|none`` applied to the model's inputs; every bad value is reported at once."""
    from dataclasses import replace

    by_name = {spec.name: spec for spec in inputs}
    chosen: dict = {}
    problems = []
    for name, value in given:
        spec = by_name.get(name)
        if spec is None:
            problems.append(f"{name!r} is not a model input (inputs: {', '.join(by_name)})")
            continue
        if value == "none":
            chosen[name] = None
            continue
        try:
            axis = int(value)
        except ValueError:
            problems.append(f"{name}={value}: the axis must be an integer or 'none'")
            continue
        axis = axis + len(spec.shape) if axis < 0 else axis
        if not 0 <= axis < len(spec.shape) or spec.shape[axis] > 1:
            problems.append(f"{name}={value}: input {name!r} {tuple(spec.shape)} has no batch-sized axis (1 or "
                            "dynamic) there")
            continue
        chosen[name] = axis
    if problems:
        raise CalibrationDataError(problems, fix="give --batch-axis INPUT=AXIS (the axis of size 1 or dynamic) or "
                                                 "INPUT=none for an input the data holds whole")
    return [replace(spec, batch_axis=chosen[spec.name]) if spec.name in chosen else spec for spec in inputs]


def parse_batch_axes(values: Optional[Sequence[str]]) -> Tuple[Tuple[str, str], ...]:
    """``--batch-axis NAME=AXIS`` values -> ((name, axis text), ...)."""
    pairs, problems = [], []
    for value in values or ():
        name, sep, axis = str(value).partition("=")
        if not sep or not name.strip() or not axis.strip():
            problems.append(f"{value!r} is not NAME=AXIS")
        else:
            pairs.append((name.strip(), axis.strip()))
    if problems:
        raise CalibrationDataError(problems, fix="give --batch-axis INPUT=AXIS, e.g. --batch-axis state=1")
    return tuple(pairs)


def _as_model_input(array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """One sample as the sources give it (a leading axis of 1 added to the stored item) placed in the model
    input's layout: the batch axis moved to where the input has it, dropped for an input without one.
    An item stored with the model's whole shape (batch included) is taken as it is."""
    item = array[0] if array.ndim and array.shape[0] == 1 else array
    axis = batch_axis_of(spec)
    if item.ndim == len(spec.shape):
        return item
    if axis is None:
        return item
    if item.ndim + 1 == len(spec.shape):
        return np.expand_dims(item, axis)
    return array


class SampleSource:
    """Raw items of a data source; ``load(i)`` returns one sample (a list of arrays)."""

    kind = "abstract"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.labels: Optional[List[int]] = None

    def __len__(self) -> int:
        raise NotImplementedError

    def name(self, index: int) -> str:
        raise NotImplementedError

    def load(self, index: int) -> Sample:
        raise NotImplementedError

    def digest(self, index: int) -> bytes:
        """Content digest of one raw item (for the fingerprint)."""
        raise NotImplementedError

    def describe(self) -> dict:
        return {"kind": self.kind, "path": str(self.path), "items": len(self)}


class ImageFolderSource(SampleSource):
    kind = "image-folder"

    def __init__(self, path: Path, spec: PreprocessSpec) -> None:
        super().__init__(path)
        self.spec = spec
        self.files = sorted(p for p in self.path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        self.labels = _read_labels_csv(self.path, [f.name for f in self.files])

    def __len__(self) -> int:
        return len(self.files)

    def name(self, index: int) -> str:
        return str(self.files[index])

    def load(self, index: int) -> Sample:
        return [load_image(self.files[index], self.spec)[None]]

    def digest(self, index: int) -> bytes:
        return hashlib.sha256(self.files[index].read_bytes()).digest()

    def describe(self) -> dict:
        return {**super().describe(), "preprocess": self.spec.to_dict()}


class ArrayFileSource(SampleSource):
    """A ``.npy`` (N, ...) array, or a ``.npz`` with one array per input (+ optional labels)."""

    kind = "array-file"

    def __init__(self, path: Path, input_names: Sequence[str]) -> None:
        super().__init__(path)
        data = _read_arrays(self.path)
        if isinstance(data, np.ndarray):
            self.arrays = [data]
        else:
            label_key = next((k for k in LABEL_KEYS if k in data), None)
            if label_key:
                raw = np.asarray(data.pop(label_key)).reshape(-1)
                if not np.issubdtype(raw.dtype, np.integer) or (raw.size and raw.min() < 0):
                    raise CalibrationDataError(
                        f"{self.path}: array {label_key!r} must hold class indices (integers >= 0), "
                        f"got dtype {raw.dtype}" + (f" with minimum {raw.min()}" if np.issubdtype(raw.dtype, np.integer) else ""),
                        fix=f"save the labels as integers: np.savez(path, ..., {label_key}=np.asarray(labels, np.int64))",
                    )
                self.labels = [int(v) for v in raw]
            if all(n in data for n in input_names):
                self.arrays = [data[n] for n in input_names]
            elif len(data) == len(input_names):
                self.arrays = [data[k] for k in sorted(data)]
            else:
                raise CalibrationDataError(
                    f"{self.path} holds arrays {sorted(data)} but the model has inputs {list(input_names)}",
                    fix="name the arrays after the model inputs (np.savez(path, **{name: array}))",
                )
        counts = {len(a) if a.ndim else 0 for a in self.arrays}
        if len(counts) != 1:
            raise CalibrationDataError(f"arrays in {self.path} have different sample counts {sorted(counts)}")
        if self.labels is not None and len(self.labels) != len(self.arrays[0]):
            raise CalibrationDataError(
                f"{self.path}: {len(self.labels)} labels for {len(self.arrays[0])} samples"
            )

    def __len__(self) -> int:
        return len(self.arrays[0]) if self.arrays[0].ndim else 0

    def name(self, index: int) -> str:
        return f"{self.path}[{index}]"

    def load(self, index: int) -> Sample:
        return [np.asarray(a[index])[None] for a in self.arrays]

    def digest(self, index: int) -> bytes:
        h = hashlib.sha256()
        for a in self.arrays:
            h.update(np.ascontiguousarray(a[index]).tobytes())
            h.update(str(a.dtype).encode())
        return h.digest()


def _read_arrays(path: Path):
    """The array of a .npy, or {name: array} of a .npz; a truncated/damaged file or object (pickled) arrays are one
    CalibrationDataError naming the file (never a traceback, never an unpickling of user data)."""
    import zipfile

    fix = "save plain numeric arrays: np.save(path, array) or np.savez(path, **{input_name: array})"
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return loaded
        with loaded:
            return {k: loaded[k] for k in loaded.files}
    except zipfile.BadZipFile as exc:
        raise CalibrationDataError(f"cannot read {path}: the .npz (zip) archive is truncated or damaged ({exc})",
                                   fix="write the file again (np.savez) and check that the copy is complete") from exc
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise CalibrationDataError(f"cannot read {path}: it holds object (pickled) arrays, not numbers; edgekit "
                                       "does not unpickle data files", fix=fix) from exc
        raise CalibrationDataError(f"cannot read {path}: {exc}", fix=fix) from exc
    except (OSError, EOFError) as exc:
        raise CalibrationDataError(f"cannot read {path}: {exc}", fix=fix) from exc


class NpyFolderSource(SampleSource):
    """A folder of ``.npy`` files, one sample each (single-input models)."""

    kind = "npy-folder"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.files = sorted(self.path.glob("*.npy"))
        self.labels = _read_labels_csv(self.path, [f.name for f in self.files])

    def __len__(self) -> int:
        return len(self.files)

    def name(self, index: int) -> str:
        return str(self.files[index])

    def load(self, index: int) -> Sample:
        try:
            array = np.load(self.files[index], allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise CalibrationDataError(f"cannot read {self.files[index]}: {exc}") from exc
        return [array[None]]

    def digest(self, index: int) -> bytes:
        return hashlib.sha256(self.files[index].read_bytes()).digest()


def _read_labels_csv(folder: Path, names: Sequence[str]) -> Optional[List[int]]:
    return labels_for(folder, names)


def open_source(path: Path, input_names: Sequence[str], spec: PreprocessSpec | None = None) -> SampleSource:
    """Open CALIB: a folder of images, a folder of .npy files, or a .npy/.npz file."""
    path = Path(path)
    if not path.exists():
        raise CalibrationDataError(f"calibration data {path} does not exist")
    if path.is_file():
        if path.suffix.lower() not in (".npy", ".npz"):
            raise CalibrationDataError(
                f"{path} is not a .npy/.npz file or a folder",
                fix="pass a folder of PNG/JPEG images, a folder of .npy files, or one .npy/.npz file",
            )
        return ArrayFileSource(path, input_names)
    images = [p.name for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES]
    arrays = [p.name for p in path.iterdir() if p.suffix.lower() in (".npy", ".npz")]
    if images and arrays:  # which one was meant? silently using one kind would drop the other
        raise CalibrationDataError(
            f"{path} holds both images ({len(images)}, e.g. {sorted(images)[0]}) and array files ({len(arrays)}, "
            f"e.g. {sorted(arrays)[0]}); edgekit would use only one kind",
            fix="keep one kind of data in the folder, or pass the array file itself (--calib FILE.npy)")
    has_images = bool(images)
    if has_images:
        spec = spec or find_spec(path)
        if spec is None:
            raise CalibrationDataError(
                f"image folder {path} has no preprocessing spec",
                fix=f"put a preprocess.json in {path} or pass --preprocess SPEC.json",
            )
        return ImageFolderSource(path, spec)
    return NpyFolderSource(path)


class CalibrationSet:
    """A deterministic subset of a source, loaded once, validated against the model inputs."""

    def __init__(self, source: SampleSource, indices: Sequence[int], *, seed: int) -> None:
        self.source = source
        self.indices = list(indices)
        self.seed = seed
        self._samples: Optional[List[Sample]] = None
        self._fingerprint: Optional[str] = None

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def labels(self) -> Optional[List[int]]:
        if self.source.labels is None:
            return None
        return [self.source.labels[i] for i in self.indices]

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            h = hashlib.sha256(self.source.kind.encode())
            spec = getattr(self.source, "spec", None)
            if spec is not None:
                h.update(repr(sorted(spec.to_dict().items())).encode())
            for i in self.indices:
                h.update(self.source.digest(i))
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def samples(self, inputs: Sequence[InputSpec]) -> List[Sample]:
        """All samples as float32 arrays shaped like the model inputs; problems collected first."""
        if self._samples is None:
            self._samples = _load_and_validate(self.source, self.indices, inputs)
        return self._samples

    def describe(self) -> dict:
        return {**self.source.describe(), "selected": len(self), "seed": self.seed, "fingerprint": self.fingerprint}


def split(
    source: SampleSource, *, calib_size: Optional[int], seed: int, holdout_fraction: float
) -> Tuple[CalibrationSet, Optional[CalibrationSet]]:
    """Deterministic (seeded) split into a calibration set and an optional held-out set."""
    n = len(source)
    if n == 0:
        raise CalibrationDataError(
            f"calibration data {source.path} is empty (no usable samples found)",
            fix="pass a folder with PNG/JPEG images or .npy files, or a non-empty .npy/.npz",
        )
    order = np.random.default_rng(seed).permutation(n).tolist()
    n_holdout = int(round(n * holdout_fraction)) if holdout_fraction > 0 else 0
    if holdout_fraction > 0 and (n_holdout < 1 or n - n_holdout < 1):
        raise CalibrationDataError(
            f"{n} sample(s) in {source.path} are too few to hold some out for parity",
            fix="add samples or pass --eval-data with separate evaluation data",
        )
    holdout = sorted(order[:n_holdout])
    rest = order[n_holdout:]
    chosen = sorted(rest if calib_size is None else rest[:calib_size])
    calib = CalibrationSet(source, chosen, seed=seed)
    return calib, (CalibrationSet(source, holdout, seed=seed) if holdout else None)


def whole(source: SampleSource, *, limit: Optional[int] = None, seed: int = 0) -> CalibrationSet:
    """Every item of a source (or a seeded subset of ``limit`` items)."""
    if len(source) == 0:
        raise CalibrationDataError(f"data {source.path} is empty (no usable samples found)")
    indices = list(range(len(source)))
    if limit is not None and limit < len(indices):
        indices = sorted(np.random.default_rng(seed).permutation(len(indices))[:limit].tolist())
    return CalibrationSet(source, indices, seed=seed)


def _load_and_validate(source: SampleSource, indices: Sequence[int], inputs: Sequence[InputSpec]) -> List[Sample]:
    problems: list[str] = []
    bad_values: list[str] = []
    shape_issues: dict[tuple, list[str]] = {}
    samples: List[Sample] = []
    for i in indices:
        try:
            sample = source.load(i)
        except CalibrationDataError as exc:
            problems.extend(exc.problems)
            continue
        if len(sample) != len(inputs):
            problems.append(f"{source.name(i)} gives {len(sample)} input(s) but the model has {len(inputs)}")
            continue
        converted: Sample = []
        for array, spec in zip(sample, inputs):
            if not (np.issubdtype(array.dtype, np.floating) and np.issubdtype(spec.dtype, np.floating)):
                if array.dtype != spec.dtype:
                    shape_issues.setdefault(("dtype", str(array.dtype), spec.name, str(spec.dtype)), []).append(source.name(i))
                    continue
            array = _as_model_input(array, spec)
            if not _shape_matches(array.shape, spec):
                shape_issues.setdefault(("shape", _per_sample(array.shape, spec), spec.name, spec), []).append(
                    source.name(i))
                continue
            array = array.astype(spec.dtype, copy=False)
            if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
                bad_values.append(source.name(i))
            converted.append(array)
        if len(converted) == len(inputs):
            samples.append(converted)
    for (what, got, name, expected), names in shape_issues.items():
        where = f"{len(names)} sample(s), e.g. {names[0]}"
        if what == "dtype":
            problems.append(f"dtype {got} does not match model input {name!r} dtype {expected} ({where})")
        else:
            axis = batch_axis_of(expected)
            where_batch = "no batch axis" if axis is None else f"batch axis {axis}"
            problems.append(
                f"one sample of input {name!r} is {got}, the model needs {_per_sample(expected.shape, expected)} per "
                f"sample (input shape {tuple(expected.shape)}, {where_batch}; {where})"
                + ("" if axis in (0, None) else "; if the batch is elsewhere, say --batch-axis "
                   f"{name}=AXIS")
            )
    if bad_values:
        shown = ", ".join(bad_values[:5]) + (f" and {len(bad_values) - 5} more" if len(bad_values) > 5 else "")
        problems.append(f"{len(bad_values)} sample(s) contain NaN or Inf: {shown}")
    if problems:
        raise CalibrationDataError(problems, fix="fix or remove the listed samples, or pass data that matches the model input")
    if not samples:
        raise CalibrationDataError(f"no usable samples in {source.path}")
    return samples


def _per_sample(shape: Tuple[int, ...], spec: InputSpec) -> Tuple[int, ...]:
    """A shape without the input's batch axis (what one sample of the data holds)."""
    axis = batch_axis_of(spec)
    if axis is None or len(shape) != len(spec.shape):
        return tuple(shape)
    return tuple(d for k, d in enumerate(shape) if k != axis)


def _shape_matches(got: Tuple[int, ...], spec: InputSpec) -> bool:
    """``got`` is in the model's layout with a batch of 1 at the batch axis; model dims <= 0 are dynamic."""
    expected = spec.shape
    if len(got) != len(expected):
        return False
    axis = batch_axis_of(spec)
    return all(e <= 0 or g == e or (k == axis and g == 1) for k, (g, e) in enumerate(zip(got, expected)))

