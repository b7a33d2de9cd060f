"""`edgekit run --pipeline` on a microcontroller (qemu:mps2-an386): the firmware receives the raw frame, runs
the generated integer preprocessing, the int8 model and top-k, with exact instruction counts per phase; the
device's top-k must equal the host's (the spec's Pillow reference on the same pixels -> LiteRT -> top-k)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.preprocessing.edge_cases import PHOTO_FILES, PHOTOS

CAMERA = Path(__file__).resolve().parents[1] / "fixtures" / "camera96_int8.tflite"  # python -m tests.run.camera_model
CAMERA_SPEC = {"name": "camera", "color": "rgb", "size": [96, 96], "resize": "bilinear", "scale": 1 / 255,
               "mean": [0.0], "std": [1.0], "layout": "NHWC"}


def rgb565_frames(folder: Path, w: int = 160, h: int = 120) -> Path:
    from PIL import Image

    folder.mkdir()
    for name in PHOTO_FILES:
        rgb = np.asarray(Image.open(PHOTOS / name).convert("RGB").resize((w, h)), np.uint16)
        value = ((rgb[..., 0] >> 3) << 11) | ((rgb[..., 1] >> 2) << 5) | (rgb[..., 2] >> 3)
        (folder / f"{Path(name).stem}.rgb565").write_bytes(value.astype("<u2").tobytes())
    return folder


def pipeline_file(folder: Path, **phases) -> Path:
    data = {"decode": {"format": "rgb565", "width": 160, "height": 120},
            "preprocess": {"implementation": "c", "spec": CAMERA_SPEC}, "postprocess": {"steps": ["topk"], "top_k": 3}}
    data.update(phases)
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def check_budget(report: dict) -> None:
    budget = report["budget"]
    assert [r["phase"] for r in budget["phases"]] == ["preprocess", "inference", "postprocess"]
    for r in budget["phases"]:
        assert r["instructions"]["mean"] > 0 and r["instructions"]["method"] == "measured"
        assert r["latency_ms"]["method"] == "estimated" and "instructions (exact, QEMU plugin)" in r["latency_ms"]["source"]
        assert r["energy_uj"]["method"] == "estimated" and r["energy_uj"]["value"] > 0
    assert sum(r["share"] for r in budget["phases"]) == pytest.approx(1.0)
    assert report["bit_exact"]["identical"] == report["bit_exact"]["frames"] == len(report["results"])


@pytest.mark.slow  # builds the pipeline firmware and runs it in QEMU
def test_camera_model_fed_rgb565_frames_on_qemu(cli, tmp_path, capsys):
    frames = rgb565_frames(tmp_path / "frames")
    out = tmp_path / "out"
    assert cli("run", CAMERA, "--device", "qemu:mps2-an386", "--pipeline", pipeline_file(tmp_path), "--inputs", frames,
               "-o", out) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "pipeline.json").read_text())
    check_budget(report)
    # resizing 160x120 -> 96x96 on the MCU costs more than this small model: the budget says so
    assert report["budget"]["bottleneck"]["phase"] == "preprocess" and "Bottleneck: **preprocess**" in printed
    tops = [tuple(map(tuple, r["device_topk"])) for r in report["results"].values()]
    assert len(set(tops)) > 1, "every frame gave the same output: the bit-exact check would prove little"
    assert "bit-exact with the host reference on 3 of 3 frames" in printed


@pytest.mark.slow  # quantizes the demo model (once per session), builds the firmware, runs it in QEMU
def test_demo_digits_model_fed_gray_frames_on_qemu(cli, tmp_path, demo_quantized_80):
    from PIL import Image

    from tests.conftest import DIGITS

    shutil.copytree(demo_quantized_80, tmp_path / "q")  # quantize(demo, calib_size=80), once per session
    frames = tmp_path / "frames"
    frames.mkdir()
    for path in sorted((DIGITS / "eval").glob("*.png"))[:4]:  # 32x32 "sensor" frames of the 8x8 digits
        pixels = np.asarray(Image.open(path).convert("L").resize((32, 32), Image.BILINEAR))
        (frames / f"{path.stem}.gray").write_bytes(pixels.tobytes())
    spec = {"name": "digits", "color": "grayscale", "size": [8, 8], "resize": "bilinear", "scale": 1 / 255,
            "mean": [0.0], "std": [1.0], "layout": "NCHW"}
    pipe = pipeline_file(tmp_path, decode={"format": "gray8", "width": 32, "height": 32},
                         preprocess={"implementation": "c", "spec": spec}, postprocess={"steps": ["topk"], "top_k": 10})
    out = tmp_path / "out"
    assert cli("run", tmp_path / "q" / "model_int8.tflite", "--device", "qemu:mps2-an386", "--pipeline", pipe,
               "--inputs", frames, "-o", out) == 0
    report = json.loads((out / "pipeline.json").read_text())
    check_budget(report)
    for r in report["results"].values():  # top-10 of 10 classes: the whole int8 output, compared bit for bit
        assert sorted(c for c, _ in r["device_topk"]) == list(range(10))


@pytest.mark.parametrize("phases, message", [
    ({"decode": {"format": "jpeg"}}, "a microcontroller receives raw sensor frames; valid: rgb565, rgb888, gray8"),
    ({"preprocess": {"implementation": "pillow", "spec": CAMERA_SPEC}},
     "implementation 'pillow' does not run on a microcontroller; valid: c"),
    ({"postprocess": {"function": "app:post"}}, "post-processing on a microcontroller is top-k on the int8 output"),
])
def test_microcontroller_pipeline_refusals(cli, tmp_path, capsys, phases, message):
    frames = rgb565_frames(tmp_path / "frames")
    code = cli("run", CAMERA, "--device", "qemu:mps2-an386", "--pipeline", pipeline_file(tmp_path, **phases),
               "--inputs", frames, "-o", tmp_path / "out")
    assert code != 0 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_frame_of_the_wrong_size_is_refused_before_the_firmware_is_built(cli, tmp_path, capsys):
    frames = rgb565_frames(tmp_path / "frames")
    shutil.copy(frames / "china.rgb565", frames / "big.rgb565")
    (frames / "big.rgb565").write_bytes((frames / "big.rgb565").read_bytes() * 2)
    code = cli("run", CAMERA, "--device", "qemu:mps2-an386", "--pipeline", pipeline_file(tmp_path), "--inputs", frames,
               "-o", tmp_path / "out")
    assert code != 0
    assert "not rgb565 at 160x120 (38400 bytes): big.rgb565 (76800 bytes)" in capsys.readouterr().err


def test_device_top_k_order_matches_the_firmware_rule():
    from edgekit.run.pipeline.mcu import rgb565_to_rgb888, top_k

    assert top_k(np.array([3, 7, 7, -1, 7], np.int8), 4).tolist() == [[1, 7], [2, 7], [4, 7], [0, 3]]
    white, red = (0xFFFF).to_bytes(2, "little"), (0xF800).to_bytes(2, "little")
    assert rgb565_to_rgb888(white + red, (1, 2)).tolist() == [[[255, 255, 255], [255, 0, 0]]]


def test_real_board_phase_cycles_become_a_measured_budget():
    from edgekit.run.pipeline.mcu import cycles_budget, mcu_table

    b = cycles_budget([[300, 900, 10], [320, 880, 10]], {"clock_hz": 64_000_000})
    assert [r.phase for r in b.phases] == ["preprocess", "inference", "postprocess"]
    assert b.phases[1].latency_ms.to_dict() == {"value": pytest.approx(890 / 64e3), "method": "measured",
                                                "source": "DWT cycles / 64 MHz (profile clock_hz)"}
    assert b.bottleneck.phase == "inference" and "| inference | 890 |" in "\n".join(mcu_table(b))
    assert cycles_budget([[0, 0, 0]], {"clock_hz": 1}).phases == []
