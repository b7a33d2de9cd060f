#!/usr/bin/env python
"""Single-op CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED models as edgekit firmware on QEMU: bit-exactness of
the Cortex-M fast paths against LiteRT BUILTIN_REF and their exact instruction counts.

The host tests (tests/firmware/test_kernels_conv.py) run the portable C of every kernel; the assembly and ACLE
paths for Cortex-M4 (DSP) and Cortex-M55 (Helium/MVE) only run on the device. This script covers what the MLPerf
models do not: activation clamps narrower than int8 (output zero point != -128), partial channel groups,
strides, dilation, kernels other than 3x3, padded im2col columns, partial 4-pixel blocks and depthwise depth
multipliers > 1 (the demo's 1 -> 16 first layer).

    .venv/bin/python tests/benchmarks/bench_kernels_qemu.py [--boards mps2-an386,mps3-an547] [--json out.json]

Exits 1 if any case is not bit-exact; 0 with "skipped" if qemu-system-arm or arm-none-eabi-gcc is missing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import FigureLog, bench_options  # noqa: E402

import numpy as np  # noqa: E402

BOARDS = ("mps2-an386", "mps3-an547")
SMOKE_CASES = (12,)  # one small fully-connected case: the script's whole path (build, QEMU, compare) in seconds


def out_size(padding: str, size: int, k: int, stride: int, dilation: int) -> int:
    eff = (k - 1) * dilation + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - eff) // stride


def conv_model(rng, *, h, w, c, oc, kh, kw, stride=1, dilation=1, padding="SAME", act="RELU", out_zp=-128,
               out_scale=None):
    from tests.firmware.opmodels import T, build_model

    oh, ow = out_size(padding, h, kh, stride, dilation), out_size(padding, w, kw, stride, dilation)
    wt = rng.integers(-127, 128, size=(oc, kh, kw, c)).astype(np.int8)
    ws = [float(v) for v in (10 ** rng.uniform(-2.5, -1.5, size=oc))]
    in_scale = 0.05
    return build_model("CONV_2D", [
        T((1, h, w, c), scale=in_scale, zero_point=int(rng.integers(-100, 100))),
        T((oc, kh, kw, c), scale=ws, data=wt),
        T((oc,), "int32", scale=[in_scale * s for s in ws], data=rng.integers(-5000, 5000, oc).astype(np.int32))],
        [T((1, oh, ow, oc), scale=out_scale or 0.02 * np.sqrt(kh * kw * c) / 4, zero_point=out_zp)],
        {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": dilation,
         "dilation_w_factor": dilation, "fused_activation_function": act})


def dw_model(rng, *, h, w, c, k=3, stride=1, dilation=1, padding="SAME", act="RELU", out_zp=-128, mult=1):
    from tests.firmware.opmodels import T, build_model

    oh, ow = out_size(padding, h, k, stride, dilation), out_size(padding, w, k, stride, dilation)
    oc = c * mult
    wt = rng.integers(-127, 128, size=(1, k, k, oc)).astype(np.int8)
    ws = [float(v) for v in (10 ** rng.uniform(-2.5, -1.5, size=oc))]
    in_scale = 0.05
    return build_model("DEPTHWISE_CONV_2D", [
        T((1, h, w, c), scale=in_scale, zero_point=int(rng.integers(-100, 100))),
        T((1, k, k, oc), scale=ws, data=wt, quantized_dimension=3),
        T((oc,), "int32", scale=[in_scale * s for s in ws], data=rng.integers(-3000, 3000, oc).astype(np.int32))],
        [T((1, oh, ow, oc), scale=0.02 * k / 2, zero_point=out_zp)],
        {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": dilation,
         "dilation_w_factor": dilation, "depth_multiplier": mult, "fused_activation_function": act})


def fc_model(rng, *, depth, units, act="NONE", out_zp=3, per_tensor=False, batches=1):
    from tests.firmware.opmodels import T, build_model

    wt = rng.integers(-127, 128, size=(units, depth)).astype(np.int8)
    ws = [float(v) for v in (10 ** rng.uniform(-2.5, -1.5, size=units))]
    if per_tensor:
        ws = ws[0]
    bscale = float(np.float32(0.05) * np.float32(ws)) if per_tensor else [float(np.float32(0.05) * np.float32(s)) for s in ws]
    return build_model("FULLY_CONNECTED", [
        T((batches, depth), scale=0.05, zero_point=int(rng.integers(-100, 100))),
        T((units, depth), scale=ws, data=wt),
        T((units,), "int32", scale=bscale, data=rng.integers(-5000, 5000, units).astype(np.int32))],
        [T((batches, units), scale=0.02 * np.sqrt(depth) / 2, zero_point=out_zp)],
        {"fused_activation_function": act})


def cases(rng):
    """(name, model bytes, MACs)."""
    yield "dw 3x3 25x5x64 s1 RELU zp-128 (KWS layer)", dw_model(rng, h=25, w=5, c=64), 25 * 5 * 64 * 9
    yield "dw 3x3 12x9x12 s1 RELU6 zp7 (clamp, partial groups)", \
        dw_model(rng, h=12, w=9, c=12, act="RELU6", out_zp=7), 12 * 9 * 12 * 9
    yield "dw 3x3 16x16x20 s2 NONE zp-5", dw_model(rng, h=16, w=16, c=20, stride=2, act="NONE", out_zp=-5), \
        8 * 8 * 20 * 9
    yield "dw 5x5 10x10x8 d2 VALID RELU zp0", \
        dw_model(rng, h=10, w=10, c=8, k=5, dilation=2, padding="VALID", out_zp=0), 2 * 2 * 8 * 25
    yield "dw 3x3 48x48x16 s1 RELU (ring rows)", dw_model(rng, h=48, w=48, c=16), 48 * 48 * 16 * 9
    yield "conv 1x1 25x5 64->64 RELU zp-128 (KWS layer)", conv_model(rng, h=25, w=5, c=64, oc=64, kh=1, kw=1), \
        125 * 64 * 64
    yield "conv 1x1 7x3 20->13 RELU6 zp11 (tails, clamp)", \
        conv_model(rng, h=7, w=3, c=20, oc=13, kh=1, kw=1, act="RELU6", out_zp=11), 21 * 20 * 13
    yield "conv 1x1 6x6 16->8 NONE zp9 (left-shift rescale)", \
        conv_model(rng, h=6, w=6, c=16, oc=8, kh=1, kw=1, act="NONE", out_zp=9, out_scale=2e-5), 36 * 16 * 8
    yield "conv 1x1 6x6 16->8 RELU zp9 (exponent > 22: no zp fold)", \
        conv_model(rng, h=6, w=6, c=16, oc=8, kh=1, kw=1, out_zp=9, out_scale=500.0), 36 * 16 * 8
    yield "conv 3x3 9x9 3->8 s2 SAME NONE zp-3 (padded columns)", \
        conv_model(rng, h=9, w=9, c=3, oc=8, kh=3, kw=3, stride=2, act="NONE", out_zp=-3), 25 * 27 * 8
    yield "conv 10x4 49x10 1->64 s2 RELU (KWS first layer)", \
        conv_model(rng, h=49, w=10, c=1, oc=64, kh=10, kw=4, stride=2), 125 * 40 * 64
    yield "fc 640->128 NONE", fc_model(rng, depth=640, units=128), 640 * 128
    yield "fc 37->11 RELU", fc_model(rng, depth=37, units=11, act="RELU", out_zp=-128), 37 * 11
    # depth multiplier > 1 (last, so the cases above keep their random draws)
    yield "dw 3x3 8x8 1->16 (m16) s1 RELU (demo first layer)", dw_model(rng, h=8, w=8, c=1, mult=16), \
        8 * 8 * 16 * 9
    yield "dw 3x3 12x10 3->9 (m3) s1 RELU6 zp5 (gathered lanes)", \
        dw_model(rng, h=12, w=10, c=3, mult=3, act="RELU6", out_zp=5), 12 * 10 * 9 * 9
    yield "dw 3x3 60x60 1->6 (m6) s2 NONE (ring rows, broadcast)", \
        dw_model(rng, h=60, w=60, c=1, mult=6, stride=2, act="NONE", out_zp=-5), 30 * 30 * 6 * 9
    # FULLY_CONNECTED per-tensor scale: the packed quad assembly with its in-register requantization
    yield "fc 640->128 per-tensor NONE (AD layer)", fc_model(rng, depth=640, units=128, per_tensor=True), 640 * 128
    yield "fc 128->66 per-tensor RELU6 zp5 (clamp, partial quad)", \
        fc_model(rng, depth=128, units=66, act="RELU6", out_zp=5, per_tensor=True), 128 * 66
    yield "fc 2x 37->9 per-tensor RELU zp-128 (tail, batches)", \
        fc_model(rng, depth=37, units=9, act="RELU", out_zp=-128, per_tensor=True, batches=2), 2 * 37 * 9
    yield "conv 3x3 96x96 3->8 s2 SAME RELU6 (VWW first layer)", \
        conv_model(rng, h=96, w=96, c=3, oc=8, kh=3, kw=3, stride=2, act="RELU6"), 48 * 48 * 27 * 8
    # the Helium small-map depthwise path (rows of 2-5 pixels): partial channel groups, narrow clamps, even and odd
    # row widths, several accumulator blocks per channel
    yield "dw 3x3 40x3x20 s1 RELU6 zp7 (Helium small map, partial group, row blocks)", \
        dw_model(rng, h=40, w=3, c=20, act="RELU6", out_zp=7), 40 * 3 * 20 * 9
    yield "dw 3x3 9x4x20 s1 NONE zp-5 (Helium small map, even rows)", \
        dw_model(rng, h=9, w=4, c=20, act="NONE", out_zp=-5), 9 * 4 * 20 * 9
    yield "dw 3x3 6x2x44 s1 RELU zp-128 (Helium small map, 2-pixel rows)", dw_model(rng, h=6, w=2, c=44), \
        6 * 2 * 44 * 9


def run_case(path: Path, board: str, samples: int, seed: int) -> dict:
    from edgekit.tflite_graph import read_graph
    from edgekit.run.base import RunRequest
    from edgekit.run.runners.mcu import QemuRunner
    from edgekit.run.resolve import resolve_device

    graph = read_graph(path.read_bytes())
    rng = np.random.default_rng(seed)
    inputs = []
    for _ in range(samples):
        inputs.append({graph.tensors[i].name: rng.integers(-128, 128, size=graph.tensors[i].shape, dtype=np.int8)
                       for i in graph.inputs})
    run = QemuRunner(resolve_device(f"qemu:{board}")).run(
        RunRequest(artifact=path, inputs=inputs, iterations=samples, timeout_s=600))
    work = run.work.present()
    ops = work.get("per_op_instructions") or []
    return {"instructions": ops[0]["instructions"] if ops else work["instructions_per_inference"],
            "bit_exact": bool(work["outputs_bit_exact"]["value"]),
            "differing": work["outputs_bit_exact"]["differing_elements"],
            "elements": work["outputs_bit_exact"]["total_elements"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    bench_options(parser)
    args = parser.parse_args()
    figures = FigureLog("bench_kernels_qemu", smoke=args.smoke)
    if args.smoke:  # three cases (depthwise, conv, fully connected) on one board, one sample
        args.boards, args.samples = BOARDS[0], 1
    missing = [tool for tool in ("qemu-system-arm", "arm-none-eabi-gcc") if shutil.which(tool) is None]
    if missing:
        print(f"skipped: missing {', '.join(missing)}")
        return 0
    boards = [b for b in args.boards.split(",") if b]
    rows, failures = [], 0
    with tempfile.TemporaryDirectory(prefix="ek_bench_kernels_") as tmp:
        for index, (name, model, macs) in enumerate(cases(np.random.default_rng(7))):
            if args.smoke and index not in SMOKE_CASES:
                continue
            path = Path(tmp) / f"case{index}.tflite"
            path.write_bytes(model)
            for board in boards:
                started = time.monotonic()
                r = run_case(path, board, args.samples, seed=index)
                r.update(case=name, board=board, macs=macs, instructions_per_mac=r["instructions"] / macs,
                         seconds=round(time.monotonic() - started, 1))
                failures += not r["bit_exact"]
                rows.append(r)
                src = f"QEMU {board}, ekcount plugin, {args.samples} sample(s), vs LiteRT BUILTIN_REF"
                figures.add(f"{name} on {board}: instructions", r["instructions"], "instr", source=src)
                figures.add(f"{name} on {board}: instructions per MAC", round(r["instructions_per_mac"], 3), "instr/MAC",
                            source=src)
                figures.add(f"{name} on {board}: bit-exact", r["bit_exact"], "", method="count", source=src)
                print(f"{name:55s} {board:11s} {r['instructions']:>10,} instr  {r['instructions_per_mac']:5.2f}/MAC  "
                      f"{'bit-exact' if r['bit_exact'] else 'DIFFERS'} ({r['differing']} of {r['elements']})",
                      flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cases": rows}, indent=2))
        print(f"wrote {args.json}")
    figures.write(args.figures)
    print("all bit-exact" if not failures else f"{failures} case(s) NOT bit-exact")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
