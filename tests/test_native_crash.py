"""A native crash never kills the CLI silently, and collapsed calibration is caught before it can cause one.

The model: a tiny untrained Keras CNN whose weights are ~1e-3, so its activations shrink by ~1e-3 per layer
(what keras.applications.MobileNetV2(weights=None) does over 50 layers): scales of ~1e-8 and below, on which
LiteRT's reference kernels abort (SIGABRT) in allocate_tensors."""
import os
import shutil

import numpy as np
import pytest

from edgekit.errors import UnsupportedOpError
from edgekit.native import ChildError, NativeCrashError, run_isolated


def _collapsing_keras(path, *, stddev: float, softmax: bool) -> None:
    import keras

    keras.utils.set_random_seed(0)
    init = keras.initializers.RandomNormal(stddev=stddev)
    x = inp = keras.Input((8, 8, 3))
    for _ in range(3):
        x = keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=init)(x)
        x = keras.layers.ReLU(6.0)(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(5, kernel_initializer=init)(x)
    if softmax:
        x = keras.layers.Softmax()(x)
    keras.Model(inp, x).save(path)


def _int8_without_the_check(model_path, calib: np.ndarray) -> bytes:
    """What quantize would produce if it did not refuse degenerate calibration (the model that makes LiteRT abort)."""
    from edgekit.converters.tflite.int8 import calibrated_flatbuffer, quantize_calibrated
    from edgekit.calibration.ranges import choose_ranges
    from edgekit.calibration.statistics import collect_statistics
    from edgekit.export import to_float_tflite
    from edgekit.tflite_model import TFLiteModel

    model = TFLiteModel(to_float_tflite(str(model_path)).tflite, source=str(model_path))
    ranges = choose_ranges(collect_statistics(model, [[calib[i:i + 1]] for i in range(len(calib))]), "minmax")
    return quantize_calibrated(calibrated_flatbuffer(model.data, ranges))


@pytest.fixture(scope="module")
def collapsing(tmp_path_factory):
    folder = tmp_path_factory.mktemp("collapsing")
    calib = np.random.default_rng(0).uniform(-1, 1, (12, 8, 8, 3)).astype(np.float32)
    np.save(folder / "calib.npy", calib)
    _collapsing_keras(folder / "untrained.keras", stddev=1e-3, softmax=True)
    return folder


def test_untrained_model_is_refused_before_quantizing(cli, capsys, collapsing, tmp_path):
    out = tmp_path / "q"
    code = cli("quantize", collapsing / "untrained.keras", "--calib", collapsing / "calib.npy", "-o", out)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "degenerate calibration" in err and "never exceed 1e-06" in err and "Traceback" not in err
    assert max(len(line) for line in err.splitlines()[:-1]) <= 120  # (the Fix: line is the CLI's own)
    assert err.count("peak |value|") >= 3 and "dense" in err  # the collapsed tensors are named, with their peaks
    assert "untrained model" in err and "calibration data that is wrong" in err and "Fix:" in err
    assert not out.exists()


def test_native_abort_in_litert_becomes_a_clear_error(cli, capsys, collapsing, tmp_path):
    """The int8 model with scales ~1e-9 (made without the check): LiteRT BUILTIN_REF aborts in allocate_tensors
    inside an isolated child; the CLI names the step and exits 3 instead of dying with SIGABRT and no output.
    (Plain parity runs the optimized kernels, which do not abort; the per-layer analysis runs BUILTIN_REF.)"""
    bad = tmp_path / "collapsed_int8.tflite"
    bad.write_bytes(_int8_without_the_check(collapsing / "untrained.keras", np.load(collapsing / "calib.npy")))
    code = cli("parity", bad, bad, "--data", collapsing / "calib.npy", "--per-layer", "-o", tmp_path / "layers")
    err = capsys.readouterr().err
    assert code == 3, err
    assert "LiteRT tensor allocation (reference kernels)" in err and "crashed inside native code (SIGABRT" in err
    assert "Fix:" in err and "Traceback" not in err


def test_isolated_step_reports_signal_and_last_words():
    def abort_loudly():
        os.write(2, b"ek_kernel.cc:42 CHECK failed: scale > 1e-6\n")
        os.abort()

    with pytest.raises(NativeCrashError) as caught:
        run_isolated("the test step", abort_loudly)
    message = caught.value.message
    assert "the test step crashed inside native code (SIGABRT, signal 6)" in message
    assert "CHECK failed: scale > 1e-6" in message and caught.value.exit_code == 3

    assert run_isolated("a working step", lambda: b"\x01" * 100_000) == b"\x01" * 100_000  # large results pass whole
    with pytest.raises(ChildError) as raised:
        run_isolated("a failing step", lambda: int("x"))
    assert raised.value.type_name == "ValueError" and "invalid literal" in str(raised.value)


@pytest.mark.skipif(not shutil.which("gcc"), reason="gcc is needed to build the edgekit runtime for this host")
@pytest.mark.parametrize("stddev", [1e-3, 1e-5])
def test_edgekit_runtime_computes_or_refuses_tiny_scales(tmp_path, stddev):
    """Our C runtime (host build, and the ASan+UBSan driver) on scales down to ~1e-20: no fault. Without SOFTMAX it
    computes, bit-exact with LiteRT BUILTIN_REF where LiteRT itself survives; SOFTMAX's beta * input scale below
    TFLite's limit is refused with a message that names the cause."""
    from edgekit.firmware.host_runtime import HostRuntime
    from edgekit.tflite_model import TFLiteModel

    calib = np.random.default_rng(0).uniform(-1, 1, (8, 8, 8, 3)).astype(np.float32)
    _collapsing_keras(tmp_path / "plain.keras", stddev=stddev, softmax=False)
    model = _int8_without_the_check(tmp_path / "plain.keras", calib)
    reference = TFLiteModel(model, source="collapsed")
    scales = [d["quantization"][0] for d in reference.interpreter("plain").get_tensor_details() if d["quantization"][0]]
    assert min(scales) < 1e-8
    x = np.random.default_rng(1).integers(-128, 128, (1, 8, 8, 3)).astype(np.int8)
    try:
        expected = reference.run([x], kind="reference", raw=True)
    except NativeCrashError:
        expected = None  # LiteRT aborts on these scales (caught): our runtime must still not fault
    for sanitize in (False, True):
        got = HostRuntime(model, sanitize=sanitize, source="collapsed").invoke([x])
        if expected is not None:
            assert all(np.array_equal(g, e) for g, e in zip(got, expected))

    _collapsing_keras(tmp_path / "softmax.keras", stddev=stddev, softmax=True)
    with pytest.raises(UnsupportedOpError) as refused:
        HostRuntime(_int8_without_the_check(tmp_path / "softmax.keras", calib), source="collapsed softmax")
    assert "SOFTMAX" in str(refused.value) and "degenerate" in refused.value.fix


def test_a_hung_isolated_step_is_stopped_by_the_watchdog_and_named():
    import time

    started = time.monotonic()
    with pytest.raises(NativeCrashError, match=r"the sleeping step did not finish within 1 s"):
        run_isolated("the sleeping step", lambda: time.sleep(60), timeout_s=1)
    assert time.monotonic() - started < 30
