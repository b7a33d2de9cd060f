"""`edgekit run --pipeline`: per-phase budget timed on the device by pipeline_runner.py (host here; ssh against
a real sshd on 127.0.0.1), raw camera frames, the user's post-processing, bad pipeline files and frames."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from edgekit.run.runners import pipeline_runner
from tests.preprocessing.edge_cases import PHOTO_FILES, PHOTOS
from tests.run.runtools import IC_INT8

SPEC = {"name": "cifar", "color": "rgb", "size": [32, 32], "resize": "bilinear", "scale": 1 / 255, "mean": [0.0],
        "std": [1.0], "layout": "NHWC"}


def write_pipeline(folder: Path, **phases) -> Path:
    data = {"decode": {"format": "jpeg"}, "preprocess": {"implementation": "pillow", "spec": SPEC},
            "postprocess": {"steps": ["dequantize", "topk"], "top_k": 3}}
    data.update(phases)
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def reference_top3(tensor_q: np.ndarray) -> list:
    from edgekit.tflite_model import TFLiteModel
    from edgekit.parity.runners import TFLiteRunner

    runner = TFLiteRunner(TFLiteModel.load(IC_INT8), kernels="reference")  # BUILTIN_REF: the bit-exact reference
    out = np.asarray(runner.run([tensor_q])[0]).reshape(-1)
    q = TFLiteModel.load(IC_INT8).outputs[0]
    return [int(i) for i in np.argsort(-((out.astype(np.float32) - q.zero_point) * np.float32(q.scale)), kind="stable")[:3]]


def quantized_reference(image: Path) -> np.ndarray:
    """edgekit's Pillow reference for the spec, quantized to the model's input."""
    from edgekit.preprocessing.spec import PreprocessSpec
    from edgekit.preprocessing.pillow_impl import reference_tensor
    from edgekit.tflite_model import TFLiteModel

    inp = TFLiteModel.load(IC_INT8).inputs[0]
    values = reference_tensor(image, PreprocessSpec.from_dict(SPEC))
    return np.clip(np.round(values.astype(np.float64) / inp.scale) + inp.zero_point, -128, 127).astype(np.int8)[None]


def test_host_budget_names_the_bottleneck_and_labels_estimated_energy(cli, tmp_path, capsys, monkeypatch):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "test-pm.yaml").write_text(json.dumps({
        "name": "test-pm", "kind": "linux", "description": "this machine with a stated power model",
        "power_model": {"idle_w": 2.0, "full_load_w": 6.0, "cores": 4, "source": "test figures, not a real board"}}))
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(profiles))
    out = tmp_path / "out"
    code = cli("run", IC_INT8, "--device", "host", "--profile", "test-pm", "--pipeline", write_pipeline(tmp_path),
               "--inputs", PHOTOS, "-n", "12", "--warmup", "1", "-o", out)
    assert code == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "pipeline.json").read_text())
    budget = report["budget"]
    assert [r["phase"] for r in budget["phases"]] == ["decode", "preprocess", "inference", "postprocess"]
    assert sum(r["share"] for r in budget["phases"]) == pytest.approx(1.0)
    for r in budget["phases"]:
        assert r["latency_ms"]["count"] == 12 and 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"]
        assert r["energy"]["method"] == "estimated" and "test-pm" in r["energy"]["source"] and r["energy"]["value_uj"] > 0
    top = max(budget["phases"], key=lambda r: r["share"])["phase"]
    assert budget["bottleneck"]["phase"] == top and f"Bottleneck: **{top}**" in printed
    assert budget["end_to_end_energy_uj"] == pytest.approx(sum(r["energy"]["value_uj"] for r in budget["phases"]))
    # the device's end-to-end result equals edgekit's reference preprocessing into the same model
    for name in PHOTO_FILES:
        assert [c for c, _ in report["results"][name]] == reference_top3(quantized_reference(PHOTOS / name)), name
    assert "| **end to end** |" in (out / "report.md").read_text()


def test_device_preprocessing_equals_the_pillow_reference():
    from PIL import Image

    model_input = {"dtype": "int8", "quantization": {"scale": 1 / 255, "zero_point": -128}}
    spec = dict(SPEC, antialias=True)
    for name in PHOTO_FILES:
        pixels = pipeline_runner.decode((PHOTOS / name).read_bytes(), {"format": "jpeg", "library": "pillow"})
        tensor = pipeline_runner.to_model_input(pipeline_runner.resize_pillow(pixels, spec), spec, model_input)
        from edgekit.preprocessing.spec import PreprocessSpec
        from edgekit.preprocessing.pillow_impl import reference_tensor

        ref = reference_tensor(PHOTOS / name, PreprocessSpec.from_dict(SPEC))
        expect = np.clip(np.round(ref.astype(np.float64) * 255) - 128, -128, 127).astype(np.int8)
        assert np.array_equal(tensor[0], expect), name
    assert Image  # Pillow decodes on the device side too


def _rgb565_frames(folder: Path, w: int = 160, h: int = 120) -> Path:
    from PIL import Image

    folder.mkdir()
    for name in PHOTO_FILES:
        rgb = np.asarray(Image.open(PHOTOS / name).convert("RGB").resize((w, h)), np.uint16)
        value = ((rgb[..., 0] >> 3) << 11) | ((rgb[..., 1] >> 2) << 5) | (rgb[..., 2] >> 3)
        (folder / f"{Path(name).stem}.raw").write_bytes(value.astype("<u2").tobytes())
    return folder


def test_raw_rgb565_frames_with_opencv_and_a_user_postprocess(cli, tmp_path):
    frames = _rgb565_frames(tmp_path / "frames")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "post.py").write_text("import numpy as np\n\ndef best(outputs):\n"
                                              "    name, value = outputs[0]\n    return {'class': int(np.argmax(value))}\n")
    pipe = write_pipeline(tmp_path, decode={"format": "rgb565", "width": 160, "height": 120},
                          preprocess={"implementation": "opencv", "spec": SPEC},
                          postprocess={"function": "post:best", "python_path": "app"})
    out = tmp_path / "out"
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", pipe, "--inputs", frames, "-n", "6", "-o", out) == 0
    report = json.loads((out / "pipeline.json").read_text())
    assert set(report["results"]) == {"china.raw", "flower.raw", "grace_hopper.raw"}
    assert all(0 <= r["class"] < 10 for r in report["results"].values())
    assert {r["energy"]["method"] for r in report["budget"]["phases"]} <= {"unavailable", "measured"}


def test_wrong_frame_size_names_the_expected_one(cli, tmp_path, capsys):
    frames = _rgb565_frames(tmp_path / "frames")
    (frames / "short.raw").write_bytes(b"\0" * 1000)
    pipe = write_pipeline(tmp_path, decode={"format": "rgb565", "width": 160, "height": 120})
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", pipe, "--inputs", frames, "-o", tmp_path / "out") != 0
    err = capsys.readouterr().err
    assert "not rgb565 at 160x120 (38400 bytes): short.raw (1000 bytes)" in err
    assert not (tmp_path / "out").exists()


def test_unknown_phase_and_implementation_are_refused_with_the_valid_ones(cli, tmp_path, capsys):
    pipe = write_pipeline(tmp_path, camera={"fps": 30}, preprocess={"implementation": "skimage", "spec": SPEC},
                          postprocess={"steps": ["argmax"]})
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", pipe, "--inputs", PHOTOS, "-o", tmp_path / "out") != 0
    err = capsys.readouterr().err
    assert ": camera: unknown key 'camera'; valid keys: decode, preprocess, inference, postprocess" in err
    assert "preprocess.implementation: input should be 'pillow', 'opencv' or 'c' (got 'skimage')" in err
    assert "postprocess.steps[0]: input should be 'dequantize', 'softmax' or 'topk' (got 'argmax')" in err
    assert f"{pipe}:" in err  # every problem with file:line
    assert not (tmp_path / "out").exists()


def test_spec_that_does_not_fit_the_model_is_refused(cli, tmp_path, capsys):
    pipe = write_pipeline(tmp_path, preprocess={"implementation": "pillow", "spec": dict(SPEC, size=[96, 96])})
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", pipe, "--inputs", PHOTOS, "-o", tmp_path / "out") != 0
    assert "gives tensors of shape (1, 96, 96, 3) but the model input" in capsys.readouterr().err


def test_ssh_runs_the_phases_on_the_board(cli, tmp_path, sshd):
    out = tmp_path / "out"
    code = cli("run", IC_INT8, "--device", sshd.device, *sshd.cli_args(), "--pipeline", write_pipeline(tmp_path),
               "--inputs", PHOTOS, "-n", "5", "--warmup", "1", "-o", out)
    assert code == 0
    report = json.loads((out / "pipeline.json").read_text())
    assert report["device"]["kind"] == "ssh" and report["device_python"] == sys.version.split()[0]
    assert all(r["latency_ms"]["count"] == 5 for r in report["budget"]["phases"])
    for name in PHOTO_FILES:
        assert [c for c, _ in report["results"][name]] == reference_top3(quantized_reference(PHOTOS / name))


def test_power_samples_are_attributed_to_phase_windows():
    from edgekit.run.pipeline.budget import attribute_samples

    samples = [(10.0, 2.0), (10.001, 2.0), (10.002, 8.0), (10.003, 8.0)]  # monotonic s, W
    # two 1 ms windows: one where the meter read 2 W, one where it read 8 W -> mean of 2 uJ*1000 and 8 uJ*1000
    assert attribute_samples(samples, [10.0, 10.002], [1.0, 1.0]) == pytest.approx((2000 + 8000) / 2)
    # a window between readings takes the nearest reading
    assert attribute_samples(samples, [10.0104], [0.1]) == pytest.approx(8.0 * 0.1e-3 * 1e6)
