"""The diagnosis names injected mismatches: one known mismatch (or the classic combination) is put
into the candidate, and the search must name it and explain the difference down to rounding."""
import numpy as np
import pytest

from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.base import implementation
from edgekit.preprocessing.parity import run_parity
from edgekit.preprocessing.sources import TensorFolderPreprocessor
from tests.preprocessing.edge_cases import PHOTOS

REFERENCE = dict(name="ref", color="rgb", shorter_side=72, crop=[64, 64], resize="bilinear",
                 mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], layout="NCHW")
ZERO_ONE = dict(REFERENCE, mean=[0.0], std=[1.0])
NEAREST = dict(REFERENCE, resize="nearest", shorter_side=None, crop=None, size=[50, 70])

# (case, reference spec, candidate implementation, changes to the reference spec, expected cause families)
INJECTED = [
    ("channel order", REFERENCE, "pillow", {"color": "bgr"}, {"channel order"}),
    ("normalization constants", REFERENCE, "pillow", {"mean": [0.5], "std": [0.5]}, {"normalization constants"}),
    ("value range 0..255", ZERO_ONE, "pillow", {"scale": 1.0}, {"value range"}),
    ("antialias off", REFERENCE, "pillow", {"antialias": False}, {"antialias"}),
    ("resize method bicubic", REFERENCE, "pillow", {"resize": "bicubic"}, {"resize method"}),
    ("resize method nearest", REFERENCE, "pillow", {"resize": "nearest"}, {"resize method"}),
    ("library opencv", REFERENCE, "opencv", {}, {"library"}),
    ("layout", REFERENCE, "pillow", {"layout": "NHWC"}, {"layout"}),
    ("orientation ignored", REFERENCE, "pillow", {"exif_orientation": False}, {"orientation"}),
    ("tf fast jpeg idct", REFERENCE, "tf[jpeg_idct=fast]", {}, {"library"}),
    ("opencv legacy nearest", NEAREST, "opencv[nearest=legacy]", {}, {"library"}),
    ("resize without crop", REFERENCE, "pillow", {"shorter_side": None, "crop": None, "size": [64, 64]}, {"output size"}),
    ("classic skew", REFERENCE, "opencv", {"color": "bgr", "antialias": False, "mean": [0.5], "std": [0.5]},
     {"channel order", "normalization constants", "antialias"}),
]


def _candidate(impl_text: str, spec: PreprocessSpec):
    name, _, options = impl_text.partition("[")
    opts = dict(item.split("=") for item in options.rstrip("]").split(",")) if options else {}
    return implementation(name, spec, **opts)


@pytest.fixture(scope="module")
def images(edge_dir):
    return [PHOTOS / "china.jpg", PHOTOS / "grace_hopper.jpg", edge_dir / "exif_6.jpg", edge_dir / "exif_3.jpg",
            edge_dir / "gray.png"]


@pytest.fixture(scope="module")
def hits(images):
    """Run every injected case once; {case: (expected, named families, diagnosis)}."""
    out = {}
    for case, ref_data, impl, changes, expected in INJECTED:
        reference = PreprocessSpec.from_dict(ref_data)
        report, _, _ = run_parity(implementation("pillow", reference), _candidate(impl, reference.replace(**changes)), images)
        assert not report.passed, case
        out[case] = (expected, {c["family"] for c in report.diagnosis["causes"]}, report.diagnosis)
    named = sum(1 for e, f, d in out.values() if e <= f and d["explained"])
    print(f"\ndiagnosis hit rate: {named}/{len(out)} injected mismatches named and explained")
    return out


@pytest.mark.parametrize("case", [c[0] for c in INJECTED])
def test_injected_mismatch_is_named_and_explained(hits, case):
    expected, named, diagnosis = hits[case]
    assert expected <= named, f"{case}: named {named}, expected {expected}: {diagnosis['summary']}"
    assert diagnosis["explained"], diagnosis["summary"]
    assert diagnosis["residual_mean_abs"] <= 0.5


def test_descriptions_say_what_the_candidate_does(hits):
    by_family = {c["family"]: c for c in hits["classic skew"][2]["causes"]}
    assert by_family["channel order"]["candidate"] == "BGR" and by_family["channel order"]["reference"] == "RGB"
    assert by_family["normalization constants"]["candidate"] == "-1..1 (x / 127.5 - 1)"
    assert by_family["normalization constants"]["reference"] == "ImageNet mean/std (RGB order)"
    assert "without antialias" in by_family["antialias"]["candidate"]
    value_range = hits["value range 0..255"][2]["causes"][0]
    assert (value_range["reference"], value_range["candidate"]) == ("0..1 (x / 255)", "0..255 (no scaling)")


def test_candidate_side_is_perturbed_when_the_reference_is_a_tensor_folder(images, tmp_path):
    """QA case: the reference is what the trained pipeline wrote to disk, the candidate a spec."""
    spec = PreprocessSpec.from_dict(REFERENCE)
    for path in images:
        np.save(tmp_path / f"{path.stem}.npy", implementation("pillow", spec)(path))
    candidate = implementation("opencv", spec.replace(color="bgr", antialias=False))
    report, _, _ = run_parity(TensorFolderPreprocessor(tmp_path), candidate, images)
    d = report.diagnosis
    assert d["perturbed"] == "candidate" and d["explained"], d["summary"]
    order = next(c for c in d["causes"] if c["family"] == "channel order")
    assert (order["candidate"], order["reference"]) == ("BGR", "RGB")


def test_two_tensor_folders_get_the_black_box_diagnosis(images, tmp_path):
    spec = PreprocessSpec.from_dict(REFERENCE)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for path in images:
        t = implementation("pillow", spec)(path)
        np.save(a / f"{path.stem}.npy", t)
        np.save(b / f"{path.stem}.npy", t[::-1])
    report, _, _ = run_parity(TensorFolderPreprocessor(a), TensorFolderPreprocessor(b), images)
    d = report.diagnosis
    assert d["available"] and d["mode"] == "black box"
    assert [c["family"] for c in d["causes"]] == ["channel order"], d["summary"]
    assert (d["causes"][0]["reference"], d["causes"][0]["candidate"]) == ("RGB", "BGR") and d["explained"]
