"""PyTorch (.pt2, TorchScript, module:factory) -> float .tflite.

.pt2 and factories go through litert-torch (torch.export based); TorchScript cannot be
re-exported by torch.export, so it goes through the legacy ONNX exporter and onnx2tf.
"""
from __future__ import annotations

import importlib
import logging
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Optional, Tuple

from edgekit.errors import ConversionError, InvalidModelError, ToolMissingError, UnsupportedOpError, UserError, first_line
from edgekit.export.detect import ModelKind
from edgekit.quiet import captured_output
from edgekit.support import OpSupport, SupportReport

log = logging.getLogger(__name__)


def _torch():
    try:
        import torch
    except ImportError:
        raise ToolMissingError("torch", "pip install torch==2.13.0 (or run `make install`)") from None
    return torch


def float_tflite_from_torch(model: str, kind: ModelKind, input_shape: Optional[Tuple[int, ...]]) -> Tuple[bytes, str]:
    if kind is ModelKind.PT2:
        program = load_exported_program(model)
        shape = input_shape or _program_input_shape(program)
        return _litert_convert(program.module(), shape, model), "torch.export.load -> litert-torch"
    if kind is ModelKind.TORCH_FACTORY:
        module = _call_factory(model)
        shape = factory_input_shape(model, module, input_shape)
        return _litert_convert(module.eval(), shape, model), "module:factory -> litert-torch"
    scripted, shape = load_torchscript(model, input_shape)
    return _via_onnx(scripted, shape, model), "torch.jit.load -> torch.onnx (legacy exporter) -> onnx2tf"


def load_exported_program(model: str):
    """torch.export.load; a truncated or foreign file is an InvalidModelError naming the fix."""
    torch = _torch()
    try:
        return torch.export.load(model)
    except Exception as exc:
        raise InvalidModelError(
            f"cannot load {model} with torch.export.load: {first_line(exc)}",
            fix="the file may be truncated or saved by another torch version; re-save with torch.export.save",
        ) from exc


def load_torchscript(model: str, input_shape: Optional[Tuple[int, ...]]):
    """(scripted module, input shape): TorchScript does not record the shape, so --input-shape is required."""
    torch = _torch()
    try:
        scripted = torch.jit.load(model, map_location="cpu")
    except Exception as exc:
        raise InvalidModelError(
            f"cannot load TorchScript {model}: {first_line(exc)}",
            fix="the file may be truncated or corrupt; re-save with torch.jit.save",
        ) from exc
    if input_shape is None:
        raise UserError(f"TorchScript files do not record the input shape of {model}", fix="pass --input-shape 1,3,224,224")
    return scripted, tuple(input_shape)


def factory_input_shape(spec: str, module, input_shape: Optional[Tuple[int, ...]]) -> Tuple[int, ...]:
    """--input-shape, else the module's ``example_input_shape``, else its Python module's ``INPUT_SHAPE``."""
    shape = input_shape or getattr(module, "example_input_shape", None)
    if shape is None:
        shape = getattr(importlib.import_module(spec.partition(":")[0]), "INPUT_SHAPE", None)
    if shape is None:
        raise UserError(f"the input shape of {spec} is unknown", fix="pass --input-shape 1,3,224,224")
    return tuple(shape)


def _program_input_shape(program) -> Tuple[int, ...]:
    user_inputs = [
        node for node in program.graph.nodes
        if node.op == "placeholder" and node.name in set(program.graph_signature.user_inputs)
    ]
    if len(user_inputs) != 1:
        raise UserError(f"edgekit supports single-input PyTorch models; this one has {len(user_inputs)} inputs")
    value = user_inputs[0].meta.get("val")
    return tuple(int(d) for d in value.shape)


def _call_factory(spec: str):
    torch = _torch()
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import {spec}: {exc}", fix="check the module is on PYTHONPATH and defines the factory") from exc
    module = factory()
    if not isinstance(module, torch.nn.Module):
        raise UserError(f"{spec} returned {type(module).__name__}, not a torch.nn.Module")
    return module


def _litert_convert(module, shape: Tuple[int, ...], source: str) -> bytes:
    torch = _torch()
    try:
        with captured_output():
            import litert_torch
    except ImportError:
        raise ToolMissingError("litert-torch", "pip install litert-torch==0.10.0 (or run `make install`)") from None
    sample = (torch.zeros(*shape),)
    try:
        with captured_output() as output, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            edge = litert_torch.convert(module, sample)
            return bytes(edge.model_content())
    except Exception as exc:
        text = str(exc) + "\n" + "\n".join(output)
        report = _unsupported_aten_ops(text)
        if report.rejected:
            raise UnsupportedOpError(report, target="TFLite (litert-torch)") from exc
        raise ConversionError(
            f"litert-torch could not convert {source}: {first_line(exc)}",
            fix="run with --verbose for the converter log",
        ) from exc


def _unsupported_aten_ops(text: str) -> SupportReport:
    import re

    report = SupportReport("TFLite (litert-torch)")
    for op in sorted(set(re.findall(r"(aten\.[a-z_0-9]+(?:\.[a-z_0-9]+)?)", text))):
        if "not supported" in text or "lowering" in text.lower():
            report.ops.append(OpSupport(op, "graph", False, "litert-torch has no lowering for it"))
    return report


def _via_onnx(scripted, shape: Tuple[int, ...], source: str) -> bytes:
    torch = _torch()
    from edgekit.export.onnx_source import float_tflite_from_onnx

    with tempfile.TemporaryDirectory(prefix="edgekit-ts-") as work:
        onnx_path = Path(work) / "model.onnx"
        try:
            with captured_output(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    scripted, (torch.zeros(*shape),), str(onnx_path), dynamo=False,
                    input_names=["input"], output_names=["output"], opset_version=17,
                )
        except Exception as exc:
            raise ConversionError(f"cannot export TorchScript {source} to ONNX: {first_line(exc)}") from exc
        return float_tflite_from_onnx(onnx_path)
