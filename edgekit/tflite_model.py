"""Run .tflite models with LiteRT (interpreter, inputs, outputs, ops, activation tensors); the flatbuffer itself is
read by edgekit.tflite_graph."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.errors import InvalidModelError, ToolMissingError, first_line
from edgekit.quiet import captured_output

log = logging.getLogger(__name__)

TFLITE_IDENTIFIER = b"TFL3"


@dataclass(frozen=True)
class TensorInfo:
    index: int
    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    scale: float
    zero_point: int

    @property
    def is_quantized(self) -> bool:
        return self.scale != 0.0


@dataclass(frozen=True)
class OpInfo:
    index: int
    name: str  # builtin name, e.g. CONV_2D
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]


_PROBED: set = set()  # (sha256, kind options) whose allocation already succeeded in a child


def _probe_allocation(litert, data: bytes, options: dict, step: str) -> None:
    """Allocate the interpreter once in a forked child first: a kernel's failed CHECK in Prepare (e.g. a scale of
    1e-8 from collapsed activations) aborts that child, not edgekit, and becomes a NativeCrashError naming the
    step. Python-level load errors are left to the in-process attempt, which reports them as before."""
    import hashlib

    from edgekit.native import ChildError, isolation_available, run_isolated

    key = (hashlib.sha256(data).hexdigest(), repr(sorted(options.items())))
    if key in _PROBED or not isolation_available():
        return

    def allocate() -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            litert.Interpreter(model_content=data, num_threads=1, **options).allocate_tensors()
        return True

    try:
        run_isolated(step, allocate, fix="check the quantization scales of the model (a collapsed calibration range "
                                         "gives scales near 1e-8 that LiteRT's kernels abort on): edgekit verify, or "
                                         "re-quantize with real calibration data")
    except ChildError:
        return  # a normal load error: the in-process attempt raises it with its message
    _PROBED.add(key)


def _interpreter_module():
    try:
        from ai_edge_litert import interpreter as litert
    except ImportError:  # a device with the older runtime
        try:
            from tflite_runtime import interpreter as litert  # type: ignore[no-redef]
        except ImportError:
            raise ToolMissingError("ai-edge-litert", "pip install ai-edge-litert==2.3.0 (or run `make install`)") from None
    return litert


def check_tflite_bytes(data: bytes, source: str) -> None:
    """Cheap structural checks before handing bytes to the runtime."""
    if len(data) < 16 or data[4:8] != TFLITE_IDENTIFIER:
        raise InvalidModelError(
            f"{source} is not a TFLite flatbuffer (missing 'TFL3' identifier; size {len(data)} bytes)",
            fix="pass a .tflite produced by a TFLite converter; the file may be truncated or of another kind",
        )


class TFLiteModel:
    """A .tflite model held in memory, with a LiteRT interpreter per resolver kind."""

    def __init__(self, data: bytes, *, source: str = "<bytes>") -> None:
        check_tflite_bytes(data, source)
        self.data = bytes(data)
        self.source = source
        self._interpreters: Dict[str, object] = {}
        self.describe_interpreter = self.interpreter("plain")

    @classmethod
    def load(cls, path: Path) -> "TFLiteModel":
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidModelError(f"cannot read model {path}: {exc.strerror}") from exc
        return cls(data, source=str(path))

    def guard_reference_kernels(self, litert, options: dict) -> None:
        """BUILTIN_REF kernels abort (a CHECK in Prepare) on degenerate int8 scales: for a quantized model, allocate
        once in an isolated child first, so such a model becomes a NativeCrashError naming the step."""
        if self._quantized():
            _probe_allocation(litert, self.data, options, f"LiteRT tensor allocation (reference kernels) of {self.source}")

    def _quantized(self) -> bool:
        """Any tensor with quantization parameters (from the optimized-kernel interpreter, which does not abort)."""
        details = self.interpreter("plain").get_tensor_details()
        return any(float((d.get("quantization") or (0.0, 0))[0]) != 0.0 for d in details)

    def interpreter(self, kind: str = "plain"):
        """kind: 'plain' (no delegates), 'reference' (BUILTIN_REF kernels), 'debug' (all tensors kept)."""
        if kind in self._interpreters:
            return self._interpreters[kind]
        litert = _interpreter_module()
        resolver = getattr(litert, "OpResolverType")
        options = {
            "plain": dict(experimental_op_resolver_type=resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
            "reference": dict(experimental_op_resolver_type=resolver.BUILTIN_REF),
            "debug": dict(
                experimental_op_resolver_type=resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                experimental_preserve_all_tensors=True,
            ),
        }[kind]
        if kind == "reference":
            self.guard_reference_kernels(litert, options)
        try:
            with warnings.catch_warnings(), captured_output((2,)):
                warnings.simplefilter("ignore")
                interp = litert.Interpreter(model_content=self.data, num_threads=1, **options)
                interp.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            raise InvalidModelError(
                f"{self.source} cannot be loaded by LiteRT: {first_line(exc, None)}",
                fix="the file is corrupt, truncated, or uses operators this runtime lacks",
            ) from exc
        self._interpreters[kind] = interp
        return interp

    # --- description -------------------------------------------------------------------
    def _tensor_info(self, detail: dict) -> TensorInfo:
        scale, zero_point = detail.get("quantization", (0.0, 0))
        return TensorInfo(
            index=int(detail["index"]),
            name=str(detail["name"]),
            shape=tuple(int(v) for v in detail.get("shape_signature", detail["shape"])),
            dtype=np.dtype(detail["dtype"]),
            scale=float(scale),
            zero_point=int(zero_point),
        )

    @property
    def inputs(self) -> List[TensorInfo]:
        return [self._tensor_info(d) for d in self.describe_interpreter.get_input_details()]

    @property
    def outputs(self) -> List[TensorInfo]:
        return [self._tensor_info(d) for d in self.describe_interpreter.get_output_details()]

    def input_specs(self) -> List[InputSpec]:
        """Inputs in float terms (what calibration data must look like)."""
        return [
            InputSpec(t.name, t.shape, np.dtype(np.float32) if t.is_quantized else t.dtype)
            for t in self.inputs
        ]

    @property
    def ops(self) -> List[OpInfo]:
        details = self.describe_interpreter._get_ops_details()
        return [
            OpInfo(int(d["index"]), str(d["op_name"]), tuple(int(i) for i in d["inputs"]), tuple(int(o) for o in d["outputs"]))
            for d in details
        ]

    def tensor(self, index: int) -> TensorInfo:
        return self._tensor_info(self.describe_interpreter._get_tensor_details(index, 0))

    def activation_tensors(self) -> List[int]:
        """Tensors computed at run time: model inputs and every op output (no constants)."""
        seen: Dict[int, None] = {t.index: None for t in self.inputs}
        for op in self.ops:
            for o in op.outputs:
                if o >= 0:
                    seen[o] = None
        return list(seen)

    # --- execution ---------------------------------------------------------------------
    def run(self, sample: Sample, *, kind: str = "plain", raw: bool = False) -> List[np.ndarray]:
        """Run one sample given in float terms; int8/uint8 inputs are quantized with the model's
        own scale/zero-point and outputs dequantized (unless ``raw``: stored integers back)."""
        interp = self.interpreter(kind)
        for info, value in zip(self.inputs, sample):
            interp.set_tensor(info.index, quantize_input(value, info))
        interp.invoke()
        outputs = []
        for info in self.outputs:
            value = interp.get_tensor(info.index)
            outputs.append(value.copy() if raw else dequantize(value, info))
        return outputs

    def tensor_values(self, indices: Sequence[int]) -> Dict[int, np.ndarray]:
        """Values of tensors after the last ``run(kind='debug')``."""
        interp = self.interpreter("debug")
        return {i: interp.get_tensor(i) for i in indices}

    def visit_tensors(self, indices: Sequence[int], visit: Callable[[int, np.ndarray], None]) -> None:
        """``visit(index, values)`` for each tensor after the last ``run(kind='debug')``, without copying: ``values``
        is a read-only view of the interpreter's buffer, valid only inside the call (LiteRT refuses to invoke
        while a view is held; copy what you keep)."""
        interp = self.interpreter("debug")
        for i in indices:
            view = interp.tensor(i)()
            view.flags.writeable = False
            visit(i, view)
            del view


def quantize_input(value: np.ndarray, info: TensorInfo) -> np.ndarray:
    if not info.is_quantized or np.issubdtype(value.dtype, np.integer):
        return np.asarray(value, dtype=info.dtype)
    limits = np.iinfo(info.dtype)
    q = np.round(np.asarray(value, np.float64) / info.scale) + info.zero_point
    return np.clip(q, limits.min, limits.max).astype(info.dtype)


def dequantize(value: np.ndarray, info: TensorInfo) -> np.ndarray:
    if not info.is_quantized:
        return np.asarray(value, dtype=np.float32)
    return ((value.astype(np.float32) - info.zero_point) * np.float32(info.scale)).astype(np.float32)
