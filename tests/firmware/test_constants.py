"""Issue 29 (flash): a prepared model keeps in flash only the bytes of the .tflite it reads (edgekit.firmware.constants).

The compacted constants + rewritten prepared blob run bit-exact with LiteRT BUILTIN_REF on the host runtime (the same
C as the device; the QEMU runs of tests/firmware/test_library.py and test_firmware_cli.py use them too), the device's
validation accepts them and refuses the blob against the original .tflite, and flash (constants + prepared model) is at
most 1.2x the int8 .tflite wherever the kernels keep the weights int8 (Helium plans, --optimize with int8 weights).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware import host_runtime as H
from edgekit.firmware.constants import compact_constants
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
