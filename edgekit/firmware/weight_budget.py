"""--weights auto: which ops keep re-laid-out weight copies in flash, within a flash budget (issue 29).

A re-laid-out copy (CONV_2D's expanded int16 records, FULLY_CONNECTED's int16 pairs; Cortex-M4) makes its op faster
and costs flash. The budget: the model's flash (compacted constants + prepared blob) stays at most FLASH_LIMIT x the
int8 .tflite, and within the board's flash beside the code reserve. Ops are taken greedily by estimated instructions
saved per extra flash byte; an op whose copy does not fit is skipped and smaller ones after it may still fit (the
caller measures the chosen plan and drops the least useful op while the measured flash is over).

The extra bytes of each op are measured (the plan with that op's copy alone over the int8-weight plan); the
instructions saved are an ESTIMATE: a per-MAC + per-output-element rate per op type, least-squares fitted to the
instruction counts measured per op on QEMU mps2-an386 (ekcount plugin, --optimize balanced) of the MLPerf Tiny KWS, IC
and AD firmware with --weights relaid against --weights int8 (fit within 7 % on every CONV_2D op / row-streamed group
of those models; FULLY_CONNECTED within 2 % on the big layers, 25 % on 10-unit ones where a few hundred instructions
are at stake).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from edgekit.tflite_graph import Graph

FLASH_LIMIT = 1.2  # issue 29: flash of a prepared model <= 1.2x its int8 .tflite (plus runtime code)

# op type -> (instructions saved per MAC, per output element) by its re-laid-out copy on Cortex-M4: estimated (fit to
# measured QEMU mps2-an386 per-op counts, relaid vs int8, balanced; see the module docstring)
SAVED_RATES: Dict[str, Tuple[float, float]] = {
    "CONV_2D": (0.1194, 8.39),
    "FULLY_CONNECTED": (0.6246, 1.88),
}
RATE_SOURCE = ("estimated: per-MAC + per-output-element rates fitted to instruction counts measured per op on QEMU "
               "mps2-an386 (MLPerf Tiny KWS/IC/AD, --optimize balanced, --weights relaid vs int8)")


@dataclass(frozen=True)
class LayoutCandidate:
    """One op that can keep a re-laid-out weight copy."""

    op: int                  # op index in the main graph
    name: str                # CONV_2D, FULLY_CONNECTED
    extra_bytes: int         # flash over the int8-weight plan with this op's copy alone (measured)
    macs: int
    outputs: int             # output elements
    saved_instructions: int  # per inference (estimated)

    @property
    def density(self) -> float:
        """Estimated instructions saved per extra flash byte (a copy costing no flash is worth taking first)."""
        return float("inf") if self.extra_bytes <= 0 else self.saved_instructions / self.extra_bytes


def _product(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def op_work(graph: Graph, op_index: int) -> Tuple[int, int]:
    """(MACs, output elements) of a CONV_2D / FULLY_CONNECTED op from its shapes (0, 0 if unreadable)."""
    op = graph.ops[op_index]
    if len(op.inputs) < 2 or not op.outputs or not 0 <= op.inputs[1] < len(graph.tensors) \
            or not 0 <= op.outputs[0] < len(graph.tensors):
        return 0, 0
    weights, out = graph.tensors[op.inputs[1]].shape, graph.tensors[op.outputs[0]].shape
    outputs = _product(out)
    depth = _product(weights[1:]) if op.name == "CONV_2D" else (int(weights[-1]) if weights else 0)
    return outputs * depth, outputs


def estimated_saving(name: str, macs: int, outputs: int) -> int:
    """Instructions per inference a re-laid-out copy saves (estimated from SAVED_RATES; 0 for other op types)."""
    per_mac, per_output = SAVED_RATES.get(name, (0.0, 0.0))
    return int(round(per_mac * macs + per_output * outputs))


def layout_ops(graph: Graph) -> List[int]:
    """Indices of the ops whose kernels may keep a re-laid-out weight copy (the plan says whether they do)."""
    return [i for i, op in enumerate(graph.ops) if op.name in SAVED_RATES]


def candidate(graph: Graph, op_index: int, extra_bytes: int) -> LayoutCandidate:
    macs, outputs = op_work(graph, op_index)
    name = graph.ops[op_index].name
    return LayoutCandidate(op_index, name, extra_bytes, macs, outputs, estimated_saving(name, macs, outputs))


def ranked(candidates: Iterable[LayoutCandidate]) -> List[LayoutCandidate]:
    """Most estimated instructions saved per extra byte first (ties: the op that saves more, then op order)."""
    return sorted(candidates, key=lambda c: (-c.density, -c.saved_instructions, c.op))


def choose_layouts(candidates: Iterable[LayoutCandidate], budget_bytes: int) -> List[LayoutCandidate]:
    """Greedy: in ranked order, every copy whose extra bytes still fit the remaining budget (copies that cost no flash
    always; ones that save nothing never). Returned in ranked order."""
    chosen, left = [], budget_bytes
    for c in ranked(candidates):
        if c.extra_bytes <= 0 or (c.saved_instructions > 0 and c.extra_bytes <= left):
            chosen.append(c)
            left -= max(c.extra_bytes, 0)
    return chosen


def flash_limit_bytes(tflite_bytes: int, board_flash: Optional[int], code_reserve: int) -> int:
    """The most flash the model (constants + prepared blob) may take: FLASH_LIMIT x the .tflite, and what the board
    holds beside the code reserve (None: no board limit)."""
    limit = int(FLASH_LIMIT * tflite_bytes)
    return limit if board_flash is None else min(limit, board_flash - code_reserve)
