"""table.json of edgekit lab is a typed LabTable: stamped with its schema, rows with declared keys only."""
import json

import pytest
from pydantic import ValidationError


def test_lab_table_is_stamped_and_refuses_an_unknown_row_key():
    from edgekit.lab.results import LabBoard, LabSettings, LabTable, LabTiming
    from edgekit.schemas import schema_id

    row = {"model": "ad", "board": "mps2-an386", "device": "qemu:mps2-an386", "model_sha256": "0" * 64,
           "status": "ok", "fits": True, "ram_bytes": 1000, "flash_bytes": 2000, "instructions_per_inference": 5,
           "latency_ms": {"value": 1.5, "method": "estimated", "source": "profile cycle model"},
           "energy_uj": {"value": None, "method": "unavailable", "source": "no power model"},
           "bit_exact": True, "error": None, "wall_s": 0.5}
    fields = dict(edgekit_lab="0", matrix=None, models=[], boards=[LabBoard(name="b", device="qemu:b", instances=1)],
                  settings=LabSettings(iterations=1, inputs=1, parallel=1),
                  summary={"ok": 1, "does-not-fit": 0, "failed": 0, "resumed": 0, "cells": 1},
                  timing=LabTiming(wall_s=1.0, build_s=0.0, run_s=1.0, method="measured: test"), host="h", notes=[])
    written = json.loads(LabTable(cells=[row], **fields).dumps())
    assert written["schema"] == schema_id("lab") and written["cells"] == [row]
    with pytest.raises(ValidationError, match="bit_exactt"):
        LabTable(cells=[{**row, "bit_exactt": True}], **fields)
