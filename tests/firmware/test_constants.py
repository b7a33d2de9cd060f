"""Issue 29 (flash): a prepared model keeps in flash only the bytes of the .tflite it reads (edgekit.firmware.constants).

The compacted constants + rewritten prepared blob run bit-exact with LiteRT BUILTIN_REF on the host runtime (the same
C as the device; the QEMU runs of tests/firmware/test_library.py and test_firmware_cli.py use them too), the device's
validation accepts them and refuses the blob against the original .tflite, and flash (constants + prepared model) is at
most 1.2x the int8 .tflite wherever the kernels keep the weights int8 (Helium plans, and Cortex-M4 plans with
--weights int8 / flash_layouts=False). Constants no op reads (every reader uses its re-laid-out or folded copy:
EKP_UNREAD) are left out, and the device refuses a blob whose op would read one.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware import host_runtime as H
from edgekit.firmware.constants import (EKP_UNREAD, H_TENSORS_OFF, TENSOR_RECORD, _blob_checksum, compact_constants,
                                        unread_constants)
from edgekit.tflite_graph import read_graph
from tests.firmware.opmodels import random_input, reference

MLPERF = Path(__file__).resolve().parents[1] / "fixtures" / "mlperf_tiny"
FLASH_LIMIT = 1.2  # issue 29: flash of a prepared model <= 1.2x its int8 .tflite (plus runtime code)


def _runtime_over(model: bytes, rt: H.HostRuntime, data: bytes, blob: bytes) -> H.HostRuntime:
    """``rt``'s prepared runtime re-bound to ``data`` / ``blob`` (as the device binds model_data.c / prepared_data.c)."""
    b = rt._backend
    b.flash_data, b.flash_blob = H._aligned_copy(data), H._aligned_copy(blob)
    status = b.lib.ek_prepared_init(b.prep, b.flash_data.ctypes.data, len(b.flash_data), b.flash_blob.ctypes.data,
                                    len(b.flash_blob), b.prep_state.ctypes.data, len(b.prep_state),
                                    b.prep_arena.ctypes.data, len(b.prep_arena))
    assert status == 0
    return rt


@pytest.mark.parametrize("name", ["kws_ref_model_int8.tflite", "ic_resnet8_int8.tflite"])
@pytest.mark.parametrize("optimize", ["speed", "ram"])
def test_compacted_constants_run_bit_exact(name, optimize):
    """(A Helium plan runs only on Helium kernels: its compaction is checked on QEMU mps3-an547 in test_library.py.)"""
    model = (MLPERF / name).read_bytes()
    rt = H.HostRuntime(model, optimize=optimize)
    c = compact_constants(model, rt.prepared["blob"])
    assert len(c.data) < len(model) and len(c.blob) == len(rt.prepared["blob"])
    assert H.prepared_init_error(c.data, c.blob) is None
    assert "made for another model" in H.prepared_init_error(model, c.blob)  # bound to the compact data only
    _runtime_over(model, rt, c.data, c.blob)
    for seed in range(2):
        x = random_input(model, np.random.default_rng(seed))
        for got, want in zip(rt.invoke(x), reference(model, x)):
            assert np.array_equal(got, want)


@pytest.mark.parametrize("name", ["kws_ref_model_int8.tflite", "ic_resnet8_int8.tflite", "ad_autoencoder_int8.tflite"])
def test_flash_of_a_prepared_model_with_int8_weights_is_at_most_1_2x_the_tflite(name):
    model = (MLPERF / name).read_bytes()
    rt = H.HostRuntime(model, optimize="balanced", plan_mve=True)  # Helium kernels keep the weights int8
    c = compact_constants(model, rt.prepared["blob"])
    assert (len(c.data) + len(c.blob)) / len(model) <= FLASH_LIMIT
    # the kept bytes are the constants the records point to (+ alignment), not the flatbuffer's other tables
    assert c.tensor_bytes + c.quantization_bytes <= len(c.data) < c.tensor_bytes + c.quantization_bytes + 16 * 200


def _bit_exact(model: bytes, rt: H.HostRuntime, seeds=range(1)) -> bool:
    for seed in seeds:
        x = random_input(model, np.random.default_rng(seed))
        if not all(np.array_equal(got, want) for got, want in zip(rt.invoke(x), reference(model, x))):
            return False
    return True


@pytest.mark.parametrize("name", ["kws_ref_model_int8.tflite", "ic_resnet8_int8.tflite", "ad_autoencoder_int8.tflite"])
def test_flash_of_a_cortex_m4_plan_with_int8_weights_is_at_most_1_2x_the_tflite(name):
    """flash_layouts=False (--weights int8) on the Cortex-M4 plan: no int16 copies (FULLY_CONNECTED dots the int8
    weights, CONV_2D runs unexpanded), the folded biases left out; bit-exact over the compacted constants."""
    model = (MLPERF / name).read_bytes()
    rt = H.HostRuntime(model, optimize="balanced", flash_layouts=False)
    c = compact_constants(model, rt.prepared["blob"])
    assert (len(c.data) + len(c.blob)) / len(model) <= FLASH_LIMIT
    _runtime_over(model, rt, c.data, c.blob)
    assert _bit_exact(model, rt)


def test_originals_no_op_reads_are_left_out_of_the_compacted_constants():
    """KWS's Cortex-M4 plan with re-laid-out weights: CONV_2D's expanded records and FULLY_CONNECTED's int16 pairs
    replace their int8 weights, the folds their biases: those originals are EKP_UNREAD, the compacted constants do not
    keep them, and the model still runs bit-exact over them."""
    model = (MLPERF / "kws_ref_model_int8.tflite").read_bytes()
    rt = H.HostRuntime(model, optimize="balanced")
    blob = rt.prepared["blob"]
    dropped, dropped_bytes = unread_constants(blob)
    graph = read_graph(model)
    fc = next(op for op in graph.ops if op.name == "FULLY_CONNECTED")
    header = np.frombuffer(blob[:4 * 21], dtype="<u4")
    fc_weights = TENSOR_RECORD.unpack_from(blob, int(header[H_TENSORS_OFF]) + TENSOR_RECORD.size * fc.inputs[1])
    assert fc_weights[-1] & EKP_UNREAD and fc_weights[0] == 0  # where NONE: not referenced
    c = compact_constants(model, blob)
    assert dropped >= 2 and dropped_bytes > len(c.data)
    int8 = compact_constants(model, H.HostRuntime(model, optimize="balanced", flash_layouts=False).prepared["blob"])
    assert len(c.data) + dropped_bytes <= int8.tensor_bytes + int8.quantization_bytes + 16 * 200
    _runtime_over(model, rt, c.data, c.blob)
    assert _bit_exact(model, rt)


def test_the_device_refuses_a_blob_whose_op_would_read_a_constant_left_out():
    """Flag FULLY_CONNECTED's weights EKP_UNREAD in an int8-weight blob (whose FC dots them) and re-seal it: the device
    validation refuses it (the kernel's own per-op data says it reads that input), never runs it over no data."""
    model = (MLPERF / "ad_autoencoder_int8.tflite").read_bytes()
    blob = bytearray(H.HostRuntime(model, optimize="balanced", flash_layouts=False).prepared["blob"])
    assert H.prepared_init_error(model, bytes(blob)) is None
    weights = read_graph(model).ops[0].inputs[1]
    at = int(np.frombuffer(bytes(blob[:4 * 21]), dtype="<u4")[H_TENSORS_OFF]) + TENSOR_RECORD.size * weights
    r = list(TENSOR_RECORD.unpack_from(blob, at))
    r[0], r[1], r[-1] = 0, 0, r[-1] | EKP_UNREAD
    TENSOR_RECORD.pack_into(blob, at, *r)
    blob[12:16] = b"\0\0\0\0"
    blob[12:16] = _blob_checksum(bytes(blob)).to_bytes(4, "little")
    assert "tensor record outside the arena or the model" in H.prepared_init_error(model, bytes(blob))


def test_a_helium_planned_blob_runs_bit_exact_without_helium():
    """A Helium plan (EKP_FOR_MVE) holds no packed FULLY_CONNECTED weights; a non-Helium runtime (this host, or a
    Cortex-M4 build) follows the plan (the int8-weight path) instead of reading packed weights past the op's data."""
    model = (MLPERF / "ad_autoencoder_int8.tflite").read_bytes()
    rt = H.HostRuntime(model, optimize="balanced", plan_mve=True)
    assert len(rt.prepared["blob"]) < len(model) // 10  # no int16 copy of the weights
    assert _bit_exact(model, rt, range(2))
