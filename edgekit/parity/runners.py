"""Model runners for parity: same float inputs in, float (dequantized) and raw outputs out."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Tuple

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.errors import InvalidModelError, ToolMissingError, first_line
from edgekit.provenance import sha256_file, tool_version
from edgekit.registry import Registry
from edgekit.tflite_model import TFLiteModel

log = logging.getLogger(__name__)

RUNNERS: Registry = Registry("model runner")

# TFLiteRunner kernels -> TFLiteModel interpreter kind, and how reports name them.
KERNELS = {"optimized": "plain", "reference": "reference"}
KERNEL_NAMES = {"optimized": "LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES (optimized kernels)",
                "reference": "LiteRT BUILTIN_REF (reference kernels)"}
OPTIMIZED_NOTE = ("int8 results of the optimized kernels may differ from the reference kernels (BUILTIN_REF, "
                  "what the firmware matches bit for bit) by 1 LSB per op, which later ops can carry further "
                  "(2 LSB measured at the output of the MLPerf Tiny AD autoencoder's FULLY_CONNECTED stack)")


class ModelRunner:
    """One model on one runtime."""

    def input_specs(self) -> List[InputSpec]:
        raise NotImplementedError

    def output_names(self) -> List[str]:
        raise NotImplementedError

    def run(self, sample: Sample) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        """(outputs in float terms, outputs as stored) for one sample (batch of 1)."""
        raise NotImplementedError

    def describe(self) -> dict:
        raise NotImplementedError


@RUNNERS.register("tflite")
class TFLiteRunner(ModelRunner):
    """LiteRT. ``kernels='optimized'`` (default): the builtin optimized kernels without default delegates,
    for FP32-vs-INT8 parity, accuracy and statistics (45x faster than the reference kernels on MobileNetV2).
    ``kernels='reference'``: BUILTIN_REF, only where bit-exactness is the question (host vs device, firmware)."""

    def __init__(self, model: TFLiteModel, *, kernels: str = "optimized", sha256: str | None = None) -> None:
        if kernels not in KERNELS:
            raise ValueError(f"kernels must be one of {sorted(KERNELS)}, not {kernels!r}")
        self.model = model
        self.kernels = kernels
        self.sha256 = sha256

    @classmethod
    def open(cls, path: Path) -> "TFLiteRunner":
        return cls(TFLiteModel.load(path), sha256=sha256_file(path))

    def input_specs(self) -> List[InputSpec]:
        return self.model.input_specs()

    def output_names(self) -> List[str]:
        return [o.name for o in self.model.outputs]

    def run(self, sample: Sample):
        raw = self.model.run(sample, kind=KERNELS[self.kernels], raw=True)
        from edgekit.tflite_model import dequantize

        return [dequantize(v, info) for v, info in zip(raw, self.model.outputs)], raw

    def describe(self) -> dict:
        return {
            "path": self.model.source,
            "sha256": self.sha256,
            "format": "tflite",
            "runtime": f"ai-edge-litert {tool_version('ai-edge-litert')}",
            "kernels": KERNEL_NAMES[self.kernels],
            **({"kernels_note": OPTIMIZED_NOTE} if self.kernels == "optimized" else {}),
            "inputs": [{"name": t.name, "shape": list(t.shape), "dtype": str(t.dtype), "scale": t.scale, "zero_point": t.zero_point} for t in self.model.inputs],
        }


ONNX_KERNELS = {
    "reference": "onnxruntime, graph optimizations off: QDQ reference semantics, independent of the host's int8 "
                 "instructions (DequantizeLinear -> float op -> QuantizeLinear, as ONNX defines it)",
    "optimized": "onnxruntime, default graph optimizations (WeightBiasQuantization off): QDQ fused into int8 kernels "
                 "(QLinearConv / MatMulInteger), what a deployment runs; results depend on the host's int8 instructions",
}


@RUNNERS.register("onnx")
class OnnxRunner(ModelRunner):
    """onnxruntime on the CPU, one thread; QDQ models are fed float inputs as ONNX defines them.

    ``kernels='reference'`` (the default, for every accuracy judgement) turns graph optimizations off, so a QDQ model
    computes DequantizeLinear -> float op -> QuantizeLinear exactly as written: the analogue of LiteRT's BUILTIN_REF.
    With optimizations on, onnxruntime fuses QDQ into int8 kernels whose x86 AVX2 path without VNNI (vpmaddubsw)
    saturates int16 intermediate sums, so the measured accuracy would depend on the host CPU.
    ``kernels='optimized'`` is that deployed session, for latency."""

    def __init__(self, path: Path, *, kernels: str = "reference") -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise ToolMissingError("onnxruntime", "pip install onnxruntime==1.32.0 (or run `make install`)") from None
        if kernels not in ONNX_KERNELS:
            raise ValueError(f"kernels must be one of {sorted(ONNX_KERNELS)}, not {kernels!r}")
        self.path = Path(path)
        self.kernels = kernels
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        extra = {}
        if kernels == "reference":
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        else:
            # onnxruntime's WeightBiasQuantization pass re-quantizes the float weights of an op kept in float
            # (--keep-float) when its input comes from a DequantizeLinear: it silently undoes mixed precision.
            extra["disabled_optimizers"] = ["WeightBiasQuantization"]
            _log_host_note_once()
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"], **extra)
        except Exception as exc:
            raise InvalidModelError(f"onnxruntime cannot load {path}: {first_line(exc)}") from exc
        self.sha256 = sha256_file(self.path)

    @classmethod
    def open(cls, path: Path) -> "OnnxRunner":
        return cls(path)

    def input_specs(self) -> List[InputSpec]:
        types = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int64)": np.int64}
        return [
            InputSpec(i.name, tuple(d if isinstance(d, int) else -1 for d in i.shape), np.dtype(types.get(i.type, np.float32)))
            for i in self.session.get_inputs()
        ]

    def output_names(self) -> List[str]:
        return [o.name for o in self.session.get_outputs()]

    def run(self, sample: Sample):
        feeds = {spec.name: value.astype(spec.dtype) for spec, value in zip(self.input_specs(), sample)}
        outputs = self.session.run(None, feeds)
        return [np.asarray(o, np.float32) for o in outputs], [np.asarray(o) for o in outputs]

    def describe(self) -> dict:
        return {"path": str(self.path), "sha256": self.sha256, "format": "onnx",
                "runtime": f"onnxruntime {tool_version('onnxruntime')}", "kernels": ONNX_KERNELS[self.kernels]}


_HOST_NOTE_LOGGED = False


def _log_host_note_once() -> None:
    global _HOST_NOTE_LOGGED
    if not _HOST_NOTE_LOGGED:
        _HOST_NOTE_LOGGED = True
        note = host_int8_note()
        if note:
            log.info("%s (used here for latency only)", note)


def host_int8_note(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """A note when this is an x86 host without VNNI (avx512_vnni / avx_vnni), where onnxruntime's optimized u8s8
    kernels use vpmaddubsw and can saturate int16 sums; None elsewhere or when /proc/cpuinfo is unreadable."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), None)
    if flags is None or "avx2" not in flags or {"avx512_vnni", "avx_vnni"} & set(flags):
        return None
    return ("x86 host without VNNI (no avx512_vnni / avx_vnni): onnxruntime's optimized int8 kernels use vpmaddubsw, "
            "whose int16 intermediate sums can saturate; their outputs (and so their accuracy) can differ from the QDQ "
            "reference semantics edgekit's parity uses")


@RUNNERS.register("coreml")
@RUNNERS.register("mlpackage")
class LazyCoreMLRunner:
    """Core ML .mlpackage: edgekit.coreml.runner.CoreMLRunner, imported on first use (it needs coremltools)."""

    @staticmethod
    def open(path: Path) -> ModelRunner:
        from edgekit.coreml.runner import CoreMLRunner

        return CoreMLRunner.open(Path(path))


def open_runner(path: Path) -> ModelRunner:
    """A runner for a model file, chosen by its content."""
    from edgekit.export.detect import detect_kind

    kind = detect_kind(str(path))
    if kind.value not in RUNNERS:
        raise InvalidModelError(
            f"{path} is a {kind.value} model; parity runs .tflite and .onnx models directly",
            fix="convert it first (edgekit quantize writes model_float.tflite beside model_int8.tflite)",
        )
    return RUNNERS.get(kind.value).open(Path(path))
