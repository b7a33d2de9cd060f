"""Every torch op of a model checked against coremltools' torch converter registry, before converting."""
from __future__ import annotations

from typing import Iterator, Tuple

from edgekit.support import OpSupport, SupportReport

from .convert import coremltools
from .source import TorchSource

TARGET = "Core ML (coremltools torch frontend)"


def check_torch_ops(source: TorchSource) -> SupportReport:
    """One OpSupport per distinct op kind (first location kept); ct.convert would stop at the first unknown one."""
    coremltools()  # the import itself is noisy (TensorFlow, torch version warnings): quietened there
    from coremltools.converters.mil.frontend.torch.torch_op_registry import _TORCH_OPS_REGISTRY
    from coremltools.converters.mil.frontend.torch.utils import sanitize_op_kind

    known = _TORCH_OPS_REGISTRY.name_to_func_mapping
    ops = _program_ops(source.program) if source.program is not None else _script_ops(source.scripted)
    report = SupportReport(TARGET)
    seen = set()
    for kind, location in ops:
        if kind in seen:
            continue
        seen.add(kind)
        supported = sanitize_op_kind(kind) in known
        reason = "" if supported else "coremltools 9.0 has no converter for it"
        report.ops.append(OpSupport(kind, location, supported, reason))
    return report


def _program_ops(program) -> Iterator[Tuple[str, str]]:
    """(kind, location) of every call_function node, named the way coremltools' EXIR frontend names them."""
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        try:
            kind = node.target.name()
        except AttributeError:
            kind = getattr(node.target, "__name__", str(node.target))
        yield kind, f"node '{node.name}'"


def _script_ops(scripted) -> Iterator[Tuple[str, str]]:
    """(kind, location) of every non-prim node of the inlined TorchScript graph (prim:: nodes are structural)."""
    def walk(block):
        for node in block.nodes():
            if not node.kind().startswith("prim::"):
                outputs = [o.debugName() for o in node.outputs()]
                yield node.kind(), f"value '%{outputs[0]}'" if outputs else "graph"
            for sub in node.blocks():
                yield from walk(sub)

    yield from walk(scripted.inlined_graph)
