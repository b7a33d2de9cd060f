"""`edgekit run --pipeline` refuses frames of the wrong format, naming the expected one, before any device work."""
import shutil

from tests.preprocessing.edge_cases import PHOTO_FILES, PHOTOS
from tests.run.runtools import IC_INT8
from tests.run.test_run_pipeline import write_pipeline


def test_encoded_images_given_as_raw_frames_are_named(cli, tmp_path, capsys):
    frames = tmp_path / "frames"
    frames.mkdir()
    shutil.copy(PHOTOS / PHOTO_FILES[0], frames / "cam0.raw")  # a JPEG under a raw name
    (frames / "cam1.raw").write_bytes(b"\0" * (160 * 120 * 2))
    pipe = write_pipeline(tmp_path, decode={"format": "rgb565", "width": 160, "height": 120})
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", pipe, "--inputs", frames, "-o", tmp_path / "out") != 0
    err = capsys.readouterr().err
    assert "1 file(s) are encoded images, not raw rgb565 at 160x120 (38400 bytes): cam0.raw (a JPEG file)" in err
    assert not (tmp_path / "out").exists()


def test_a_png_where_the_pipeline_says_jpeg_is_named(cli, tmp_path, capsys):
    from PIL import Image

    frames = tmp_path / "frames"
    frames.mkdir()
    shutil.copy(PHOTOS / PHOTO_FILES[0], frames / "a.jpg")
    Image.open(PHOTOS / PHOTO_FILES[1]).save(frames / "b.jpg", format="PNG")  # a PNG behind a .jpg name
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", write_pipeline(tmp_path), "--inputs", frames,
               "-o", tmp_path / "out") != 0
    err = capsys.readouterr().err
    assert "1 file(s) are not JPEG as the pipeline's decode format says: b.jpg (PNG)" in err and "format: auto" in err


def test_raw_frames_with_an_encoded_decode_format_say_what_to_state(cli, tmp_path, capsys):
    frames = tmp_path / "frames"
    frames.mkdir()
    (frames / "cam0.rgb565").write_bytes(b"\0" * (160 * 120 * 2))
    assert cli("run", IC_INT8, "--device", "host", "--pipeline", write_pipeline(tmp_path), "--inputs", frames,
               "-o", tmp_path / "out") != 0
    err = capsys.readouterr().err
    assert "no input frames in" in err and "for decode format jpeg (found 1 other file(s): cam0.rgb565)" in err
    assert "format: rgb565|rgb888|gray8" in err
