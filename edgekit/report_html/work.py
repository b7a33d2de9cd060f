"""The work of one inference on the device: instructions per operator (exact, QEMU plugin) with each op's
estimated latency, and the estimated cycles per instruction class."""
from __future__ import annotations

from typing import List, Optional, Sequence

from edgekit.firmware.cycle_model import CycleEstimate
from edgekit.report_html.page import figure, p, table
from edgekit.report_html.svg import Bar, esc, hbar_chart
from edgekit.run.results import OpInstructions


def op_label(o: OpInstructions) -> str:
    """"#3 CONV_2D", or "#0-3 CONV_2D+ADD" for a row-streamed group."""
    if o.ops:
        return f"#{o.index}-{o.last_index} {'+'.join(map(str, o.ops))}"
    return f"#{o.index} {o.op}"


def per_op_section(per_op: Sequence[OpInstructions], cycles: Optional[CycleEstimate], *, board: str) -> str:
    """The per-operator chart (``chart-per-op``) and table. Each op's latency is ESTIMATED as its exact
    instructions x the inference's mean cycles per instruction / the clock (stated beside the figures)."""
    if not per_op:
        return p("No per-operator counts (the device has no instruction-counting plugin).", "muted")
    cpi = cycles.cycles_per_instruction if cycles else None
    clock = cycles.clock_hz if cycles else None

    def ms(instructions: int) -> Optional[float]:
        return instructions * cpi / clock * 1e3 if cpi and clock else None

    total = sum(o.instructions for o in per_op) or 1
    bars = [Bar(op_label(o), o.instructions, group=str(o.op),
                tip=f"{op_label(o)}: {o.instructions:,} instructions (exact), {o.instructions / total:.1%}"
                    + (f"; ~{ms(o.instructions):.3g} ms (estimated)" if ms(o.instructions) else ""))
            for o in per_op]
    chart = hbar_chart("chart-per-op", bars, axis_label="instructions per inference (exact, QEMU ekcount plugin)",
                       title=f"instructions per operator on {board}")
    model = (f"latency per op ESTIMATED: instructions x {cpi:.3f} cycles per instruction (the inference's mean, "
             f"from its instruction classes) / {clock / 1e6:g} MHz") if cpi and clock else "no latency model"
    rows = [(op_label(o), o.instructions, f"{o.instructions / total:.1%}", o.macs or 0,
             round(o.instructions / o.macs, 2) if o.macs else None,
             round(ms(o.instructions), 4) if ms(o.instructions) is not None else None) for o in per_op]
    return (figure(chart, "exact instruction counts per operator; colour = operator type")
            + table(["operator", "instructions (exact)", "share", "MACs", "instructions/MAC", "latency ms (estimated)"],
                    rows, table_id="per-op")
            + p(esc(model), "estimate"))


def cycles_section(cycles: Optional[CycleEstimate]) -> str:
    """Estimated cycles per instruction class (``chart-cycles``): exact counts x the core's timing table."""
    if cycles is None:
        return p("No cycle estimate (no instruction classes from the device).", "muted")
    classes = [(name, row) for name, row in cycles.classes.items() if row.count]
    bars = [Bar(name, row.cycles, tip=f"{name}: {row.count:,} executed x {row.cycles_each:g} cycles = "
                                      f"{row.cycles:,.0f} cycles (estimated)") for name, row in classes]
    chart = hbar_chart("chart-cycles", bars, axis_label="cycles per inference (ESTIMATED)",
                       title=f"estimated cycles per instruction class ({cycles.core})")
    rows: List[tuple] = [(name, row.count, row.cycles_each, round(row.cycles)) for name, row in classes]
    rows.append(("all", cycles.instructions, round(cycles.cycles_per_instruction, 3), round(cycles.cycles)))
    return (figure(chart, f"{cycles.core}, memory: {cycles.memory}")
            + table(["class", "executed (exact)", "cycles each", "cycles (estimated)"], rows, table_id="cycles")
            + p(f"ESTIMATE: {esc(cycles.source)}. QEMU is not cycle-accurate: only the instruction counts are exact.",
                "estimate"))
