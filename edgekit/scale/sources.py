"""Data at scale as chunks: a dataset is listed (names, sizes; no sample is read), cut into chunks, and
each chunk is read where it is processed. Every sample keeps a stable name (``file[row]`` or the image path)
so a corrupt one can be counted and named instead of failing the run.

Sources: a folder of images (+ labels.csv, decoded through the PreprocessSpec), a ``.npy`` (N, ...) or
``.npz`` (one array per input + labels) file, a folder of ``.npy``/``.npz`` shards (or one sample per ``.npy``,
+ labels.csv), Parquet files (a folder or one file) with an image column (bytes) or a tensor column.
"""
from __future__ import annotations

import csv
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.calibration.dataset import IMAGE_SUFFIXES, LABEL_KEYS, InputSpec
from edgekit.errors import CalibrationDataError, first_line
from edgekit.preprocessing.spec import PreprocessSpec, find_spec

DEFAULT_CHUNK = 256


@dataclass(frozen=True)
class Chunk:
    """Rows [start, stop) of one file, or a list of image / one-sample .npy files."""

    kind: str                      # array | npy-files | images | parquet
    path: str
    start: int = 0
    stop: int = 0
    files: Tuple[str, ...] = ()
    labels: Tuple[Optional[int], ...] = ()
    group: int = -1                # Parquet row group
    rows: Tuple[int, ...] = ()     # a seeded subset of [start, stop) (--limit), else all of it

    @property
    def size(self) -> int:
        return len(self.files) if self.files else (len(self.rows) if self.rows else self.stop - self.start)

    @property
    def row_ids(self) -> Sequence[int]:
        return self.rows or range(self.start, self.stop)


@dataclass(frozen=True)
class LoadedRow:
    name: str
    sample: Optional[List[np.ndarray]]  # None: corrupt
    label: Optional[int] = None
    error: str = ""


@dataclass(frozen=True)
class ScaleSource:
    """A listed dataset: its chunks, how many samples, and what to tell the report."""

    path: Path
    kind: str
    chunks: List[Chunk]
    spec: Optional[PreprocessSpec]
    column: Optional[str] = None

    @property
    def samples(self) -> int:
        return sum(c.size for c in self.chunks)

    @property
    def decoding(self) -> "Decoding":
        return Decoding(self.spec, self.column)

    def describe(self) -> dict:
        out = {"kind": self.kind, "path": str(self.path), "items": self.samples, "chunks": len(self.chunks)}
        if self.spec is not None:
            out["preprocess"] = self.spec.to_dict()
        if self.column:
            out["column"] = self.column
        return out


def list_source(path: Path, inputs: Sequence[InputSpec], spec: Optional[PreprocessSpec] = None, *,
                chunk: int = DEFAULT_CHUNK, column: Optional[str] = None, limit: Optional[int] = None,
                seed: int = 0) -> ScaleSource:
    """List PATH into chunks of at most ``chunk`` samples (``limit``: a seeded subset of N samples, the
    same one ``edgekit.calibration.dataset.whole`` picks from the same files)."""
    path = Path(path)
    if not path.exists():
        raise CalibrationDataError(f"data {path} does not exist")
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    suffixes = {p.suffix.lower() for p in files}
    if suffixes & {".parquet"}:
        source = _parquet(path, [p for p in files if p.suffix.lower() == ".parquet"], spec, chunk, column)
    elif suffixes & set(IMAGE_SUFFIXES):
        spec = spec or find_spec(path if path.is_dir() else path.parent)
        if spec is None:
            raise CalibrationDataError(f"image folder {path} has no preprocessing spec",
                                       fix=f"put a preprocess.json in {path} or pass --preprocess SPEC.json")
        images = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES]
        source = ScaleSource(path, "image-folder", _file_chunks("images", path, images, chunk), spec)
    elif suffixes & {".npy", ".npz"}:
        source = _arrays(path, [p for p in files if p.suffix.lower() in (".npy", ".npz")], inputs, chunk)
    else:
        raise CalibrationDataError(f"{path} holds no images, .npy/.npz or .parquet files",
                                   fix="pass a folder of images (with preprocess.json), .npy/.npz shards, or Parquet files")
    if source.samples == 0:
        raise CalibrationDataError(f"data {path} is empty (no usable samples found)")
    if limit is not None:
        source = ScaleSource(source.path, source.kind, _subset(source.chunks, limit, seed), source.spec, source.column)
    return source


def _subset(chunks: Sequence[Chunk], limit: int, seed: int) -> List[Chunk]:
    total = sum(c.size for c in chunks)
    if limit >= total:
        return list(chunks)
    chosen = np.sort(np.random.default_rng(seed).permutation(total)[:limit])
    out, offset = [], 0
    for c in chunks:
        picked = chosen[(chosen >= offset) & (chosen < offset + c.size)] - offset
        if len(picked):
            if c.files:
                out.append(replace(c, files=tuple(c.files[i] for i in picked), labels=tuple(c.labels[i] for i in picked)))
            else:
                out.append(replace(c, rows=tuple(int(c.row_ids[i]) for i in picked)))
        offset += c.size
    return out


def _labels_csv(folder: Path) -> dict:
    path = folder / "labels.csv"
    if not path.is_file():
        return {}
    with open(path, newline="") as handle:
        return {row["file"]: int(row["label"]) for row in csv.DictReader(handle)}


def _file_chunks(kind: str, folder: Path, files: Sequence[Path], chunk: int) -> List[Chunk]:
    labels = _labels_csv(folder if folder.is_dir() else folder.parent)
    out = []
    for i in range(0, len(files), chunk):
        part = files[i:i + chunk]
        out.append(Chunk(kind, str(folder), files=tuple(str(p) for p in part),
                         labels=tuple(labels.get(p.name) for p in part)))
    return out


def _arrays(path: Path, files: Sequence[Path], inputs: Sequence[InputSpec], chunk: int) -> ScaleSource:
    """A .npy/.npz whose arrays have the model input's rank (batch axis included) is a shard of rows;
    a folder of .npy files one rank lower holds one sample per file (named in labels.csv if labelled)."""
    shards, singles, problems = [], [], []
    rank = len(inputs[0].shape) if inputs else 0
    for f in files:
        try:
            if f.suffix.lower() == ".npy":
                array = np.load(f, mmap_mode="r", allow_pickle=False)
            else:
                with np.load(f, allow_pickle=False) as z:
                    keys = [k for k in z.files if k not in LABEL_KEYS]
                    array = z[keys[0]] if keys else np.empty((0,))
        except (OSError, ValueError, EOFError) as exc:
            problems.append(f"{f}: {first_line(exc)}")
            continue
        if f.suffix.lower() == ".npy" and path.is_dir() and array.ndim == rank - 1:
            singles.append(f)
        else:
            shards.append((f, len(array) if array.ndim else 0))
    if shards and singles:
        problems.append(f"{path} mixes shards (N, ...) and one-sample .npy files, e.g. {singles[0].name}")
    if problems:
        raise CalibrationDataError(problems, fix="fix or remove the listed files")
    if singles:
        return ScaleSource(path, "npy-folder", _file_chunks("npy-files", path, singles, chunk), None)
    chunks = [Chunk("array", str(f), s, min(s + chunk, rows)) for f, rows in shards for s in range(0, rows, chunk)]
    return ScaleSource(path, "array-shards" if path.is_dir() else "array-file", chunks, None)


def _parquet(path: Path, files: Sequence[Path], spec: Optional[PreprocessSpec], chunk: int, column: Optional[str]) -> ScaleSource:
    import pyarrow.parquet as pq

    chunks: List[Chunk] = []
    chosen = column
    for f in files:
        try:
            meta = pq.ParquetFile(f)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise CalibrationDataError(f"cannot read Parquet file {f}: {first_line(exc)}") from exc
        names = [n for n in meta.schema_arrow.names if n not in LABEL_KEYS and n not in ("id", "name")]
        if chosen is None:
            if len(names) != 1:
                raise CalibrationDataError(f"{f} has columns {names}; which one holds the input is ambiguous",
                                           fix="pass --column NAME")
            chosen = names[0]
        elif chosen not in meta.schema_arrow.names:
            raise CalibrationDataError(f"{f} has no column {chosen!r} (columns: {meta.schema_arrow.names})")
        start = 0
        for group in range(meta.metadata.num_row_groups):  # a row group is the unit Parquet reads
            rows = meta.metadata.row_group(group).num_rows
            chunks.append(Chunk("parquet", str(f), start, start + rows, group=group))
            start += rows
    return ScaleSource(path, "parquet", chunks, spec, chosen)


# --- reading a chunk (where it is processed) ----------------------------------------------------------

@dataclass(frozen=True)
class Decoding:
    """What a worker needs to turn raw items into inputs (small: it is shipped to every actor)."""

    spec: Optional[PreprocessSpec] = None
    column: Optional[str] = None


def read_chunk(chunk: Chunk, source: "ScaleSource | Decoding", inputs: Sequence[InputSpec]) -> Iterator[LoadedRow]:
    """The rows of one chunk, each validated against the model inputs; bad rows come back with an error."""
    if chunk.kind == "images":
        from edgekit.preprocessing.spec import load_image

        for f, label in zip(chunk.files, chunk.labels):
            yield _checked(f, lambda f=f: [load_image(Path(f), source.spec)[None]], inputs, label)
    elif chunk.kind == "npy-files":
        for f, label in zip(chunk.files, chunk.labels):
            yield _checked(f, lambda f=f: [np.load(f, allow_pickle=False)[None]], inputs, label)
    elif chunk.kind == "array":
        yield from _array_rows(chunk, inputs)
    elif chunk.kind == "parquet":
        yield from _parquet_rows(chunk, source, inputs)
    else:
        raise ValueError(f"unknown chunk kind {chunk.kind!r}")


def _array_rows(chunk: Chunk, inputs: Sequence[InputSpec]) -> Iterator[LoadedRow]:
    labels = None
    try:
        if chunk.path.lower().endswith(".npy"):
            arrays = [np.load(chunk.path, mmap_mode="r", allow_pickle=False)]
        else:
            with np.load(chunk.path, allow_pickle=False) as z:
                data = {k: z[k][chunk.start:chunk.stop] for k in z.files}  # npz members load whole: keep shards small
            key = next((k for k in LABEL_KEYS if k in data), None)
            labels = data.pop(key).reshape(-1) if key else None
            names = [i.name for i in inputs]
            arrays = [data[n] for n in names] if all(n in data for n in names) else [data[k] for k in sorted(data)]
            arrays = [_Offset(a, chunk.start) for a in arrays]
    except (OSError, ValueError, EOFError) as exc:
        for row in chunk.row_ids:
            yield LoadedRow(f"{chunk.path}[{row}]", None, error=first_line(exc))
        return
    for row in chunk.row_ids:
        label = int(labels[row - chunk.start]) if labels is not None else None
        yield _checked(f"{chunk.path}[{row}]", lambda row=row: [np.asarray(a[row])[None] for a in arrays], inputs, label)


class _Offset:
    """An array slice indexed by the row numbers of the whole file."""

    def __init__(self, array: np.ndarray, start: int) -> None:
        self.array, self.start = array, start

    def __getitem__(self, row: int) -> np.ndarray:
        return self.array[row - self.start]


def _parquet_rows(chunk: Chunk, source: "ScaleSource | Decoding", inputs: Sequence[InputSpec]) -> Iterator[LoadedRow]:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(chunk.path).read_row_group(chunk.group)
    row_ids = list(chunk.row_ids)
    if chunk.rows:  # --limit: a subset of the group
        table = table.take([r - chunk.start for r in row_ids])
    label_key = next((k for k in LABEL_KEYS if k in table.column_names), None)
    values = table.column(source.column).to_pylist()
    labels = table.column(label_key).to_pylist() if label_key else [None] * len(values)
    ids = table.column("id").to_pylist() if "id" in table.column_names else None
    for offset, (row, value, label) in enumerate(zip(row_ids, values, labels)):
        name = f"{chunk.path}[{row}]" + (f" (id {ids[offset]})" if ids else "")
        yield _checked(name, lambda value=value: [_parquet_value(value, source, inputs[0])], inputs,
                       None if label is None else int(label))


def _parquet_value(value, source: "ScaleSource | Decoding", spec: InputSpec) -> np.ndarray:
    if isinstance(value, (bytes, bytearray)):
        if source.spec is None:
            raise CalibrationDataError(f"column {source.column!r} holds encoded images but no preprocessing spec was given",
                                       fix="pass --preprocess SPEC.json")
        from edgekit.preprocessing.spec import load_image

        with tempfile.NamedTemporaryFile(suffix=".img") as handle:  # the Pillow reference decodes from a path
            handle.write(value)
            handle.flush()
            return load_image(Path(handle.name), source.spec)[None]
    array = np.asarray(value, dtype=np.float32)
    per_sample = int(np.prod([d for d in spec.shape[1:]]))
    if array.size != per_sample:
        raise CalibrationDataError(f"{array.size} values, the input {spec.name!r} needs {per_sample}")
    return array.reshape((1, *spec.shape[1:]))


def _checked(name: str, load, inputs: Sequence[InputSpec], label: Optional[int]) -> LoadedRow:
    """Load one sample; any failure (unreadable, wrong shape, NaN/Inf) is returned as the row's error."""
    try:
        sample = load()
    except Exception as exc:  # a corrupt sample of any kind is counted and named, never a crash
        return LoadedRow(name, None, label, error=first_line(exc))
    if len(sample) != len(inputs):
        return LoadedRow(name, None, label, error=f"{len(sample)} input(s), the model has {len(inputs)}")
    out = []
    for array, spec in zip(sample, inputs):
        if len(array.shape) != len(spec.shape) or any(e > 0 and g != e for g, e in zip(array.shape[1:], spec.shape[1:])):
            return LoadedRow(name, None, label, error=f"shape {tuple(array.shape[1:])}, input {spec.name!r} needs {tuple(spec.shape[1:])}")
        array = np.asarray(array).astype(spec.dtype, copy=False)
        if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
            return LoadedRow(name, None, label, error="contains NaN or Inf")
        out.append(array)
    return LoadedRow(name, out, label)
