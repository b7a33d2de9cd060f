"""ONNX -> float .tflite with onnx2tf, keeping the model's NCHW input layout so the same
input data feeds the ONNX and the TFLite model. Never touches the network: onnx2tf's sample
calibration download only happens for its own int8 output, which we do not ask for."""
from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path
from typing import Optional, Tuple

from edgekit.errors import ConversionError, InvalidModelError, ToolMissingError, UnsupportedOpError, first_line
from edgekit.quiet import captured_output
from edgekit.support import OpSupport, SupportReport
from edgekit.tool_messages import ONNX2TF, clean_lines, strip_ansi, summarize, translate, wrap

log = logging.getLogger(__name__)


def load_onnx(path: Path):
    try:
        import onnx
    except ImportError:
        raise ToolMissingError("onnx", "pip install onnx==1.23.2 (or run `make install`)") from None
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:
        raise InvalidModelError(
            f"{path} is not a valid ONNX model: {first_line(exc)}",
            fix="the file may be truncated or corrupt; re-export it",
        ) from exc
    return model


def float_tflite_from_onnx(path: Path, input_shape: Optional[Tuple[int, ...]] = None) -> bytes:
    """onnx2tf on the model with static inputs: --input-shape, else a dynamic batch fixed to 1 (as the ONNX route)."""
    from edgekit.converters.onnx.export import fix_input_shapes

    model = load_onnx(path)
    initializers = {t.name for t in model.graph.initializer}
    # onnx2tf keeps the NCW/NCHW/NCDHW layout of the inputs named here and refuses any other rank (2-D inputs
    # were refused: "only supports 3D/4D/5D input"); other inputs have no layout to keep
    inputs = [i.name for i in model.graph.input
              if i.name not in initializers and len(i.type.tensor_type.shape.dim) in (3, 4, 5)]
    note = fix_input_shapes(model, input_shape)
    try:
        import onnx2tf
    except ImportError:
        raise ToolMissingError("onnx2tf", "pip install onnx2tf==1.28.8 onnx-graphsurgeon sng4onnx sne4onnx onnxsim (or run `make install`)") from None
    with tempfile.TemporaryDirectory(prefix="edgekit-onnx2tf-") as work:
        source = path
        if note:
            import onnx

            log.info("%s", note)
            source = Path(work) / "static_input.onnx"
            onnx.save(model, str(source))
        try:
            with captured_output() as output:
                onnx2tf.convert(
                    input_onnx_file_path=str(source),
                    output_folder_path=work,
                    keep_ncw_or_nchw_or_ncdhw_input_names=inputs or None,
                    non_verbose=True,
                    disable_model_save=False,
                )
        except SystemExit:
            raise _conversion_failure(path, model, output) from None
        except Exception as exc:
            output.append(str(exc))
            raise _conversion_failure(path, model, output) from exc
        produced = sorted(Path(work).glob("*_float32.tflite"))
        if not produced:
            raise _conversion_failure(path, model, output)
        return produced[0].read_bytes()


# The advice onnx2tf prints after every failure, whatever its cause (it names -b/-ois, -kt/-kat, -onwdt): not evidence
# of a dynamic dimension or a layout problem.
_ONNX2TF_FOOTER = ("Read this and deal with it", "if the input OP has a dynamic dimension",
                   "NHWC or an irregular channel arrangement", "NonMaxSuppression in the post-processing")


def _has_dynamic_input(model) -> bool:
    """Any graph input (not an initializer) with a dimension that is not a fixed positive number."""
    initializers = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        for dim in value.type.tensor_type.shape.dim:
            if not (dim.HasField("dim_value") and dim.dim_value > 0):
                return True
    return False


def _conversion_failure(path: Path, model, output: list[str]) -> Exception:
    text = "\n".join(output)
    failing = []
    for node in model.graph.node:
        if node.op_type in text and node.op_type not in failing and ("not supported" in text or "Unsupported" in text):
            failing.append(node)
    if failing:
        report = SupportReport("TFLite (via onnx2tf)")
        for node in model.graph.node:
            if node.op_type in {n.op_type for n in failing}:
                report.ops.append(OpSupport(f"onnx::{node.op_type}", f"node '{node.name}'", False, "onnx2tf cannot convert it"))
        return UnsupportedOpError(report, target="TFLite")
    specific = [line for line in output if not any(f in line for f in _ONNX2TF_FOOTER)]
    known = translate(specific, ONNX2TF)
    if known is ONNX2TF[0] and not _has_dynamic_input(model):
        known = None  # the inputs are all fixed already
    if known is not None:
        return ConversionError(wrap(f"onnx2tf could not convert {path}: {known.problem}"), fix=known.fix)
    node = re.search(r"onnx_op_name:\s*(\S+)", strip_ansi(text))
    if node is not None:
        errors = [line for line in clean_lines(output) if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line)]
        detail = f": {errors[-1][:200]}" if errors else ""
        return ConversionError(
            wrap(f"onnx2tf could not convert {path}: it failed on ONNX node '{node.group(1)}'{detail}"),
            fix="quantize the ONNX model directly with --format onnx, or replace that node (e.g. simplify the "
                "model with onnxsim) and try again; --verbose shows onnx2tf's log")
    return ConversionError(f"onnx2tf could not convert {path}; its last messages:\n{summarize(specific or output)}",
                           fix="run with --verbose for the converter log, or quantize with --format onnx")
