"""The edgekit runtime's operator table, read from the kernel sources (not kept by hand).

Every kernel file in ``firmware/runtime/src/kernels/`` carries one tag line per operator it implements::

    /* edgekit-op: SUB | types: int8, int16 | versions: 1-3 | fast path: none */

``scan_kernels`` reads those tags and the ``const ek_kernel ek_kernel_<name> = {EK_OP_<NAME>, ...}`` definitions;
``tag_problems`` lists every mismatch between the two (a definition without a tag, a tag without a definition, a
tag written twice). ``edgekit ops`` prints the table; ``edgekit ops --markdown --write firmware/runtime/README.md``
regenerates the table between the README's ``<!-- edgekit-ops:begin -->`` / ``<!-- edgekit-ops:end -->`` markers.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

from edgekit.errors import UserError

log = logging.getLogger(__name__)

TAG_RE = re.compile(r"/\*\s*edgekit-op:\s*(\w+)\s*\|\s*types:\s*([^|]*?)\s*\|\s*versions:\s*([^|]*?)\s*\|"
                    r"\s*fast path:\s*(.*?)\s*\*/")
KERNEL_RE = re.compile(r"const\s+ek_kernel\s+ek_kernel_(\w+)\s*=\s*\{\s*EK_OP_(\w+)")
BEGIN, END = "<!-- edgekit-ops:begin -->", "<!-- edgekit-ops:end -->"


@dataclass(frozen=True)
class OpEntry:
    """One operator the runtime implements, as its kernel file's tag states it."""

    op: str
    types: Tuple[str, ...]
    versions: str
    fast_path: str
    file: str


@dataclass(frozen=True)
class KernelScan:
    """Tags and ``ek_kernel`` definitions found in one kernels folder."""

    tags: Tuple[Tuple[str, OpEntry], ...]      # (file, entry) in file order, duplicates kept
    kernels: Tuple[Tuple[str, str], ...]       # (file, op) of every ek_kernel definition

    @property
    def entries(self) -> List[OpEntry]:
        """One entry per op (the first tag wins), sorted by op name."""
        seen: Dict[str, OpEntry] = {}
        for _, entry in self.tags:
            seen.setdefault(entry.op, entry)
        return [seen[k] for k in sorted(seen)]


@lru_cache(maxsize=4)
def _scan(kernels_dir: str) -> KernelScan:
    tags: List[Tuple[str, OpEntry]] = []
    kernels: List[Tuple[str, str]] = []
    for path in sorted(Path(kernels_dir).glob("*.c")):
        text = path.read_text(errors="replace")
        for m in TAG_RE.finditer(text):
            types = tuple(t.strip() for t in m.group(2).split(",") if t.strip())
            tags.append((path.name, OpEntry(m.group(1), types, m.group(3), m.group(4), path.name)))
        kernels.extend((path.name, m.group(2)) for m in KERNEL_RE.finditer(text))
    return KernelScan(tuple(tags), tuple(kernels))


def scan_kernels(kernels_dir: Path) -> KernelScan:
    """The tags and kernel definitions of every ``*.c`` file in ``kernels_dir`` (cached per folder)."""
    return _scan(str(kernels_dir))


def tag_problems(scan: KernelScan) -> List[str]:
    """Every mismatch between tags and ``ek_kernel`` definitions (empty when they agree file by file)."""
    problems = []
    tagged = {(f, e.op) for f, e in scan.tags}
    defined = set(scan.kernels)
    for f, op in sorted(defined - tagged):
        problems.append(f"{f}: ek_kernel for {op} has no '/* edgekit-op: {op} | ... */' tag")
    for f, op in sorted(tagged - defined):
        problems.append(f"{f}: tag for {op} but no 'const ek_kernel ... = {{EK_OP_{op}' in that file")
    ops = [e.op for _, e in scan.tags]
    for op in sorted({o for o in ops if ops.count(o) > 1}):
        problems.append(f"{op} is tagged more than once ({', '.join(f for f, e in scan.tags if e.op == op)})")
    return problems


def op_table(kernels_dir: Path) -> List[OpEntry]:
    """The runtime's operators, sorted by name."""
    return scan_kernels(kernels_dir).entries


def to_json(entries: List[OpEntry]) -> str:
    return json.dumps({"count": len(entries), "ops": [asdict(e) | {"types": list(e.types)} for e in entries]},
                      indent=2) + "\n"


def to_markdown(entries: List[OpEntry]) -> str:
    lines = [f"{len(entries)} operators (generated from the kernels' `edgekit-op` tags by "
             "`edgekit ops --markdown --write firmware/runtime/README.md`; do not edit by hand).", "",
             "| op | types | versions | Cortex-M fast path | kernel file |", "|---|---|---|---|---|"]
    for e in entries:
        lines.append(f"| {e.op} | {', '.join(e.types)} | {e.versions} | {e.fast_path} | `{e.file}` |")
    return "\n".join(lines) + "\n"


def to_text(entries: List[OpEntry]) -> str:
    rows = [("op", "types", "versions", "fast path", "kernel file")]
    rows += [(e.op, ", ".join(e.types), e.versions, e.fast_path, e.file) for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    out.append(f"{len(entries)} operators")
    return "\n".join(out) + "\n"


def replace_block(document: str, block: str, name: str = "the document") -> str:
    """``document`` with the text between the BEGIN and END markers replaced by ``block``."""
    if document.count(BEGIN) != 1 or document.count(END) != 1 or document.index(BEGIN) > document.index(END):
        raise UserError(f"{name} has no single '{BEGIN}' ... '{END}' block to replace",
                        fix=f"add the two marker lines where the op table belongs, {BEGIN} before {END}")
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}{END}{tail}"


def committed_block(document: str) -> str:
    """The text between the markers (what ``replace_block`` wrote)."""
    if BEGIN not in document or END not in document:
        return ""
    return document.split(BEGIN, 1)[1].split(END, 1)[0].lstrip("\n")

