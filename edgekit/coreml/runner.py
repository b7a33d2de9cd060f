"""CoreMLRunner: parity runner for .mlpackage files, evaluated by edgekit's numpy MIL evaluator.

What is compared: the program's numeric outputs in the program's output order, as float32. For a classifier that
is the probabilities output as an array in class order (Core ML itself returns a dict); the class-label output is
not numeric and is left out of parity (it is the argmax of the probabilities; ``MILProgram.predict`` returns it).

On macOS (sys.platform == "darwin") each sample is also run by the real Core ML runtime through
``edgekit.coreml.macos`` and describe() records the largest |evaluator - Core ML| difference per output.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.coreml.evaluator import MILProgram
from edgekit.errors import CalibrationDataError
from edgekit.parity.runners import ModelRunner
from edgekit.provenance import sha256_file, tool_version

log = logging.getLogger(__name__)

NATIVE_COMPUTE_UNITS = "cpu_only"  # the macOS cross-check runs Core ML on the CPU (deterministic, no ANE fp16 paths)


class CoreMLRunner(ModelRunner):
    """An ML Program .mlpackage run by ``edgekit.coreml.evaluator.MILProgram`` (plus Core ML itself on macOS)."""

    def __init__(
        self,
        path: Path,
        *,
        to_feeds: Optional[Callable[[Sample], Dict[str, np.ndarray]]] = None,
        sha256: Optional[str] = None,
    ) -> None:
        self.path = Path(path)
        self.program = MILProgram.load(self.path)
        self.program.check_supported()
        self.to_feeds = to_feeds or self._feeds_in_order
        self.sha256 = sha256 or sha256_file(self.path)
        labels = self.program.label_outputs
        self._numeric = [name for name in self.program.outputs if name not in labels]
        self._native = self._open_native()
        self._native_max_diff: Dict[str, float] = {}

    @classmethod
    def open(cls, path: Path) -> "CoreMLRunner":
        return cls(path)

    def _open_native(self):
        if sys.platform != "darwin":
            return None
        from edgekit.coreml import macos  # written for macOS; imported only there

        return macos.load(self.path, NATIVE_COMPUTE_UNITS)

    def _feeds_in_order(self, sample: Sample) -> Dict[str, np.ndarray]:
        inputs = self.program.inputs
        if len(sample) != len(inputs):
            raise CalibrationDataError(
                f"a sample has {len(sample)} tensor(s), {self.path.name} has {len(inputs)} input(s) "
                f"({', '.join(i.name for i in inputs)})",
                fix="give one array per model input, in the model's input order",
            )
        return {spec.name: np.asarray(value) for spec, value in zip(inputs, sample)}

    def input_specs(self) -> List[InputSpec]:
        return [InputSpec(i.name, tuple(i.shape), np.dtype(np.float32) if i.is_image else i.dtype) for i in self.program.inputs]

    def output_names(self) -> List[str]:
        return list(self._numeric)

    def run(self, sample: Sample):
        feeds = self.to_feeds(sample)
        outputs = self.program.predict(feeds)
        raw = [np.asarray(outputs[name]) for name in self._numeric]
        if self._native is not None:
            self._compare_native(feeds, outputs)
        return [r.astype(np.float32) for r in raw], raw

    def _compare_native(self, feeds: Dict[str, np.ndarray], outputs: Dict[str, np.ndarray]) -> None:
        native = self._native.predict(_native_feeds(self.program, feeds))
        for name in self._numeric:
            if name in native:
                diff = float(np.max(np.abs(np.asarray(native[name], np.float64).reshape(-1)
                                           - np.asarray(outputs[name], np.float64).reshape(-1))))
                self._native_max_diff[name] = max(self._native_max_diff.get(name, 0.0), diff)

    def describe(self) -> dict:
        program = self.program
        result = {
            "path": str(self.path),
            "sha256": self.sha256,
            "format": "coreml",
            "runtime": f"edgekit MIL evaluator (numpy) on coremltools {tool_version('coremltools')} program",
            "opset": program.opset,
            "ops": sorted(program.ops_used()),
            "inputs": [
                {"name": i.name, "shape": list(i.shape), "dtype": str(i.dtype), "image": i.is_image, "color_layout": i.color_layout}
                for i in program.inputs
            ],
            "compared_outputs": list(self._numeric),
        }
        if program.class_labels is not None:
            result["classifier"] = {"labels": [str(c) for c in program.class_labels], "label_outputs": sorted(program.label_outputs)}
        if self._native is not None:
            result["coreml_runtime"] = {"compute_units": NATIVE_COMPUTE_UNITS, "max_abs_diff_vs_evaluator": dict(self._native_max_diff)}
        return result


def _native_feeds(program: MILProgram, feeds: Dict[str, np.ndarray]) -> dict:
    """Feeds for coremltools' predict: image inputs become PIL images (RGB order; Core ML applies the layout)."""
    from PIL import Image

    result = {}
    for spec in program.inputs:
        value = np.asarray(feeds[spec.name])
        if not spec.is_image:
            result[spec.name] = value
            continue
        pixels = np.clip(np.rint(value.astype(np.float64)), 0, 255).astype(np.uint8)[0]  # (C, H, W)
        if spec.color_layout in ("G", "G_FLOAT16"):
            result[spec.name] = Image.fromarray(pixels[0], mode="L")
        else:
            hwc = np.transpose(pixels, (1, 2, 0))
            result[spec.name] = Image.fromarray(hwc[..., ::-1] if spec.color_layout == "BGR" else hwc, mode="RGB")
    return result
