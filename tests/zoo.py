"""The model zoo (issue 25): real models shipped inside public Python packages (tests/fixtures/zoo/<package>/, each
with its LICENSE and PROVENANCE.md), and the one pipeline the zoo test and bench_model_zoo.py run on each:
float model + generated calibration data -> `edgekit quantize` -> `edgekit firmware --build` -> `edgekit run` on
QEMU mps2-an386 (bit-exact vs LiteRT BUILTIN_REF, instructions from the QEMU plugin) -> RAM vs the smallest arena
the tflite-micro python runtime works with for the same int8 model."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ZOO = Path(__file__).resolve().parent / "fixtures" / "zoo"
BOARD = "mps2-an386"
RAM_TARGET = 0.6  # edgekit runtime RAM (arena + state) <= 0.6 x TFLM's smallest working arena


@dataclass(frozen=True)
class ZooModel:
    """One zoo model: its file, the float input range its calibration data is drawn from, and what it needs."""

    package: str
    file: str
    low: float = 0.0
    high: float = 1.0
    needs: Tuple[str, ...] = ()   # edgekit ops other issue-25 branches add (empty: runs on main)
    suite: bool = True            # in tests/test_model_zoo.py (False: only in the benchmark)

    @property
    def name(self) -> str:
        return Path(self.file).stem

    @property
    def path(self) -> Path:
        """The fixture (``file`` may also be an absolute path: a model a benchmark built itself)."""
        return Path(self.file) if Path(self.file).is_absolute() else ZOO / self.package / self.file


# Input ranges: MediaPipe's ImageToTensorCalculator output_tensor_float_range of each model's graph.
MODELS: Tuple[ZooModel, ...] = (
    ZooModel("mediapipe", "hand_landmark_lite.tflite", 0.0, 1.0),
    ZooModel("mediapipe", "face_detection_short_range.tflite", -1.0, 1.0),  # its RELUs fuse into ADD
    ZooModel("mediapipe", "face_landmark.tflite", 0.0, 1.0),
    ZooModel("mediapipe", "hand_recrop.tflite", 0.0, 1.0),
)


@dataclass
class ZooResult:
    """What the pipeline measured for one model (figures from firmware.json, run.json and the TFLM arena)."""

    model: ZooModel
    ops: Dict[str, int]
    folded: Dict[str, int] = field(default_factory=dict)
    missing_ops: List[str] = field(default_factory=list)   # of the int8 model once quantized (else the float one)
    error: str = ""
    int8_bytes: int = 0
    ram_bytes: int = 0            # arena + runtime state (firmware.json)
    arena_bytes: int = 0
    state_bytes: int = 0
    flash_bytes: int = 0
    tflm_arena_bytes: int = 0     # smallest working arena of the tflite-micro python runtime (64-bit host)
    instructions: int = 0
    macs: int = 0
    bit_exact: Optional[bool] = None
    differing_elements: int = -1
    vs_tflm_python: Optional[bool] = None
    parity: Dict[str, float] = field(default_factory=dict)  # cosine vs float per output, generated data

    @property
    def ram_ratio(self) -> float:
        return self.ram_bytes / self.tflm_arena_bytes if self.tflm_arena_bytes else float("nan")

    def to_json(self) -> dict:
        data = {k: v for k, v in self.__dict__.items() if k != "model"}
        data.update(model=self.model.name, package=self.model.package, ram_ratio=self.ram_ratio)
        return data


def op_counts(data: bytes) -> Dict[str, int]:
    from collections import Counter

    from edgekit.tflite_graph import read_graph

    return dict(Counter(op.qualified_name for op in read_graph(data).ops).most_common())


def missing_ops(data: bytes) -> List[str]:
    """Ops of ``data`` (float or int8) the edgekit runtime has no kernel for (DEQUANTIZE/DENSIFY of weights fold)."""
    from edgekit.firmware.support import EDGEKIT_OPS

    return sorted(set(op_counts(data)) - set(EDGEKIT_OPS) - {"DENSIFY"})


def calibration_data(model_path: Path, low: float, high: float, folder: Path, count: int, seed: int = 0) -> Path:
    """``count`` seeded samples, uniform over [low, high], of the model's (single) input shape, as one .npy."""
    from edgekit.tflite_graph import read_graph

    graph = read_graph(model_path.read_bytes())
    (index,) = graph.inputs
    shape = graph.tensors[index].shape[1:]
    path = folder / f"{model_path.stem}_calib.npy"
    np.save(path, np.random.default_rng(seed).uniform(low, high, (count, *shape)).astype(np.float32))
    return path


def run_model(model: ZooModel, workdir: Path, *, calib_count: int = 8, samples: int = 1,
              optimize: Optional[str] = None) -> ZooResult:
    """The whole pipeline; stops at the first step that fails and records why in ``error`` (no exception)."""
    from edgekit.cli import main as cli
    from edgekit.errors import EdgekitError
    from edgekit.export.fold_constants import fold_constants
    from edgekit.firmware.tflm import measure_tflm_arena
    from edgekit.quantize import quantize

    data = model.path.read_bytes()
    result = ZooResult(model, op_counts(data), fold_constants(data, model.name).folded, missing_ops(data))
    workdir.mkdir(parents=True, exist_ok=True)
    calib = calibration_data(model.path, model.low, model.high, workdir, calib_count)
    try:
        quantized = quantize(str(model.path), calib, workdir / "quantize")
    except EdgekitError as exc:
        result.error = f"edgekit quantize: {exc}"
        return result
    # parity vs the float model on generated data: recorded, not judged (the data are not real images)
    result.parity = {o.name: float(o.cosine) for o in quantized.parity.outputs}
    int8 = workdir / "quantize" / quantized.main_file
    result.int8_bytes = int8.stat().st_size
    result.missing_ops = missing_ops(int8.read_bytes())  # what the int8 model really needs (RELU may have fused)
    fw = workdir / "firmware"
    mode = ["--optimize", optimize] if optimize else []  # None: the firmware command's default (balanced)
    if cli(["firmware", str(int8), "--board", BOARD, "--build", "-o", str(fw)] + mode) != 0:
        result.error = f"edgekit firmware refused the int8 model (ops it lacks: {', '.join(result.missing_ops) or 'none'})"
        return result
    info = json.loads((fw / "firmware.json").read_text())
    result.arena_bytes, result.state_bytes = int(info["arena_bytes"]), int(info["state_bytes"])
    result.ram_bytes = result.arena_bytes + result.state_bytes
    result.flash_bytes = int(info["flash_bytes"])
    result.tflm_arena_bytes = measure_tflm_arena(int8.read_bytes()).min_working_64bit
    run_dir = workdir / "run"
    code = cli(["run", str(fw), "--device", f"qemu:{BOARD}", "-n", "1", "--warmup", "0", "--inputs", str(calib),
                "--input-limit", str(samples), "-o", str(run_dir)])
    if code != 0 or not (run_dir / "run.json").is_file():
        result.error = f"edgekit run on QEMU {BOARD} exited {code}"
        return result
    run = json.loads((run_dir / "run.json").read_text())
    exact = run["outputs_bit_exact"]
    result.instructions, result.macs = int(run["instructions_per_inference"]), int(run["macs_per_inference"])
    result.bit_exact, result.differing_elements = bool(exact["bit_exact"]), int(exact["differing_elements"])
    result.vs_tflm_python = (exact.get("vs_tflm_python") or {}).get("bit_exact")
    return result
