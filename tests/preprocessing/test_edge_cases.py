"""Decode rules on generated edge cases, in every implementation: EXIF orientation, gray, alpha,
16-bit, CMYK, odd sizes, corrupt and truncated files (named, the rest still processed)."""
import cv2
import numpy as np
import pytest
from PIL import Image

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import ImageReadError, implementation
from tests.preprocessing.edge_cases import CORRUPT, EXIF_ORIENTATIONS, PHOTOS

IMPLS = ("pillow", "opencv", "torchvision", "tf", "c")
RAW = {"name": "raw", "color": "rgb", "scale": 1.0, "layout": "NHWC"}  # tensor = decoded pixels


def run(impl, data, paths):
    return implementation(impl, PreprocessSpec.from_dict(data)).run_many(paths)


@pytest.mark.parametrize("impl", IMPLS)
def test_exif_orientation_gives_the_upright_picture_in_every_implementation(impl, edge_dir):
    upright = np.asarray(Image.open(PHOTOS / "grace_hopper.jpg").convert("RGB").crop((120, 80, 240, 170)), np.float32)
    paths = [edge_dir / f"exif_{k}.jpg" for k in EXIF_ORIENTATIONS]
    reference = run("pillow", RAW, paths)
    for path, ref, got in zip(paths, reference, run(impl, RAW, paths)):
        assert got.shape == (90, 120, 3), path.name
        assert np.abs(got - upright).mean() < 3.0, path.name  # JPEG noise only, not a rotated picture
        np.testing.assert_array_equal(got, ref, err_msg=path.name)


@pytest.mark.parametrize("impl", IMPLS)
def test_exif_orientation_can_be_turned_off(impl, edge_dir):
    spec = dict(RAW, decode={"exif_orientation": False})
    paths = [edge_dir / "exif_6.jpg", edge_dir / "exif_3.jpg"]
    rotated, flipped = run(impl, spec, paths)
    assert rotated.shape == (120, 90, 3)  # as stored
    stored = np.asarray(Image.open(paths[1]).convert("RGB"), np.float32)
    np.testing.assert_array_equal(flipped, stored)


@pytest.mark.parametrize("impl", IMPLS)
def test_gray_sources_are_replicated_to_rgb_and_rgb_to_gray_is_luma(impl, edge_dir):
    gray = run(impl, RAW, [edge_dir / "gray.png"])[0]
    np.testing.assert_array_equal(gray[:, :, 0], gray[:, :, 1])
    np.testing.assert_array_equal(gray[:, :, 0], gray[:, :, 2])
    np.testing.assert_array_equal(gray[:, :, 0], np.asarray(Image.open(edge_dir / "gray.png"), np.float32))
    luma = run(impl, dict(RAW, color="grayscale"), [PHOTOS / "china.jpg"])[0][:, :, 0]
    pillow = np.asarray(Image.open(PHOTOS / "china.jpg").convert("L"), np.float32)
    # OpenCV (14-bit weights), torchvision (0.2989.., truncated) and TF (float, truncated) differ by <= 1
    assert np.abs(luma - pillow).max() <= (0 if impl in ("pillow", "c") else 1)


@pytest.mark.parametrize("impl", IMPLS)
def test_alpha_is_dropped_or_composited_as_the_spec_says(impl, edge_dir):
    rgba = np.asarray(Image.open(edge_dir / "rgba.png"), np.int64)
    dropped = run(impl, RAW, [edge_dir / "rgba.png"])[0]
    np.testing.assert_array_equal(dropped, rgba[:, :, :3])
    spec = dict(RAW, decode={"alpha": "composite", "background": [255, 128, 0]})
    composite = run(impl, spec, [edge_dir / "rgba.png"])[0]
    a = rgba[:, :, 3:]
    expected = (rgba[:, :, :3] * a + np.array([255, 128, 0]) * (255 - a) + 127) // 255
    np.testing.assert_array_equal(composite, expected)
    others = [edge_dir / "gray_alpha.png", edge_dir / "palette_transparent.png"]  # LA, and P with a tRNS color
    for got, ref, dropped in zip(run(impl, spec, others), run("pillow", spec, others), run("pillow", RAW, others)):
        np.testing.assert_array_equal(got, ref)
        assert not np.array_equal(ref, dropped)  # the files really have transparent pixels


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("rule", ["shift", "round"])
def test_16_bit_samples_become_8_bit_by_the_spec_rule(impl, rule, edge_dir):
    spec = dict(RAW, decode={"high_bit_depth": rule})
    for name in ("gray16.png", "rgb16.png"):
        raw = cv2.imread(str(edge_dir / name), cv2.IMREAD_UNCHANGED).astype(np.int64)
        raw = raw[:, :, None].repeat(3, axis=2) if raw.ndim == 2 else raw[:, :, ::-1]
        expected = raw >> 8 if rule == "shift" else np.floor(raw / 257 + 0.5)
        if name == "rgb16.png" and rule == "round" and impl in ("pillow", "torchvision", "c"):
            # Pillow reads 48-bit PNGs as 8-bit RGB (high byte) itself: 'round' cannot apply there
            expected = raw >> 8
        np.testing.assert_array_equal(run(impl, spec, [edge_dir / name])[0], expected, err_msg=name)


@pytest.mark.parametrize("impl", IMPLS)
def test_cmyk_jpeg_converts_to_rgb(impl, edge_dir):
    got = run(impl, RAW, [edge_dir / "cmyk.jpg"])[0]
    reference = run("pillow", RAW, [edge_dir / "cmyk.jpg"])[0]
    # OpenCV converts CMYK with its own rounding (measured: <= 1 level); TF and Pillow agree exactly
    assert np.abs(got - reference).max() <= (1 if impl == "opencv" else 0)
    assert np.abs(got - np.asarray(Image.open(PHOTOS / "flower.jpg").convert("RGB").resize((200, 134)))).mean() < 6


@pytest.mark.parametrize("impl", IMPLS)
def test_odd_sizes_resize_in_every_implementation(impl, edge_dir):
    spec = {"name": "odd", "color": "rgb", "size": [8, 8], "resize": "bilinear", "scale": 1.0, "layout": "NHWC"}
    names = ["odd_1x1.png", "odd_3x517.png", "odd_517x3.jpg", "odd_37x101.png", "odd_425x639.jpg"]
    results = run(impl, spec, [edge_dir / n for n in names])
    assert all(r.shape == (8, 8, 3) for r in results)
    one = np.asarray(Image.open(edge_dir / "odd_1x1.png"), np.float32)[0, 0]
    np.testing.assert_allclose(results[0], np.broadcast_to(one, (8, 8, 3)), atol=0.5)  # a 1x1 image stays one color


@pytest.mark.parametrize("impl", IMPLS)
def test_corrupt_and_truncated_files_are_named_and_the_rest_processed(impl, edge_dir):
    paths = [edge_dir / n for n in CORRUPT] + [edge_dir / "gray.png", PHOTOS / "flower.jpg"]
    results = run(impl, {"name": "x", "size": [16, 16]}, paths)
    for path, result in zip(paths[:4], results):
        assert isinstance(result, ImageReadError), path.name
        assert result.path == path and path.name in str(result)
    assert [r.shape for r in results[4:]] == [(16, 16, 3), (16, 16, 3)]
