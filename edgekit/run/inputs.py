"""Inputs for a run: the model's input tensors, and samples from --inputs data or seeded random values."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import CalibrationDataError, InvalidModelError, ToolMissingError, UserError, first_line

log = logging.getLogger(__name__)

RANDOM_SAMPLES = 4
ONNX_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
               "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
               "tensor(bool)": np.bool_}


@dataclass(frozen=True)
class ModelInput:
    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0


def model_file(artifact: Path) -> Path:
    """The model inside an artifact: the file itself, or model.tflite / model.onnx in a folder."""
    artifact = Path(artifact)
    if not artifact.exists():
        raise InvalidModelError(f"artifact {artifact} does not exist")
    if artifact.is_dir() and artifact.suffix != ".mlpackage":
        for name in ("model.tflite", "model_int8.tflite", "model.onnx"):
            if (artifact / name).is_file():
                return artifact / name
        raise InvalidModelError(f"{artifact} is a folder without model.tflite / model.onnx",
                                fix="pass the .tflite or .onnx file itself")
    return artifact


def model_inputs(artifact: Path) -> List[ModelInput]:
    path = model_file(artifact)
    suffix = path.suffix.lower()
    if suffix == ".tflite":
        from edgekit.tflite_model import TFLiteModel

        return [ModelInput(t.name, tuple(max(d, 1) for d in t.shape), t.dtype, t.scale, t.zero_point)
                for t in TFLiteModel.load(path).inputs]
    if suffix == ".onnx":
        try:
            import onnxruntime as ort
        except ImportError:
            raise ToolMissingError("onnxruntime", "pip install onnxruntime==1.32.0") from None
        try:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own exception types
            raise InvalidModelError(f"{path} cannot be loaded by onnxruntime: {first_line(exc, None)}") from exc
        return [ModelInput(i.name, tuple(d if isinstance(d, int) and d > 0 else 1 for d in i.shape),
                           np.dtype(ONNX_DTYPES.get(i.type, np.float32))) for i in session.get_inputs()]
    raise UserError(f"cannot tell the inputs of {path} (a {suffix or 'folder'} artifact)",
                    fix="pass a .tflite or .onnx model, or a runner that understands this artifact")


def random_inputs(inputs: Sequence[ModelInput], count: int = RANDOM_SAMPLES, seed: int = 0) -> List[Dict[str, np.ndarray]]:
    """Seeded random samples: integers over the full range of integer inputs, N(0, 1) for float inputs."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(count):
        sample = {}
        for spec in inputs:
            if np.issubdtype(spec.dtype, np.integer):
                info = np.iinfo(spec.dtype)
                sample[spec.name] = rng.integers(info.min, info.max, size=spec.shape, endpoint=True).astype(spec.dtype)
            elif spec.dtype == np.bool_:
                sample[spec.name] = rng.integers(0, 1, size=spec.shape, endpoint=True).astype(np.bool_)
            else:
                sample[spec.name] = rng.standard_normal(spec.shape).astype(spec.dtype)
        samples.append(sample)
    return samples


def _quantize(value: np.ndarray, spec: ModelInput) -> np.ndarray:
    if np.issubdtype(value.dtype, np.integer) or not np.issubdtype(spec.dtype, np.integer):
        return np.asarray(value, dtype=spec.dtype)
    if spec.scale == 0.0:
        raise CalibrationDataError(f"input {spec.name!r} is {spec.dtype} without quantization parameters; "
                                   f"pass {spec.dtype} data, not float")
    info = np.iinfo(spec.dtype)
    q = np.round(np.asarray(value, np.float64) / spec.scale) + spec.zero_point
    return np.clip(q, info.min, info.max).astype(spec.dtype)


# why a plain dict: the second value is the source's own description (edgekit.calibration.dataset describe():
# kind, path, items, preprocess...), written as run.json config.inputs; the calibration source owns its keys
def load_inputs(path: Path, inputs: Sequence[ModelInput], *, limit: int, seed: int = 0) -> Tuple[List[Dict[str, np.ndarray]], Dict[str, Any]]:
    """Samples from an --inputs source (folder of images with preprocess.json, .npy/.npz, folder of .npy), in
    float terms (quantized with the model's own scale/zero point) or already in the model's integer dtype."""
    from edgekit.calibration import dataset as data
    from edgekit.calibration.dataset import InputSpec

    source = data.open_source(Path(path), [i.name for i in inputs])
    chosen = data.whole(source, limit=limit, seed=seed)
    first = source.load(chosen.indices[0])
    specs = []
    for array, spec in zip(first, inputs):
        integer_data = np.issubdtype(array.dtype, np.integer)
        specs.append(InputSpec(spec.name, spec.shape, spec.dtype if integer_data else np.dtype(np.float32)))
    samples = []
    for sample in chosen.samples(specs):
        samples.append({spec.name: _quantize(array, spec) for array, spec in zip(sample, inputs)})
    return samples, chosen.describe()


def prepare_inputs(artifact: Path, inputs_path: Optional[Path], *, limit: int = 16, seed: int = 0,
                   specs: Optional[Sequence[ModelInput]] = None) -> Tuple[List[Dict[str, np.ndarray]], Dict[str, Any]]:
    specs = list(specs) if specs is not None else model_inputs(artifact)
    if inputs_path is None:
        samples = random_inputs(specs, seed=seed)
        return samples, {"kind": "random", "seed": seed, "samples": len(samples),
                         "note": "seeded random values over each input's range (no --inputs given)"}
    return load_inputs(inputs_path, specs, limit=limit, seed=seed)
