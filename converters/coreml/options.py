"""Which `edgekit quantize --format coreml` settings exist, and what each one needs (no coremltools import here)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

# Deployment targets in order; the ops a precision emits decide the oldest one that can load it.
DEPLOYMENT_TARGETS = ("iOS16", "iOS17", "iOS18")
# the format-specific QuantizeOptions fields --format coreml takes (edgekit.quantize_backend.FORMAT_OPTIONS)
OPTIONS = ("deployment_target", "compute_units", "labels", "model_info")
COMPUTE_UNITS = {"all": "ALL", "cpu_and_ne": "CPU_AND_NE", "cpu_only": "CPU_ONLY"}  # edgekit name -> ct.ComputeUnit
# --method -> the torch observer that records activation ranges in the PT2E calibration (W8A8 only).
ACTIVATION_OBSERVERS = {
    "minmax": "MinMaxObserver",    # global min/max over the calibration samples
    "mse": "HistogramObserver",    # searches the range minimising the L2 quantization error over a histogram
}
UNSUPPORTED_METHODS = {
    "percentile": "torch's observers have no percentile clipping",
    "entropy": "torch's observers have no KL-divergence range search",
}


@dataclass(frozen=True)
class Precision:
    """W8 (int8 weights, fp16 compute) or W8A8 (int8 weights and activations)."""

    name: str                # "W8" | "W8A8"
    minimum_target: str      # oldest deployment target that has the ops it needs
    needs: str               # why (the ops), for error messages and the report

    @property
    def quantizes_activations(self) -> bool:
        return self.name == "W8A8"


W8 = Precision("W8", "iOS16", "constexpr_affine_dequantize (int8 weights) needs iOS16")
W8A8 = Precision("W8A8", "iOS17", "quantize/dequantize of activations need iOS17")
PRECISIONS: Dict[str, Precision] = {"float16": W8, "int8": W8A8}  # by --activations


def precision_of(options) -> Optional[Precision]:
    return PRECISIONS.get(options.activations)


def deployment_target(options) -> str:
    """The requested target, or the oldest one the precision allows."""
    precision = precision_of(options) or W8A8
    return options.deployment_target or precision.minimum_target


def option_problems(options) -> List[str]:
    """Every value of its own options the Core ML backend cannot honour, as sentences naming the fix."""
    problems: List[str] = []
    if options.weights != "int8":
        problems.append(f"--weights {options.weights} (Core ML weights are int8, per channel)")
    precision = precision_of(options)
    if precision is None:
        problems.append(
            f"--activations {options.activations} (Core ML takes int8 = W8A8, or float16 = W8: int8 weights, fp16 compute)"
        )
    if options.deployment_target is not None:
        if options.deployment_target not in DEPLOYMENT_TARGETS:
            problems.append(f"--deployment-target {options.deployment_target} (valid: {', '.join(DEPLOYMENT_TARGETS)})")
        elif precision is not None and DEPLOYMENT_TARGETS.index(options.deployment_target) < DEPLOYMENT_TARGETS.index(
            precision.minimum_target
        ):
            problems.append(
                f"--deployment-target {options.deployment_target} is too old for {precision.name}: "
                f"{precision.needs}; use --deployment-target {precision.minimum_target} or newer"
            )
    if options.compute_units not in COMPUTE_UNITS:
        problems.append(f"--compute-units {options.compute_units} (valid: {', '.join(COMPUTE_UNITS)})")
    if options.method in UNSUPPORTED_METHODS:
        problems.append(
            f"--method {options.method} ({UNSUPPORTED_METHODS[options.method]}; the Core ML route calibrates in torch: "
            f"use minmax (MinMaxObserver) or mse (HistogramObserver))"
        )
    elif precision is not None and not precision.quantizes_activations and options.method != "minmax":
        problems.append(f"--method {options.method} (W8 has no activation ranges to calibrate; drop --method)")
    return problems
