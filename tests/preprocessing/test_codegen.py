"""Generated C preprocessing: compiles warning-free (host gcc, and arm-none-eabi-gcc when present),
matches the Pillow reference bit for bit, validates its tables and arguments, runs clean under ASan/UBSan."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import implementation
from edgekit.preprocessing.c_impl import CFLAGS
from edgekit.preprocessing.codegen import build_tables, c_symbol, generate_c
from edgekit.preprocessing.decode import decode_pillow
from tests.conftest import DIGITS
from tests.preprocessing.edge_cases import PHOTOS

HERE = Path(__file__).resolve().parent
SPECS = {
    "imagenet-nchw-float": dict(name="imagenet", color="rgb", shorter_side=256, crop=[224, 224], resize="bilinear",
                                mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], layout="NCHW"),
    "bgr-nhwc-uint8-bicubic": dict(name="u8", color="bgr", size=[60, 45], resize="bicubic", scale=1 / 255, layout="NHWC",
                                   dtype="uint8", quantization={"scale": 1 / 255, "zero_point": 0}),
    "gray-int8-lanczos-crop": dict(name="g8", color="grayscale", size=[40, 40], crop=[33, 31], resize="lanczos",
                                   layout="NCHW", dtype="int8", quantization={"scale": 0.0078125, "zero_point": -128},
                                   mean=[0.5], std=[1.0]),
    "hamming-noaa-bilinear": dict(name="h", color="rgb", size=[17, 300], resize="bilinear", antialias=False),
    "box": dict(name="box", color="rgb", size=[37, 41], resize="box", layout="NCHW"),
    "nearest": dict(name="nn", color="rgb", size=[100, 7], resize="nearest"),
    "crop-only": dict(name="crop", color="rgb", crop=[101, 99], layout="NCHW"),
    "hamming": dict(name="ham", color="grayscale", size=[64, 48], resize="hamming"),
}


def _compile_and_run(tmp_path: Path, files: dict, driver: Path, *extra_flags: str, cc: str = "gcc") -> subprocess.CompletedProcess:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    sources = ["ek_preprocess.c", next(n for n in files if n.endswith(".c") and n != "ek_preprocess.c"), str(driver)]
    exe = tmp_path / "prog"
    subprocess.run([cc, *CFLAGS, *extra_flags, f"-I{tmp_path}", *sources, "-o", str(exe)], cwd=tmp_path, check=True,
                   capture_output=True, text=True)
    return subprocess.run([str(exe)], capture_output=True, text=True)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_generated_c_is_bit_exact_with_the_reference(name, decodable_paths):
    spec = PreprocessSpec.from_dict(SPECS[name])
    paths = decodable_paths if name in ("imagenet-nchw-float", "gray-int8-lanczos-crop") else decodable_paths[:8]
    reference = implementation("pillow", spec).run_many(paths)
    generated = implementation("c", spec).run_many(paths)
    for path, r, c in zip(paths, reference, generated):
        if isinstance(r, Exception):  # e.g. an image smaller than the crop: both must refuse it
            assert isinstance(c, Exception), path.name
            continue
        assert c.dtype == r.dtype and c.shape == r.shape, path.name
        np.testing.assert_array_equal(c, r, err_msg=path.name)


def test_vertical_first_tables_for_the_sizes_pillow_resizes_vertically_first():
    spec = PreprocessSpec.from_dict(SPECS["imagenet-nchw-float"]).replace(shorter_side=None, crop=None, size=[32, 32])
    assert build_tables(spec, (517, 3)).vertical_first  # narrow, tall: Pillow 13 goes vertical first
    assert not build_tables(spec, (427, 640)).vertical_first


def test_digits_spec_generates_the_documented_api_and_sizes():
    spec = PreprocessSpec.load(DIGITS / "preprocess.json")
    files = generate_c(spec, input_format="gray8")
    assert sorted(files) == ["ek_pp_digits_8x8_gray.c", "ek_pp_digits_8x8_gray.h", "ek_preprocess.c", "ek_preprocess.h"]
    header = files["ek_pp_digits_8x8_gray.h"]
    for line in ("#define EK_PP_DIGITS_8X8_GRAY_INPUT_BYTES 64u", "#define EK_PP_DIGITS_8X8_GRAY_OUTPUT_BYTES 256u",
                 "extern const ek_pp_config ek_pp_digits_8x8_gray;"):
        assert line in header
    assert "ek_pp_status ek_preprocess(const ek_pp_config *cfg" in files["ek_preprocess.h"]
    assert "malloc" not in files["ek_preprocess.c"]


def test_generate_c_input_errors():
    with pytest.raises(UserError, match="needs input_size"):
        generate_c(PreprocessSpec.from_dict({"shorter_side": 64}))
    with pytest.raises(UserError, match="input format 'yuv'"):
        generate_c(PreprocessSpec.from_dict({"size": [8, 8]}), input_format="yuv")
    with pytest.raises(UserError, match="resolve it first"):
        generate_c(PreprocessSpec.from_dict({"size": [8, 8], "dtype": "int8", "quantization": "model"}))
    with pytest.raises(UserError, match="smaller than the crop"):
        generate_c(PreprocessSpec.from_dict({"crop": [64, 64]}), input_size=(32, 32))
    assert c_symbol("ImageNet-224 (v2)") == "ek_pp_imagenet_224_v2"


@pytest.mark.parametrize("frame", [(48, 64), (517, 3)], ids=["horizontal-first", "vertical-first"])
def test_engine_rejects_bad_arguments_and_tables(tmp_path, frame):
    spec = PreprocessSpec.from_dict({"name": "model", "size": [24, 20], "resize": "bicubic", "layout": "NCHW"})
    files = generate_c(spec, input_size=frame, input_format="rgb888", symbol="ek_pp_model")
    done = _compile_and_run(tmp_path, files, HERE / "c" / "engine_checks.c")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all engine checks passed" in done.stdout


def test_engine_is_clean_under_address_and_undefined_behaviour_sanitizers(tmp_path, photo_paths):
    spec = PreprocessSpec.from_dict(SPECS["gray-int8-lanczos-crop"])
    for k, (path, fmt) in enumerate([(photo_paths[0], "rgb888"), (photo_paths[1], "bgr888")]):
        pixels = decode_pillow(path, spec)
        if fmt == "bgr888":
            pixels = pixels[:, :, ::-1]
        folder = tmp_path / str(k)
        folder.mkdir()
        files = generate_c(spec, input_size=pixels.shape[:2], input_format=fmt, symbol="ek_pp_model")
        for name, text in files.items():
            (folder / name).write_text(text)
        exe = folder / "host"
        subprocess.run(["gcc", *CFLAGS, "-I.", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        '-DEK_PP_CONFIG_HEADER="ek_pp_model.h"', "-DEK_PP_CONFIG=ek_pp_model",
                        "ek_preprocess.c", "ek_pp_model.c", str(PHOTOS.parents[1] / "firmware" / "preprocess" / "host_driver.c"),
                        "-o", str(exe)], cwd=folder, check=True, capture_output=True)
        (folder / "in.raw").write_bytes(np.ascontiguousarray(pixels).tobytes())
        done = subprocess.run([str(exe), "in.raw", "out.raw"], cwd=folder, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        got = np.frombuffer((folder / "out.raw").read_bytes(), np.int8).reshape(1, 33, 31)
        np.testing.assert_array_equal(got, implementation("pillow", spec)(path))  # bgr888 input gives the same tensor


def test_engine_and_tables_build_for_cortex_m4_without_dynamic_allocation(tmp_path):
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        pytest.skip("arm-none-eabi-gcc is not installed (apt-get install gcc-arm-none-eabi)")
    spec = PreprocessSpec.from_dict({"name": "cam", "color": "rgb", "size": [96, 96], "resize": "bilinear",
                                     "layout": "NHWC", "dtype": "int8", "quantization": {"scale": 1 / 255, "zero_point": -128}})
    files = generate_c(spec, input_size=(240, 320), input_format="rgb888")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    flags = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-std=c99", "-O2", "-Wall", "-Wextra",
             "-Werror", "-ffunction-sections", "-fdata-sections"]
    for source in ("ek_preprocess.c", "ek_pp_cam.c"):
        subprocess.run([cc, *flags, "-c", source, "-o", source + ".o"], cwd=tmp_path, check=True, capture_output=True)
    symbols = subprocess.run(["arm-none-eabi-nm", "-u", "ek_preprocess.c.o"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "malloc" not in symbols and "free" not in symbols
    sizes = subprocess.run(["arm-none-eabi-size", "ek_preprocess.c.o", "ek_pp_cam.c.o"], cwd=tmp_path,
                           capture_output=True, text=True).stdout
    text_bytes = int(sizes.splitlines()[1].split()[0])
    assert 0 < text_bytes < 4096, sizes  # the engine is small: a few hundred instructions
