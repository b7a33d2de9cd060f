"""ONNX backend: ONNX / PyTorch model -> float ONNX reference -> QDQ INT8 ONNX (onnxruntime or NNCF).

--keep-float NAME|OPTYPE leaves nodes in float with either engine; --fallback auto (onnxruntime engine) searches
for the nodes to leave in float with edgekit/fallback.py, calibrating once (see ort_fallback)."""
from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from edgekit.converters import CONVERTERS
from edgekit.errors import UserError
from edgekit.fallback import FallbackResult
from edgekit.parity.runners import OnnxRunner
from edgekit.provenance import sha256_bytes, tool_version
from edgekit.quantize_backend import FloatReference, QuantizedModel, QuantizeInputs

from . import nncf_quant, ort_quant
from .export import to_float_onnx
from .mixed import node_macs, ort_fallback  # noqa: F401  (node_macs: public helper)
from .inspect_qdq import summarize
from .report import onnx_sections

log = logging.getLogger(__name__)

ENGINES = ("ort", "nncf")
ENGINE_METHODS = {"ort": ort_quant.ORT_METHODS, "nncf": nncf_quant.NNCF_METHODS}
ENGINE_REFUSED = {"ort": ort_quant.ORT_REFUSED, "nncf": nncf_quant.NNCF_REFUSED}
# (main file, manifest format): all 8-bit, or --fallback auto's choice with nodes left in float
INT8_OUTPUT = ("model_int8.onnx", "onnx-qdq-int8")
MIXED_OUTPUT = ("model_mixed.onnx", "onnx-qdq-int8-mixed-float32")


@CONVERTERS.register("onnx")
class OnnxQdqConverter:
    """QDQ INT8 ONNX: 8-bit asymmetric activations, per-channel symmetric int8 weights."""

    name = "onnx"
    filename = "model_int8.onnx"
    stage = "quantize"
    options = ("engine", "fallback", "fallback_to", "keep_float")

    def option_problems(self, options) -> List[str]:
        problems = []
        engine = options.engine or "ort"
        if engine not in ENGINES:
            problems.append(f"--engine {engine} (valid engines: {', '.join(ENGINES)})")
        elif options.method not in ENGINE_METHODS[engine]:
            reason = ENGINE_REFUSED[engine].get(options.method, "not offered")
            problems.append(f"--method {options.method} with --engine {engine}: {reason} "
                            f"(--engine {engine} takes --method {' | '.join(ENGINE_METHODS[engine])})")
        if options.weights != "int8":
            problems.append(f"--weights {options.weights} (ONNX QDQ weights are int8)")
        if options.activations != "int8":
            problems.append(f"--activations {options.activations} (--format onnx quantizes activations to 8 bits)")
        if options.fallback == "none" and options.fallback_to != "float":
            problems.append(f"--fallback-to {options.fallback_to} without --fallback auto (it has no effect)")
        elif options.fallback_to != "float":
            problems.append(f"--fallback-to {options.fallback_to} (--format onnx keeps 8-bit activations; "
                            "its fallback is float: use --fallback-to float)")
        if options.fallback != "none" and engine == "nncf":
            problems.append("--fallback auto with --engine nncf (every nncf.quantize call recalibrates: NNCF 3.4's "
                            "statistics cache is OpenVINO-only; use --engine ort for --fallback auto, or --keep-float "
                            "NAME|OPTYPE with --engine nncf)")
        return problems

    def export(self, model: str, options, workdir: Path) -> FloatReference:
        exported = to_float_onnx(model, options.input_shape)
        path = workdir / "model_float.onnx"  # the runner and the quantizers read the float model from a file
        path.write_bytes(exported.data)
        sha = sha256_bytes(exported.data)
        return FloatReference(
            runner=OnnxRunner(path), kind=exported.kind.value, route=exported.route, main_file="model_float.onnx",
            format="onnx-float32", files={"model_float.onnx": exported.data}, sha256=sha, handle=path,
            notes=exported.notes,
        )

    def quantize(self, reference: FloatReference, inputs: QuantizeInputs, options) -> QuantizedModel:
        float_path: Path = reference.handle
        specs = reference.runner.input_specs()
        engine = options.engine or "ort"
        names, types = resolve_keep_float(float_path, options.keep_float)
        out = inputs.workdir / self.filename
        tick = inputs.progress("calibrating", len(inputs.calib_samples))
        described = ENGINE_RUNS[engine](float_path, out, specs, inputs, options, names, types, tick, reference)
        fallback: Optional[FallbackResult] = described.pop("fallback", None)
        main_file, fmt_name = INT8_OUTPUT
        nodes_left_float = fallback.chosen.float_ops if fallback is not None else (names or types)
        if nodes_left_float:  # --keep-float or --fallback auto left nodes in float (as TFLite's model_mixed.tflite)
            main_file, fmt_name = MIXED_OUTPUT
            out = out.rename(inputs.workdir / main_file)
        summary = summarize(out)
        data = out.read_bytes()
        per_layer = None
        if options.debug:
            from edgekit.parity.layers import per_layer_report

            per_layer = per_layer_report(float_path, out, inputs.eval_samples, progress=inputs.progress)
        params = {"engine": engine, "engine_version": described["version"], "engine_method": described["engine_method"],
                  "engine_settings": described["settings"]}
        lines = onnx_sections(summary, described, _float_reasons(engine, types), kept=names,
                              fallback=fallback.chosen.float_ops if fallback else ())
        extras = {"engine": params, "qdq": summary.to_json()}
        if fallback is not None:
            params["float_nodes"] = list(fallback.chosen.float_ops)
            extras["fallback"] = fallback.to_json()
            lines += fallback.markdown_lines()
        return QuantizedModel(
            runner=OnnxRunner(out), main_file=main_file, format=fmt_name, files={main_file: data},
            params=params, report_lines=lines, summary=extras, per_layer=per_layer, handle=summary,
        )


def _run_ort(float_path: Path, out: Path, specs, inputs: QuantizeInputs, options, names, types, tick,
             reference: FloatReference) -> dict:
    excluded = sorted(set(names) | set(_nodes_of_types(float_path, types)))
    settings = ort_quant.ort_settings(options.method, options.range_options.percentile, excluded)
    cache = inputs.workdir / "ort_ranges.json"
    ranges = ort_quant.calibrate(float_path, inputs.calib_samples, specs, settings, cache, tick)  # once, every variant
    ort_quant.check_not_degenerate(float_path, inputs.calib_samples, specs, ranges)  # collapsed: refuse before quantizing
    fallback = None
    if options.fallback == "auto":
        fallback = ort_fallback(float_path, cache, settings, reference, inputs, options)
        settings = replace(settings, nodes_to_exclude=list(fallback.chosen.plan))
        shutil.copyfile(fallback.chosen.result, out)
    else:
        ort_quant.quantize(float_path, out, cache, settings)
    return {"engine": "onnxruntime.quantization.quantize_static", "version": tool_version("onnxruntime"),
            "method": options.method, "engine_method": f"CalibrationMethod.{settings.calibrate_method}",
            "settings": {"calibrator": settings.calibrator, "quantizer": settings.quantizer,
                         "nodes_to_exclude": settings.nodes_to_exclude, "calibration_samples": len(inputs.calib_samples)},
            "notes": _ort_notes(options.method), "fallback": fallback}


def _run_nncf(float_path: Path, out: Path, specs, inputs: QuantizeInputs, options, names, types, tick,
              reference: FloatReference) -> dict:
    settings = nncf_quant.nncf_settings(options.method, len(inputs.calib_samples), names, types)
    ort_quant.check_not_degenerate(float_path, inputs.calib_samples, specs)  # collapsed: refuse before quantizing
    nncf_quant.quantize(float_path, out, inputs.calib_samples, specs, settings, tick)
    return {"engine": "nncf.quantize (ONNX backend)", "version": tool_version("nncf"), "method": options.method,
            "engine_method": f"RangeEstimatorParametersSet.{settings.range_estimator}",
            "settings": settings.to_json(), "notes": []}


ENGINE_RUNS = {"ort": _run_ort, "nncf": _run_nncf}


def resolve_keep_float(float_path: Path, wanted: Sequence[str]) -> Tuple[List[str], List[str]]:
    """--keep-float values -> (node names, op types). A value may be a node name, a node's output
    tensor name or an op type (case-insensitive); one that matches nothing is an error listing the choices."""
    if not wanted:
        return [], []
    import onnx

    nodes = onnx.load(str(float_path)).graph.node
    by_type = {n.op_type.lower(): n.op_type for n in nodes}
    names, types, unknown = [], [], []
    for value in wanted:
        match = [n.name for n in nodes if value in (n.name, *n.output)]
        if match:
            names += match
        elif value.lower() in by_type:
            types.append(by_type[value.lower()])
        else:
            unknown.append(value)
    if unknown:
        raise UserError(
            f"--keep-float {', '.join(unknown)} matches no node name, output tensor or op type of the float ONNX model",
            fix=f"op types in this model: {', '.join(sorted(set(by_type.values())))} (node names: see model_float.onnx)")
    return sorted(set(names)), sorted(set(types))


def _nodes_of_types(float_path: Path, types: Sequence[str]) -> List[str]:
    if not types:
        return []
    import onnx

    return [n.name for n in onnx.load(str(float_path)).graph.node if n.op_type in types]


def _ort_notes(method: str) -> List[str]:
    notes = ["ranges computed by onnxruntime's own calibrator (create_calibrator) with every setting above, then passed "
             "to quantize_static as its calibration cache: quantize_static alone fixes Entropy at 128 bins, which equals MinMax",
             "activations QUInt8 with int8 weights (U8S8): onnxruntime's guidance for x86 CPUs; asymmetric uint8 is the "
             "int8 grid with the zero point moved by 128 (identical values); measured on an x86 host U8S8 ran 2.2x faster "
             "than S8S8 on mobilenet_like with the same SQNR"]
    if method == "percentile":
        notes.append("onnxruntime cuts (100 - p) / 200 from each tail, so p = 2 x --percentile - 100 gives edgekit's "
                     "meaning (--percentile P keeps P % below the upper bound)")
    return notes


def _float_reasons(engine: str, types: Sequence[str]) -> Dict[str, str]:
    reasons: Dict[str, str] = {t: "--keep-float (op type)" for t in types}
    if engine == "ort":
        reasons.setdefault("Relu", "onnxruntime folds Relu/Clip into the preceding quantized range (asymmetric activations)")
    else:
        reasons.setdefault("Relu", "NNCF quantizes after the activation; onnxruntime fuses Conv+Relu+QuantizeLinear at run time")
    return reasons
