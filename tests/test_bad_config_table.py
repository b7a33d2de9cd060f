"""Hostile config files (issue 27), data-driven: MATRIX.yaml for `edgekit lab`, PIPELINE.yaml for `--pipeline`.

Each case: the file's text, the command, and the FILE:LINE: place: message the one error must hold; every case
also checks exit 2, no traceback and no output folder.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import MLPERF

AD = MLPERF / "ad_autoencoder_int8.tflite"
IC = MLPERF / "ic_resnet8_int8.tflite"
BOARDS = "boards:\n  - {qemu: mps2-an386}\n"
MODELS = f"models:\n  - {{name: ad, model: {AD}}}\n"
PIPE_SPEC = "preprocess:\n  spec: {color: rgb, size: [32, 32], scale: 0.00392156862745098, layout: NHWC}\n"

LAB_CASES = [
    ("models-is-a-number", "models: 5\n" + BOARDS, 1, "models: input should be a valid list (got 5)"),
    ("timeout-not-a-number", MODELS + BOARDS + "timeout: abc\n", 5, "timeout: input should be a valid number (got 'abc')"),
    ("timeout-negative", MODELS + BOARDS + "timeout: -5\n", 5, "timeout: input should be greater than 0 (got -5)"),
    ("instances-text", MODELS + "boards:\n  - qemu: mps2-an386\n    instances: two\n", 5,
     "boards[0].instances: input should be a valid integer (got 'two')"),
    ("iterations-bool", MODELS + BOARDS + "iterations: yes\n", 5, "iterations: input should be a valid integer (got True)"),
    ("board-address-number", MODELS + "boards:\n  - {serial: 5}\n", 4, "boards[0].serial: input should be a valid string"),
    ("unknown-board-key", MODELS + "boards:\n  - {qemu: mps2-an386, speed: 3}\n", 4,
     "boards[0].speed: unknown key 'speed'; valid keys: qemu, labgrid, serial, name, instances"),
    ("not-a-mapping", "- just\n- a list\n", 1, "the file: must be a mapping of keys (models, boards"),
    ("bad-yaml", "models: [\n", 2, "matrix file is not valid YAML"),
]


@pytest.mark.parametrize("text,line,fragment", [c[1:] for c in LAB_CASES], ids=[c[0] for c in LAB_CASES])
def test_lab_matrix_problem_has_file_and_line(cli, capsys, tmp_path, text, line, fragment):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(text)
    assert cli("lab", matrix, "-o", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"{matrix}:{line}: " in err and fragment in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_the_readme_serial_lab_example_is_accepted(tmp_path):
    """README's `{serial: /dev/ttyACM0, profile: nucleo-l4r5zi, flash: true}`: its default name is dev_ttyACM0."""
    from edgekit.lab.matrix import load_matrix

    matrix = tmp_path / "m.yaml"
    matrix.write_text(MODELS + "boards:\n  - {serial: /dev/ttyACM0, profile: nucleo-l4r5zi, flash: true}\n"
                      "  - {labgrid: rack-3, coordinator: 'lab:20408', lock_timeout: 600}\n")
    loaded = load_matrix(matrix)
    assert [b.name for b in loaded.boards] == ["dev_ttyACM0", "rack-3"]
    assert loaded.boards[0].options == {"profile": "nucleo-l4r5zi", "flash": True}
    assert loaded.boards[1].options == {"coordinator": "lab:20408", "lock_timeout": 600.0}


PIPELINE_CASES = [
    ("decode-number", "decode: 5\n" + PIPE_SPEC, 1, "decode: should be a mapping of keys"),
    ("decode-word", "decode: jpeg\n" + PIPE_SPEC, 1, "decode: should be a mapping of keys (KEY: VALUE lines, or {KEY: VALUE}), not 'jpeg'"),
    ("steps-a-word", PIPE_SPEC + "postprocess:\n  steps: topk\n", 4, "postprocess.steps: input should be a valid list (got 'topk')"),
    ("top-k-negative", PIPE_SPEC + "postprocess:\n  steps: [topk]\n  top_k: -4\n", 5,
     "postprocess.top_k: input should be greater than 0 (got -4)"),
    ("width-text", "decode:\n  format: rgb565\n  width: wide\n  height: 32\n" + PIPE_SPEC, 3,
     "decode.width: input should be a valid integer (got 'wide')"),
    ("format-unknown", "decode: {format: bmp}\n" + PIPE_SPEC, 1,
     "decode.format: input should be 'auto', 'jpeg', 'png', 'rgb565', 'rgb888' or 'gray8' (got 'bmp')"),
    ("spec-missing", "decode: {format: png}\npreprocess: {implementation: pillow}\n", 2, "preprocess.spec: missing (required)"),
]


@pytest.mark.parametrize("text,line,fragment", [c[1:] for c in PIPELINE_CASES], ids=[c[0] for c in PIPELINE_CASES])
def test_pipeline_problem_has_file_and_line(cli, capsys, tmp_path, text, line, fragment):
    pipe = tmp_path / "pipeline.yaml"
    pipe.write_text(text)
    frames = tmp_path / "frames"
    frames.mkdir()
    assert cli("run", IC, "--device", "host", "--pipeline", pipe, "--inputs", frames, "-o", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"{pipe}:{line}: " in err and fragment in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
