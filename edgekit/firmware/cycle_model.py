"""Cycle estimates from instruction classes: the ekcount plugin counts every executed instruction by class (QEMU
has no timing), and a core's published per-class timing turns the counts into cycles. Always an estimate.

Cortex-M4 (the table every core here starts from): Arm Cortex-M4 Technical Reference Manual r0p1, 3.3.1
"Cortex-M4 instruction set summary" (reproduced in TI SWCU192 Table 3-25): ALU, MUL/MLA/SMLAD/SMULL/SMLAL 1 cycle;
LDR/STR 2 (neighbouring loads/stores can pipeline to 1: not modelled, so a little high for load runs); LDM/STM/PUSH/
POP and LDRD/STRD 1 + N registers; SDIV/UDIV 2-12 by operands (12 taken); branch 1 + P, P = 1-3 pipeline refill
cycles (P = 2 taken); a conditional branch not taken 1; an LDM/POP that loads pc adds P; VFP arithmetic 1, VDIV/VSQRT
14, VLDR/VSTR 2, VLDM/VSTM 1 + N; IT and hints 1 (IT can fold into the previous instruction: a little high).
Cortex-M33 and Cortex-M7: Arm publishes no per-instruction table; the M4 timing is used (the M7 dual-issues, so the
estimate is an upper bound there). Cortex-M55: scalar code as the M4; it executes MVE (Helium) two beats per cycle
(Cortex-M55 TRM: a 128-bit vector instruction takes 2 cycles), so 2 cycles per MVE instruction (beat overlap with
the next instruction not modelled: an upper bound). Memory is taken as zero wait-state unless the board profile's
``cycle_model.memory`` says otherwise (the figure carries that text).
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional

from edgekit.firmware.plugin import EXTRA_TALLIES
from edgekit.results import Section

REFILL = 2           # P: pipeline refill cycles of a taken branch (1..3 on Cortex-M4)
DIVIDE = 12          # SDIV/UDIV: 2..12 by operands, the upper end

# class -> cycles per instruction on Cortex-M4; multi-register classes add their registers (below)
M4_CYCLES: Dict[str, float] = {
    "alu": 1, "load": 2, "store": 2, "load_multiple": 1, "store_multiple": 1, "multiply": 1, "divide": DIVIDE,
    "branch": 1 + REFILL, "branch_conditional": 1, "fp": 1, "fp_divide_sqrt": 14, "fp_load": 2, "fp_store": 2,
    "mve": 2, "other": 1,
}
# tallies that add cycles on top of the instruction classes
M4_EXTRA: Dict[str, float] = {"load_multiple_registers": 1, "store_multiple_registers": 1, "load_multiple_pc": REFILL,
                              "branch_conditional_taken": REFILL}

TIMING_SOURCES = {
    "cortex-m4": "Cortex-M4 TRM r0p1 3.3.1 timings",
    "cortex-m33": "Cortex-M4 TRM r0p1 3.3.1 timings (no published M33 table)",
    "cortex-m7": "Cortex-M4 TRM r0p1 3.3.1 timings (upper bound: the M7 dual-issues)",
    "cortex-m55": "Cortex-M4 TRM r0p1 3.3.1 timings for scalar code, 2 cycles per MVE instruction (Cortex-M55 TRM)",
}
ZERO_WAIT = "zero wait-state code and data memory"


class ClassCycles(Section):
    """One instruction class: how many ran, cycles each, cycles in all."""

    count: int
    cycles_each: float
    cycles: float


class CycleEstimate(Section):
    """Cycles of one inference from its instruction classes (an estimate: QEMU is not cycle-accurate)."""

    method: str            # always "estimated"
    source: str
    core: str
    memory: str
    instructions: int
    cycles: float
    cycles_per_instruction: float
    classes: Dict[str, ClassCycles]
    clock_hz: Optional[int] = None
    latency_ms: Optional[float] = None


def estimate_cycles(classes: Mapping[str, int], cpu: str, *, memory: Optional[str] = None,
                    clock_hz: Optional[int] = None) -> CycleEstimate:
    """The cycle estimate of one inference on ``cpu`` (arm-none-eabi-gcc -mcpu name) from ekcount's class counts."""
    core = cpu if cpu in TIMING_SOURCES else "cortex-m4"
    rows: Dict[str, ClassCycles] = {}
    for name, count in classes.items():
        each = M4_CYCLES.get(name, M4_EXTRA.get(name))
        if each is None:
            raise ValueError(f"no timing for instruction class {name!r}")
        rows[name] = ClassCycles(count=int(count), cycles_each=float(each), cycles=float(count) * float(each))
    instructions = sum(int(c) for n, c in classes.items() if n not in EXTRA_TALLIES)
    cycles = sum(r.cycles for r in rows.values())
    memory_text = memory or ZERO_WAIT
    source = (f"instruction classes counted exactly by the QEMU plugin (ekcount) x {TIMING_SOURCES.get(core)}; "
              f"taken branches 1 + {REFILL} refill cycles, divides {DIVIDE}; memory: {memory_text}"
              + ("" if cpu in TIMING_SOURCES else f"; {cpu} has no table here, Cortex-M4 timings used"))
    return CycleEstimate(method="estimated", source=source, core=cpu, memory=memory_text, instructions=instructions, cycles=cycles,
                         cycles_per_instruction=cycles / instructions if instructions else 0.0, classes=rows,
                         clock_hz=clock_hz, latency_ms=cycles / clock_hz * 1e3 if clock_hz else None)
