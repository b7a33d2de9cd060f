"""Any model edgekit takes for --format onnx -> a clean float ONNX graph (static shape, batch 1).

ONNX files are used as given (checked with onnx.checker, symbolic batch fixed to 1); PyTorch models
are exported with torch.onnx. Either way the graph then goes through onnx shape inference and
onnxruntime's quant_pre_process (constant folding, BatchNorm fusion, shapes), which is what
onnxruntime's quantizer expects.
"""
from __future__ import annotations

import logging
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from edgekit.errors import ConversionError, InvalidModelError, ToolMissingError, UserError, first_line
from edgekit.export.detect import ModelKind, detect_source_kind
from edgekit.quiet import captured_output

log = logging.getLogger(__name__)

DYNAMO_OPSET = 18   # torch.onnx dynamo exporter minimum
LEGACY_OPSET = 17   # TorchScript goes through the legacy (TorchScript-based) exporter
TAKES = "--format onnx takes ONNX or PyTorch models (.onnx, .pt2, TorchScript, package.module:factory)"


@dataclass(frozen=True)
class FloatOnnx:
    data: bytes          # the preprocessed float model (model_float.onnx)
    kind: ModelKind
    route: str
    notes: Tuple[str, ...] = ()


def onnx_module():
    try:
        import onnx
    except ImportError:
        raise ToolMissingError("onnx", "pip install onnx==1.23.2 (or run `make install`)") from None
    return onnx


def to_float_onnx(model: str, input_shape: Optional[Tuple[int, ...]] = None) -> FloatOnnx:
    """Load or export ``model`` and return the preprocessed float ONNX graph."""
    kind = detect_source_kind(model)
    if kind in (ModelKind.TFLITE, ModelKind.KERAS, ModelKind.SAVED_MODEL):
        raise UserError(
            f"{model} is a {kind.value} model; {TAKES}",
            fix="use --format tflite for TensorFlow/TFLite models (tf2onnx is not installed), or export the model to ONNX yourself",
        )
    with tempfile.TemporaryDirectory(prefix="edgekit-onnx-") as work:
        raw = Path(work) / "raw.onnx"
        notes = []
        if kind is ModelKind.ONNX:
            proto = load_checked(Path(model))
            fixed = fix_input_shapes(proto, input_shape)
            if fixed:
                notes.append(fixed)
            onnx_module().save(proto, str(raw))
            route = "as given"
        else:
            route = export_torch(model, kind, input_shape, raw)
        clean = Path(work) / "clean.onnx"
        preprocess(raw, clean, model)
        return FloatOnnx(clean.read_bytes(), kind, route + " -> onnx shape inference -> quant_pre_process", tuple(notes))


def load_checked(path: Path):
    """onnx.load + onnx.checker; a truncated or corrupt file is an InvalidModelError."""
    onnx = onnx_module()
    try:
        proto = onnx.load(str(path))
        onnx.checker.check_model(proto)
    except Exception as exc:  # DecodeError, ValidationError, OSError: all mean "not a usable ONNX file"
        first = first_line(exc)
        raise InvalidModelError(
            f"{path} is not a valid ONNX model ({first})",
            fix="the file may be truncated or corrupt; re-export it (torch.onnx.export / onnx.save)",
        ) from exc
    if not proto.graph.input:
        raise InvalidModelError(f"{path} has no graph inputs")
    return proto


def fix_input_shapes(proto, input_shape: Optional[Tuple[int, ...]]) -> Optional[str]:
    """Make every graph input static: --input-shape for a single input, else a symbolic batch becomes 1."""
    initializers = {i.name for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    if input_shape is not None:
        if len(inputs) != 1:
            raise UserError(f"--input-shape sets one input, the model has {len(inputs)}")
        dims = inputs[0].type.tensor_type.shape.dim
        if len(dims) != len(input_shape):
            raise UserError(f"--input-shape {','.join(map(str, input_shape))} has {len(input_shape)} dims, "
                            f"input '{inputs[0].name}' has {len(dims)}")
        for dim, value in zip(dims, input_shape):
            dim.Clear()
            dim.dim_value = int(value)
        return f"input '{inputs[0].name}' fixed to {list(input_shape)} (--input-shape)"
    changed = []
    for tensor in inputs:
        dims = tensor.type.tensor_type.shape.dim
        for position, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            if position != 0:
                raise UserError(f"input '{tensor.name}' has a dynamic dimension {position} ({dim.dim_param or '?'})",
                                fix="pass --input-shape, e.g. 1,3,224,224")
            dim.Clear()
            dim.dim_value = 1
            changed.append(tensor.name)
    return f"dynamic batch of {', '.join(changed)} fixed to 1" if changed else None


def export_torch(model: str, kind: ModelKind, input_shape: Optional[Tuple[int, ...]], out: Path) -> str:
    """PyTorch -> ONNX. .pt2 and factories use the dynamo exporter (opset 18); TorchScript the legacy one."""
    from edgekit.export.torch_source import (_call_factory, _program_input_shape, factory_input_shape,
                                             load_exported_program, load_torchscript)

    if kind is ModelKind.PT2:
        program = load_exported_program(model)
        shape = input_shape or _program_input_shape(program)
        _torch_export(program, shape, out, model, dynamo=True)
        return f"torch.export.load -> torch.onnx.export(dynamo, opset {DYNAMO_OPSET})"
    if kind is ModelKind.TORCH_FACTORY:
        module = _call_factory(model).eval()
        _torch_export(module, factory_input_shape(model, module, input_shape), out, model, dynamo=True)
        return f"module:factory -> torch.onnx.export(dynamo, opset {DYNAMO_OPSET})"
    scripted, shape = load_torchscript(model, input_shape)
    _torch_export(scripted, shape, out, model, dynamo=False)
    return f"torch.jit.load -> torch.onnx.export(legacy, opset {LEGACY_OPSET})"


def _torch_export(obj, shape: Tuple[int, ...], out: Path, source: str, *, dynamo: bool) -> None:
    torch = __import__("torch")
    options = dict(input_names=["input"], output_names=["output"])
    if dynamo:
        options.update(dynamo=True, opset_version=DYNAMO_OPSET, external_data=False, verbose=False)
    else:
        options.update(dynamo=False, opset_version=LEGACY_OPSET)
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")  # "torchvision is not installed"
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with captured_output() as output, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(obj, (torch.zeros(*shape),), str(out), **options)
    except Exception as exc:
        log.debug("torch.onnx.export output:\n%s", "\n".join(output))
        raise ConversionError(
            f"torch.onnx.export could not export {source}: {first_line(exc)}",
            fix="run with --verbose for the exporter log; unsupported layers must be replaced",
        ) from exc
    finally:
        registration.setLevel(level)


def preprocess(raw: Path, out: Path, source: str) -> None:
    """onnx shape inference + onnxruntime quant_pre_process (optimisation and symbolic shapes)."""
    onnx = onnx_module()
    from onnxruntime.quantization.shape_inference import quant_pre_process

    inferred = onnx.shape_inference.infer_shapes(onnx.load(str(raw)), strict_mode=False)
    try:
        with captured_output(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quant_pre_process(inferred, str(out), skip_symbolic_shape=False)
    except Exception as exc:
        raise ConversionError(
            f"onnxruntime quant_pre_process failed on {source}: {first_line(exc)}",
            fix="check that onnxruntime can run the model (python -c \"import onnxruntime as o; o.InferenceSession('m.onnx')\")",
        ) from exc
