"""The SVG builders of report.html, without a browser: marks land where their figures say, pages are
self-contained."""
from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from edgekit.report_html.memory import flash_parts, plan_blocks
from edgekit.report_html.svg import (Bar, Block, HeatCell, TimelineGeometry, hbar_chart, heatmap, memory_timeline,
                                     overlapping_pairs, split_bar)

NS = {"s": "http://www.w3.org/2000/svg"}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report_html"


def _rects(svg: str, cls: str) -> list:
    return [r for r in ET.fromstring(svg).iter(f"{{{NS['s']}}}rect") if cls in (r.get("class") or "").split()]


def test_memory_timeline_places_each_tensor_at_its_offset_and_lifetime():
    blocks = [Block("t0", "input", 640, 64, -1, 1),           # graph input: there before op 0
              Block("t1", "conv out", 0, 2048, 1, 3),
              Block("t2", "output", 2048, 16, 3, 4),          # graph output of a 4-op model: kept to the end
              Block("s2", "scratch of op 2", 2064, 500, 2, 2, kind="scratch")]
    svg = memory_timeline("tl", blocks, ops=4, arena_bytes=3072, title="plan")
    g = TimelineGeometry(ops=4, arena_bytes=3072)
    drawn = {r.get("data-key"): r for r in _rects(svg, "block")}
    assert set(drawn) == {"t0", "t1", "t2", "s2"}
    for b in blocks:
        r = drawn[b.key]
        assert float(r.get("x")) == pytest.approx(g.x(b.first_op), abs=0.01)
        assert float(r.get("width")) == pytest.approx(g.x(b.last_op + 1) - g.x(b.first_op), abs=0.01)
        assert float(r.get("y")) == pytest.approx(g.y(b.offset), abs=0.01)
        assert float(r.get("height")) == pytest.approx(g.y(b.offset + b.size) - g.y(b.offset), abs=0.01)
        assert (int(r.get("data-offset")), int(r.get("data-bytes"))) == (b.offset, b.size)
    # the input starts left of op 0, the output reaches the right edge (op ops + 1), offset 0 is the top
    assert g.x(-1) == g.left and g.x(4 + 1) == pytest.approx(g.left + g.plot_w) and g.y(0) == g.top
    assert "scratch" in drawn["s2"].get("class")


def test_overlaps_are_the_live_pairs_sharing_bytes_and_are_hatched():
    dying = Block("t1", "input", 1000, 1000, 0, 2)
    out = Block("t2", "output over its dying input", 500, 1000, 2, 3)   # bytes 1000..1500 shared at op 2
    later = Block("t3", "same bytes, later", 1000, 1000, 3, 4)          # shares bytes with t1 but never both alive
    alias = Block("t4", "reshape of t2", 500, 1000, 2, 3, kind="alias")
    pairs = {(a.key, b.key) for a, b in overlapping_pairs([dying, out, later, alias])}
    assert pairs == {("t1", "t2"), ("t2", "t3")}   # t1/t3: disjoint lifetimes; t4 is t2's buffer (an alias)
    svg = memory_timeline("tl", [dying, out], ops=4, arena_bytes=2048, title="plan")
    hatch, = _rects(svg, "overlap")
    g = TimelineGeometry(ops=4, arena_bytes=2048)
    assert hatch.get("data-pair") == "t1,t2" and hatch.get("fill") == "url(#tl-hatch)"
    near = lambda value: pytest.approx(value, abs=0.01)  # noqa: E731  (coordinates are written to 2 decimals)
    assert float(hatch.get("y")) == near(g.y(1000)) and float(hatch.get("height")) == near(g.y(1500) - g.y(1000))
    assert float(hatch.get("x")) == near(g.x(2)) and float(hatch.get("width")) == near(g.x(3) - g.x(2))


def test_plan_blocks_read_the_plan_with_aliases_scratch_and_a_streamed_region():
    plan = {"tensors": [{"index": 0, "offset": 0, "bytes": 64, "first_op": -1, "last_op": 0, "alias_of": -1, "name": "in"},
                        {"index": 5, "offset": 0, "bytes": 64, "first_op": 0, "last_op": 1, "alias_of": 0, "name": "a/b;c"},
                        {"index": 6, "offset": 64, "bytes": 0, "first_op": 1, "last_op": 2, "alias_of": -1}],
            "scratch": [{"op": 1, "offset": 128, "bytes": 32}, {"op": 2, "offset": 256, "bytes": 900}],
            "streamed_groups": [{"ops": "2-4", "first_op": 2, "last_op": 4, "op_names": ["CONV_2D"] * 3,
                                 "region_bytes": 900, "windows": [], "why": "rows"}]}
    blocks = {b.key: b for b in plan_blocks(plan)}
    assert set(blocks) == {"t0", "t5", "s1", "s2"}   # a 0-byte tensor (a streamed window) has no box
    assert blocks["t5"].kind == "alias" and blocks["t5"].label == "t5 b"
    assert blocks["s1"].kind == "scratch" and (blocks["s1"].first_op, blocks["s1"].last_op) == (1, 1)
    region = blocks["s2"]
    assert region.kind == "region" and (region.first_op, region.last_op, region.size) == (2, 4, 900)


def test_split_bar_parts_fill_the_bar_in_proportion_and_show_the_capacity():
    svg = split_bar("flash", [("model", 300), ("code", 100)], capacity=4000, title="flash")
    parts = _rects(svg, "part")
    widths = [float(r.get("width")) for r in parts]
    assert [r.get("data-bytes") for r in parts] == ["300", "100"] and widths[0] == pytest.approx(3 * widths[1])
    assert sum(widths) == pytest.approx(740)   # the whole plot width: 760 - 2 x 10
    assert _rects(svg, "capacity")[0].get("data-capacity") == "4000" and "400 B used of 4,000 B (10.0%)" in svg


def test_flash_parts_add_the_rest_of_the_image_as_other():
    split = {"model": 10, "prepared": 20, "runtime_core": 5, "runtime_kernels": 6, "startup_protocol": 7, "libc": 2}
    parts = flash_parts({"bytes": 60, "model": 10, "method": "m", "split": split})
    assert parts[-1] == ("other", 10) and sum(v for _, v in parts) == 60


def test_bars_scale_linearly_and_carry_thresholds():
    svg = hbar_chart("b", [Bar("a", 100.0, group="x"), Bar("b", 50.0, group="y", mark=80.0)], axis_label="n", title="t")
    a, b = _rects(svg, "bar")
    assert float(a.get("width")) == pytest.approx(2 * float(b.get("width")))
    marker = [m for m in ET.fromstring(svg).iter(f"{{{NS['s']}}}line") if m.get("class") == "marker"]
    assert [m.get("data-mark") for m in marker] == ["80"]


def test_heatmap_colours_by_log_value_and_greys_cells_without_one():
    cells = [HeatCell("m", "b1", 1e3, ("1k",)), HeatCell("m", "b2", 1e6, ("1M",)),
             HeatCell("m", "b3", None, ("failed",), status="failed")]
    svg = heatmap("h", ["m"], ["b1", "b2", "b3"], cells, title="t", scale_label="instructions")
    fills = {r.get("data-column"): r.get("fill") for r in _rects(svg, "cell")}
    assert fills == {"b1": "#440154", "b2": "#fde725", "b3": "#dddddd"}   # viridis ends; grey
    close = heatmap("h", ["m"], ["b1", "b2"], [HeatCell("m", "b1", 264778, ()), HeatCell("m", "b2", 264678, ())],
                    title="t", scale_label="instructions")
    mid = [r.get("fill") for r in _rects(close, "cell")]
    assert mid[0] == mid[1] == "#21918c"   # 0.04 % apart: both mid-scale, not the two ends


def test_pages_are_self_contained(tmp_path):
    from edgekit.report_html.render import render_folder

    for kind in ("deploy", "lab"):
        folder = tmp_path / kind
        shutil.copytree(FIXTURES / kind, folder)
        html = render_folder(folder).read_text()
        assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "https://" not in html.split("<main>")[0] and "src=" not in html and "@import" not in html
        assert "default-src 'none'" in html
