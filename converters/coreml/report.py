"""The "## Core ML" section of report.md."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from .convert import PASS_PIPELINE_NOTE
from .image import ImageInput
from .options import ACTIVATION_OBSERVERS, Precision

WEIGHT_FILE = Path("Data") / "com.apple.CoreML" / "weights" / "weight.bin"


def package_sizes(package: Path) -> dict:
    """Bytes of the whole .mlpackage and of its weight blob."""
    package = Path(package)
    weights = package / WEIGHT_FILE
    return {
        "package_bytes": sum(f.stat().st_size for f in package.rglob("*") if f.is_file()),
        "weights_bytes": weights.stat().st_size if weights.is_file() else 0,
    }


@dataclass
class CoreMLFacts:
    precision: Precision
    deployment_target: str
    compute_units: str
    method: Optional[str]               # activation observer method (W8A8)
    ops: Sequence[str]
    float_sizes: dict
    quantized_sizes: dict
    image: Optional[ImageInput]
    labels: Optional[Sequence]
    float_check: Optional[dict]         # torch vs the float Core ML program, by the evaluator
    evaluator_runtime: str
    notes: List[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "precision": self.precision.name,
            "deployment_target": self.deployment_target,
            "compute_units": self.compute_units,
            "activation_observer": ACTIVATION_OBSERVERS.get(self.method) if self.method else None,
            "ops": sorted(self.ops),
            "float_program": self.float_sizes,
            "quantized_program": self.quantized_sizes,
            "image_input": self.image.to_json() if self.image else None,
            "classifier_labels": list(self.labels) if self.labels else None,
            "float_program_vs_torch": self.float_check,
            "parity_runtime": self.evaluator_runtime,
        }


def coreml_section(facts: CoreMLFacts) -> List[str]:
    p = facts.precision
    precision = (
        "**W8A8**: int8 per-channel weights, int8 per-tensor activations (quantize/dequantize ops; float16 compute "
        "between them), "
        f"activation ranges calibrated in torch with {ACTIVATION_OBSERVERS[facts.method]} (--method {facts.method})"
        if p.quantizes_activations else
        "**W8**: int8 per-channel symmetric weights (constexpr_affine_dequantize), float16 compute"
    )
    fs, qs = facts.float_sizes, facts.quantized_sizes
    lines = [
        "## Core ML",
        "",
        f"- Precision: {precision}",
        f"- Deployment target: {facts.deployment_target} (minimum for {p.name}: {p.minimum_target}; {p.needs})",
        f"- Compute units: `{facts.compute_units}` (a load-time setting of MLModel: recorded in the model's "
        "metadata `com.edgekit.compute_units` and in the manifest; the app passes it to MLModelConfiguration)",
        f"- Ops in the program ({len(facts.ops)}): " + ", ".join(f"`{o}`" for o in sorted(facts.ops)),
        f"- Weights: {fs['weights_bytes']:,} bytes float32 -> {qs['weights_bytes']:,} bytes "
        f"({qs['weights_bytes'] / max(fs['weights_bytes'], 1):.2f}x); packages {fs['package_bytes']:,} -> {qs['package_bytes']:,} bytes",
        f"- Pass pipeline: {PASS_PIPELINE_NOTE}",
    ]
    if facts.image is not None:
        im = facts.image
        lines.append(
            f"- Input `{im.name}` is an ImageType: color layout {im.color_layout}, scale {im.scale:.9g}, "
            f"bias {[round(b, 9) for b in im.bias]} (value = scale * pixel + bias, from spec `{im.spec.name}`); "
            "resize/crop are not in the model: the app does them as the spec says. Parity feeds the program the "
            "0..255 pixels the spec's normalisation came from"
        )
    else:
        lines.append("- Input is a TensorType (the calibration data are not an NCHW image folder with a preprocessing spec)")
    if facts.labels:
        shown = ", ".join(str(l) for l in list(facts.labels)[:12]) + (" ..." if len(facts.labels) > 12 else "")
        lines.append(f"- Classifier: {len(facts.labels)} class labels ({shown}); outputs classLabel and the "
                     "probabilities dictionary (parity compares the probabilities output, which carries the logits)")
    if facts.float_check:
        fc = facts.float_check
        lines.append(
            f"- Float32 Core ML program `model_float.mlpackage` vs torch on {fc['samples']} samples: max |diff| "
            f"{fc['max_abs_diff']:.3g} (evaluator sanity check)"
        )
    lines += [
        f"- Parity reference: the float PyTorch model run by torch (float32). Candidate: the Core ML program evaluated "
        f"by {facts.evaluator_runtime}. " + (
            "On this macOS host the runner also ran Core ML itself on every sample: parity.json "
            "`candidate.coreml_runtime` has the largest evaluator-vs-Core-ML difference"
            if sys.platform == "darwin" else
            "Computed on Linux by edgekit's numpy MIL evaluator (the Core ML runtime exists only on macOS; "
            "there the runner also runs Core ML and records the evaluator-vs-Core-ML difference)"),
        *[f"- {n}" for n in facts.notes],
        "",
    ]
    return lines
