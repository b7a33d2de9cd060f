"""Shape and data-movement kernels of the edgekit C runtime against LiteRT BUILTIN_REF, bit for bit.

SPLIT, SPLIT_V, UNPACK, PACK, STRIDED_SLICE (every mask, offset, negative strides), SLICE, SQUEEZE, EXPAND_DIMS,
GATHER (axis, batch_dims, constant and run-time positions), DEPTH_TO_SPACE, SPACE_TO_DEPTH, RESIZE_NEAREST_NEIGHBOR,
RESIZE_BILINEAR (align_corners, half_pixel_centers), CAST, FILL, SHAPE, ZEROS_LIKE and TRANSPOSE_CONV: seeded
random shapes and parameters, single-op models from tests/firmware/opmodels.py, run through the host build of the
runtime (in place and as a prepared model with the overlapped plan) and through LiteRT BUILTIN_REF. Output shapes
are the ones LiteRT computes (the model is built once with a placeholder shape, then with LiteRT's).
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

import numpy as np
import pytest

from edgekit.errors import EdgekitError
from edgekit.firmware.host_runtime import HostRuntime
from tests.firmware.opmodels import T, build_model, reference
from tests.firmware.test_kernels_elementwise import assert_bit_exact, const_i32, random_dims

NP_OF = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "float32": np.float32, "uint8": np.uint8,
         "int64": np.int64, "bool": np.bool_}


def values(rng: np.random.Generator, dtype: str, shape: Sequence[int]) -> np.ndarray:
    """Random values of a dtype (floats N(0, 10), bools 0/1, ints over their range)."""
    if dtype == "float32":
        return (rng.standard_normal(shape) * 10).astype(np.float32)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    info = np.iinfo(NP_OF[dtype])
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(NP_OF[dtype])


def act(shape: Sequence[int], dtype: str = "int8", scale: Optional[float] = 0.05, zero_point: int = 3) -> T:
    """An activation tensor; quantized only when int8."""
    return T(list(shape), dtype, scale=scale if dtype == "int8" else None, zero_point=zero_point if dtype == "int8" else 0)


def litert_shapes(model: bytes) -> Optional[List[List[int]]]:
    """The output shapes LiteRT computes for a model (None if LiteRT refuses it)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:
        interp = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        interp.allocate_tensors()
        return [list(interp.get_tensor(d["index"]).shape) for d in interp.get_output_details()]
    except (RuntimeError, ValueError):
        return None


def shaped_model(make: Callable[[List[List[int]]], bytes], placeholder: List[List[int]]) -> Optional[bytes]:
    """make(output shapes) -> model, rebuilt with the shapes LiteRT computes from the placeholder one."""
    shapes = litert_shapes(make(placeholder))
    return None if shapes is None else make(shapes)


# --- SPLIT / SPLIT_V / UNPACK / PACK -----------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_split_split_v_unpack_pack_random(seed):
    rng = np.random.default_rng(100 + seed)
    checked = 0
    for it in range(8):
        dtype = ["int8", "int8", "int16", "float32", "int32"][it % 5]
        rank = int(rng.integers(1, 6))
        dims = random_dims(rng, rank, 300, max_dim=6)
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        x = values(rng, dtype, dims)
        # SPLIT: a divisor of the axis extent as the number of outputs (up to 16)
        n = int(rng.choice([d for d in range(1, min(dims[a], 16) + 1) if dims[a] % d == 0]))
        part = dims.copy()
        part[a] //= n
        model = build_model("SPLIT", [const_i32(axis), act(dims, dtype)], [act(part, dtype) for _ in range(n)],
                            {"num_splits": n})
        assert_bit_exact(model, [x], f"SPLIT {dims} axis {axis} n {n} {dtype}")
        # SPLIT_V: random sizes, one of them -1 sometimes
        k = int(rng.integers(1, min(dims[a], 5) + 1))
        cuts = sorted(rng.choice(np.arange(1, dims[a]), size=k - 1, replace=False)) if k > 1 else []
        sizes = list(np.diff([0, *cuts, dims[a]]).astype(int))
        given = list(sizes)
        if rng.random() < 0.5:
            given[int(rng.integers(k))] = -1
        outs = []
        for s in sizes:
            p = dims.copy()
            p[a] = int(s)
            outs.append(act(p, dtype))
        model = build_model("SPLIT_V", [act(dims, dtype), const_i32(given), const_i32(axis)], outs, {"num_splits": k})
        assert_bit_exact(model, [x], f"SPLIT_V {dims} axis {axis} sizes {given} {dtype}")
        # UNPACK (at most 16 outputs)
        if dims[a] <= 16:
            part = dims[:a] + dims[a + 1:]
            model = build_model("UNPACK", [act(dims, dtype)], [act(part, dtype) for _ in range(dims[a])],
                                {"num": dims[a], "axis": axis})
            assert_bit_exact(model, [x], f"UNPACK {dims} axis {axis} {dtype}")
        # PACK of up to 8 inputs
        if rank <= 5:
            m = int(rng.integers(1, 9))
            pa = int(rng.integers(-(rank + 1), rank + 1))
            out = dims.copy()
            out.insert(pa % (rank + 1), m)
            model = build_model("PACK", [act(dims, dtype) for _ in range(m)], [act(out, dtype)],
                                {"values_count": m, "axis": pa})
            assert_bit_exact(model, [values(rng, dtype, dims) for _ in range(m)], f"PACK {m} x {dims} axis {pa} {dtype}")
        checked += 1
    assert checked == 8


def test_split_of_sixteen_outputs():
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16)
    model = build_model("SPLIT", [const_i32(1), act([1, 16, 16])], [act([1, 1, 16]) for _ in range(16)], {"num_splits": 16})
    got = assert_bit_exact(model, [x], "SPLIT 16")
    assert len(got) == 16


def test_split_count_that_differs_from_the_outputs_is_refused():
    model = build_model("SPLIT", [const_i32(0), act([4, 2])], [act([2, 2]), act([2, 2])], {"num_splits": 4})
    with pytest.raises(EdgekitError, match="split/pack count"):
        HostRuntime(model)


# --- STRIDED_SLICE / SLICE ---------------------------------------------------------------------------------

def _strided_slice_case(rng: np.random.Generator):
    rank = int(rng.integers(1, 6))
    dims = random_dims(rng, rank, 400, max_dim=7)
    n = int(rng.integers(1, rank + 1)) if rng.random() < 0.4 else rank
    begin, end, strides = [], [], []
    for _ in range(n):
        s = int(rng.choice([1, 1, 2, 3, -1, -2]))
        strides.append(s)
        begin.append(int(rng.integers(-9, 10)))
        end.append(int(rng.integers(-9, 10)))
    opts = {"begin_mask": int(rng.integers(0, 1 << n)), "end_mask": int(rng.integers(0, 1 << n)),
            "shrink_axis_mask": int(rng.integers(0, 1 << n)) if rng.random() < 0.4 else 0}
    if rng.random() < 0.3:
        opts["ellipsis_mask"] = 1 << int(rng.integers(n))
    if rng.random() < 0.3:
        opts["new_axis_mask"] = int(rng.integers(0, 1 << n))
    if rng.random() < 0.15 and n == rank and "ellipsis_mask" not in opts and "new_axis_mask" not in opts:
        opts = {"offset": True}  # end = extent relative to begin
        begin = [int(rng.integers(0, d)) for d in dims]
        end = [int(rng.integers(0, d - b + 1)) for d, b in zip(dims, begin)]
        strides = [1] * rank
    return dims, begin, end, strides, opts


def test_strided_slice_random():
    rng = np.random.default_rng(7)
    checked = refused = 0
    for _ in range(160):
        dims, begin, end, strides, opts = _strided_slice_case(rng)
        dtype = "int8" if rng.random() < 0.7 else str(rng.choice(["int16", "float32", "int32", "bool"]))

        def make(shapes):
            return build_model("STRIDED_SLICE", [act(dims, dtype), const_i32(begin), const_i32(end), const_i32(strides)],
                               [act(shapes[0], dtype)], opts)
        model = shaped_model(make, [[1]])
        if model is None:
            continue
        try:
            assert_bit_exact(model, [values(rng, dtype, dims)], f"STRIDED_SLICE {dims} {begin} {end} {strides} {opts} {dtype}")
        except EdgekitError as e:  # only the two documented refusals
            assert "shrinks an axis to no element" in str(e) or "6 dimensions" in str(e), str(e)
            refused += 1
            continue
        checked += 1
    assert checked >= 100 and refused < 30  # most draws are valid slices


def test_strided_slice_masks_by_hand():
    """Ellipsis in the middle, new axes, shrink with negative indices, negative strides, all in one place."""
    rng = np.random.default_rng(8)
    x = values(rng, "int8", [2, 3, 4, 5])
    cases = [([0, 1], [0, 3], [1, -1], {"ellipsis_mask": 1}),                          # x[..., 1:3:-1] (empty)
             ([1, 0, 4], [2, 0, 0], [1, 1, -2], {"ellipsis_mask": 2}),                  # x[1:2, ..., 4:0:-2]
             ([0, 0, -1], [0, 0, 0], [1, 1, 1], {"new_axis_mask": 1, "ellipsis_mask": 2, "shrink_axis_mask": 4}),
             ([-1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, -1], {"shrink_axis_mask": 1, "begin_mask": 14, "end_mask": 14}),
             ([0, 1, 1, 1], [2, 2, 2, 3], [1, 1, 1, 1], {"offset": True})]
    for begin, end, strides, opts in cases:
        def make(shapes):
            return build_model("STRIDED_SLICE", [act(x.shape), const_i32(begin), const_i32(end), const_i32(strides)],
                               [act(shapes[0])], opts)
        model = shaped_model(make, [[1]])
        assert model is not None, (begin, end, strides, opts)
        assert_bit_exact(model, [x], f"STRIDED_SLICE {begin} {end} {strides} {opts}")


def test_slice_random():
    rng = np.random.default_rng(9)
    for it in range(30):
        rank = int(rng.integers(1, 6))
        dims = random_dims(rng, rank, 400, max_dim=7)
        begin = [int(rng.integers(0, d + 1)) for d in dims]
        size = [int(rng.integers(0, d - b + 1)) if rng.random() < 0.7 else -1 for d, b in zip(dims, begin)]
        out = [d - b if s == -1 else s for d, b, s in zip(dims, begin, size)]
        index_type = "int32" if it % 2 else "int64"
        idx = lambda v: T([len(v)], index_type, scale=None, data=np.asarray(v, dtype=NP_OF[index_type]))  # noqa: E731
        dtype = "int8" if it % 3 else "float32"
        model = build_model("SLICE", [act(dims, dtype), idx(begin), idx(size)], [act(out, dtype)])
        assert_bit_exact(model, [values(rng, dtype, dims)], f"SLICE {dims} {begin} {size}")


# --- SQUEEZE / EXPAND_DIMS -----------------------------------------------------------------------------------

def test_squeeze_and_expand_dims_run_in_place():
    rng = np.random.default_rng(10)
    x = values(rng, "int8", [1, 4, 1, 6])
    squeeze = build_model("SQUEEZE", [act([1, 4, 1, 6])], [act([4, 6])], {"squeeze_dims": [0, 2]})
    assert_bit_exact(squeeze, [x], "SQUEEZE")
    expand = build_model("EXPAND_DIMS", [act([4, 6]), const_i32([1])], [act([4, 1, 6])])
    assert_bit_exact(expand, [x.reshape(4, 6)], "EXPAND_DIMS")
    for dtype in ("float32", "int32"):
        expand = build_model("EXPAND_DIMS", [act([3], dtype), const_i32(-1)], [act([3, 1], dtype)])
        assert_bit_exact(expand, [values(rng, dtype, [3])], f"EXPAND_DIMS {dtype}")


def test_squeeze_with_a_wrong_output_shape_is_refused():
    model = build_model("SQUEEZE", [act([1, 4, 2])], [act([2, 4])])
    with pytest.raises(EdgekitError, match="SQUEEZE output shape"):
        HostRuntime(model)


# --- GATHER ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("constant_positions", [True, False])
def test_gather_random(constant_positions):
    rng = np.random.default_rng(11 + constant_positions)
    for it in range(25):
        rank = int(rng.integers(1, 5))
        dims = random_dims(rng, rank, 200, max_dim=6)
        axis = int(rng.integers(0, rank))
        bd = int(rng.integers(0, axis + 1)) if rng.random() < 0.5 else 0
        pos_rank = int(rng.integers(bd, bd + 3))
        pos_dims = dims[:bd] + [int(rng.integers(1, 5)) for _ in range(pos_rank - bd)]
        ptype = ["int32", "int64", "int16"][it % 3]
        positions = rng.integers(0, dims[axis], size=pos_dims).astype(NP_OF[ptype])
        out = dims[:axis] + pos_dims[bd:] + dims[axis + 1:]
        dtype = "int8" if it % 4 else "float32"
        p = T(pos_dims, ptype, scale=None, data=positions if constant_positions else None)
        opts = {"axis": axis - rank if rng.random() < 0.3 else axis, "batch_dims": bd}
        model = build_model("GATHER", [act(dims, dtype), p], [act(out, dtype)], opts)
        inputs = [values(rng, dtype, dims)] + ([] if constant_positions else [positions])
        assert_bit_exact(model, inputs, f"GATHER {dims} axis {axis} bd {bd} positions {pos_dims} {ptype}")


def test_gather_position_out_of_range_fails_like_litert():
    model = build_model("GATHER", [act([5, 3]), T([2], "int32", scale=None)], [act([2, 3])])
    rt = HostRuntime(model)
    x = np.zeros((5, 3), np.int8)
    assert len(rt.invoke([x, np.array([4, 0], np.int32)])) == 1
    with pytest.raises(EdgekitError, match="gather index out of bounds"):
        rt.invoke([x, np.array([5, 0], np.int32)])


# --- DEPTH_TO_SPACE / SPACE_TO_DEPTH -------------------------------------------------------------------------

def test_depth_to_space_and_space_to_depth_random():
    rng = np.random.default_rng(12)
    for it in range(20):
        b = int(rng.integers(1, 4))
        n, h, w, c = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
        dtype = "int8" if it % 3 else "float32"
        d2s = build_model("DEPTH_TO_SPACE", [act([n, h, w, c * b * b], dtype)], [act([n, h * b, w * b, c], dtype)],
                          {"block_size": b})
        assert_bit_exact(d2s, [values(rng, dtype, [n, h, w, c * b * b])], f"DEPTH_TO_SPACE b {b}")
        s2d = build_model("SPACE_TO_DEPTH", [act([n, h * b, w * b, c], dtype)], [act([n, h, w, c * b * b], dtype)],
                          {"block_size": b})
        assert_bit_exact(s2d, [values(rng, dtype, [n, h * b, w * b, c])], f"SPACE_TO_DEPTH b {b}")


# --- RESIZE ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"])
def test_resize_random(op):
    rng = np.random.default_rng(13 if op == "RESIZE_BILINEAR" else 14)
    for it in range(40):
        n, h, w, c = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 5))
        oh, ow = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        flags = [(False, False), (True, False), (False, True), (True, True)][it % 4]
        if op == "RESIZE_BILINEAR" and all(flags):
            flags = (False, True)
        dtype = "int8" if op == "RESIZE_BILINEAR" or it % 3 else "int16"
        model = build_model(op, [act([n, h, w, c], dtype), const_i32([oh, ow])], [act([n, oh, ow, c], dtype)],
                            {"align_corners": flags[0], "half_pixel_centers": flags[1]})
        assert_bit_exact(model, [values(rng, dtype, [n, h, w, c])], f"{op} {h}x{w} -> {oh}x{ow} {flags}")


def test_resize_bilinear_with_both_flags_is_refused():
    model = build_model("RESIZE_BILINEAR", [act([1, 2, 2, 1]), const_i32([4, 4])], [act([1, 4, 4, 1])],
                        {"align_corners": True, "half_pixel_centers": True})
    with pytest.raises(EdgekitError, match="align_corners and half_pixel_centers"):
        HostRuntime(model)


# --- CAST / FILL / SHAPE / ZEROS_LIKE ---------------------------------------------------------------------------

CAST_TYPES = ["float32", "int8", "uint8", "int16", "int32", "int64", "bool"]


def test_cast_between_every_supported_pair():
    rng = np.random.default_rng(15)
    ran = 0
    for src in CAST_TYPES:
        for dst in CAST_TYPES:
            x = values(rng, src, [3, 7])
            if src == "float32":  # in and out of every destination's range (saturates), NaN, infinities
                x = (rng.standard_normal((3, 7)) * 200).astype(np.float32)
                x[0, :7] = [0.0, -0.0, 0.5, np.nan, np.inf, -np.inf, 3e9]
                x[1, :3] = [-3e9, 1e20, -1e20]
            model = build_model("CAST", [T([3, 7], src, scale=None)], [T([3, 7], dst, scale=None)])
            if litert_shapes(model) is None:
                continue
            assert_bit_exact(model, [x], f"CAST {src} -> {dst}")
            ran += 1
    assert ran >= 30


def test_fill_shape_zeros_like():
    rng = np.random.default_rng(16)
    for dtype in ("int8", "int16", "int32", "int64", "float32", "bool"):
        value = T([], dtype, scale=0.1 if dtype in ("int8", "int16") else None)
        out = T([2, 3, 4], dtype, scale=0.1 if dtype in ("int8", "int16") else None)
        model = build_model("FILL", [const_i32([2, 3, 4]), value], [out])
        assert_bit_exact(model, [values(rng, dtype, [])], f"FILL {dtype}")
    for out_type in ("int32", "int64"):
        model = build_model("SHAPE", [act([2, 5, 1, 3])], [T([4], out_type, scale=None)],
                            {"out_type": 2 if out_type == "int32" else 4})
        got = assert_bit_exact(model, [values(rng, "int8", [2, 5, 1, 3])], f"SHAPE {out_type}")
        assert list(got[0]) == [2, 5, 1, 3]
    for dtype in ("int32", "int64", "float32"):
        model = build_model("ZEROS_LIKE", [T([4, 3], dtype, scale=None)], [T([4, 3], dtype, scale=None)])
        assert_bit_exact(model, [values(rng, dtype, [4, 3])], f"ZEROS_LIKE {dtype}")


# --- TRANSPOSE_CONV ----------------------------------------------------------------------------------------

def test_transpose_conv_random():
    rng = np.random.default_rng(17)
    for it in range(30):
        n, h, w, ic, oc = 1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        padding = "SAME" if it % 2 else "VALID"
        if padding == "SAME":
            oh, ow = h * sh, w * sw
        else:
            oh, ow = (h - 1) * sh + kh, (w - 1) * sw + kw
        s_in, s_out = float(np.exp(rng.uniform(-5, -1))), float(np.exp(rng.uniform(-3, 0)))
        per_channel = it % 3 != 0
        ws = [float(v) for v in np.exp(rng.uniform(-6, -2, size=oc))] if per_channel else float(np.exp(rng.uniform(-6, -2)))
        weights = rng.integers(-127, 128, size=(oc, kh, kw, ic)).astype(np.int8)
        tensors = [const_i32([n, oh, ow, oc]), T([oc, kh, kw, ic], scale=ws, data=weights),
                   T([n, h, w, ic], scale=s_in, zero_point=int(rng.integers(-128, 128)))]
        if it % 4 != 1:  # optional bias
            scales = ws if per_channel else [ws] * oc
            tensors.append(T([oc], "int32", scale=[s_in * s for s in scales], data=rng.integers(-3000, 3000, size=oc)))
        options = {"padding": padding, "stride_h": sh, "stride_w": sw}
        if it % 5 == 2:
            options["fused_activation_function"] = "RELU"
        model = build_model("TRANSPOSE_CONV", tensors, [T([n, oh, ow, oc], scale=s_out, zero_point=int(rng.integers(-128, 128)))],
                            options, version=4 if "fused_activation_function" in options else 3)
        assert_bit_exact(model, [values(rng, "int8", [n, h, w, ic])], f"TRANSPOSE_CONV it {it}")


# --- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND / BROADCAST_TO ------------------------------------------------------

def test_space_to_batch_and_batch_to_space_random():
    rng = np.random.default_rng(18)
    for it in range(20):
        bh, bw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        pads = [[int(rng.integers(0, 3)), 0], [int(rng.integers(0, 3)), 0]]
        h, w = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        pads[0][1] = (-(h + pads[0][0])) % bh  # pad the bottom/right up to a multiple of the block
        pads[1][1] = (-(w + pads[1][0])) % bw
        oh, ow = (h + sum(pads[0])) // bh, (w + sum(pads[1])) // bw
        dtype = "int8" if it % 3 else "float32"
        pad_t = T([2, 2], "int32", scale=None, data=np.array(pads))
        s2b = build_model("SPACE_TO_BATCH_ND", [act([n, h, w, c], dtype), const_i32([bh, bw]), pad_t],
                          [act([n * bh * bw, oh, ow, c], dtype)])
        assert_bit_exact(s2b, [values(rng, dtype, [n, h, w, c])], f"SPACE_TO_BATCH_ND {h}x{w} block {bh}x{bw} pads {pads}")
        b2s = build_model("BATCH_TO_SPACE_ND", [act([n * bh * bw, oh, ow, c], dtype), const_i32([bh, bw]), pad_t],
                          [act([n, h, w, c], dtype)])
        assert_bit_exact(b2s, [values(rng, dtype, [n * bh * bw, oh, ow, c])], f"BATCH_TO_SPACE_ND block {bh}x{bw} crops {pads}")


def test_broadcast_to_random():
    rng = np.random.default_rng(19)
    for it in range(25):
        rank = int(rng.integers(1, 6))
        target = random_dims(rng, rank, 300, max_dim=5)
        lead = int(rng.integers(0, rank))
        src = [1 if rng.random() < 0.5 else d for d in target[lead:]]
        dtype = ["int8", "float32", "int32", "bool"][it % 4]
        model = build_model("BROADCAST_TO", [act(src, dtype), const_i32(target)], [act(target, dtype)], version=2)
        assert_bit_exact(model, [values(rng, dtype, src)], f"BROADCAST_TO {src} -> {target}")


def test_support_report_accepts_data_movement_of_any_type_and_keeps_int8_rules():
    from edgekit.firmware.support import check_support
    from edgekit.tflite_graph import read_graph

    f32 = lambda *d: T(list(d), "float32", scale=None)  # noqa: E731
    moves = build_model("STRIDED_SLICE", [f32(4, 4), const_i32([0, 0]), const_i32([2, 2]), const_i32([1, 1])], [f32(2, 2)])
    shape = build_model("SHAPE", [act([2, 3])], [T([2], "int32", scale=None)], {"out_type": 2})
    gather = build_model("GATHER", [act([5, 3]), const_i32([1, 2])], [act([2, 3])])
    bilinear_f32 = build_model("RESIZE_BILINEAR", [f32(1, 2, 2, 1), const_i32([4, 4])], [f32(1, 4, 4, 1)])
    for model in (moves, shape, gather):
        report = check_support(read_graph(model))
        assert all(o.supported for o in report.ops), [(o.op, o.reason) for o in report.ops]
    report = check_support(read_graph(bilinear_f32))
    assert not report.ops[0].supported and "int8-only" in report.ops[0].reason


@pytest.mark.parametrize("constant_indices", [True, False])
def test_gather_nd_random(constant_indices):
    rng = np.random.default_rng(20 + constant_indices)
    for it in range(20):
        rank = int(rng.integers(1, 5))
        dims = random_dims(rng, rank, 200, max_dim=5)
        nd = int(rng.integers(1, rank + 1))
        lead = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
        itype = ["int32", "int64", "int16"][it % 3]
        idx = np.stack([rng.integers(0, d, size=lead) for d in dims[:nd]], axis=-1).astype(NP_OF[itype])
        out = lead + dims[nd:]
        dtype = "int8" if it % 3 else "float32"
        model = build_model("GATHER_ND", [act(dims, dtype), T(list(idx.shape), itype, scale=None,
                                                                data=idx if constant_indices else None)], [act(out, dtype)])
        inputs = [values(rng, dtype, dims)] + ([] if constant_indices else [idx])
        assert_bit_exact(model, inputs, f"GATHER_ND {dims} indices {list(idx.shape)}")


def test_padv2_with_a_constant_value():
    rng = np.random.default_rng(22)
    pads = T([4, 2], "int32", scale=None, data=np.array([[0, 1], [2, 0], [1, 1], [0, 0]]))
    value = T([], scale=0.05, zero_point=3, data=np.array(-77, dtype=np.int8))
    model = build_model("PADV2", [act([1, 3, 2, 4]), pads, value], [act([2, 5, 4, 4])])
    got = assert_bit_exact(model, [values(rng, "int8", [1, 3, 2, 4])], "PADV2")
    assert (got[0][1] == -77).all()


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_random(mode):
    from ai_edge_litert import schema_py_generated as schema

    rng = np.random.default_rng(23 + (mode == "SYMMETRIC"))
    offset = 1 if mode == "REFLECT" else 0
    for it in range(15):
        rank = int(rng.integers(1, 5))
        dims = random_dims(rng, rank, 200, max_dim=5)
        pads = [[int(rng.integers(0, d - offset + 1)), int(rng.integers(0, d - offset + 1))] for d in dims]
        out = [d + a + b for d, (a, b) in zip(dims, pads)]
        dtype = "int8" if it % 3 else "float32"
        model = build_model("MIRROR_PAD", [act(dims, dtype), T([rank, 2], "int32", scale=None, data=np.array(pads))],
                            [act(out, dtype)], {"mode": getattr(schema.MirrorPadMode, mode)})
        assert_bit_exact(model, [values(rng, dtype, dims)], f"MIRROR_PAD {mode} {dims} {pads}")
