"""Core ML backend: PyTorch -> ML Program .mlpackage, W8 (int8 weights) or W8A8 (int8 weights + activations).

export(): load the torch model, name every op coremltools cannot convert, the float reference is torch itself.
quantize(): write the float32 program (model_float.mlpackage) and the quantized one (model_w8.mlpackage or
model_w8a8.mlpackage, activation ranges calibrated in torch), with ImageType input / classifier output when the data
say so; parity runs the quantized program in edgekit's numpy MIL evaluator (edgekit.coreml) on Linux.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import numpy as np

from edgekit.converters import CONVERTERS
from edgekit.errors import InternalError, UnsupportedOpError, UserError
from edgekit.export.detect import ModelKind
from edgekit.provenance import sha256_file
from edgekit.quantize_backend import FloatReference, QuantizedModel, QuantizeInputs

from .options import OPTIONS, deployment_target, option_problems, precision_of
from .source import TorchSource, load_torch_source

log = logging.getLogger(__name__)

FLOAT_FILE = "model_float.mlpackage"
FLOAT_CHECK_SAMPLES = 20  # eval samples on which the float32 program is checked against torch


@CONVERTERS.register("coreml")
class CoreMLConverter:
    """PyTorch -> Core ML ML Program (.mlpackage) in W8 or W8A8."""

    name = "coreml"
    stage = "quantize"
    options = OPTIONS

    def option_problems(self, options) -> List[str]:
        return option_problems(options)

    def export(self, model: str, options, workdir: Path) -> FloatReference:
        from .ops import TARGET, check_torch_ops
        from .torch_runner import TorchRunner

        source = load_torch_source(model, options.input_shape)
        precision = precision_of(options)
        if precision is not None and precision.quantizes_activations and source.kind is ModelKind.TORCHSCRIPT:
            raise UserError(
                f"W8A8 calibrates activations on a torch.export graph, and TorchScript ({model}) cannot be re-exported",
                fix="save the model with torch.export.save (.pt2) or pass package.module:factory; "
                "or use --activations float16 (W8, weights only)",
            )
        support = check_torch_ops(source)
        if not support.ok:
            raise UnsupportedOpError(support, target=TARGET)
        return FloatReference(
            runner=TorchRunner(source), kind=source.kind.value, route=source.route, main_file=FLOAT_FILE,
            format="mlpackage-float32", files={}, sha256=source.sha256 or "", handle=source,
            notes=("parity reference: the float PyTorch model run by torch; model_float.mlpackage is its float32 "
                   "Core ML program (same input/output interface as the quantized one)",),
        )

    def quantize(self, reference: FloatReference, inputs: QuantizeInputs, options) -> QuantizedModel:
        from edgekit.coreml.evaluator import MILProgram
        from edgekit.coreml.runner import CoreMLRunner

        from .files import save_package
        from .convert import ProgramSettings, quantize_weights_int8, to_ml_program
        from .image import PixelFeeds, class_labels, image_input
        from .metadata import apply_metadata, provenance
        from .report import CoreMLFacts, coreml_section, package_sizes

        source: TorchSource = reference.handle
        precision = precision_of(options)
        target = deployment_target(options)
        outputs, _ = reference.runner.run([np.zeros(source.input_shape, np.float32)])
        labels = class_labels(inputs, outputs[0].shape) if len(outputs) == 1 else None
        if options.labels is not None:
            labels = _labels_from_file(options.labels, outputs)
        image = image_input(source.input_name, source.input_shape, inputs)
        to_feeds = PixelFeeds(image) if image is not None else None
        settings = dict(input_name=source.input_name, input_shape=source.input_shape,
                        output_names=reference.runner.output_names(), image=image, labels=labels,
                        deployment_target=target, compute_units=options.compute_units)
        meta = dict(source=source.model, source_sha256=source.sha256, calibration_fingerprint=inputs.calib_set.fingerprint,
                    compute_units=options.compute_units, pass_pipeline="default minus common::int_op_canonicalization",
                    preprocess=inputs.preprocess.to_dict() if inputs.preprocess is not None else None)
        params = {"precision": precision.name, "deployment_target": target, "compute_units": options.compute_units,
                  "weights": "int8 per-channel symmetric",
                  "activations": f"int8 per-tensor ({options.method})" if precision.quantizes_activations else "float16",
                  "image_input": image.to_json() if image else None, "classifier_labels": len(labels) if labels else None}

        float_model = to_ml_program(source, source.program, ProgramSettings(**settings, float16=False))
        apply_metadata(float_model, source=source.model, precision="float32",
                       entries=provenance(precision="float32", params=_float_params(params), **meta))
        float_path = inputs.workdir / FLOAT_FILE
        save_package(float_model, float_path)
        reference.files[FLOAT_FILE] = float_path
        reference.sha256 = sha256_file(float_path)

        if precision.quantizes_activations:
            from .calibrate import calibrated_program

            tick = inputs.progress("calibrating", len(inputs.calib_samples))
            program = calibrated_program(source, inputs.calib_samples, options.method, tick)
            quantized = to_ml_program(source, program, ProgramSettings(**settings, float16=True))
        else:
            quantized = quantize_weights_int8(to_ml_program(source, source.program, ProgramSettings(**settings, float16=True)))
        apply_metadata(quantized, source=source.model, precision=precision.name,
                       entries=provenance(precision=precision.name, params=params, **meta),
                       info=options.model_info, image=image, labels=labels)
        name = f"model_{precision.name.lower()}.mlpackage"
        path = inputs.workdir / name
        save_package(quantized, path)

        program = MILProgram.load(path)
        program.check_supported()
        self._check_no_requantization_fold(program)
        sha = sha256_file(path)
        runner = CoreMLRunner(path, to_feeds=to_feeds, sha256=sha)
        per_layer = None
        if options.debug:  # every op output of the float32 and the quantized program, on the MIL evaluator
            from edgekit.parity.layers_coreml import per_layer_report_for_packages

            per_layer = per_layer_report_for_packages(float_path, path, inputs.eval_samples, to_feeds=to_feeds,
                                                      progress=inputs.progress)
        facts = CoreMLFacts(
            precision=precision, deployment_target=target, compute_units=options.compute_units,
            method=options.method if precision.quantizes_activations else None, ops=sorted(program.ops_used()),
            float_sizes=package_sizes(float_path), quantized_sizes=package_sizes(path), image=image, labels=labels,
            float_check=_float_program_check(reference, float_path, to_feeds, inputs.eval_samples),
            evaluator_runtime=runner.describe().get("runtime", "edgekit's numpy MIL evaluator"),
        )
        return QuantizedModel(
            runner=runner, main_file=name, format=f"mlpackage-{precision.name.lower()}", files={name: path},
            params={"coreml": params}, report_lines=coreml_section(facts), summary={"coreml": facts.to_json()},
            per_layer=per_layer, handle=quantized,
        )

    @staticmethod
    def _check_no_requantization_fold(program) -> None:
        from edgekit.coreml.fold_guard import find_requantization_folds

        folds = find_requantization_folds(program)
        if folds:
            raise InternalError(
                "the converted Core ML program has folded requantizations (coremltools' int_op_canonicalization "
                "came back?): " + "; ".join(folds[:5])
            )


def _labels_from_file(path: Path, outputs) -> List[str]:
    """--labels: one class name per line, as many as the single (1, N) output has classes."""
    from edgekit.mobile.tflite_package import classification_output, read_labels_file

    names = read_labels_file(path)
    shapes = [np.asarray(o).shape for o in outputs]
    index = classification_output(shapes)
    if index is None or max(shapes[index]) != len(names):
        raise UserError(f"--labels {path} has {len(names)} names, the model's outputs are {[list(s) for s in shapes]}",
                        fix="write exactly one name per class, line i = output index i")
    return names


def _float_params(params: dict) -> dict:
    """The quantized model's settings minus what only applies to it (weights/activations precision)."""
    return {**{k: v for k, v in params.items() if k not in ("weights", "activations")}, "precision": "float32"}


def _float_program_check(reference: FloatReference, float_path: Path, to_feeds, samples) -> Optional[dict]:
    """Max |torch - float32 Core ML program| on a few samples, evaluated by the numpy MIL evaluator."""
    from edgekit.coreml.runner import CoreMLRunner

    runner = CoreMLRunner(float_path, to_feeds=to_feeds)
    worst = 0.0
    chosen = list(samples)[:FLOAT_CHECK_SAMPLES]
    for sample in chosen:
        ref, _ = reference.runner.run(sample)
        got, _ = runner.run(sample)
        for r, g in zip(ref, got, strict=True):
            worst = max(worst, float(np.max(np.abs(np.asarray(r, np.float64).reshape(-1) - np.asarray(g, np.float64).reshape(-1)))))
    return {"samples": len(chosen), "max_abs_diff": worst}
