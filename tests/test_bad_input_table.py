"""Bad input, data-driven: ONE table of cases, each = setup + command line + exit code + message fragment.

Every case also checks: no traceback, and no file left behind or changed anywhere under the test folder
(a snapshot of the folder before the command equals the one after). Commands name a model that does not
exist where the refusal must come before any work (the output-location checks): reaching the model would
give a different message.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np
import pytest

from tests.conftest import DEMO_MODEL, DIGITS, MLPERF

GRAY_SPEC = {"color": "grayscale", "size": [8, 8], "scale": 1 / 255, "layout": "NCHW"}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def a_file(name: str) -> Callable[[Path], None]:
    return lambda tmp: _write(tmp / name, "not a folder\n")


def foreign_folder(tmp: Path) -> None:
    _write(tmp / "out" / "thesis.tex", "someone's work\n")


def edgekit_folder_holding_the_calibration(tmp: Path) -> None:
    _write(tmp / "out" / "manifest.json", json.dumps({"edgekit_manifest": 1, "artifacts": []}))
    np.save(tmp / "out" / "calib.npy", np.zeros((4, 1, 8, 8), np.float32))


def digits_folder(labels: Dict[str, str] | None = None, *, count: int = 6) -> Callable[[Path], None]:
    """A copy of a few digit images with labels.csv rows (``labels`` overrides some)."""
    def setup(tmp: Path) -> None:
        folder = tmp / "imgs"
        folder.mkdir()
        rows = ["file,label"]
        for line in (DIGITS / "calib" / "labels.csv").read_text().splitlines()[1:count + 1]:
            name, label = line.split(",")
            shutil.copy(DIGITS / "calib" / name, folder / name)
            rows.append(f"{name},{(labels or {}).get(name, label)}")
        (folder / "labels.csv").write_text("\n".join(rows) + "\n")
        shutil.copy(DIGITS / "calib" / "preprocess.json", folder / "preprocess.json")
    return setup


def string_labels_npz(tmp: Path) -> None:
    np.savez(tmp / "data.npz", x=np.zeros((4, 1, 8, 8), np.float32), labels=np.array(["cat", "dog", "cat", "dog"]))


def spec(name: str, **values) -> Callable[[Path], None]:
    return lambda tmp: _write(tmp / name, json.dumps({**GRAY_SPEC, **values}))


def unreadable_image(tmp: Path) -> None:
    digits_folder(count=4)(tmp)
    (tmp / "imgs" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    (tmp / "imgs" / "labels.csv").unlink()
    shutil.copy(DIGITS / "calib" / "preprocess.json", tmp / "spec.json")


def calib_npy(tmp: Path) -> None:
    np.save(tmp / "calib.npy", np.zeros((10, 1, 8, 8), np.float32))


def several(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        for s in setups:
            s(tmp)
    return setup


def truncated_npz(tmp: Path) -> None:
    np.savez(tmp / "data.npz", x=np.zeros((16, 1, 8, 8), np.float32))
    blob = (tmp / "data.npz").read_bytes()
    (tmp / "data.npz").write_bytes(blob[: len(blob) // 2])


def object_npz(tmp: Path) -> None:
    np.savez(tmp / "data.npz", x=np.array([{"pixels": 1}] * 4, dtype=object))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    import struct
    import zlib

    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def bomb_png_folder(tmp: Path) -> None:
    """The digits folder plus a 20000x20000 gray PNG (a few hundred bytes on disk: Pillow refuses it at open)."""
    import struct
    import zlib

    digits_folder(count=4)(tmp)
    (tmp / "imgs" / "labels.csv").unlink()
    header = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)
    (tmp / "imgs" / "huge.png").write_bytes(b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
                                            + _png_chunk(b"IDAT", zlib.compress(b"\0" * 64)) + _png_chunk(b"IEND", b""))


def images_and_npy(tmp: Path) -> None:
    digits_folder(count=4)(tmp)
    np.save(tmp / "imgs" / "x.npy", np.zeros((4, 1, 8, 8), np.float32))


KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"
IC_INT8 = MLPERF / "ic_resnet8_int8.tflite"
IC_SPEC = "preprocess:\n  spec: {color: rgb, size: [32, 32], scale: 0.00392156862745098, layout: NHWC}\n"


def pipeline_file(text: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _write(tmp / "pipe.yaml", text)
        (tmp / "frames").mkdir()
        shutil.copy(DIGITS / "calib" / "0001.png", tmp / "frames" / "0001.png")
    return setup


def numeric_sha256_manifest(tmp: Path) -> None:
    _write(tmp / "out" / "a.bin", "payload\n")
    _write(tmp / "out" / "manifest.json", json.dumps({"edgekit_manifest": 1, "artifacts": [
        {"path": "a.bin", "sha256": 1234567, "stage": "quantize", "format": "bin"}]}))


def tflite_with_damaged_identifier(tmp: Path) -> None:
    """The AD model with 'TFL3' overwritten, and a zip of associated files appended (as metadata writers do)."""
    import io
    import zipfile

    blob = bytearray((MLPERF / "ad_autoencoder_int8.tflite").read_bytes())
    blob[4:8] = b"XXXX"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("labels.txt", "normal\nanomaly\n")
    (tmp / "m.tflite").write_bytes(bytes(blob) + archive.getvalue())


@dataclass(frozen=True)
class Case:
    """One bad input: ``argv`` may use {tmp} (the test folder), {demo} (the demo .pt2), {float} (its float .tflite)."""

    id: str
    argv: Tuple[str, ...]
    code: int
    message: str
    setup: Callable[[Path], None] = field(default=lambda tmp: None)


MISSING = "{tmp}/missing_model.tflite"  # never read: the output check comes first
CASES: List[Case] = [
    # 2. -o that cannot be a folder, in every command that writes one: exit 2 before any work
    Case("quantize -o existing file", ("quantize", MISSING, "--calib", "{tmp}/c.npy", "-o", "{tmp}/out"), 2,
         "output folder {tmp}/out exists and is a file", a_file("out")),
    Case("quantize -o under a file", ("quantize", MISSING, "--calib", "{tmp}/c.npy", "-o", "{tmp}/f/sub/out"), 2,
         "cannot be created: {tmp}/f is a file", a_file("f")),
    Case("quantize -o in /proc", ("quantize", MISSING, "--calib", "{tmp}/c.npy", "-o", "/proc/edgekit-nope/out"), 2,
         "output folder /proc/edgekit-nope/out cannot be created: /proc is not writable"),
    Case("parity -o existing file", ("parity", MISSING, MISSING, "--data", "{tmp}/c.npy", "-o", "{tmp}/out"), 2,
         "exists and is a file", a_file("out")),
    Case("firmware -o under a file", ("firmware", MISSING, "-o", "{tmp}/f/fw"), 2, "{tmp}/f is a file", a_file("f")),
    Case("deploy -o existing file", ("deploy", MISSING, "--calib", "{tmp}/c.npy", "-o", "{tmp}/out"), 2,
         "exists and is a file", a_file("out")),
    Case("run -o in /proc", ("run", MISSING, "--device", "host", "-o", "/proc/edgekit-nope"), 2,
         "/proc is not writable"),
    Case("preprocess-parity -o existing file", ("preprocess-parity", "--reference", "{tmp}/s.json", "--candidate",
         "{tmp}/s.json", "--images", "{tmp}/imgs", "-o", "{tmp}/out"), 2, "exists and is a file", a_file("out")),
    Case("calib-check -o under a file", ("calib-check", "--model", MISSING, "--calib", "{tmp}/c.npy", "--live",
         "{tmp}/c.npy", "-o", "{tmp}/f/x"), 2, "{tmp}/f is a file", a_file("f")),
    Case("compile -o existing file", ("compile", MISSING, "-o", "{tmp}/out"), 2, "exists and is a file", a_file("out")),
    Case("package -o under a file", ("package", MISSING, "--ios", "-o", "{tmp}/f/pkg"), 2, "{tmp}/f is a file",
         a_file("f")),
    Case("mlperf-dataset -o existing file", ("mlperf-dataset", MISSING, "--task", "kws", "-o", "{tmp}/out"), 2,
         "exists and is a file", a_file("out")),
    Case("run --harness -o in /proc", ("run", MISSING, "--device", "qemu:mps2-an386", "--harness", "mlperf-tiny",
         "-o", "/proc/edgekit-nope"), 2, "/proc is not writable"),
    # 4. never mix runs: a non-empty folder edgekit did not write is refused, and so is one holding an input
    Case("quantize -o a foreign non-empty folder", ("quantize", MISSING, "--calib", "{tmp}/c.npy", "-o", "{tmp}/out"), 2,
         "is not empty and was not written by edgekit", foreign_folder),
    Case("quantize -o the folder holding --calib", ("quantize", "{demo}", "--calib", "{tmp}/out/calib.npy", "-o",
         "{tmp}/out"), 2, "holds the input {tmp}/out/calib.npy", edgekit_folder_holding_the_calibration),
    # 3. labels that are not class indices: refused with file and line (a class list maps names: see below)
    Case("labels.csv with a class name", ("parity", "{float}", "{float}", "--data", "{tmp}/imgs"), 2,
         "labels.csv:3: label 'cat' of 0002.png is not a class index", digits_folder({"0002.png": "cat"})),
    Case("labels.csv with a negative label", ("parity", "{float}", "{float}", "--data", "{tmp}/imgs"), 2,
         "labels.csv:2: label '-1' of 0001.png is not a class index", digits_folder({"0001.png": "-1"})),
    Case(".npz with string labels", ("parity", "{float}", "{float}", "--data", "{tmp}/data.npz"), 2,
         "array 'labels' must hold class indices (integers >= 0), got dtype <U3", string_labels_npz),
    # 6. silently accepted nonsense, refused with the valid range
    Case("labels outside the model's classes", ("parity", "{float}", "{float}", "--data", "{tmp}/imgs"), 2,
         "1 label(s) in the data's labels are outside the model's class range 0..9 (the model has 10 outputs): [12]",
         digits_folder({"0003.png": "12"})),
    Case("negative std", ("quantize", "{demo}", "--calib", "{tmp}/c.npy", "--preprocess", "{tmp}/neg.json", "-o",
         "{tmp}/out"), 2, "std [-0.5] must hold positive numbers", spec("neg.json", std=[-0.5])),
    Case("two means for one channel", ("quantize", "{demo}", "--calib", "{tmp}/c.npy", "--preprocess", "{tmp}/m.json",
         "-o", "{tmp}/out"), 2, "mean [0.1, 0.2] must be a list of 1 finite number (color grayscale has 1 channel)",
         spec("m.json", mean=[0.1, 0.2])),
    Case("--min-cosine 2", ("quantize", "{demo}", "--calib", "{tmp}/c.npy", "--min-cosine", "2", "-o", "{tmp}/out"), 2,
         "--min-cosine 2 is out of range: it must be between -1 and 1", calib_npy),
    Case("--min-top1 1.5 in parity", ("parity", "{float}", "{float}", "--data", "{tmp}/c.npy", "--min-top1", "1.5"), 2,
         "--min-top1 1.5 is out of range: it must be between 0 and 1", calib_npy),
    Case("--min-sqnr-db nan", ("parity", "{float}", "{float}", "--data", "{tmp}/c.npy", "--min-sqnr-db", "nan"), 2,
         "--min-sqnr-db nan is out of range", calib_npy),
    Case("deploy --timeout 0", ("deploy", "{demo}", "--calib", "{tmp}/c.npy", "--timeout", "0", "-o", "{tmp}/out"), 2,
         "--timeout 0 must be a positive number of seconds", calib_npy),
    Case("run --timeout 0", ("run", "{float}", "--device", "host", "--timeout", "0", "-o", "{tmp}/out"), 2,
         "--timeout must be positive"),
    Case("preprocess-parity with an unreadable image", ("preprocess-parity", "--reference", "{tmp}/spec.json",
         "--candidate", "{tmp}/spec.json", "--images", "{tmp}/imgs", "--no-diagnose"), 1,
         "1 image(s) could not be read by either pipeline: broken.png", unreadable_image),
    Case("preprocess-parity --allow-unreadable -1", ("preprocess-parity", "--reference", "{tmp}/spec.json",
         "--candidate", "{tmp}/spec.json", "--images", "{tmp}/imgs", "--allow-unreadable", "-1"), 2,
         "--allow-unreadable -1 must be 0 or more", unreadable_image),
    # 7. calibration files that crashed the loaders (issue 27)
    Case("truncated .npz", ("quantize", "{demo}", "--calib", "{tmp}/data.npz", "-o", "{tmp}/out"), 2,
         "cannot read {tmp}/data.npz: the .npz (zip) archive is truncated or damaged", truncated_npz),
    Case("truncated .npz in parity", ("parity", "{float}", "{float}", "--data", "{tmp}/data.npz"), 2,
         "archive is truncated or damaged", truncated_npz),
    Case(".npz of object arrays", ("quantize", "{demo}", "--calib", "{tmp}/data.npz", "-o", "{tmp}/out"), 2,
         "it holds object (pickled) arrays, not numbers", object_npz),
    Case("20000x20000 PNG in quantize", ("quantize", "{demo}", "--calib", "{tmp}/imgs", "-o", "{tmp}/out"), 2,
         "cannot read image {tmp}/imgs/huge.png: the image is too large to decode safely", bomb_png_folder),
    Case("20000x20000 PNG in parity", ("parity", "{float}", "{float}", "--data", "{tmp}/imgs"), 2,
         "huge.png: the image is too large to decode safely", bomb_png_folder),
    Case("label 42 in the calibration rows", ("quantize", "{demo}", "--calib", "{tmp}/imgs", "-o", "{tmp}/out"), 2,
         "1 label(s) in {tmp}/imgs (all 6 rows) are outside the model's class range 0..9 (the model has 10 outputs): "
         "[42]", digits_folder({"0001.png": "42"})),
    Case("images and an .npy in one folder", ("quantize", "{demo}", "--calib", "{tmp}/imgs", "-o", "{tmp}/out"), 2,
         "{tmp}/imgs holds both images (4, e.g. 0001.png) and array files (1, e.g. x.npy)", images_and_npy),
    # 8. wrong outcomes (issue 27): refused at once instead of a wrong result, a traceback or a misleading cause
    Case("mlperf-dataset --task ad on the KWS model", ("mlperf-dataset", str(KWS_INT8), "--task", "ad", "-o",
         "{tmp}/out"), 2, "the model cannot make a ad01 dataset: ad: the ad01 benchmark sends 640 input values per "
         "sample (5 frames x 128 mels) and scores 640 outputs; this model takes 490 and gives 12; it matches --task kws"),
    Case("firmware --harness --task ic on the KWS model", ("firmware", str(KWS_INT8), "--harness", "mlperf-tiny",
         "--task", "ic", "-o", "{tmp}/out"), 2, "ic: the ic01 benchmark sends 3072 input values per sample (32x32x3 RGB)"),
    Case("--device macos --pipeline off macOS", ("run", str(IC_INT8), "--device", "macos", "--pipeline",
         "{tmp}/pipe.yaml", "--inputs", "{tmp}/frames", "-o", "{tmp}/out"), 2,
         "--device macos runs on this machine, which is linux, not macOS", pipeline_file(IC_SPEC)),
    Case("missing post-process module", ("run", str(IC_INT8), "--device", "host", "--pipeline", "{tmp}/pipe.yaml",
         "--inputs", "{tmp}/frames", "-o", "{tmp}/out"), 2,
         "{tmp}/pipe.yaml:4: postprocess.function: module 'no_such_module' cannot be imported",
         pipeline_file(IC_SPEC + "postprocess:\n  function: no_such_module:top\n")),
    Case("post-process module not in python_path", ("run", str(IC_INT8), "--device", "host", "--pipeline",
         "{tmp}/pipe.yaml", "--inputs", "{tmp}/frames", "-o", "{tmp}/out"), 2,
         "postprocess.function: module 'mine' is not in python_path {tmp}/frames",
         pipeline_file(IC_SPEC + "postprocess:\n  function: mine:top\n  python_path: frames\n")),
    Case("verify with a numeric sha256", ("verify", "{tmp}/out"), 2,
         "{tmp}/out/manifest.json: artifacts[0].sha256 is not a sha256 (64 hex digits) (got 1234567)",
         numeric_sha256_manifest),
    Case(".tflite with a damaged identifier", ("quantize", "{tmp}/m.tflite", "--calib", "{tmp}/calib.npy", "-o",
         "{tmp}/out"), 2, "{tmp}/m.tflite is not a TFLite flatbuffer (bytes 4-8 are b'XXXX', not the 'TFL3' identifier)",
         several(tflite_with_damaged_identifier, calib_npy)),
    Case("qemu on a missing firmware", ("qemu", "{tmp}/nothing"), 2, "firmware {tmp}/nothing does not exist"),
    Case("qemu on a .tflite", ("qemu", str(KWS_INT8)), 2, "is not a firmware project folder or an .elf"),
]


def snapshot(folder: Path) -> Dict[str, str]:
    """Every file and folder under ``folder`` with a digest of its content."""
    out = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, cli, capsys, tmp_path, demo_float_tflite):
    case.setup(tmp_path)
    before = snapshot(tmp_path)
    values = {"tmp": str(tmp_path), "demo": str(DEMO_MODEL), "float": str(demo_float_tflite)}
    argv = [a.format(**values) for a in case.argv]
    code = cli(*argv)
    captured = capsys.readouterr()
    err = captured.err
    assert code == case.code, f"exit {code}, expected {case.code}:\n{err}"
    assert case.message.format(**values) in err + captured.out, err
    assert "Traceback" not in err
    assert snapshot(tmp_path) == before, "the command left files behind or changed them"
