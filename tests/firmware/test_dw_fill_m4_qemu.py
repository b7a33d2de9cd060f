"""DEPTHWISE_CONV_2D on Cortex-M4 (QEMU mps2-an386) against LiteRT BUILTIN_REF: randomized single-op layers in one
model, so the device-only paths run: the assembly 3x3 pass and the assembly input expansion of the blocked path
(plane mode, and ring mode with both copies of a row written at once), full and partial channel groups, strides 1
and 2, SAME and VALID padding, every fused activation, output scales giving small and large exponents.
The host tests (test_kernels_conv.py) run the portable C of the same paths."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.firmware.opmodels import T, build_graph

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def out_size(padding: str, size: int, k: int, stride: int) -> int:
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - k) // stride


def dw_layers_model(rng: np.random.Generator, count: int) -> tuple[bytes, list[str]]:
    """count independent depthwise layers (each its own graph input and output) in one model."""
    tensors, ops, inputs, outputs, names = [], [], [], [], []
    for i in range(count):
        padding = ["SAME", "VALID"][i % 2]
        stride = 1 + (i // 2) % 2
        c = int(rng.choice([3, 4, 5, 8, 12, 13, 16]))
        h, w = int(rng.integers(5, 40)), int(rng.integers(5, 40))
        oh, ow = out_size(padding, h, 3, stride), out_size(padding, w, 3, stride)
        in_scale = float(10 ** rng.uniform(-2, -0.5))
        ws = [float(v) for v in 10 ** rng.uniform(-2.5, -1.2, size=c)]
        eff = 0.01 * float(10 ** rng.uniform(-1.5, 1.0))  # exponents from small to large
        act = ACTIVATIONS[i % len(ACTIVATIONS)]
        base = len(tensors)
        tensors += [T((1, h, w, c), scale=in_scale, zero_point=int(rng.integers(-128, 128))),
                    T((1, 3, 3, c), scale=ws, data=rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8),
                      quantized_dimension=3),
                    T((c,), "int32", scale=[in_scale * s for s in ws],
                      data=rng.integers(-20000, 20000, c).astype(np.int32)),
                    T((1, oh, ow, c), scale=in_scale * float(np.mean(ws)) / eff, zero_point=int(rng.integers(-128, 128)))]
        ops.append(("DEPTHWISE_CONV_2D", [base, base + 1, base + 2], [base + 3],
                    {"padding": padding, "stride_h": stride, "stride_w": stride, "depth_multiplier": 1,
                     "fused_activation_function": act}))
        inputs.append(base)
        outputs.append(base + 3)
        names.append(f"{h}x{w}x{c} s{stride} {padding} {act}")
    return build_graph(tensors, ops, inputs, outputs), names


@pytest.mark.slow
def test_depthwise_layers_are_bit_exact_on_cortex_m4_in_qemu(tmp_path):
    missing = [tool for tool in ("qemu-system-arm", "arm-none-eabi-gcc") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    from edgekit.run.base import RunRequest
    from edgekit.run.runners.mcu import QemuRunner
    from edgekit.run.resolve import resolve_device
    from edgekit.tflite_graph import read_graph

    model, names = dw_layers_model(np.random.default_rng(12), 8)
    path = tmp_path / "dw_layers.tflite"
    path.write_bytes(model)
    graph = read_graph(model)
    rng = np.random.default_rng(3)
    inputs = [{graph.tensors[i].name: rng.integers(-128, 128, size=graph.tensors[i].shape, dtype=np.int8)
               for i in graph.inputs} for _ in range(2)]
    run = QemuRunner(resolve_device("qemu:mps2-an386")).run(
        RunRequest(artifact=path, inputs=inputs, iterations=2, timeout_s=600))
    exact = run.work.present()["outputs_bit_exact"]
    assert exact["value"] and exact["differing_elements"] == 0, (names, exact)
    assert exact["total_elements"] == 2 * sum(int(np.prod(graph.tensors[o].shape)) for o in graph.outputs)
