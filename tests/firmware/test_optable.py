"""The runtime's operator table (edgekit.firmware.optable, `edgekit ops`): scanned from the kernels' tags, in sync
with their ek_kernel definitions, and the table committed in firmware/runtime/README.md equal to the generated one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgekit.firmware import optable
from edgekit.firmware.support import EDGEKIT_OPS, KERNELS_DIR, kernel_files

README = Path(__file__).resolve().parents[2] / "firmware" / "runtime" / "README.md"


def test_every_ek_kernel_definition_has_a_tag_and_every_tag_a_definition():
    scan = optable.scan_kernels(KERNELS_DIR)
    assert scan.kernels, "no ek_kernel definitions found"
    assert optable.tag_problems(scan) == []
    # file by file: the ops a file defines are exactly the ops it tags
    for name in {f for f, _ in scan.kernels} | {f for f, _ in scan.tags}:
        assert sorted(op for f, op in scan.kernels if f == name) == sorted(e.op for f, e in scan.tags if f == name), name


def test_tag_problems_name_the_file_and_the_op(tmp_path):
    (tmp_path / "a.c").write_text("/* edgekit-op: FOO | types: int8 | versions: 1 | fast path: none */\n")
    (tmp_path / "b.c").write_text("const ek_kernel ek_kernel_bar = {EK_OP_BAR, \"BAR\", 0};\n"
                                  "/* edgekit-op: FOO | types: int8 | versions: 1 | fast path: none */\n")
    problems = optable.tag_problems(optable.scan_kernels(tmp_path))
    assert "b.c: ek_kernel for BAR has no '/* edgekit-op: BAR | ... */' tag" in problems
    assert any(p.startswith("a.c: tag for FOO but no") for p in problems)
    assert any(p.startswith("FOO is tagged more than once (a.c, b.c)") for p in problems)


def test_committed_readme_table_equals_the_generated_one():
    committed = optable.committed_block(README.read_text())
    generated = optable.to_markdown(optable.op_table(KERNELS_DIR))
    assert committed == generated, "stale op table: run `edgekit ops --markdown --write firmware/runtime/README.md`"


def test_support_check_uses_the_scanned_ops():
    entries = optable.op_table(KERNELS_DIR)
    assert EDGEKIT_OPS == tuple(e.op for e in entries)
    assert set(EDGEKIT_OPS) == set(kernel_files())
    for e in entries:
        assert e.types and e.versions and e.fast_path, e


def test_ops_command_text_json_markdown_and_write(cli, capsys, tmp_path):
    n = len(optable.op_table(KERNELS_DIR))
    assert cli("ops") == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["op", "types", "versions", "fast", "path", "kernel", "file"]
    assert f"{n} operators" in text and "CONV_2D" in text
    assert cli("ops", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["count"] == n and {"op", "types", "versions", "fast_path", "file"} <= set(data["ops"][0])
    conv = next(o for o in data["ops"] if o["op"] == "CONV_2D")
    assert conv["file"] == "conv_2d.c" and conv["types"] == ["int8"]
    assert cli("ops", "--markdown") == 0
    assert capsys.readouterr().out == optable.to_markdown(optable.op_table(KERNELS_DIR))
    doc = tmp_path / "README.md"
    doc.write_text(f"# x\n\n{optable.BEGIN}\nold\n{optable.END}\n\ntail\n")
    assert cli("ops", "--markdown", "--write", doc) == 0
    capsys.readouterr()
    written = doc.read_text()
    assert written.startswith("# x\n\n") and written.endswith(f"{optable.END}\n\ntail\n") and "old" not in written
    assert optable.committed_block(written) == optable.to_markdown(optable.op_table(KERNELS_DIR))


def test_ops_write_refuses_a_file_without_markers_and_leaves_it_unchanged(cli, capsys, tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text("# no markers\n")
    assert cli("ops", "--markdown", "--write", doc) != 0
    err = capsys.readouterr().err
    assert "edgekit-ops:begin" in err
    assert doc.read_text() == "# no markers\n"
    assert cli("ops", "--write", doc) != 0
    assert "--markdown" in capsys.readouterr().err
