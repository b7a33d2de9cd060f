"""ct.convert a torch program to an ML Program, and W8 weight quantization (coremltools.optimize.coreml)."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import numpy as np

from edgekit.errors import ConversionError, ToolMissingError, first_line
from edgekit.quiet import captured_output

from .image import ImageInput
from .options import COMPUTE_UNITS
from .source import TorchSource

log = logging.getLogger(__name__)

PASS_PIPELINE_NOTE = (
    "coremltools' default pass pipeline minus `common::int_op_canonicalization` (edgekit.coreml.safe_pass_pipeline): "
    "in coremltools 9.0 that pass folds dequantize(s1) -> reshape -> quantize(s2) into a reshape even when s1 != s2, "
    "which silently changes W8A8 models (TOOLCHAIN.md)"
)


def coremltools():
    try:
        with captured_output(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import coremltools as ct
    except ImportError:
        raise ToolMissingError("coremltools", "pip install coremltools==9.0 (or run `make install`)") from None
    return ct


@dataclass(frozen=True)
class ProgramSettings:
    """Everything ct.convert needs besides the torch program."""

    input_name: str
    input_shape: Sequence[int]
    output_names: Sequence[str]
    image: Optional[ImageInput]
    labels: Optional[List[Union[int, str]]]
    deployment_target: str          # "iOS16" | "iOS17" | "iOS18"
    compute_units: str              # edgekit name (options.COMPUTE_UNITS)
    float16: bool                   # compute precision of the float ops


def to_ml_program(source: TorchSource, program, settings: ProgramSettings):
    """ct.convert (``program``: an ExportedProgram, or None for the TorchScript module of ``source``)."""
    ct = coremltools()
    from edgekit.coreml.fold_guard import safe_pass_pipeline

    if settings.image is not None:
        layouts = {"RGB": ct.colorlayout.RGB, "BGR": ct.colorlayout.BGR, "G": ct.colorlayout.GRAYSCALE}
        model_input = ct.ImageType(name=settings.input_name, shape=tuple(settings.input_shape), scale=settings.image.scale,
                                   bias=settings.image.bias, color_layout=layouts[settings.image.color_layout])
    else:
        model_input = ct.TensorType(name=settings.input_name, shape=tuple(settings.input_shape), dtype=np.float32)
    # float32 tensor outputs in every precision (fp16 compute would otherwise make fp16 I/O from iOS16 on)
    # named like the float torch model's outputs, so the float and quantized programs have one interface
    outputs = None if settings.labels else [ct.TensorType(name=n, dtype=np.float32) for n in settings.output_names]
    model = program if program is not None else source.scripted
    try:
        with captured_output() as output, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ct.convert(
                model, convert_to="mlprogram", inputs=[model_input], outputs=outputs,
                classifier_config=ct.ClassifierConfig(settings.labels) if settings.labels else None,
                minimum_deployment_target=getattr(ct.target, settings.deployment_target),
                compute_precision=ct.precision.FLOAT16 if settings.float16 else ct.precision.FLOAT32,
                compute_units=getattr(ct.ComputeUnit, COMPUTE_UNITS[settings.compute_units]),
                pass_pipeline=safe_pass_pipeline(), skip_model_load=True,
            )
    except Exception as exc:
        log.debug("coremltools output:\n%s", "\n".join(output))
        raise ConversionError(
            f"coremltools could not convert {source.model}: {first_line(exc)}",
            fix="run with --verbose for the converter log",
        ) from exc


def quantize_weights_int8(mlmodel):
    """W8: every weight per-channel symmetric int8 (constexpr_affine_dequantize), whatever its size."""
    coremltools()
    from coremltools.optimize.coreml import OpLinearQuantizerConfig, OptimizationConfig, linear_quantize_weights

    config = OptimizationConfig(global_config=OpLinearQuantizerConfig(
        mode="linear_symmetric", dtype="int8", granularity="per_channel", weight_threshold=0,
    ))
    with captured_output(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return linear_quantize_weights(mlmodel, config)
