"""The typed run.json of `edgekit run --harness mlperf-tiny` (``MlperfRun``, schema ``mlperf-run``) and its parts."""
from __future__ import annotations

from typing import ClassVar, Dict, List, Literal, Optional

from edgekit.firmware.plan_types import HarnessApp
from edgekit.firmware.results import BoardSummary, FirmwareModel
from edgekit.results import JsonObject, Result, Section
from edgekit.results.number import Number
from edgekit.run.results import BitExactness, InstructionCount


class HarnessFirmware(Section):
    """The firmware facts run.json repeats from firmware.json (None when firmware.json has no such key)."""

    model: Optional[FirmwareModel] = None
    board: Optional[BoardSummary] = None
    arena_bytes: Optional[int] = None
    flash_bytes: Optional[int] = None
    ram_bytes: Optional[int] = None


class HarnessWindow(Section):
    """Performance mode: one input, N back-to-back inferences timed by the device's m-lap-us."""

    input: str
    iterations: int
    warmups: int
    elapsed_us: int
    runtime_s: float
    throughput_inf_per_s: Number     # inf when the device's timer did not advance
    latency_ms: float
    results: List[float]             # the device's m-results of the last inference
    meets_mlperf_runtime: bool


class HarnessFile(Section):
    """Accuracy mode: one dataset file, its mean score over its windows, and the predicted class."""

    file: str
    label: int
    windows: int
    score: List[float]
    predicted: Optional[int]         # None for anomaly detection (scored by AUC)


class HarnessSummary(Section):
    """The result of the mode: median throughput (performance) or top-1 / AUC (accuracy); each mode fills its own."""

    method: Optional[str] = None
    # performance
    median_throughput_inf_per_s: Optional[Number] = None
    latency_ms: Optional[float] = None
    latency_ms_per_input: Optional[List[float]] = None
    inputs: Optional[int] = None
    min_runtime_s: Optional[float] = None
    mlperf_runtime_met: Optional[bool] = None
    instructions_per_inference: Optional[InstructionCount] = None
    # accuracy
    top1: Optional[float] = None
    auc: Optional[float] = None
    files: Optional[int] = None
    windows: Optional[int] = None
    labels_note: Optional[str] = None


class Timestamps(Section):
    source: Optional[str]
    method: str
    note: Optional[str]


class MlperfRun(Result):
    """an MLPerf Tiny (EEMBC) harness run of a device under test"""

    SCHEMA: ClassVar[str] = "mlperf-run"

    edgekit_run: Literal[1] = 1      # format marker kept from before versioned schemas
    harness: str
    mode: Literal["performance", "accuracy"]
    task: str
    model_id: str
    device: str
    dut: Dict[str, str]              # what the device says: name and its `profile` lines
    firmware: HarnessFirmware
    harness_firmware: HarnessApp
    timestamps: Timestamps
    summary: HarnessSummary
    windows: List[HarnessWindow]
    files: List[HarnessFile]
    outputs_bit_exact: Optional[BitExactness]
    transcript: str

    def to_dict(self) -> JsonObject:
        return self.model_dump(mode="json", exclude_unset=True)
