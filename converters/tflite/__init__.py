"""TFLite backend: full-int8 .tflite (int8 I/O, per-channel int8 weights, int32 bias), optionally
16x8 (--activations int16) or mixed int8/float (--keep-float, --fallback auto; see precision.py)."""
from __future__ import annotations

import logging
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from edgekit.calibration.degenerate import check_calibration
from edgekit.calibration.ranges import choose_ranges
from edgekit.calibration.statistics import cache_key, collect_statistics
from edgekit.converters import CONVERTERS
from edgekit.errors import UnsupportedOpError
from edgekit.export import to_float_tflite
from edgekit.mobile.io_types import IO_TYPES
from edgekit.mobile.tflite_metadata import ModelInfo
from edgekit.mobile.tflite_package import package_tflite
from edgekit.parity.runners import TFLiteRunner
from edgekit.provenance import sha256_bytes
from edgekit.quantize_backend import FloatReference, QuantizedModel, QuantizeInputs
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_model import TFLiteModel

from .int8 import QuantizedTensor, calibrated_flatbuffer, inspect_int8, quantize_calibrated
from .mixed import auto_fallback
from .ops import int8_verdict
from .precision import INT8, INT16X8, PrecisionPlan, model_ops, plan_table
from .report import tflite_sections

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Int8Result:
    tflite: bytes
    tensors: List[QuantizedTensor]
    ops: List[str]
    support: SupportReport
    activations: str = "int8"          # int8 | int16 (16x8)
    float_ops: Tuple[str, ...] = ()     # float-model op names kept in float
    io: str = "int8"                    # input/output type (--io)

    @property
    def precision(self) -> str:
        if self.activations == "int16":
            return INT16X8
        return "int8 + float32" if self.float_ops else INT8


# (main file, manifest format) per precision
_OUTPUTS = {
    INT8: ("model_int8.tflite", "tflite-int8"),
    "int8 + float32": ("model_mixed.tflite", "tflite-int8-mixed-float32"),
    INT16X8: ("model_16x8.tflite", "tflite-int16x8"),
}


@CONVERTERS.register("tflite")
class TFLiteInt8Converter:
    """Any supported model -> float .tflite reference -> full-int8 .tflite (activation ranges from --method)."""

    name = "tflite"
    filename = "model_int8.tflite"
    target = "tflite-int8"
    stage = "quantize"
    options = ("io", "labels", "model_info", "fallback", "fallback_to", "keep_float")

    def check_support(self, model: TFLiteModel, target: str = target) -> SupportReport:
        report = SupportReport(target)
        for op in model.ops:
            outputs = [model.tensor(o).name for o in op.outputs if o >= 0]
            supported, reason = int8_verdict(op.name)
            location = f"op #{op.index} -> tensor '{outputs[0] if outputs else '?'}'"
            report.ops.append(OpSupport(op.name, location, supported, reason))
        return report

    def _support_with_plan(self, model: TFLiteModel, plan: Optional[PrecisionPlan]) -> SupportReport:
        """check_support, with ops the plan keeps in float accepted (a float-only op can stay float)."""
        report = self.check_support(model)
        ops = model_ops(model)
        kept = set(plan.float_tensors(ops)) if plan is not None else set()
        report.ops = [o if o.supported or m.tensor not in kept else OpSupport(o.op, o.location, True, "kept in float")
                      for o, m in zip(report.ops, ops)]
        return report

    def option_problems(self, options) -> List[str]:
        problems = []
        if options.weights != "int8":
            problems.append(f"--weights {options.weights} (TFLite weights are int8)")
        if options.activations not in ("int8", "int16"):
            problems.append(f"--activations {options.activations} (use int8, or int16 for 16x8)")
        if options.io not in IO_TYPES:
            problems.append(f"--io {options.io} (use {' | '.join(IO_TYPES)})")
        elif options.io != "int8" and (options.activations == "int16" or options.fallback_to == "int16"):
            problems.append(f"--io {options.io} with int16 activations (16x8 models keep int16 input/output; use --io int8)")
        problems += self._precision_problems(options)
        return problems

    @staticmethod
    def _precision_problems(options) -> List[str]:
        """16x8 is whole-model only in TF's quantizer: it cannot be mixed with float ops."""
        problems = []
        whole_16x8 = "TFLite's 16x8 quantizer has no per-op selection"
        if options.activations == "int16" and options.keep_float:
            problems.append(f"--keep-float with --activations int16 ({whole_16x8}; use --activations int8)")
        if options.activations == "int16" and options.fallback != "none":
            problems.append(f"--fallback auto with --activations int16 ({whole_16x8}; 16x8 is already the "
                            "wider mode: use --activations int8 --fallback auto [--fallback-to int16])")
        if options.fallback == "none" and options.fallback_to != "float":
            problems.append(f"--fallback-to {options.fallback_to} without --fallback auto (it has no effect)")
        if options.fallback == "auto" and options.fallback_to == "int16" and options.keep_float:
            problems.append(f"--keep-float with --fallback-to int16 (the int16 fallback is the whole model in 16x8: {whole_16x8})")
        return problems

    def export(self, model: str, options, workdir: Path) -> FloatReference:
        exported = to_float_tflite(model, input_shape=options.input_shape)
        float_model = TFLiteModel(exported.tflite, source=f"{model} (float reference)")
        sha = sha256_bytes(float_model.data)
        support = self._support_with_plan(float_model, PrecisionPlan.build(float_model, options.activations, options.keep_float))
        if not support.ok:
            error = UnsupportedOpError(support, target="int8 TFLite")
            error.fix = ("keep them in float with --keep-float OPTYPE (the model then needs a runtime with float "
                         "kernels), replace these layers with supported ones, or choose another --format")
            raise error
        return FloatReference(
            runner=TFLiteRunner(float_model, kernels="optimized", sha256=sha), kind=exported.kind.value,
            route=exported.route, main_file="model_float.tflite", format="tflite-float32",
            files={"model_float.tflite": float_model.data}, sha256=sha, handle=float_model, notes=exported.notes,
        )

    def quantize(self, reference: FloatReference, inputs: QuantizeInputs, options) -> QuantizedModel:
        float_model: TFLiteModel = reference.handle
        ops = model_ops(float_model)
        plan = PrecisionPlan.build(float_model, options.activations, options.keep_float)  # bad names: before calibrating
        stats = collect_statistics(
            float_model, inputs.calib_samples, key=cache_key(reference.sha256, inputs.calib_set.fingerprint),
            progress=inputs.progress("calibrating", 2 * len(inputs.calib_samples)),
        )
        check_calibration(stats, len(inputs.calib_samples))  # collapsed activations: refuse before quantizing
        ranges = choose_ranges(stats, options.method, options.range_options)
        calibrated = calibrated_flatbuffer(float_model.data, ranges)  # one calibration for every variant

        def build(candidate_plan: Optional[PrecisionPlan], activations: str) -> Int8Result:
            return self.convert(float_model, ranges, plan=candidate_plan, activations=activations, calibrated=calibrated,
                                io=options.io if activations == "int8" else "int8")

        fallback = None
        if options.fallback == "auto":
            fallback = auto_fallback(
                ops=ops, float_model=float_model, reference=reference.runner, plan=plan, build=build,
                samples=inputs.eval_samples, labels=inputs.eval_labels, tolerance=options.tolerance,
                fallback_to=options.fallback_to, progress=inputs.progress,
            )
            result, plan = fallback.chosen.result, fallback.chosen.plan
        else:
            result = build(plan, options.activations)
        main_file, fmt_name = _OUTPUTS[result.precision]
        packaged = package_tflite(result.tflite, inputs=inputs, io=result.io, info=options.model_info or ModelInfo(),
                                  labels_file=options.labels, provenance={
                                      "source_kind": reference.kind, "export_route": reference.route,
                                      "float_model_sha256": reference.sha256, "float_model_format": reference.format,
                                      "calibration_fingerprint": inputs.calib_set.fingerprint, "method": options.method,
                                      "precision": result.precision})
        result = replace(result, tflite=packaged.tflite)
        quantized_model = TFLiteModel(result.tflite, source=main_file)
        per_layer = None
        if options.debug:
            from edgekit.parity.layers import per_layer_report

            per_layer = per_layer_report(float_model, quantized_model, inputs.eval_samples, progress=inputs.progress)
        if plan is None:  # --fallback-to int16 chose the whole model in 16x8
            planned = [replace(p, why="fallback (whole model)") for p in PrecisionPlan(INT16X8).resolve(ops)]
        else:
            planned = plan.resolve(ops)
        summary = {
            "precision": result.precision,
            "mobile": packaged.summary,
            "plan": plan.to_json() if plan is not None else {"global": INT16X8, "why": "--fallback-to int16"},
            "ops": [p.__dict__ for p in planned],
        }
        lines = tflite_sections(stats, ranges, result) + _plan_lines(planned, result) + packaged.report_lines
        if fallback is not None:
            summary["fallback"] = fallback.to_json()
            lines += fallback.markdown_lines()
        return QuantizedModel(
            runner=TFLiteRunner(quantized_model, kernels="optimized", sha256=sha256_bytes(result.tflite)),
            main_file=main_file, format=fmt_name, files={main_file: result.tflite},
            params={"precision": result.precision, "float_ops": list(result.float_ops), "io": result.io},
            report_lines=lines, summary=summary, per_layer=per_layer, handle=result,
        )

    def convert(
        self, model: TFLiteModel, ranges: Dict[int, Tuple[float, float]], *,
        plan: Optional[PrecisionPlan] = None, activations: str = "int8", calibrated: Optional[bytes] = None,
        io: str = "int8",
    ) -> Int8Result:
        """Quantize with ``ranges`` (``calibrated``: the same ranges already written by calibrated_flatbuffer).

        ``plan``: ops kept in float (None: all int8); ``activations``: int8 or int16 (16x8, whole model);
        ``io``: input/output type int8 | uint8 | float32 (inside stays int8).
        Raises UnsupportedOpError (the whole report) if any op the plan does not keep in float cannot be quantized.
        """
        if calibrated is None:
            calibrated = calibrated_flatbuffer(model.data, ranges)
        kept = plan.float_tensors(model_ops(model)) if plan is not None else []
        pre = self._support_with_plan(model, plan)
        if not pre.ok:
            raise UnsupportedOpError(pre, target="int8 TFLite")
        quantized = quantize_calibrated(calibrated, activations=activations, float_nodes=kept, io=io)
        post, tensors, op_names = inspect_int8(quantized, activations=activations, kept_float=kept, io=io)
        if not post.ok:
            raise UnsupportedOpError(post, target="16x8 TFLite" if activations == "int16" else "int8 TFLite")
        return Int8Result(quantized, tensors, op_names, post, activations, tuple(kept), io)


def _plan_lines(planned, result: Int8Result) -> List[str]:
    lines = [
        "## Precision plan",
        "",
        f"Model precision: **{result.precision}**. Layered global -> op type (--keep-float OPTYPE) -> "
        "op name (--keep-float NAME) -> fallback (--fallback auto); the most specific layer wins.",
        "",
        *plan_table(planned),
        "",
    ]
    if result.float_ops:
        lines += [f"{len(result.float_ops)} op(s) run in float with DEQUANTIZE/QUANTIZE around them. The edgekit "
                  "firmware runtime is int8-only: `edgekit firmware` rejects these float ops in its support check; "
                  "the TensorFlow Lite Micro project (`--runtime tflm`) and LiteRT (host, Linux/Android) accept them.", ""]
    if result.activations == "int16":
        lines += ["16x8: int16 activations (symmetric, zero point 0), int8 per-channel weights, int64 bias, int16 "
                  "input/output. The edgekit firmware runtime has no int16 kernels: `edgekit firmware` rejects this "
                  "model; the TensorFlow Lite Micro project (`--runtime tflm`) and LiteRT accept it.", ""]
    return lines
