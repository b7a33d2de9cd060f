"""Chunked readers and mergeable parity statistics, without Ray (fast): every layout lists into chunks
whose rows carry stable names; statistics merged in any split equal compare() on the whole set."""
from __future__ import annotations

import math

import numpy as np
import pytest

from edgekit.errors import CalibrationDataError
from edgekit.parity.compare import compare, is_classification
from edgekit.parity.runners import open_runner
from edgekit.parity.streaming import ParitySums
from edgekit.parity.tolerance import Tolerance
from edgekit.preprocessing.spec import PreprocessSpec, load_image
from edgekit.scale.ray_parity import report_from_sums
from edgekit.scale.sources import list_source, read_chunk
from tests.conftest import MLPERF

KWS_FLOAT = MLPERF / "kws_ref_model_float32.tflite"
KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"
IC_FLOAT = MLPERF / "ic_resnet8_float32.tflite"
SPEC = {"name": "ic-32", "color": "rgb", "size": [32, 32], "resize": "bilinear", "scale": 1.0,
        "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "NHWC", "dtype": "float32"}


def _rows(source, inputs):
    return [row for chunk in source.chunks for row in read_chunk(chunk, source, inputs)]


def test_sums_merged_in_any_split_equal_compare():
    ref, cand = open_runner(KWS_FLOAT), open_runner(KWS_INT8)
    inputs = ref.input_specs()
    rng = np.random.default_rng(1)
    samples = [[rng.normal(0, 20, (1, *inputs[0].shape[1:])).astype(np.float32)] for _ in range(24)]
    labels = rng.integers(0, 12, 24).tolist()
    tol = Tolerance(min_cosine=0.9, min_top1=0.5)
    local = compare(ref, cand, samples, tolerance=tol, labels=labels)
    sizes = [int(np.prod(s.shape[1:])) for s in inputs]
    outputs = [(ref.run(s), cand.run(s)) for s in samples]

    def merged(splits):
        total = ParitySums.empty(1, top_k=3)
        for part in np.array_split(np.arange(24), splits)[::-1]:  # reversed: order must not matter
            sums = ParitySums.empty(1, top_k=3)
            for i in part:
                (r, rr), (c, cr) = outputs[i]
                sums.add_sample(f"s{i:02d}", r, c, rr, cr, [is_classification(np.asarray(r[0])[None], sizes)], labels[i])
            total.merge(sums)
        return total

    one, five = merged(1), merged(5)
    for sums in (one, five):
        report = report_from_sums(ref, cand, sums, tol)
        assert report.passed == local.passed and report.failures == local.failures
        assert report.accuracy.to_dict() == pytest.approx(local.accuracy.to_dict(), rel=0, abs=0)
        for key, value in local.outputs[0].metrics().items():
            assert math.isclose(report.outputs[0].metrics()[key], value, rel_tol=1e-9), key
    assert one.worst_samples() == five.worst_samples() and len(one.worst) == 3
    assert one.flipped_samples() == five.flipped_samples()


def test_npz_npy_shards_and_one_sample_files(tmp_path):
    inputs = open_runner(KWS_FLOAT).input_specs()
    shape = inputs[0].shape[1:]
    x = np.arange(10 * int(np.prod(shape)), dtype=np.float32).reshape(10, *shape)
    shards = tmp_path / "shards"
    shards.mkdir()
    np.save(shards / "a.npy", x[:6])
    np.save(shards / "b.npy", x[6:])
    source = list_source(shards, inputs, chunk=4)
    assert source.kind == "array-shards" and source.samples == 10 and len(source.chunks) == 3
    rows = _rows(source, inputs)
    assert [r.name for r in rows][5:7] == [f"{shards / 'a.npy'}[5]", f"{shards / 'b.npy'}[0]"]
    assert np.array_equal(rows[7].sample[0][0], x[7])

    singles = tmp_path / "singles"
    singles.mkdir()
    for i in range(3):
        np.save(singles / f"{i}.npy", x[i])
    (singles / "labels.csv").write_text("file,label\n0.npy,4\n1.npy,5\n2.npy,6\n")
    source = list_source(singles, inputs)
    assert source.kind == "npy-folder" and [r.label for r in _rows(source, inputs)] == [4, 5, 6]

    from edgekit.calibration import dataset as data

    np.save(tmp_path / "all.npy", x)
    limited = list_source(tmp_path / "all.npy", inputs, chunk=4, limit=5, seed=3)
    expected = data.whole(data.open_source(tmp_path / "all.npy", [inputs[0].name]), limit=5, seed=3).indices
    assert limited.samples == 5 and [r.name for r in _rows(limited, inputs)] == [f"{tmp_path / 'all.npy'}[{i}]" for i in expected]


def test_parquet_image_and_tensor_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    inputs = open_runner(IC_FLOAT).input_specs()
    spec = PreprocessSpec.from_dict(SPEC)
    rng = np.random.default_rng(2)
    blobs, tensors = [], []
    for i in range(5):
        path = tmp_path / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(path)
        blobs.append(path.read_bytes())
        tensors.append(load_image(path, spec).ravel().tolist())
    blobs[3] = b"broken"
    tensors[1] = tensors[1][:10]  # wrong size: counted as corrupt, named
    pq.write_table(pa.table({"image": blobs, "label": [0, 1, 2, 3, 4]}), tmp_path / "img.parquet", row_group_size=2)
    pq.write_table(pa.table({"x": tensors, "y": [1] * 5}), tmp_path / "t.parquet", row_group_size=2)

    by_image = list_source(tmp_path / "img.parquet", inputs, spec)
    assert by_image.column == "image" and len(by_image.chunks) == 3
    subset = _rows(list_source(tmp_path / "img.parquet", inputs, spec, limit=2, seed=0), inputs)
    assert len(subset) == 2 and all(r.name.endswith(f"img.parquet[{r.label}]") for r in subset)  # label == row here
    rows = _rows(by_image, inputs)
    assert [r.label for r in rows] == [0, 1, 2, 3, 4] and rows[3].sample is None and rows[3].name.endswith("img.parquet[3]")
    by_tensor = _rows(list_source(tmp_path / "t.parquet", inputs), inputs)
    assert by_tensor[1].sample is None and "10 values" in by_tensor[1].error
    for i in (0, 2, 4):
        assert np.array_equal(rows[i].sample[0], by_tensor[i].sample[0])

    pq.write_table(pa.table({"a": [[1.0]], "b": [[2.0]]}), tmp_path / "two.parquet")
    with pytest.raises(CalibrationDataError, match="--column"):
        list_source(tmp_path / "two.parquet", inputs)


def test_unknown_layout_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(CalibrationDataError, match="no images"):
        list_source(tmp_path, open_runner(KWS_FLOAT).input_specs())
