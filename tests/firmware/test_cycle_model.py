"""Cycle estimates per instruction class (edgekit.firmware.cycle_model): the arithmetic of the Cortex-M4 timing
table, the labels, and the estimate of a real inference counted on QEMU."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from edgekit.firmware.cycle_model import REFILL, estimate_cycles


def test_cycles_follow_the_cortex_m4_table():
    classes = {"alu": 100, "load": 10, "store": 5, "load_multiple": 2, "load_multiple_registers": 8,
               "store_multiple": 1, "store_multiple_registers": 4, "multiply": 20, "divide": 1, "branch": 3,
               "branch_conditional": 10, "branch_conditional_taken": 9, "load_multiple_pc": 1, "fp": 0,
               "fp_divide_sqrt": 0, "fp_load": 0, "fp_store": 0, "mve": 0, "other": 2}
    est = estimate_cycles(classes, "cortex-m4", clock_hz=100_000_000)
    expected = (100 + 10 * 2 + 5 * 2 + (2 + 8) + (1 + 4) + 20 + 12 + 3 * (1 + REFILL) + 10 + 9 * REFILL
                + REFILL + 2)
    assert est.cycles == expected and est.instructions == 154 and est.method == "estimated"
    assert est.latency_ms == pytest.approx(expected / 1e5) and est.cycles_per_instruction == pytest.approx(expected / 154)
    assert "zero wait-state" in est.memory and "TRM" in est.source
    assert "no table here" in estimate_cycles({"alu": 1}, "cortex-m0").source
    with pytest.raises(ValueError, match="no timing"):
        estimate_cycles({"teleport": 1}, "cortex-m4")


@pytest.mark.skipif(not (shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")),
                    reason="qemu-system-arm and arm-none-eabi-gcc are needed")
def test_kws_inference_estimate_on_m4_and_m55(mlperf, tmp_path):
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.qemu import QemuSession
    from edgekit.run.runners.mcu import cycle_estimate

    x = np.random.default_rng(0).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)
    cpis = {}
    for name in ("mps2-an386", "mps3-an547"):
        result = generate_firmware(mlperf / "kws_ref_model_int8.tflite", name, tmp_path / name, build=True)
        board = load_board(name)
        with QemuSession(board, result.elf, count_instructions=True) as qemu:
            counted = qemu.infer([x])
        est = cycle_estimate(counted.instruction_classes, board.profile)
        assert est.instructions == counted.instructions
        cpis[name] = est.cycles_per_instruction
        if name == "mps3-an547":
            assert est.classes["mve"].count > 0  # the Helium kernels ran
        else:
            assert est.classes["mve"].count == 0 and est.classes["multiply"].count > 0
    assert all(1.0 < c < 2.5 for c in cpis.values()), cpis
