"""Load the PyTorch model the Core ML backend converts (.pt2, package.module:factory, TorchScript)."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Tuple

from edgekit.errors import UserError, first_line
from edgekit.export.detect import ModelKind, detect_kind
from edgekit.export.torch_source import (_call_factory, _program_input_shape, _torch, factory_input_shape,
                                         load_exported_program, load_torchscript)
from edgekit.provenance import sha256_file
from edgekit.quiet import captured_output

log = logging.getLogger(__name__)

TORCH_KINDS = (ModelKind.PT2, ModelKind.TORCH_FACTORY, ModelKind.TORCHSCRIPT)


@dataclass
class TorchSource:
    """A float PyTorch model: an ExportedProgram (``program``) or a TorchScript module (``scripted``)."""

    model: str
    kind: ModelKind
    input_name: str
    input_shape: Tuple[int, ...]
    program: Any = None          # torch.export.ExportedProgram (pt2, factory)
    scripted: Any = None         # torch.jit.ScriptModule (TorchScript)
    sha256: Optional[str] = None # of the model file (None for a factory: code, not a file)
    route: str = ""

    def callable(self):
        """A callable running the float model (torch.export modules cannot be switched to eval(); they are exported in eval)."""
        return self.program.module() if self.program is not None else self.scripted

    def sample(self):
        return _torch().zeros(*self.input_shape)


def load_torch_source(model: str, input_shape: Optional[Tuple[int, ...]]) -> TorchSource:
    """Load ``model``; other model kinds get one error saying --format coreml takes PyTorch models."""
    kind = detect_kind(model)
    if kind not in TORCH_KINDS:
        raise UserError(
            f"--format coreml takes PyTorch models; {model} is a {kind.value} model",
            fix="pass the PyTorch model it came from (.pt2 from torch.export.save, TorchScript from torch.jit.save, "
            "or package.module:factory), or use --format tflite / onnx for this file",
        )
    sha = sha256_file(Path(model)) if Path(model).exists() else None
    if kind is ModelKind.PT2:
        program = load_exported_program(model)
        shape = tuple(input_shape or _program_input_shape(program))
        (name,) = program.graph_signature.user_inputs
        with warnings.catch_warnings(), captured_output():
            warnings.simplefilter("ignore")
            program = program.run_decompositions({})
        return TorchSource(model, kind, name, shape, program=program, sha256=sha,
                           route="torch.export.load -> torch.export (ATen) -> coremltools")
    if kind is ModelKind.TORCH_FACTORY:
        module = _call_factory(model).eval()
        shape = factory_input_shape(model, module, input_shape)
        program = _export(module, shape)
        (name,) = program.graph_signature.user_inputs
        return TorchSource(model, kind, name, tuple(shape), program=program, sha256=sha,
                           route="module:factory -> torch.export (ATen) -> coremltools")
    scripted, shape = load_torchscript(model, input_shape)
    return TorchSource(model, kind, "input", shape, scripted=scripted.eval(), sha256=sha,
                       route="torch.jit.load -> coremltools (TorchScript frontend)")


def _export(module, shape: Tuple[int, ...]):
    """torch.export in ATen dialect (coremltools refuses the TRAINING dialect of a saved .pt2)."""
    torch = _torch()
    try:
        with warnings.catch_warnings(), captured_output():
            warnings.simplefilter("ignore")
            return torch.export.export(module, (torch.zeros(*shape),)).run_decompositions({})
    except Exception as exc:
        raise UserError(
            f"torch.export cannot trace the model: {first_line(exc)}",
            fix="make the forward traceable by torch.export (no data-dependent Python control flow), or check --input-shape",
        ) from exc
