"""edgekit's numpy copy of Pillow's algorithms is bit-exact with Pillow (it feeds the C tables)."""
import numpy as np
import pytest
from PIL import Image, ImageOps

from edgekit.preprocessing.spec import RESIZE_METHODS
from edgekit.preprocessing.decode import orient_array
from edgekit.preprocessing.resample import nearest_indices, pillow_pass_order, resize_uint8, rgb_to_luma
from tests.preprocessing.edge_cases import EXIF_ORIENTATIONS

SIZES = [(224, 224), (97, 131), (8, 8), (700, 1001), (3, 517), (600, 40)]


@pytest.mark.parametrize("method", RESIZE_METHODS)
def test_resize_is_bit_exact_with_pillow_on_real_photos(method, photo_paths):
    for path in photo_paths:
        image = Image.open(path).convert("RGB")
        pixels = np.asarray(image)
        for h, w in SIZES:
            expected = np.asarray(image.resize((w, h), getattr(Image.Resampling, method.upper())))
            np.testing.assert_array_equal(resize_uint8(pixels, (h, w), method), expected, err_msg=f"{path.name} {h}x{w}")


def test_resize_is_bit_exact_on_random_shapes_including_pillows_vertical_first_cases():
    rng = np.random.default_rng(0)
    orders = set()
    for k in range(120):
        h, w, oh, ow = (int(v) for v in rng.integers(1, 90, 4))
        method = RESIZE_METHODS[k % len(RESIZE_METHODS)]
        x = rng.integers(0, 256, (h, w, 1 + 2 * (k % 2)), dtype=np.uint8)
        image = Image.fromarray(x[:, :, 0] if x.shape[2] == 1 else x)
        expected = np.asarray(image.resize((ow, oh), getattr(Image.Resampling, method.upper()))).reshape(oh, ow, -1)
        np.testing.assert_array_equal(resize_uint8(x, (oh, ow), method), expected)
        if method != "nearest" and h != oh and w != ow:
            orders.add(pillow_pass_order((h, w), (oh, ow), method))
    assert orders == {"hv", "vh"}  # Pillow 13 uses both orders; the mirror follows it


def test_pillow_luma_formula_on_every_color_cube_corner_and_random_colors():
    rng = np.random.default_rng(1)
    colors = np.concatenate([rng.integers(0, 256, (200_000, 3)), np.array(np.meshgrid(*[[0, 255]] * 3)).reshape(3, -1).T])
    colors = colors.astype(np.uint8).reshape(-1, 1, 3)
    np.testing.assert_array_equal(rgb_to_luma(colors)[:, 0], np.asarray(Image.fromarray(colors).convert("L"))[:, 0])


def test_nearest_reproduces_pillows_accumulated_position():
    """Pillow sums a*(i+0.5) in double: at exact integers it can land one pixel early (512 -> 224:
    (3 + 0.5) * 512/224 = 8 exactly, Pillow picks 7). torch/TF nearest-exact pick 8."""
    assert nearest_indices(512, 224)[3] == 7
    assert int(np.floor((3 + 0.5) * 512 / 224)) == 8


@pytest.mark.parametrize("orientation", EXIF_ORIENTATIONS)
def test_orientation_as_array_operations_matches_exif_transpose(orientation):
    x = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
    image = Image.fromarray(x)
    exif = image.getexif()
    exif[0x0112] = orientation
    image.info["exif"] = exif.tobytes()
    expected = np.asarray(ImageOps.exif_transpose(image))
    np.testing.assert_array_equal(orient_array(x, orientation), expected)
