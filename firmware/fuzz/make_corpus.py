"""Seed corpus for the runtime fuzzer: real models (MLPerf Tiny int8, the demo int8 model) and one small
valid model per supported operator, plus a float-I/O graph (QUANTIZE -> ... -> DEQUANTIZE) and a RESHAPE chain.

    python firmware/fuzz/make_corpus.py OUT_DIR [--mlperf DIR] [--demo MODEL.tflite]

Single-op models are built with tests/firmware/opmodels.py and checked with LiteRT (BUILTIN_REF), so
every seed is a model the runtime is meant to accept. Nothing here is committed: the corpus is generated.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

log = logging.getLogger(__name__)


def _conv_weights(rng, shape, channels_axis):
    return rng.integers(-127, 128, size=shape).astype(np.int8), list(np.linspace(0.01, 0.03, shape[channels_axis]))


def single_op_models(seed: int = 0) -> Dict[str, bytes]:
    """One small valid int8 model per operator the runtime implements (name -> .tflite bytes)."""
    from tests.firmware.opmodels import T, build_graph, build_model

    rng = np.random.default_rng(seed)
    models: Dict[str, bytes] = {}
    w, ws = _conv_weights(rng, (4, 3, 3, 3), 0)
    models["conv_2d"] = build_model(
        "CONV_2D",
        [T((1, 8, 8, 3), scale=0.05, zero_point=-3), T((4, 3, 3, 3), scale=ws, data=w),
         T((4,), "int32", scale=[0.05 * s for s in ws], data=rng.integers(-500, 500, 4))],
        [T((1, 4, 4, 4), scale=0.2, zero_point=5)],
        {"padding": "SAME", "stride_w": 2, "stride_h": 2, "fused_activation_function": "RELU6"})
    w, ws = _conv_weights(rng, (1, 3, 3, 8), 3)
    models["depthwise_conv_2d"] = build_model(
        "DEPTHWISE_CONV_2D",
        [T((1, 6, 6, 4), scale=0.05, zero_point=2), T((1, 3, 3, 8), scale=ws, data=w, quantized_dimension=3),
         T((8,), "int32", scale=[0.05 * s for s in ws], data=rng.integers(-500, 500, 8))],
        [T((1, 6, 6, 8), scale=0.1, zero_point=-1)],
        {"padding": "SAME", "depth_multiplier": 2})
    w, ws = _conv_weights(rng, (8, 16), 0)
    models["fully_connected"] = build_model(
        "FULLY_CONNECTED",
        [T((1, 16), scale=0.05, zero_point=1), T((8, 16), scale=ws, data=w),
         T((8,), "int32", scale=[0.05 * s for s in ws], data=rng.integers(-500, 500, 8))],
        [T((1, 8), scale=0.3, zero_point=0)], {"fused_activation_function": "RELU"})
    pool = {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2}
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        models[op.lower()] = build_model(op, [T((1, 8, 8, 4), scale=0.1, zero_point=3)],
                                         [T((1, 4, 4, 4), scale=0.1, zero_point=3)], pool)
    for op in ("ADD", "MUL"):
        models[op.lower()] = build_model(op, [T((1, 4, 4, 4), scale=0.1, zero_point=2), T((1, 1, 1, 4), scale=0.05)],
                                         [T((1, 4, 4, 4), scale=0.2, zero_point=-4)])
    models["reshape"] = build_model("RESHAPE", [T((1, 4, 4, 4)), T((2,), "int32", scale=None, data=np.array([1, 64]))],
                                    [T((1, 64))], {"new_shape": [1, 64]})
    models["softmax"] = build_model("SOFTMAX", [T((1, 10), scale=0.1, zero_point=0)],
                                    [T((1, 10), scale=1 / 256, zero_point=-128)])
    models["mean"] = build_model("MEAN", [T((1, 4, 4, 8), scale=0.1), T((2,), "int32", scale=None, data=np.array([1, 2]))],
                                 [T((1, 8), scale=0.1)])
    models["pad"] = build_model("PAD", [T((1, 4, 4, 3)), T((4, 2), "int32", scale=None,
                                                           data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]]))],
                                [T((1, 6, 6, 3))])
    models["concatenation"] = build_model("CONCATENATION", [T((1, 4, 4, 2), scale=0.1), T((1, 4, 4, 3), scale=0.1)],
                                          [T((1, 4, 4, 5), scale=0.1)], {"axis": 3})
    models["transpose"] = build_model("TRANSPOSE", [T((1, 4, 6, 3)), T((4,), "int32", scale=None,
                                                                        data=np.array([0, 2, 1, 3]))], [T((1, 6, 4, 3))])
    models["quantize"] = build_model("QUANTIZE", [T((1, 10), "float32", scale=None)], [T((1, 10), scale=0.02, zero_point=1)])
    models["dequantize"] = build_model("DEQUANTIZE", [T((1, 10), scale=0.02, zero_point=1)], [T((1, 10), "float32", scale=None)])
    models["logistic"] = build_model("LOGISTIC", [T((1, 16), scale=0.1, zero_point=0)],
                                     [T((1, 16), scale=1 / 256, zero_point=-128)])
    models["hard_swish"] = build_model("HARD_SWISH", [T((1, 16), scale=0.05, zero_point=0)],
                                       [T((1, 16), scale=0.03, zero_point=-20)])
    # issue 25's unary ops (ELU has no BUILTIN_REF kernel, which the seeds are checked against: the mutants' op codes
    # reach it); SQRT/RSQRT inputs >= their zero point, as LiteRT requires
    for op in ("RELU", "RELU6", "RELU_N1_TO_1", "TANH", "EXP", "LOG", "SQRT", "RSQRT", "ABS", "NEG"):
        models[op.lower()] = build_model(op, [T((1, 16), scale=0.05, zero_point=-128 if "SQRT" in op else 3)],
                                         [T((1, 16), scale=0.04, zero_point=-5)])
    models["leaky_relu"] = build_model("LEAKY_RELU", [T((1, 16), scale=0.05)], [T((1, 16), scale=0.04)], {"alpha": 0.2})
    models["gelu"] = build_model("GELU", [T((1, 16), scale=0.05)], [T((1, 16), scale=0.04)], {"approximate": True})
    models["prelu"] = build_model("PRELU", [T((1, 4, 4, 4), scale=0.05), T((1, 1, 4), scale=0.01, zero_point=2,
                                                                          data=np.array([[[5, -9, 40, 127]]], np.int8))],
                                  [T((1, 4, 4, 4), scale=0.04)])
    # binary / select / reduction kernels (kernels/add.c SUB, binary.c, select.c, mean.c, arg_min_max.c)
    a, b, o = T((1, 4, 4, 4), scale=0.1, zero_point=2), T((1, 1, 1, 4), scale=0.05), T((1, 4, 4, 4), scale=0.2, zero_point=-4)
    flag = T((1, 4, 4, 4), "bool", scale=None)
    for op in ("SUB", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM"):
        models[op.lower()] = build_model(op, [a, b], [o])
    for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
        models[op.lower()] = build_model(op, [a, b], [flag])
    for op in ("LOGICAL_AND", "LOGICAL_OR"):
        models[op.lower()] = build_model(op, [flag, T((1, 1, 1, 4), "bool", scale=None)], [flag])
    models["select"] = build_model("SELECT", [T((1,), "bool", scale=None), a, a], [a])
    models["select_v2"] = build_model("SELECT_V2", [T((4, 1), "bool", scale=None), T((1, 4, 1, 4), scale=0.1, zero_point=2), a], [a])
    axes = T((2,), "int32", scale=None, data=np.array([1, 2]))
    for op in ("SUM", "REDUCE_MAX", "REDUCE_MIN"):
        models[op.lower()] = build_model(op, [a, axes], [T((1, 4), scale=0.1 if op != "SUM" else 1.0, zero_point=2)])
    for op in ("ARG_MAX", "ARG_MIN"):
        models[op.lower()] = build_model(op, [a, T((1,), "int32", scale=None, data=np.array([3]))],
                                         [T((1, 4, 4), "int32", scale=None)], {"output_type": 2})
    models["div"] = build_model("DIV", [a, b], [o])
    models["l2_normalization"] = build_model("L2_NORMALIZATION", [a], [T((1, 4, 4, 4), scale=1 / 128, zero_point=0)])
    models["batch_matmul"] = build_model("BATCH_MATMUL", [T((2, 3, 4), scale=0.1, zero_point=1), T((4, 5), scale=0.05)],
                                         [T((2, 3, 5), scale=0.2, zero_point=-2)])
    models["log_softmax"] = build_model("LOG_SOFTMAX", [a], [T((1, 4, 4, 4), scale=16 / 256, zero_point=127)])
    models.update(shape_op_models(rng))
    models.update(graph_models(rng))
    return models


def shape_op_models(rng: np.random.Generator) -> Dict[str, bytes]:
    """One small valid model per shape / data-movement operator (SPLIT ... TRANSPOSE_CONV)."""
    from tests.firmware.opmodels import T, build_graph, build_model

    i32 = lambda *v: T((len(v),), "int32", scale=None, data=np.array(v))  # noqa: E731
    scalar = lambda v: T((), "int32", scale=None, data=np.array(v, dtype=np.int32))  # noqa: E731
    x = lambda *d: T(d, scale=0.1, zero_point=2)  # noqa: E731
    m: Dict[str, bytes] = {}
    m["split"] = build_model("SPLIT", [scalar(2), x(1, 4, 6)], [x(1, 4, 3), x(1, 4, 3)], {"num_splits": 2})
    m["split_v"] = build_model("SPLIT_V", [x(1, 4, 6), i32(1, -1, 2), scalar(-1)], [x(1, 4, 1), x(1, 4, 3), x(1, 4, 2)],
                               {"num_splits": 3})
    m["unpack"] = build_model("UNPACK", [x(3, 4)], [x(4), x(4), x(4)], {"num": 3, "axis": 0})
    m["pack"] = build_model("PACK", [x(2, 3), x(2, 3)], [x(2, 2, 3)], {"values_count": 2, "axis": 1})
    m["strided_slice"] = build_model("STRIDED_SLICE", [x(1, 6, 5, 4), i32(0, 5, 1), i32(1, 0, 5), i32(1, -2, 2)],
                                     [x(1, 3, 2, 4)], {"ellipsis_mask": 0, "shrink_axis_mask": 0})
    m["slice"] = build_model("SLICE", [x(2, 5, 4), i32(1, 1, 0), i32(1, -1, 3)], [x(1, 4, 3)])
    m["gather"] = build_model("GATHER", [x(5, 3), i32(4, 1)], [x(2, 3)], {"axis": 0})
    m["depth_to_space"] = build_model("DEPTH_TO_SPACE", [x(1, 2, 2, 8)], [x(1, 4, 4, 2)], {"block_size": 2})
    m["space_to_depth"] = build_model("SPACE_TO_DEPTH", [x(1, 4, 4, 2)], [x(1, 2, 2, 8)], {"block_size": 2})
    m["resize_nearest"] = build_model("RESIZE_NEAREST_NEIGHBOR", [x(1, 3, 3, 2), i32(5, 4)], [x(1, 5, 4, 2)],
                                      {"half_pixel_centers": True})
    m["resize_bilinear"] = build_model("RESIZE_BILINEAR", [x(1, 3, 3, 2), i32(6, 5)], [x(1, 6, 5, 2)],
                                       {"half_pixel_centers": True})
    m["cast"] = build_model("CAST", [x(2, 3)], [T((2, 3), "float32", scale=None)])
    pads = T((2, 2), "int32", scale=None, data=np.array([[1, 0], [0, 1]]))
    m["space_to_batch_nd"] = build_model("SPACE_TO_BATCH_ND", [x(1, 3, 3, 2), i32(2, 2), pads], [x(4, 2, 2, 2)])
    m["batch_to_space_nd"] = build_model("BATCH_TO_SPACE_ND", [x(4, 2, 2, 2), i32(2, 2), pads], [x(1, 3, 3, 2)])
    m["broadcast_to"] = build_model("BROADCAST_TO", [x(3, 1), i32(2, 3, 4)], [x(2, 3, 4)], version=2)
    m["gather_nd"] = build_model("GATHER_ND", [x(3, 4, 2), T((2, 2), "int32", scale=None, data=np.array([[2, 1], [0, 3]]))],
                                 [x(2, 2)])
    m["padv2"] = build_model("PADV2", [x(1, 3, 3, 2), T((4, 2), "int32", scale=None, data=np.array([[0, 0], [1, 1], [0, 2], [0, 0]])),
                                       T((), scale=0.1, zero_point=2, data=np.array(-7, dtype=np.int8))], [x(1, 5, 5, 2)])
    m["mirror_pad"] = build_model("MIRROR_PAD", [x(1, 3, 4, 2), T((4, 2), "int32", scale=None,
                                                                  data=np.array([[0, 0], [2, 1], [1, 3], [0, 0]]))],
                                  [x(1, 6, 8, 2)])
    m["shape"] = build_model("SHAPE", [x(2, 3, 1)], [T((3,), "int32", scale=None)], {"out_type": 2})
    w = rng.integers(-127, 128, size=(3, 3, 3, 2)).astype(np.int8)
    m["transpose_conv"] = build_model(
        "TRANSPOSE_CONV", [i32(1, 6, 6, 3), T((3, 3, 3, 2), scale=[0.02, 0.03, 0.01], data=w), x(1, 3, 3, 2),
                           T((3,), "int32", scale=[0.002, 0.003, 0.001], data=rng.integers(-300, 300, 3))],
        [T((1, 6, 6, 3), scale=0.2, zero_point=-3)], {"padding": "SAME", "stride_w": 2, "stride_h": 2})
    tensors = [x(1, 4, 4), T((1, 4, 2), scale=0.1, zero_point=2), T((1, 4, 2), scale=0.1, zero_point=2),
               scalar(2), T((4, 2), scale=0.1, zero_point=2), T((1, 4, 2), scale=0.1, zero_point=2), i32(0),
               T((1, 4, 4), scale=0.1, zero_point=2)]
    ops = [("SPLIT", [3, 0], [1, 2], {"num_splits": 2}), ("SQUEEZE", [1], [4], None),
           ("EXPAND_DIMS", [4, 6], [5], None), ("CONCATENATION", [5, 2], [7], {"axis": 2})]
    m["split_squeeze_concat"] = build_graph(tensors, ops, [0], [7])
    return m


def graph_models(rng: np.random.Generator) -> Dict[str, bytes]:
    """Small multi-op graphs: float I/O around an int8 body, and a RESHAPE chain (in-place aliasing)."""
    from tests.firmware.opmodels import T, build_graph

    w = rng.integers(-127, 128, size=(6, 12)).astype(np.int8)
    tensors = [
        T((1, 12), "float32", scale=None), T((1, 12), scale=0.03, zero_point=-2), T((6, 12), scale=0.02, data=w),
        T((6,), "int32", scale=0.0006, data=rng.integers(-300, 300, 6)), T((1, 6), scale=0.1, zero_point=4),
        T((1, 6), "float32", scale=None),
    ]
    ops = [("QUANTIZE", [0], [1], None), ("FULLY_CONNECTED", [1, 2, 3], [4], None), ("DEQUANTIZE", [4], [5], None)]
    float_io = build_graph(tensors, ops, [0], [5])
    shape = lambda *d: T((len(d),), "int32", scale=None, data=np.array(d))  # noqa: E731
    tensors = [T((1, 4, 4, 2), scale=0.1), shape(1, 32), T((1, 32), scale=0.1), shape(1, 8, 4), T((1, 8, 4), scale=0.1),
               T((1, 8, 4), scale=0.1, zero_point=1), shape(1, 32), T((1, 32), scale=0.1, zero_point=1)]
    ops = [("RESHAPE", [0, 1], [2], None), ("RESHAPE", [2, 3], [4], None), ("ADD", [4, 4], [5], None),
           ("RESHAPE", [5, 6], [7], None)]
    chain = build_graph(tensors, ops, [0], [7])
    return {"float_io_fc": float_io, "reshape_chain": chain}


_SUPPORTED_CODES = [0, 1, 2, 3, 4, 6, 9, 14, 17, 18, 22, 25, 34, 39, 40, 114, 117,
                    19, 20, 21, 28, 47, 54, 59, 73, 75, 76, 98, 101, 111, 150,  # + issue 25's unary ops
                    41, 99, 55, 57, 71, 72, 58, 63, 61, 62, 86, 84, 64, 123, 74, 82, 89, 56, 79, 42, 11, 126, 50,
                    49, 102, 88, 83, 45, 65, 43, 70, 36, 5, 26, 97, 23, 53, 94, 77, 93, 67, 38, 37, 130, 107, 60, 100]
_TYPES = [0, 1, 2, 3, 4, 6, 7, 9]
_TYPE_NP = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}
_EDGE_INTS = [0, 1, 2, 3, -1, 7, 64, 255, 1 << 15, (1 << 31) - 1, -(1 << 31)]


def _edge_int(rng: np.random.Generator) -> int:
    return int(rng.choice(_EDGE_INTS)) if rng.random() < 0.5 else int(rng.integers(-4, 12))


def _mutate_tensor(t, buffers, rng: np.random.Generator) -> None:
    what = rng.integers(5)
    if what == 0 and t.shape is not None and len(t.shape):  # one dimension
        t.shape[int(rng.integers(len(t.shape)))] = int(rng.choice([0, 1, 2, 3, 5, 9, 17, 100, 4096]))
    elif what == 1:  # rank
        t.shape = [int(d) for d in rng.integers(1, 6, size=int(rng.integers(0, 7)))]
    elif what == 2:
        t.type = int(rng.choice(_TYPES))
    elif what == 3 and t.quantization is not None and t.quantization.scale is not None:
        q = t.quantization
        k = int(rng.integers(len(q.scale)))
        q.scale[k] = float(rng.choice([0.0, 1e-30, 1e-9, 0.5, 1.0, 1e6, 3e38, -0.1]))
        q.zeroPoint[k] = int(rng.choice([0, -128, 127, 128, -129, 1 << 20]))
        if rng.random() < 0.3:
            q.quantizedDimension = int(rng.integers(-1, 5))
    else:
        t.quantization = None
    if t.buffer and buffers[t.buffer].data is not None:  # keep constants consistent so the reader passes them on
        count = int(np.prod(t.shape)) if t.shape is not None else 1
        if count <= 1 << 16:
            dtype = _TYPE_NP.get(t.type, np.int8)
            buffers[t.buffer].data = rng.integers(-100, 100, size=count).astype(dtype).tobytes()


def _mutate_options(op, rng: np.random.Generator) -> None:
    o = op.builtinOptions
    if o is None:
        return
    fields = [k for k, v in vars(o).items() if isinstance(v, (int, float, bool))]
    if fields:
        setattr(o, str(rng.choice(fields)), _edge_int(rng))


def structured_mutants(model: bytes, rng: np.random.Generator, count: int) -> List[bytes]:
    """Field-level variants of a valid model (shapes, types, quantization, options, op codes, wiring) that
    still parse, so they reach the kernels' prepare/eval checks rather than dying in the reader."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    out = []
    for _ in range(count):
        m = schema.ModelT.InitFromPackedBuf(model, 0)
        sg = m.subgraphs[0]
        for t in sg.tensors:  # the object API hands out read-only numpy views: make them editable lists
            t.shape = None if t.shape is None else [int(d) for d in t.shape]
            if t.quantization is not None and t.quantization.scale is not None:
                t.quantization.scale = [float(v) for v in t.quantization.scale]
                t.quantization.zeroPoint = [int(v) for v in t.quantization.zeroPoint]
        for o in sg.operators:
            o.inputs = None if o.inputs is None else [int(v) for v in o.inputs]
        for _ in range(int(rng.integers(1, 4))):
            what = rng.integers(4)
            op = sg.operators[int(rng.integers(len(sg.operators)))]
            if what == 0:
                _mutate_tensor(sg.tensors[int(rng.integers(len(sg.tensors)))], m.buffers, rng)
            elif what == 1:
                _mutate_options(op, rng)
            elif what == 2:  # another supported op on the same tensors, with that op's default options
                from tests.firmware.opmodels import _options

                code = m.operatorCodes[op.opcodeIndex]
                code.builtinCode = int(rng.choice(_SUPPORTED_CODES))
                code.deprecatedBuiltinCode = min(code.builtinCode, 127)
                names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
                op.builtinOptionsType, op.builtinOptions = _options(names[code.builtinCode], None)
            elif op.inputs is not None and len(op.inputs):
                k = int(rng.integers(len(op.inputs)))
                op.inputs[k] = int(rng.integers(-1, len(sg.tensors)))
        builder = flatbuffers.Builder(1024)
        original = schema.BufferStartDataVector
        schema.BufferStartDataVector = lambda b, n: b.StartVector(1, n, 16)
        try:
            builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
        except (TypeError, ValueError, OverflowError):  # a value the field's type cannot hold: draw again
            continue
        finally:
            schema.BufferStartDataVector = original
        out.append(bytes(builder.Output()))
    return out


def _valid_for_litert(model: bytes) -> bool:
    from tests.firmware.opmodels import random_input, reference

    try:
        reference(model, random_input(model, np.random.default_rng(0)))
        return True
    except Exception as exc:  # a seed LiteRT rejects would teach the fuzzer nothing useful
        log.warning("seed rejected by LiteRT: %s", exc)
        return False


def write_corpus(out_dir: Path, *, mlperf: Optional[Path] = None, extra: Iterable[Path] = (),
                 check: bool = True, mutants_per_op: int = 0) -> List[Path]:
    """Write the seeds (named by content hash) into out_dir; returns their paths. ``mutants_per_op`` adds
    that many structured_mutants() of every single-op model."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seeds: Dict[str, bytes] = {}
    if mlperf is not None and Path(mlperf).is_dir():
        for path in sorted(Path(mlperf).glob("*int8*.tflite")):
            seeds[path.stem] = path.read_bytes()
    for path in extra:
        seeds[Path(path).stem] = Path(path).read_bytes()
    rng = np.random.default_rng(1)
    for name, model in single_op_models().items():
        if not check or _valid_for_litert(model):
            seeds[f"op_{name}"] = model
        for k, mutant in enumerate(structured_mutants(model, rng, mutants_per_op)):
            seeds[f"mut_{name}_{k}"] = mutant
    written = []
    for name, data in seeds.items():
        path = out_dir / f"{name}-{hashlib.sha256(data).hexdigest()[:12]}.tflite"
        path.write_bytes(data)
        written.append(path)
    return written


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--mlperf", type=Path, default=REPO / "tests" / "fixtures" / "mlperf_tiny")
    parser.add_argument("--demo", type=Path, action="append", default=[], help="extra .tflite seeds (e.g. the demo int8 model)")
    parser.add_argument("--mutants", type=int, default=0, help="structured mutants per single-op model")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths = write_corpus(args.out_dir, mlperf=args.mlperf, extra=args.demo, mutants_per_op=args.mutants)
    log.info("wrote %d seeds to %s", len(paths), args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
