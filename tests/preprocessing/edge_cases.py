"""Generated edge-case images for preprocessing tests (written at test time from the real photos).

Every file is deterministic. ``CORRUPT`` files cannot be decoded by the reference; all others can.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "calibration_data" / "photos"
PHOTO_FILES = ("china.jpg", "flower.jpg", "grace_hopper.jpg")
CORRUPT = ("corrupt.jpg", "truncated.jpg", "empty.png", "not_an_image.png")
EXIF_ORIENTATIONS = (2, 3, 4, 5, 6, 7, 8)


def _inverse_transpose(orientation: int):
    """The Pillow transpose that stores an upright image so that EXIF ``orientation`` restores it."""
    from PIL import Image

    T = Image.Transpose
    return {2: T.FLIP_LEFT_RIGHT, 3: T.ROTATE_180, 4: T.FLIP_TOP_BOTTOM, 5: T.TRANSPOSE,
            6: T.ROTATE_90, 7: T.TRANSVERSE, 8: T.ROTATE_270}[orientation]


def write_edge_cases(folder: Path) -> Path:
    import cv2
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    china = Image.open(PHOTOS / "china.jpg").convert("RGB")
    flower = Image.open(PHOTOS / "flower.jpg").convert("RGB")
    hopper = Image.open(PHOTOS / "grace_hopper.jpg").convert("RGB")
    for image in (china, flower, hopper):
        image.info.pop("icc_profile", None)  # libpng warns about the JPEGs' ICC profile in PNGs
    rng = np.random.default_rng(7)

    # odd sizes
    china.crop((300, 200, 301, 201)).save(folder / "odd_1x1.png")
    flower.crop((10, 10, 527, 13)).save(folder / "odd_3x517.png")  # 3 rows, 517 columns
    hopper.crop((100, 50, 103, 567)).save(folder / "odd_517x3.jpg", quality=92)
    china.crop((101, 37, 202, 74)).save(folder / "odd_37x101.png")
    flower.crop((0, 0, 639, 425)).save(folder / "odd_425x639.jpg", quality=90)

    # EXIF orientation: stored transposed, the tag restores the upright 120x90 picture
    upright = hopper.crop((120, 80, 240, 170))
    for orientation in EXIF_ORIENTATIONS:
        exif = Image.Exif()
        exif[0x0112] = orientation
        upright.transpose(_inverse_transpose(orientation)).save(folder / f"exif_{orientation}.jpg", quality=95, exif=exif)

    # gray, alpha, palette
    china.convert("L").resize((200, 133)).save(folder / "gray.png")
    flower.convert("L").save(folder / "gray.jpg", quality=90)
    rgba = np.dstack([np.asarray(flower.resize((160, 107))),
                      np.tile(np.linspace(0, 255, 160).astype(np.uint8), (107, 1))])
    Image.fromarray(rgba, "RGBA").save(folder / "rgba.png")
    la = np.dstack([np.asarray(china.convert("L").resize((90, 60))),
                    np.tile(np.linspace(255, 0, 60).astype(np.uint8)[:, None], (1, 90))])
    Image.fromarray(la, "LA").save(folder / "gray_alpha.png")
    palette = china.resize((120, 80)).quantize(64)
    palette.info["transparency"] = 0
    palette.save(folder / "palette_transparent.png", transparency=0)

    # 16-bit: gray (Pillow I;16) and RGB (48-bit, written by OpenCV from a BGR array)
    ramp = np.asarray(hopper.convert("L").resize((150, 175)), np.uint16) * 257 + rng.integers(0, 257, (175, 150), dtype=np.uint16)
    Image.fromarray(ramp.astype(np.uint16)).save(folder / "gray16.png")
    rgb16 = np.asarray(china.resize((140, 93)), np.uint16) * 257 + rng.integers(0, 257, (93, 140, 3), dtype=np.uint16)
    cv2.imwrite(str(folder / "rgb16.png"), np.ascontiguousarray(rgb16[:, :, ::-1]))

    # CMYK JPEG (Adobe, as Pillow writes it)
    flower.resize((200, 134)).convert("CMYK").save(folder / "cmyk.jpg", quality=92)

    # broken files
    (folder / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0" + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes())
    whole = (PHOTOS / "china.jpg").read_bytes()
    (folder / "truncated.jpg").write_bytes(whole[: len(whole) * 2 // 5])
    (folder / "empty.png").write_bytes(b"")
    (folder / "not_an_image.png").write_text("this is not an image\n")
    return folder
