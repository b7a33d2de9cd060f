"""Typed parts of `edgekit run --pipeline`: the validated pipeline file (``Pipeline``), what the device-side runner
reports (``RunnerOutput``), the per-phase budgets and pipeline.json (``PipelineReport``, schema ``pipeline``)."""
from __future__ import annotations

from typing import ClassVar, Dict, List, Optional, Union

from typing_extensions import TypedDict

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.results import Figure, JsonObject, Method, Result, Section
from edgekit.run.results import Json, LatencySummary


# --- the pipeline file, validated (edgekit.run.pipeline.budget.load_pipeline) ----------------------------------------------
class Decode(Section):
    format: str                       # auto | jpeg | png | rgb565 | rgb888 | gray8
    library: str                      # pillow | opencv
    width: Optional[int] = None       # raw frames
    height: Optional[int] = None


class Preprocess(Section):
    implementation: str               # pillow | opencv | c
    # the spec as edgekit.preprocessing.spec.PreprocessSpec.to_dict() writes it (+ antialias, shorter_side, crop):
    # the device-side runner reads it as JSON, the host rebuilds the PreprocessSpec from it
    spec: Dict[str, Json]


    def spec_object(self) -> PreprocessSpec:
        """The spec as its type (the keys left at null dropped, as PreprocessSpec.from_dict takes them)."""
        return PreprocessSpec.from_dict({k: v for k, v in self.spec.items() if v is not None})


class Inference(Section):
    runtime: str


class Postprocess(Section):
    steps: List[str]                  # dequantize, softmax, topk
    top_k: int
    function: Optional[str]           # module:function of the user's own post-processing
    python_path: Optional[str]


class Quantization(Section):
    scale: float
    zero_point: int


class ModelInput(Section):
    name: str
    shape: List[int]
    dtype: str
    quantization: Optional[Quantization]


class ModelFacts(Section):
    """The model's input (shape, dtype, quantization) and output quantization (edgekit.run.pipeline.budget.model_facts)."""

    model_input: ModelInput
    output_quantization: Optional[Quantization]


class Pipeline(Section):
    """A pipeline file with every default filled in; ``model_input`` / ``output_quantization`` once the model is known."""

    decode: Decode
    preprocess: Preprocess
    inference: Inference
    postprocess: Postprocess
    source: str
    model_input: Optional[ModelInput] = None
    output_quantization: Optional[Quantization] = None

    def with_model(self, facts: ModelFacts) -> "Pipeline":
        return self.model_copy(update={"model_input": facts.model_input,
                                       "output_quantization": facts.output_quantization})


# --- what the device-side runner prints (edgekit/run/runners/pipeline_runner.py, JSON), plus what the host adds -----------
class PowerSamples(TypedDict, total=False):
    samples: List[List[float]]        # (monotonic t, W) on the device's clock
    reads: int
    interval_s: float
    battery_status: Optional[str]
    source: str


class ClockOffset(TypedDict):
    offset_s: float                   # host time = device time + offset_s
    drift_s: float
    spread_s: float
    lines: int


class FrameCheck(TypedDict):
    pixels_sha256: str
    tensor_sha256: str


class RunnerOutput(TypedDict, total=False):
    phases_ms: Dict[str, List[float]]
    phase_start_monotonic_s: Dict[str, List[float]]
    phase_start_host_s: Dict[str, List[float]]       # added here: the windows on this host's clock
    power: Optional[PowerSamples]
    power_unavailable: Optional[str]
    preprocess_checks: List[FrameCheck]
    energy_uj: Optional[Dict[str, List[float]]]
    energy_source: Optional[str]
    results: List[Json]               # per frame, what the post-processing returned (a user function's own JSON)
    runtime: Json                     # the runtime's self-description (session.info)
    python: str
    numpy: str
    pid: int
    error: str
    c_library_built_with: str         # added here
    clock_offset: ClockOffset         # added here


# --- budgets -----------------------------------------------------------------------------------------------------
class PhaseEnergy(Section):
    """Energy of one phase per run (uJ) with how it was obtained."""

    value_uj: Optional[float]
    method: Method
    source: str
    note: Optional[str] = None


class PhaseRow(Section):
    phase: str
    latency_ms: LatencySummary
    share: float                      # of the mean end-to-end time
    energy: PhaseEnergy


class Bottleneck(Section):
    phase: str
    share: float


class HostBudget(Section):
    """Host, ssh and adb devices: every phase timed on the device."""

    phases: List[PhaseRow]
    end_to_end_ms: LatencySummary
    end_to_end_energy_uj: Optional[float]
    energy_method: str
    bottleneck: Bottleneck
    iterations: int


class CountStats(Section):
    """Instructions or cycles per run of a phase, with how they were counted."""

    mean: float
    min: Optional[float] = None
    max: Optional[float] = None
    method: str
    source: str


class McuPhaseRow(Section):
    phase: str
    share: float
    instructions: Optional[CountStats] = None        # QEMU plugin
    cycles: Optional[CountStats] = None              # a board's DWT counter
    latency_ms: Figure
    energy_uj: Optional[Figure] = None


class McuEndToEnd(Section):
    instructions: Optional[float] = None
    cycles: Optional[float] = None
    latency_ms: Figure
    energy_uj: Optional[Figure] = None


class McuBudget(Section):
    """Microcontrollers: per-phase instructions (QEMU) or cycles (a board); no phases, with a note, when neither."""

    phases: List[McuPhaseRow]
    note: Optional[str] = None
    end_to_end: Optional[McuEndToEnd] = None
    bottleneck: Optional[Bottleneck] = None


# --- pipeline.json -----------------------------------------------------------------------------------------------
class PipelineDevice(Section):
    kind: str
    name: str
    profile: Optional[str] = None
    board: Optional[str] = None


class PreprocessCheck(Section):
    """Did the device's preprocess phase give the spec's reference tensor, bit for bit?"""

    implementation: str
    frames: int
    identical: int
    differ: List[str]
    not_compared: List[str]
    reference: str
    note: Optional[str] = None        # why nothing was compared


class McuFrameResult(Section):
    device_topk: List[List[int]]      # (index, value) pairs
    host_topk: List[List[int]]
    bit_exact: bool


class BitExactSummary(Section):
    frames: int
    identical: int
    reference: str


class PipelineReport(Result):
    """the whole input pipeline (decode, preprocess, infer, postprocess) timed per phase on a device"""

    SCHEMA: ClassVar[str] = "pipeline"

    device: PipelineDevice
    model: str
    pipeline: Pipeline
    frames: List[str]
    budget: Union[HostBudget, McuBudget]
    # per frame: the microcontroller's top-k vs the host's, or what a host/ssh/adb post-processing returned
    results: Union[Dict[str, McuFrameResult], Dict[str, Json]]
    runtime: Json = None
    device_python: Optional[str] = None
    timing: Optional[str] = None
    preprocess_check: Optional[PreprocessCheck] = None
    c_library_built_with: Optional[str] = None
    bit_exact: Optional[BitExactSummary] = None
    firmware_elf: Optional[str] = None

    def to_dict(self) -> JsonObject:
        return self.model_dump(mode="json", exclude_unset=True)

