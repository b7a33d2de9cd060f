"""Parity chooses metrics per output kind (issue 29): landmark / regression / detection / mask / one-value outputs of
real models are not scored as class scores, the user can name the kind, and reports say what was chosen."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgekit.errors import UserError
from edgekit.parity.output_kind import OutputKind, detect_kind, mask_overlap, parse_output_kinds, topk_hits

RNG = np.random.default_rng(7)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("shape,values,labelled,kind", [
    ((8, 12), "probs", False, OutputKind.CLASS_SCORES),         # KWS softmax
    ((8, 10), "logits", True, OutputKind.CLASS_SCORES),         # a labelled classifier's logits
    ((8, 63), "logits", False, OutputKind.REGRESSION),          # hand landmarks [1, 63]
    ((8, 1, 1, 1404), "logits", False, OutputKind.REGRESSION),  # face mesh [1, 1, 1, 1404]
    ((8, 896, 16), "logits", False, OutputKind.BOXES),          # face detection regressors
    ((8, 896, 1), "logits", False, OutputKind.DETECTION_SCORES),  # face detection classificators
    ((8, 32, 32, 1), "sigmoid", False, OutputKind.MASK),        # selfie segmentation
    ((8, 64, 64, 39), "logits", False, OutputKind.REGRESSION),  # pose heatmaps: too many channels for a mask
    ((8, 1), "logits", False, OutputKind.SCALAR),               # hand presence [1, 1]
    ((8, 1, 1, 1), "logits", False, OutputKind.SCALAR),
])
def test_kinds_detected_from_shape_and_values(shape, values, labelled, kind):
    x = RNG.normal(size=shape)
    if values == "probs":
        x = softmax(x)
    elif values == "sigmoid":
        x = 1 / (1 + np.exp(-x))
    choice = detect_kind(x, labelled=labelled)
    assert choice.kind is kind and choice.reason


def test_autoencoder_output_of_the_input_size_is_regression_and_override_wins():
    x = softmax(RNG.normal(size=(4, 640)))
    assert detect_kind(x, input_sizes=[640]).kind is OutputKind.REGRESSION
    choice = detect_kind(RNG.normal(size=(4, 63)), override="class_scores")
    assert choice.kind is OutputKind.CLASS_SCORES and choice.reason == "--output-kind"


def test_output_kind_values_are_checked_all_at_once():
    assert parse_output_kinds(["a=mask", "b = scalar"]) == (("a", "mask"), ("b", "scalar"))
    with pytest.raises(UserError) as err:
        parse_output_kinds(["a", "b=logits", "=mask"])
    text = str(err.value) + err.value.fix
    assert "'a' is not NAME=KIND" in text and "unknown kind 'logits'" in text and "'=mask'" in text
    assert "class_scores, regression, boxes, detection_scores, mask" in text


def test_topk_and_mask_overlap_count_what_they_say():
    ref = np.zeros((1, 100, 1))
    ref[0, :10, 0] = 5.0                     # anchors 0..9 score highest
    cand = ref.copy()
    cand[0, 9, 0], cand[0, 50, 0] = -1.0, 9.0  # the candidate loses anchor 9, promotes anchor 50
    assert topk_hits(ref, cand) == (9, 10)
    m = np.zeros((1, 8, 8, 1))
    m[0, :4, :, 0] = 0.9
    c = m.copy()
    c[0, :2, :, 0] = 0.1
    assert mask_overlap(m, c) == (16, 32)    # probabilities: threshold 0.5
    logits = np.where(m > 0.5, 3.0, -3.0)
    assert mask_overlap(logits, np.where(c > 0.5, 3.0, -3.0)) == (16, 32)  # logits: threshold 0


@pytest.fixture(scope="module")
def multi_head(tmp_path_factory):
    """A float Keras model with the heads of a real detector/landmark network, quantized by `edgekit quantize`."""
    import tensorflow as tf

    from tests.conftest import run_cli

    tf.keras.utils.set_random_seed(3)
    inp = tf.keras.Input((32, 32, 3), batch_size=1, name="image")
    x = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    mask = tf.keras.layers.Conv2D(1, 1, activation="sigmoid", name="mask")(x)
    pooled = tf.keras.layers.Conv2D(8, 3, strides=4, padding="same", activation="relu")(x)   # 8x8x8
    flat = tf.keras.layers.Reshape((64, 8))(pooled)
    scores = tf.keras.layers.Dense(1, name="scores")(tf.keras.layers.Concatenate(axis=1)([flat, flat]))  # 128 anchors
    boxes = tf.keras.layers.Dense(4, name="boxes")(tf.keras.layers.Concatenate(axis=1)([flat, flat]))
    vec = tf.keras.layers.GlobalAveragePooling2D()(pooled)
    landmarks = tf.keras.layers.Dense(63, name="landmarks")(vec)
    presence = tf.keras.layers.Dense(1, name="presence")(vec)
    model = tf.keras.Model(inp, [landmarks, scores, boxes, mask, presence])
    root = tmp_path_factory.mktemp("kinds")
    model.save(root / "heads.keras")
    rng = np.random.default_rng(0)
    np.save(root / "calib.npy", rng.uniform(0, 1, (40, 32, 32, 3)).astype(np.float32))
    code = run_cli("quantize", root / "heads.keras", "--calib", root / "calib.npy", "-o", root / "out")
    return root, code


def test_quantize_judges_each_head_by_its_kind(multi_head):
    root, code = multi_head
    assert code == 0
    parity = json.loads((root / "out" / "parity.json").read_text())
    kinds = {o["kind"] for o in parity["outputs"]}
    assert kinds == {"regression", "detection_scores", "boxes", "mask", "scalar"}
    for o in parity["outputs"]:
        assert "top1_agreement" not in o and o["kind_reason"]  # no output here is class scores
        assert ("topk_agreement" in o) == (o["kind"] == "detection_scores")
        assert ("mask_iou" in o) == (o["kind"] == "mask")
        if "mask_iou" in o:
            assert 0.5 < o["mask_iou"] <= 1.0
    report = (root / "out" / "report.md").read_text()
    assert "How each output is judged" in report and "one value per sample" in report


def test_a_named_kind_changes_the_metrics_and_the_gate(multi_head, capsys):
    from tests.conftest import run_cli

    root, _ = multi_head
    out = root / "parity-named"
    landmarks = next(o["name"] for o in json.loads((root / "out" / "parity.json").read_text())["outputs"]
                     if o["kind"] == "regression")
    code = run_cli("parity", root / "out" / "model_float.tflite", root / "out" / "model_int8.tflite",
                   "--data", root / "calib.npy", "--output-kind", f"{landmarks}=class_scores", "--min-top1", "0.0",
                   "-o", out)
    assert code == 0
    named = next(o for o in json.loads((out / "parity.json").read_text())["outputs"] if o["name"] == landmarks)
    assert named["kind"] == "class_scores" and named["kind_reason"] == "--output-kind" and "top1_agreement" in named
    assert run_cli("parity", root / "out" / "model_float.tflite", root / "out" / "model_int8.tflite",
                   "--data", root / "calib.npy", "--output-kind", "nosuch=mask", "-o", root / "bad") == 2
    assert "which the model does not have" in capsys.readouterr().err and not (root / "bad").exists()


def test_scalar_outputs_are_not_gated_by_cosine():
    from edgekit.parity.tolerance import Tolerance

    tol = Tolerance(min_cosine=0.99)
    metrics = {"cosine": 0.2, "sqnr_db": 30.0}
    assert tol.failures("presence", metrics, "scalar") == []
    assert tol.failures("landmarks", metrics, "regression") == ["landmarks: cosine = 0.2000 < 0.99"]


def test_streaming_sums_give_the_same_kind_metrics_as_compare(multi_head):
    from edgekit.parity.compare import compare
    from edgekit.parity.runners import open_runner
    from edgekit.parity.streaming import ParitySums
    from edgekit.parity.tolerance import Tolerance
    from edgekit.scale.ray_parity import report_from_sums

    root, _ = multi_head
    ref, cand = open_runner(root / "out" / "model_float.tflite"), open_runner(root / "out" / "model_int8.tflite")
    samples = [[s[None]] for s in np.load(root / "calib.npy")[:12]]
    tol = Tolerance(min_cosine=0.5, min_topk=0.1, min_iou=0.1)
    local = compare(ref, cand, samples, tolerance=tol)
    sums = ParitySums.empty(len(cand.output_names()))
    for i, s in enumerate(samples):
        (r, rr), (c, cr) = ref.run(s), cand.run(s)
        kinds = [detect_kind(np.asarray(o)[None]) for o in r]
        sums.add_sample(f"s{i}", r, c, rr, cr, kinds)
    merged = report_from_sums(ref, cand, sums, tol)
    assert [o.kind for o in merged.outputs] == [o.kind for o in local.outputs]
    assert merged.failures == local.failures
    for mine, theirs in zip(merged.outputs, local.outputs):
        for key in ("topk_agreement", "mask_iou", "cosine"):
            a, b = mine.metrics().get(key), theirs.metrics().get(key)
            assert (a is None) == (b is None) and (a is None or math.isclose(a, b, rel_tol=1e-9)), key
