"""Numpy evaluator of Core ML ML Programs (.mlpackage), so Linux can compute what a Core ML model outputs.

The program is read from the package's protobuf spec and weight blob (``edgekit.coreml.package``; no Core ML
runtime needed) and every op is evaluated in numpy (``edgekit.coreml.ops``): float math in float32/float64, then
each result rounded to the dtype the program declares for it (np.float16 for fp16 tensors, so fp16 programs get
fp16 rounding after every op), and the exact quantize/dequantize/constexpr formulas of coremltools' own value
inference. An op the evaluator lacks is never skipped: ``check_supported()`` lists every one of them in an
UnsupportedOpError, and ``predict()`` calls it first.

Image inputs: for an ``ImageType`` input coremltools (pass ``mil_backend::insert_image_preprocessing_ops``) puts
the scale and bias into the program as ``mul``/``add`` ops right after the input, and the spec describes the input
as an image. The program input is the pixel tensor (N, C, H, W) with channels in the image's color layout
(RGB/BGR, or one channel for grayscale), values 0..255; ``predict`` rounds and clips image feeds to uint8 as a
pixel buffer would hold them.

Classifiers: the program ends with a ``classify`` op; the evaluator returns its probability output as a float
array in class order (Core ML returns a dict) and its label output as a 0-d array holding the label.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from edgekit.coreml.ops import OPS, OpCall
from edgekit.coreml.package import DATA_TYPES, BlobStore, decode_bytes, load_protos, read_package
from edgekit.errors import CalibrationDataError, InternalError, InvalidModelError, UnsupportedOpError
from edgekit.support import OpSupport, SupportReport

log = logging.getLogger(__name__)

EVALUATOR_TARGET = "edgekit's numpy MIL evaluator"
_COLOR_SPACES = {10: "G", 20: "RGB", 30: "BGR", 40: "G_FLOAT16"}


@dataclass(frozen=True)
class ProgramInput:
    """One input of the program: ``is_image`` inputs receive pixels (0..255), preprocessing is in the program."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    is_image: bool = False
    color_layout: Optional[str] = None  # "RGB", "BGR", "G" / "G_FLOAT16" (grayscale) for images, None otherwise


@dataclass(frozen=True)
class _TensorType:
    dtype: Optional[int]  # MIL DataType enum; None for non-tensor values (lists, dicts)
    shape: Optional[Tuple[int, ...]]  # None when a dimension is not constant


@dataclass
class _Op:
    index: int
    op_type: str
    inputs: Dict[str, List[Tuple[str, object]]]  # name -> [("name", var) | ("value", proto Value)]
    outputs: List[Tuple[str, _TensorType]]
    attributes: dict
    nested: bool  # has nested blocks (control flow)

    def location(self) -> str:
        names = ", ".join(f"'{n}'" for n, _ in self.outputs) or "no outputs"
        return f"op #{self.index} -> {names}"


class MILProgram:
    """An ML Program read back from an .mlpackage, evaluable in numpy."""

    def __init__(self, path: Path, spec, blobs: BlobStore) -> None:
        self.path = Path(path)
        self.spec = spec
        self._blobs = blobs
        self._MIL = load_protos()[1]
        program = spec.mlProgram
        name = spec.description.defaultFunctionName or "main"
        if name not in program.functions:
            raise InvalidModelError(f"{path}: the ML Program has no function '{name}' (has {sorted(program.functions)})")
        function = program.functions[name]
        opset = function.opset
        if opset not in function.block_specializations:
            raise InvalidModelError(f"{path}: function '{name}' has no block for its opset {opset}")
        self.opset = opset
        self.function_name = name
        block = function.block_specializations[opset]
        self._block_outputs = list(block.outputs)
        self._function_inputs = [(i.name, self._tensor_type(i.type)) for i in function.inputs]
        self._ops = [self._read_op(i, o) for i, o in enumerate(block.operations)]
        self._consts: Optional[Dict[str, object]] = None
        self._checked = False
        self._label_outputs = {op.outputs[0][0] for op in self._ops if op.op_type == "classify" and op.outputs}

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: Path) -> "MILProgram":
        """Read ``path`` (an .mlpackage folder); InvalidModelError if it is missing, truncated or not an ML Program."""
        spec, weights_dir = read_package(Path(path))
        try:
            return cls(path, spec, BlobStore(weights_dir))
        except (InvalidModelError, UnsupportedOpError):
            raise
        except Exception as exc:  # a structurally broken program: name it instead of a traceback
            raise InvalidModelError(f"{path}: the ML Program cannot be read ({type(exc).__name__}: {exc})") from exc

    def _tensor_type(self, value_type) -> _TensorType:
        if value_type.WhichOneof("type") != "tensorType":
            return _TensorType(None, None)
        tensor = value_type.tensorType
        dims = []
        for dim in tensor.dimensions:
            if dim.WhichOneof("dimension") != "constant":
                return _TensorType(tensor.dataType, None)
            dims.append(int(dim.constant.size))
        return _TensorType(tensor.dataType, tuple(dims))

    def _read_op(self, index: int, proto_op) -> _Op:
        inputs = {}
        for key, argument in proto_op.inputs.items():
            inputs[key] = [
                ("name", b.name) if b.WhichOneof("binding") == "name" else ("value", b.value) for b in argument.arguments
            ]
        for key, value in proto_op.attributes.items():  # iOS16 constexpr ops carry their parameters as attributes
            if key != "name" and key not in inputs and proto_op.type != "const":
                inputs[key] = [("value", value)]
        outputs = [(o.name, self._tensor_type(o.type)) for o in proto_op.outputs]
        return _Op(index, proto_op.type, inputs, outputs, dict(proto_op.attributes), len(proto_op.blocks) > 0)

    def _decode(self, value, where: str):
        """A MIL proto Value -> numpy array (or list for list values, str for a scalar string)."""
        kind = value.type.WhichOneof("type")
        if kind == "listType" or value.immediateValue.WhichOneof("value") == "list":
            return [self._decode(v, where) for v in value.immediateValue.list.values]
        if kind != "tensorType":
            raise InvalidModelError(f"{self.path}: value {where} has type {kind}, which the evaluator cannot read")
        ttype = self._tensor_type(value.type)
        shape = ttype.shape if ttype.shape is not None else ()
        count = int(np.prod(shape)) if shape else 1
        if value.WhichOneof("value") == "blobFileValue":
            blob = value.blobFileValue
            return self._blobs.read(blob.fileName, blob.offset, ttype.dtype, shape)
        tensor = value.immediateValue.tensor
        field = tensor.WhichOneof("value")
        if field == "bytes":
            return decode_bytes(tensor.bytes.values, ttype.dtype, shape, count, where)
        if field is None:
            raise InvalidModelError(f"{self.path}: value {where} is empty")
        items = list(getattr(tensor, field).values)
        if ttype.dtype == 2:  # string
            return items[0] if not shape else np.asarray(items).reshape(shape)
        np_type = DATA_TYPES.get(ttype.dtype, (None,))[0]
        if np_type is None:
            raise InvalidModelError(f"{self.path}: value {where} has unknown data type {ttype.dtype}")
        if len(items) != count:
            raise InvalidModelError(f"{self.path}: value {where} holds {len(items)} elements, its type needs {count}")
        return np.asarray(items, dtype=np_type).reshape(shape)

    # ------------------------------------------------------------------ description
    @property
    def inputs(self) -> List[ProgramInput]:
        """Program inputs in the spec's order."""
        described = {i.name: i for i in self.spec.description.input}
        result = []
        for name, ttype in self._function_inputs:
            feature = described.get(name)
            is_image = feature is not None and feature.type.WhichOneof("Type") == "imageType"
            layout = _COLOR_SPACES.get(feature.type.imageType.colorSpace, "?") if is_image else None
            dtype = np.dtype(DATA_TYPES.get(ttype.dtype, (np.float32,))[0])
            result.append(ProgramInput(name, tuple(ttype.shape or ()), dtype, is_image, layout))
        order = [i.name for i in self.spec.description.input]
        result.sort(key=lambda i: order.index(i.name) if i.name in order else len(order))
        return result

    @property
    def outputs(self) -> List[str]:
        """Output names in the spec's order (classifiers: the label output and the probabilities output)."""
        names = [o.name for o in self.spec.description.output]
        return names or list(self._block_outputs)

    @property
    def label_outputs(self) -> Set[str]:
        """Outputs holding a class label (not numeric)."""
        return set(self._label_outputs)

    @property
    def class_labels(self) -> Optional[list]:
        """Class labels of a classifier program, in class order (None if not a classifier)."""
        for op in self._ops:
            if op.op_type == "classify":
                return self._literal_inputs(op).get("classes")
        return None

    @property
    def deployment_opset(self) -> str:
        return self.opset

    @property
    def operations(self) -> list:
        """The program's main-function operations in order (index, op_type, inputs, outputs)."""
        return list(self._ops)

    def ops_used(self) -> Set[str]:
        """Every op type of the main function."""
        return {op.op_type for op in self._ops}

    def op_types_in_order(self) -> List[str]:
        return [op.op_type for op in self._ops]

    def support_report(self) -> SupportReport:
        """Every op of the program, supported by the evaluator or not (with its location)."""
        report = SupportReport(EVALUATOR_TARGET)
        for op in self._ops:
            if op.nested:
                report.ops.append(OpSupport(op.op_type, op.location(), False, "control flow (nested blocks) is not evaluated"))
            elif op.op_type not in OPS:
                report.ops.append(OpSupport(op.op_type, op.location(), False, "the evaluator has no implementation of this op"))
            else:
                report.ops.append(OpSupport(op.op_type, op.location(), True))
        return report

    def check_supported(self) -> None:
        """Raise UnsupportedOpError listing every op the evaluator cannot evaluate (with its output names)."""
        report = self.support_report()
        if not report.ok:
            raise UnsupportedOpError(report, target=EVALUATOR_TARGET)
        self._checked = True

    def quantization_parameters(self) -> Dict[int, dict]:
        """quantize, dequantize and reshape ops by index: type, input name, outputs, scale, zero point, dtypes."""
        consts = self._constants()
        dtypes = {name: t.dtype for op in self._ops for name, t in op.outputs}
        dtypes.update({name: t.dtype for name, t in self._function_inputs})
        result = {}
        for op in self._ops:
            if op.op_type not in ("quantize", "dequantize", "reshape"):
                continue
            key = "x" if op.op_type == "reshape" else "input"
            bindings = op.inputs.get(key, [])
            source = bindings[0][1] if bindings and bindings[0][0] == "name" else None
            constant = functools.partial(self._constant_input, op, consts)
            out_dtype = op.outputs[0][1].dtype if op.outputs else None
            result[op.index] = {
                "type": op.op_type,
                "input": source,
                "outputs": [n for n, _ in op.outputs],
                "scale": constant("scale"),
                "zero_point": constant("zero_point"),
                "axis": constant("axis"),
                "output_dtype": DATA_TYPES.get(out_dtype, (None, None))[1],
                "input_dtype": DATA_TYPES.get(dtypes.get(source), (None, None))[1],
            }
        return result

    def _constant_input(self, op: _Op, consts: Dict[str, object], name: str):
        """The value of a constant input of ``op`` (literal or const op output), None if absent or computed."""
        items = op.inputs.get(name)
        if not items:
            return None
        kind, item = items[0]
        return consts.get(item) if kind == "name" else self._decode(item, f"{op.location()} input '{name}'")

    # ------------------------------------------------------------------ evaluation
    def _literal_inputs(self, op: _Op) -> Dict[str, object]:
        return {
            key: self._decode(bindings[0][1], f"{op.location()} input '{key}'")
            for key, bindings in op.inputs.items()
            if len(bindings) == 1 and bindings[0][0] == "value"
        }

    def _constants(self) -> Dict[str, object]:
        """Values of every op whose inputs are all constant (const and constexpr ops), computed once."""
        if self._consts is None:
            consts: Dict[str, object] = {}
            for op in self._ops:
                if op.op_type == "const":
                    consts[op.outputs[0][0]] = self._decode(op.attributes["val"], op.location())
                elif op.op_type.startswith("constexpr_"):
                    self._run_op(op, consts)
            self._consts = consts
        return self._consts

    def _run_op(self, op: _Op, env: Dict[str, object]) -> None:
        inputs = {}
        literals = {}
        for key, bindings in op.inputs.items():
            values = []
            for kind, item in bindings:
                if kind == "name":
                    if item not in env:
                        raise InvalidModelError(
                            f"{self.path}: {op.op_type} at {op.location()} reads '{item}', which no earlier op produces"
                        )
                    values.append(env[item])
                else:
                    decoded = self._decode(item, f"{op.location()} input '{key}'")
                    if isinstance(decoded, list):
                        literals[key] = decoded
                    values.append(decoded if not isinstance(decoded, list) else None)
            inputs[key] = values
        call = OpCall(op.op_type, op.outputs[0][0] if op.outputs else "?", inputs, [t.shape for _, t in op.outputs], literals)
        try:
            result = OPS[op.op_type](call)
        except (InvalidModelError, UnsupportedOpError):
            raise
        except Exception as exc:
            raise InternalError(f"evaluating {op.op_type} at {op.location()} failed: {type(exc).__name__}: {exc}") from exc
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(op.outputs):
            raise InternalError(
                f"{op.op_type} at {op.location()} gave {len(results)} outputs, the program declares {len(op.outputs)}"
            )
        for (name, ttype), value in zip(op.outputs, results):
            env[name] = self._as_declared(value, ttype, op)

    def _as_declared(self, value, ttype: _TensorType, op: _Op):
        """Round to the declared dtype (fp16 rounding happens here) and check the declared shape."""
        if ttype.dtype is None or ttype.dtype == 2 or isinstance(value, str):
            return value
        np_type = DATA_TYPES[ttype.dtype][0]
        out = np.asarray(value).astype(np_type) if np.asarray(value).dtype != np_type else np.asarray(value)
        if ttype.shape is not None and tuple(out.shape) != ttype.shape:
            if out.size == int(np.prod(ttype.shape)) and op.op_type == "classify":
                return out.reshape(ttype.shape)
            raise InternalError(
                f"{op.op_type} at {op.location()} computed shape {tuple(out.shape)}, the program declares {ttype.shape}"
            )
        return out

    def _check_feeds(self, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        problems = []
        ready = {}
        for spec in self.inputs:
            if spec.name not in feeds:
                problems.append(f"input '{spec.name}' {list(spec.shape)} is not fed")
                continue
            value = np.asarray(feeds[spec.name])
            if spec.shape and tuple(value.shape) != spec.shape:
                problems.append(f"input '{spec.name}' has shape {list(value.shape)}, the program needs {list(spec.shape)}")
                continue
            if spec.is_image:  # a pixel buffer holds uint8 values
                value = np.clip(np.rint(value.astype(np.float64)), 0, 255)
            ready[spec.name] = value.astype(spec.dtype)
        unknown = sorted(set(feeds) - {i.name for i in self.inputs})
        if unknown:
            problems.append(f"unknown input(s) {unknown}; the program's inputs are {[i.name for i in self.inputs]}")
        if problems:
            raise CalibrationDataError(problems, fix="feed one array per program input, with the program's shapes")
        return ready

    def predict(self, feeds: Dict[str, np.ndarray], *, keep_intermediates: bool = False) -> Dict[str, np.ndarray]:
        """Evaluate the program on ``feeds`` (input name -> array); with keep_intermediates, every named value."""
        if not self._checked:
            self.check_supported()
        env: Dict[str, object] = dict(self._constants())
        env.update(self._check_feeds(feeds))
        for op in self._ops:
            if op.op_type == "const" or op.op_type.startswith("constexpr_"):
                continue
            self._run_op(op, env)
        if keep_intermediates:
            return dict(env)
        missing = [name for name in self._block_outputs if name not in env]
        if missing:
            raise InvalidModelError(f"{self.path}: outputs {missing} are produced by no op")
        return {name: env[name] for name in self.outputs if name in env}
