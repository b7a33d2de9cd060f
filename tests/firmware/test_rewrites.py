"""A missing op is listed with every other missing op, its location and the nearest supported rewrite
(edgekit.firmware.rewrites), before anything is written; every rewrite names only ops the runtime has."""
from __future__ import annotations

import pytest

from edgekit.errors import UnsupportedOpError
from edgekit.firmware.rewrites import BUILTIN_REWRITES, CUSTOM_REWRITES, named_ops
from edgekit.firmware.support import EDGEKIT_OPS, TFLM_RESOLVER_METHODS
from tests.firmware.opmodels import T, build_graph


@pytest.mark.parametrize("op,hint", sorted({**BUILTIN_REWRITES, **CUSTOM_REWRITES}.items()))
def test_every_rewrite_names_only_supported_ops(op, hint):
    missing = set(named_ops(hint)) - set(EDGEKIT_OPS) - {op}
    assert not missing, f"{op}: the rewrite names ops the runtime lacks: {sorted(missing)}"


def test_rewrites_are_for_ops_the_runtime_lacks():
    assert not set(BUILTIN_REWRITES) & set(EDGEKIT_OPS)


def test_missing_ops_come_with_location_rewrite_and_tflm(tmp_path):
    from edgekit.firmware.generate import generate_firmware

    tensors = [T([1, 8], name="x"), T([1, 8], name="sq"), T([1, 8], name="mirror"), T([1, 8], name="y")]
    ops = [("SQUARE", [0], [1], None), ("ADD", [1, 0], [2], None),
           ("CUSTOM:Convolution2DTransposeBias", [2], [3], None)]
    model = build_graph(tensors, ops, [0], [3])
    with pytest.raises(UnsupportedOpError) as err:
        generate_firmware(model, "mps2-an386", tmp_path / "out")
    rejected = {o.op.split("(")[0].strip(): o for o in err.value.report.rejected}
    text = str(err.value)
    assert "SQUARE at op #0" in text and "nearest supported rewrite: MUL of the tensor by itself" in text
    assert "SQUARE" in TFLM_RESOLVER_METHODS and "--runtime tflm" in rejected["SQUARE"].reason
    assert "TRANSPOSE_CONV + ADD" in text and not (tmp_path / "out").exists()
