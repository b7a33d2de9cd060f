"""The typed parts of firmware.json: a mistyped key fails at construction instead of becoming a silent None."""
import pytest
from pydantic import TypeAdapter, ValidationError

from edgekit.firmware.plan_types import PlanReport, RamFigures, StackFigure


def _ram(**extra):
    return {"bytes": 100, "arena": 60, "state": 20, "other_static": 4, "method": "estimated: test",
            "stack": {"bytes": 16, "method": "linker reservation"}, **extra}


def test_ram_figures_refuse_a_mistyped_key_and_keep_the_given_ones():
    ram = TypeAdapter(RamFigures).validate_python(_ram(runtime={"bytes": 80, "arena": 60, "mutable_state": 20,
                                                                "method": "estimated: test"}))
    assert ram["runtime"]["mutable_state"] == 20 and ram["stack"]["bytes"] == 16
    with pytest.raises(ValidationError, match="state_used_on_devise"):
        TypeAdapter(RamFigures).validate_python(_ram(state_used_on_devise=12))
    with pytest.raises(ValidationError, match="method"):
        TypeAdapter(RamFigures).validate_python({k: v for k, v in _ram().items() if k != "method"})


def test_a_measured_stack_keeps_its_static_estimate_but_not_a_second_level():
    measured = {"bytes": 600, "estimated": False, "method": "measured", "static_estimate": {
        "bytes": 900, "estimated": True, "method": "static", "chain": ["main", "ek_serve"]}}
    assert TypeAdapter(StackFigure).validate_python(measured)["static_estimate"]["chain"] == ["main", "ek_serve"]
    nested = {**measured, "static_estimate": {**measured["static_estimate"], "static_estimate": {"bytes": 1}}}
    with pytest.raises(ValidationError):
        TypeAdapter(StackFigure).validate_python(nested)


def test_plan_report_overlap_rows_take_a_group_input():
    plan = {"tensors": [{"index": 3, "offset": 0, "bytes": 64, "first_op": 0, "last_op": 1, "alias_of": -1,
                         "name": "x"}], "scratch": [], "persistent_bytes": 0, "optimize": "ram", "prepared_bytes": 10,
            "overlaps": [{"op": 2, "op_name": "CONV_2D", "input": "group input", "group_first_op": 0,
                          "rule": "exactly in place", "why": "row-streamed"}],
            "streamed_groups": [], "weight_layouts": {"flash_layouts": True, "note": "n"},
            "plain_in_place_tflite": {"arena_bytes": 1, "state_bytes_host": 2, "persistent_bytes": 3}}
    assert TypeAdapter(PlanReport).validate_python(plan)["overlaps"][0]["input"] == "group input"
    with pytest.raises(ValidationError, match="offest"):
        TypeAdapter(PlanReport).validate_python({**plan, "tensors": [{**plan["tensors"][0], "offest": 0}]})
