"""edgekit verify: every artifact re-hashed against manifest.json / firmware.json; a .tflite with 64 flipped weight
bytes is named (it would still load and may even pass parity); run and firmware warn about it."""
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import MLPERF

KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"


def flip_weight_bytes(path, count: int = 64) -> None:
    """XOR ``count`` bytes in the middle of the model's largest constant buffer (its biggest weight tensor)."""
    from tensorflow.lite.tools import flatbuffer_utils

    data = bytearray(path.read_bytes())
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    largest = max((bytes(b.data) for b in model.buffers if b.data is not None), key=len)
    offset = data.find(largest)
    assert offset > 0 and len(largest) > 4 * count
    start = offset + len(largest) // 2
    for i in range(start, start + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_flipped_weights_in_a_manifest_artifact_are_named(cli, capsys, tmp_path):
    from edgekit.artifact import Artifact, Manifest

    out = tmp_path / "q"
    out.mkdir()
    model = out / "model_int8.tflite"
    shutil.copyfile(KWS_INT8, model)
    (out / "notes.md").write_text("report\n")
    manifest = Manifest(command="quantize")
    manifest.add(Artifact.from_file(KWS_INT8, format="tflite-int8", stage="source"))  # outside the folder: not checked
    manifest.add(Artifact.from_file(model, format="tflite-int8", stage="quantize"))
    manifest.add(Artifact.from_file(out / "notes.md", format="markdown", stage="report"))
    manifest.write(out / "manifest.json")

    assert cli("verify", out) == 0
    assert "all 2 artifact(s)" in capsys.readouterr().out

    flip_weight_bytes(model)
    (out / "notes.md").unlink()
    assert cli("verify", out) == 1
    err = capsys.readouterr().err
    assert "CHANGED" in err and "model_int8.tflite: changed since manifest.json was written" in err
    assert "MISSING" in err and "notes.md: missing" in err and "2 of 2 artifact(s)" in err
    assert "Traceback" not in err

    assert cli("run", model, "--device", "host", "-n", "2", "--warmup", "0", "-o", tmp_path / "run") == 0
    err = capsys.readouterr().err
    assert "edgekit run: warning:" in err and "model_int8.tflite: changed since manifest.json" in err
    # firmware warns before any work (an unknown board then stops it cheaply: the warning was already given)
    assert cli("firmware", model, "--board", "no-such-board", "-o", tmp_path / "fw") == 2
    err = capsys.readouterr().err
    assert "edgekit firmware: warning:" in err and "model_int8.tflite: changed since manifest.json" in err


def test_firmware_project_model_is_checked_against_firmware_json(cli, capsys, tmp_path):
    out = tmp_path / "fw"
    assert cli("firmware", KWS_INT8, "-o", out) == 0
    capsys.readouterr()
    info = json.loads((out / "firmware.json").read_text())
    assert cli("verify", out) == 0
    flip_weight_bytes(out / info["model"]["file"])
    assert cli("verify", out) == 1
    err = capsys.readouterr().err
    assert f"{info['model']['file']}: changed since firmware.json was written" in err


def test_verify_refuses_a_folder_without_records(cli, capsys, tmp_path):
    assert cli("verify", tmp_path) == 2
    err = capsys.readouterr().err
    assert "no manifest.json or firmware.json" in err and "Fix:" in err
    assert cli("verify", tmp_path / "missing") == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.slow
def test_built_firmware_image_is_checked(cli, capsys, tmp_path):
    if not shutil.which("arm-none-eabi-gcc"):
        pytest.skip("arm-none-eabi-gcc is needed to build the ELF (apt-get install gcc-arm-none-eabi)")
    out = tmp_path / "fw"
    assert cli("firmware", KWS_INT8, "-o", out, "--build") == 0
    info = json.loads((out / "firmware.json").read_text())
    assert len(info["build"]["elf_sha256"]) == 64
    elf = out / info["build"]["elf"]
    data = bytearray(elf.read_bytes())
    data[len(data) // 2] ^= 0x01
    elf.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli("verify", out) == 1
    assert "firmware.elf: changed since firmware.json" in capsys.readouterr().err
    assert cli("run", out, "--device", "qemu:mps2-an386", "-n", "1", "-o", tmp_path / "run") in (0, 4)
    assert "edgekit run: warning:" in capsys.readouterr().err


def test_a_source_given_relative_to_the_working_folder_is_not_an_artifact(cli, capsys, tmp_path, monkeypatch):
    """`edgekit quantize models/m.tflite -o out` records the source as given ("models/m.tflite", relative to the
    working folder, not to out/): verify skips it as the command's input instead of reporting out/models/m.tflite
    missing (found by the README quickstart)."""
    from edgekit.artifact import Artifact, Manifest

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    shutil.copyfile(KWS_INT8, tmp_path / "models" / "m.tflite")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("report\n")
    manifest = Manifest(command="quantize")
    manifest.add(Artifact.from_file(Path("models/m.tflite"), format="tflite-int8", stage="source"))
    manifest.add(Artifact.from_file(out / "notes.md", format="markdown", stage="report"))
    manifest.write(out / "manifest.json")
    assert json.loads((out / "manifest.json").read_text())["artifacts"][0]["path"] == "models/m.tflite"

    assert cli("verify", "out") == 0
    assert "all 1 artifact(s)" in capsys.readouterr().out
