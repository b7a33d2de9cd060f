"""ONNX -> float .tflite with onnx2tf, keeping the model's NCHW input layout so the same
input data feeds the ONNX and the TFLite model. Never touches the network: onnx2tf's sample
calibration download only happens for its own int8 output, which we do not ask for."""
from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from edgekit.errors import ConversionError, InvalidModelError, ToolMissingError, UnsupportedOpError, first_line
from edgekit.quiet import captured_output
from edgekit.support import OpSupport, SupportReport
from edgekit.tool_messages import ONNX2TF, onnx2tf_causes, strip_ansi, summarize, translate, wrap

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


# Names TF accepts as scopes (onnx2tf builds Keras layers named after ONNX tensors); others are renamed first.
_TF_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\\/>-]*$")
_DEFAULT_DOMAINS = ("", "ai.onnx")


def foreign_domain_ops(model) -> SupportReport:
    """Nodes outside the default ONNX domain (ONNX-ML LinearClassifier/ZipMap, com.microsoft contrib ops):
    onnx2tf and TFLite have no equivalent, so each is rejected with its location."""
    report = SupportReport("TFLite (via onnx2tf)")
    for index, node in enumerate(model.graph.node):
        if node.domain in _DEFAULT_DOMAINS:
            continue
        kind = "ONNX-ML operator" if node.domain == "ai.onnx.ml" else f"operator of domain '{node.domain}'"
        report.ops.append(OpSupport(f"{node.domain}::{node.op_type}", f"node #{index} '{node.name or '?'}'", False,
                                    f"{kind}: TFLite has no equivalent (a classic-ML head, not a network layer); "
                                    "cut the model before it (onnx.utils.extract_model) or quantize with "
                                    "--format onnx, which keeps it in float"))
    return report


def sanitize_names(model) -> List[str]:
    """Rename every node and tensor whose name TF rejects as a scope (e.g. containing '@' or ':') in place;
    returns the renamed originals. Names stay unique; graph inputs/outputs are renamed consistently."""
    used = {n for n in _all_names(model)}
    mapping: Dict[str, str] = {}

    def fixed(name: str) -> str:
        if not name or _TF_SCOPE_NAME.match(name):
            return name
        if name not in mapping:
            base = re.sub(r"[^A-Za-z0-9_.\\/>-]", "_", name)
            candidate, n = base, 1
            while candidate in used:
                candidate, n = f"{base}_{n}", n + 1
            used.add(candidate)
            mapping[name] = candidate
        return mapping[name]

    graph = model.graph
    for node in graph.node:
        node.name = fixed(node.name)
        for i, name in enumerate(node.input):
            node.input[i] = fixed(name)
        for i, name in enumerate(node.output):
            node.output[i] = fixed(name)
    for collection in (graph.input, graph.output, graph.value_info, graph.initializer):
        for item in collection:
            item.name = fixed(item.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = fixed(sparse.values.name)
    return sorted(mapping)


def _all_names(model) -> List[str]:
    graph = model.graph
    names = [n.name for n in graph.node] + [x for n in graph.node for x in (*n.input, *n.output)]
    names += [i.name for c in (graph.input, graph.output, graph.value_info, graph.initializer) for i in c]
    return names


def _rank(value_info) -> int:
    return len(value_info.type.tensor_type.shape.dim)


def float_tflite_from_onnx(path: Path, input_shape: Optional[Tuple[int, ...]] = None) -> bytes:
    """onnx2tf on the model with static inputs: --input-shape, else a dynamic batch fixed to 1 (as the ONNX route)."""
    from edgekit.converters.onnx.export import fix_input_shapes

    model = load_onnx(path)
    foreign = foreign_domain_ops(model)
    if not foreign.ok:
        raise UnsupportedOpError(foreign, target="TFLite")
    renamed = sanitize_names(model)
    if renamed:
        log.info("renamed %d ONNX name(s) TensorFlow rejects (e.g. %r): characters outside [A-Za-z0-9_./>-]",
                 len(renamed), renamed[0])
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    # onnx2tf keeps the NCHW-style layout only for 3-5-D inputs (and fails on others, e.g. a [1, 16000] audio input)
    inputs = [i.name for i in graph_inputs if 3 <= _rank(i) <= 5]
    note = fix_input_shapes(model, input_shape)
    try:
        import onnx2tf
    except ImportError:
        raise ToolMissingError("onnx2tf", "pip install onnx2tf==1.28.8 onnx-graphsurgeon sng4onnx sne4onnx onnxsim (or run `make install`)") from None
    with tempfile.TemporaryDirectory(prefix="edgekit-onnx2tf-") as work:
        source = path
        if note or renamed:
            import onnx

            if note:
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
    causes = onnx2tf_causes(output)
    known = translate(causes, ONNX2TF)
    if known is ONNX2TF[0] and not _has_dynamic_input(model):
        known = None  # the inputs are all fixed already: not the cause
    if known is not None:
        return ConversionError(wrap(f"onnx2tf could not convert {path}: {known.problem}") + _said(causes),
                               fix=known.fix)
    node = re.search(r"onnx_op_name:\s*(\S+)", strip_ansi(text))
    where = f" on ONNX node '{node.group(1)}'" if node else ""
    if causes or node:
        detail = f": {causes[-1]}" if causes else ""
        return ConversionError(wrap(f"onnx2tf could not convert {path}: it failed{where}{detail}") + _said(causes[:-1]),
                               fix="quantize the ONNX model directly with --format onnx (onnxruntime runs it as it "
                                   "is), or replace that node (e.g. simplify the model with onnxsim); --verbose "
                                   "shows onnx2tf's log")
    return ConversionError(f"onnx2tf could not convert {path}; its last messages:\n{summarize(output)}",
                           fix="run with --verbose for the converter log, or quantize with --format onnx")


def _said(lines: List[str]) -> str:
    return ("\n" + summarize(lines)) if lines else ""
