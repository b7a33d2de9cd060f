"""`edgekit run --pipeline` with `implementation: c` on host, ssh and adb devices: the generated integer C
preprocessing (the firmware's code) built as a shared library for where the pipeline runs, timed per frame,
and bit-exact with the spec's reference implementation."""
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import DeviceError, ToolMissingError
from edgekit.preprocessing.spec import PreprocessSpec
from tests.preprocessing.edge_cases import PHOTO_FILES, PHOTOS
from tests.run.runtools import IC_INT8, write_ssh_profile
from tests.run.test_run_pipeline import SPEC, quantized_reference, reference_top3, write_pipeline
from tests.run.test_run_pipeline_mcu import CAMERA, CAMERA_SPEC, rgb565_frames

C_PIPE = {"implementation": "c", "spec": SPEC}


def reference(pixels: np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """The spec's reference implementation on decoded pixels (Pillow resize, numpy values)."""
    from edgekit.preprocessing.decode import to_working_color
    from edgekit.preprocessing.pillow_impl import resize_crop_pillow
    from edgekit.preprocessing.values import to_tensor

    return to_tensor(resize_crop_pillow(to_working_color(pixels, spec), spec), spec)


def model_input(dtype: str, quant):
    """The model input facts spec_for_model reads (dtype, quantization)."""
    from edgekit.run.pipeline.results import ModelInput, Quantization

    return ModelInput(name="input", shape=[1], dtype=dtype, quantization=Quantization(**quant) if quant else None)


@pytest.mark.parametrize("changes, model_dtype", [
    ({}, "int8"),                                                               # the camera case: RGB, int8 input
    ({"color": "bgr", "layout": "NCHW", "resize": "bicubic"}, "uint8"),
    ({"color": "grayscale", "size": [40, 48], "resize": "nearest"}, "int8"),
    ({"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "crop": [80, 80], "size": [96, 112]}, "float32"),
])
def test_generated_c_library_equals_the_reference(changes, model_dtype):
    from edgekit.run.pipeline.generated_c import build_here, host_compiler, library_sources, spec_for_model
    from edgekit.run.runners.pipeline_runner import GeneratedC

    spec_dict = dict(CAMERA_SPEC, **changes)
    quant = {"scale": 1 / 255, "zero_point": -128 if model_dtype == "int8" else 0} if model_dtype != "float32" else None
    spec = spec_for_model(PreprocessSpec.from_dict(spec_dict), model_input(model_dtype, quant))
    assert spec.dtype == model_dtype
    rng = np.random.default_rng(7)
    frames = {(120, 160, "rgb888"): rng.integers(0, 256, (120, 160, 3), np.uint8),
              (120, 160, "gray8"): rng.integers(0, 256, (120, 160, 1), np.uint8),
              (97, 131, "rgb888"): rng.integers(0, 256, (97, 131, 3), np.uint8)}
    library = build_here(library_sources(spec, list(frames)), host_compiler())
    shape = (1, *spec.sample_shape())
    run = GeneratedC(str(library), {"shape": list(shape), "dtype": model_dtype})
    for key, pixels in frames.items():
        out = run(pixels if key[2] == "rgb888" else pixels[:, :, 0])  # a 2-D gray frame is accepted too
        expect = reference(pixels, spec)[None]
        assert out.dtype == expect.dtype and out.shape == expect.shape == shape, key
        np.testing.assert_array_equal(out, expect, err_msg=str(key))


def test_a_frame_size_without_tables_is_a_clear_failure():
    from edgekit.run.pipeline.generated_c import build_here, host_compiler, library_sources, spec_for_model
    from edgekit.run.runners.pipeline_runner import GeneratedC, PipelineFailure

    spec = spec_for_model(PreprocessSpec.from_dict(CAMERA_SPEC), model_input("int8", {"scale": 1 / 255, "zero_point": -128}))
    run = GeneratedC(str(build_here(library_sources(spec, [(120, 160, "rgb888")]), host_compiler())),
                     {"shape": [1, 96, 96, 3], "dtype": "int8"})
    with pytest.raises(PipelineFailure, match="no tables for a 100x120 frame with 3 channel"):
        run(np.zeros((120, 100, 3), np.uint8))


def test_host_pipeline_runs_the_generated_c_bit_exact(cli, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli("run", IC_INT8, "--device", "host", "--pipeline", write_pipeline(tmp_path, preprocess=C_PIPE),
               "--inputs", PHOTOS, "-n", "6", "--warmup", "1", "-o", out)
    assert code == 0
    report = json.loads((out / "pipeline.json").read_text())
    check = report["preprocess_check"]
    assert (check["implementation"], check["identical"], check["frames"]) == ("c", len(PHOTO_FILES), len(PHOTO_FILES))
    assert "on this host" in report["c_library_built_with"]
    assert report["budget"]["phases"][1]["latency_ms"]["count"] == 6
    for name in PHOTO_FILES:  # end to end: the same top-3 as the reference preprocessing into the same model
        assert [c for c, _ in report["results"][name]] == reference_top3(quantized_reference(PHOTOS / name)), name
    assert f"identical to the spec's reference on {len(PHOTO_FILES)} of {len(PHOTO_FILES)} frames" in capsys.readouterr().out


def test_host_camera_model_fed_rgb565_frames_with_the_generated_c(cli, tmp_path):
    frames = rgb565_frames(tmp_path / "frames")
    pipe = write_pipeline(tmp_path, decode={"format": "rgb565", "width": 160, "height": 120},
                          preprocess={"implementation": "c", "spec": CAMERA_SPEC},
                          postprocess={"steps": ["topk"], "top_k": 3})
    out = tmp_path / "out"
    assert cli("run", CAMERA, "--device", "host", "--pipeline", pipe, "--inputs", frames, "-n", "4", "-o", out) == 0
    report = json.loads((out / "pipeline.json").read_text())
    assert report["preprocess_check"]["identical"] == report["preprocess_check"]["frames"] == len(PHOTO_FILES)
    assert "Bottleneck: **" in (out / "report.md").read_text()


def test_ssh_builds_the_generated_c_on_the_board(cli, tmp_path, sshd):
    out = tmp_path / "out"
    code = cli("run", IC_INT8, "--device", sshd.device, *sshd.cli_args(), "--pipeline",
               write_pipeline(tmp_path, preprocess=C_PIPE), "--inputs", PHOTOS, "-n", "4", "--warmup", "1", "-o", out)
    assert code == 0
    report = json.loads((out / "pipeline.json").read_text())
    assert report["device"]["kind"] == "ssh" and report["c_library_built_with"].endswith("on the board")
    assert report["preprocess_check"]["identical"] == len(PHOTO_FILES)
    for name in PHOTO_FILES:
        assert [c for c, _ in report["results"][name]] == reference_top3(quantized_reference(PHOTOS / name))


def test_ssh_board_without_a_compiler_gets_a_cross_built_library(cli, tmp_path, sshd, monkeypatch):
    """The profile names a compiler the board lacks: the library is cross-built here for its uname -m."""
    import platform
    import shutil

    from edgekit.run.pipeline.generated_c import CROSS_GCC

    cross = CROSS_GCC.get(platform.machine())
    if cross is None or shutil.which(cross) is None:
        pytest.skip(f"no {cross or 'cross gcc'} for {platform.machine()} on this machine")
    write_ssh_profile(tmp_path, sshd, monkeypatch, "bare-board",
                      "this machine behind a test sshd, no compiler named", connection={"cc": "/nonexistent/cc"})
    out = tmp_path / "out"
    assert cli("run", IC_INT8, "--device", "bare-board", "--pipeline", write_pipeline(tmp_path, preprocess=C_PIPE),
               "--inputs", PHOTOS, "-n", "2", "-o", out) == 0
    report = json.loads((out / "pipeline.json").read_text())
    assert report["c_library_built_with"] == f"{cross} on this host (the board has no C compiler)"
    assert report["preprocess_check"]["identical"] == len(PHOTO_FILES)


def test_adb_without_an_ndk_is_refused_naming_the_fix(cli, tmp_path, capsys, monkeypatch):
    for var in ("ANDROID_NDK_HOME", "ANDROID_NDK_ROOT", "ANDROID_NDK", "NDK_ROOT", "ANDROID_HOME", "ANDROID_SDK_ROOT"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "out"
    code = cli("run", IC_INT8, "--device", "adb", "--pipeline", write_pipeline(tmp_path, preprocess=C_PIPE),
               "--inputs", PHOTOS, "-o", out)
    assert code != 0
    err = capsys.readouterr().err
    assert "the Android NDK" in err and "ANDROID_NDK_HOME" in err and "implementation pillow or opencv" in err
    assert not out.exists()


def _fake_layout_clang(folder: Path) -> Path:
    clang = folder / "toolchains" / "llvm" / "prebuilt" / "linux-x86_64" / "bin" / "clang"
    clang.parent.mkdir(parents=True)
    clang.write_text("#!/bin/sh\nexit 1\n")
    clang.chmod(clang.stat().st_mode | stat.S_IXUSR)
    return clang


def test_ndk_is_found_from_the_environment_and_targets_the_device_abi(tmp_path):
    """Only the folder layout is checked here (no NDK can be installed offline); the phone run needs one."""
    from edgekit.run.pipeline.generated_c import android_compiler, find_ndk

    sdk = tmp_path / "sdk"
    _fake_layout_clang(sdk / "ndk" / "25.2.9519653")
    newest = _fake_layout_clang(sdk / "ndk" / "27.2.12479018")
    ndk = find_ndk({"ANDROID_HOME": str(sdk)})
    assert ndk == sdk / "ndk" / "27.2.12479018"
    assert android_compiler(ndk, "arm64-v8a") == [str(newest), "--target=aarch64-linux-android21"]
    assert android_compiler(ndk, "armeabi-v7a")[1] == "--target=armv7a-linux-androideabi21"
    assert find_ndk({"ANDROID_NDK_HOME": str(sdk / "ndk" / "25.2.9519653"), "ANDROID_HOME": str(sdk)}).name == "25.2.9519653"
    with pytest.raises(DeviceError, match="ABI 'mips' is not one of arm64-v8a"):
        android_compiler(ndk, "mips")
    with pytest.raises(ToolMissingError, match=r"looked at ANDROID_NDK_HOME=/nowhere") as info:
        find_ndk({"ANDROID_NDK_HOME": "/nowhere"})
    assert "ANDROID_NDK_HOME" in info.value.fix


@pytest.mark.skipif(not os.environ.get("EDGEKIT_TEST_ADB_SERIAL"),
                    reason="needs an Android phone with a python (Termux) on adb and an NDK: set EDGEKIT_TEST_ADB_SERIAL")
def test_adb_phone_runs_the_generated_c(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("run", IC_INT8, "--device", f"adb:{os.environ['EDGEKIT_TEST_ADB_SERIAL']}", "--pipeline",
               write_pipeline(tmp_path, preprocess=C_PIPE), "--inputs", PHOTOS, "-n", "5", "-o", out) == 0
    report = json.loads((out / "pipeline.json").read_text())
    assert "Android NDK" in report["c_library_built_with"]
    assert report["preprocess_check"]["identical"] + len(report["preprocess_check"]["not_compared"]) == len(PHOTO_FILES)
