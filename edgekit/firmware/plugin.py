"""The ekcount QEMU TCG plugin (firmware/qemu_plugin/ekcount.c): build it, point it at an ELF's marker
functions, and read its per-inference and per-operator instruction counts."""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from edgekit._resources import build_root, data_dir
from edgekit.errors import DeviceError, InternalError, ToolMissingError, UserError
from edgekit.progress import step_progress

log = logging.getLogger(__name__)

PLUGIN_SOURCE = data_dir("firmware") / "qemu_plugin" / "ekcount.c"
PLUGIN_CFLAGS = ("-O2", "-g", "-Wall", "-Wextra", "-std=gnu99", "-shared", "-fPIC", "-fvisibility=hidden")

# plugin argument -> ELF symbol (firmware/boards/common/ek_markers.S)
MARKERS = {
    "ib": "ek_marker_infer_begin",
    "ie": "ek_marker_infer_end",
    "ob": "ek_marker_op_begin",
    "oe": "ek_marker_op_end",
}


def build_dir() -> Path:
    """Where host-built helpers are cached (edgekit._resources.build_root)."""
    return build_root()


def build_plugin(cache_dir: Optional[Path] = None) -> Path:
    """Compile ekcount.so with the host gcc (cached by source hash; safe when several processes race)."""
    compiler = shutil.which("gcc")
    if not compiler:
        raise ToolMissingError("gcc (host compiler, for the QEMU plugin)", "apt-get install gcc")
    source = PLUGIN_SOURCE.read_bytes()
    key = hashlib.sha256(source + " ".join(PLUGIN_CFLAGS).encode()).hexdigest()[:16]
    target_dir = Path(cache_dir or build_dir() / "qemu_plugin") / key
    target = target_dir / "ekcount.so"
    if target.is_file():
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ekcount-", suffix=".so", dir=target_dir)
    os.close(fd)
    built = step_progress("QEMU plugin", 1)
    try:
        proc = subprocess.run([compiler, *PLUGIN_CFLAGS, "-o", tmp, str(PLUGIN_SOURCE)],
                              capture_output=True, text=True, timeout=120)
        built(1)
        if proc.returncode != 0:
            raise InternalError(f"building the QEMU plugin failed:\n{proc.stderr.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    log.debug("built %s", target)
    return target


def marker_addresses(elf: Path) -> Dict[str, int]:
    """Addresses of the marker functions present in the ELF (Thumb bit cleared), by plugin argument name."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(elf, "rb") as handle:
            symtab = ELFFile(handle).get_section_by_name(".symtab")
            if symtab is None:
                raise UserError(f"{elf} has no symbol table", fix="do not strip the firmware ELF")
            found = {}
            for arg, name in MARKERS.items():
                symbols = symtab.get_symbol_by_name(name)
                if symbols:
                    found[arg] = int(symbols[0]["st_value"]) & ~1
    except (OSError, ELFError) as exc:
        raise UserError(f"cannot read the firmware ELF {elf}: {exc}", fix="pass a firmware .elf built by edgekit") from exc
    return found


def plugin_argument(plugin: Path, out_file: Path, addresses: Dict[str, int], mode: str = "tb") -> str:
    """The value of QEMU's -plugin option."""
    if mode not in ("tb", "insn"):
        raise UserError(f"plugin mode {mode!r} must be tb or insn")
    for path in (plugin, out_file):
        if "," in str(path):
            raise UserError(f"path {path} contains a comma, which QEMU's -plugin option cannot carry",
                            fix="use a folder without commas")
    parts = [str(plugin), f"out={out_file}", f"mode={mode}"]
    parts += [f"{arg}=0x{addr:x}" for arg, addr in sorted(addresses.items())]
    return ",".join(parts)


# ekcount's tallies that are not instruction classes (every instruction is in exactly one of the others)
EXTRA_TALLIES = ("load_multiple_registers", "store_multiple_registers", "load_multiple_pc", "branch_conditional_taken")


@dataclass
class InferenceCount:
    instructions: int                                   # from the begin marker to the end marker
    op_instructions: List[int] = field(default_factory=list)  # per operator, in execution order
    # executed instructions per class (ekcount's "# classes" names; *_registers count transferred registers,
    # branch_conditional_taken the conditional branches taken) from the begin marker to the end marker
    classes: Optional[Dict[str, int]] = None


@dataclass
class PluginCounts:
    inferences: List[InferenceCount]
    total_instructions: Optional[int]                   # everything QEMU ran (written at exit), or None
    open_inference: bool = False                        # an inference began but did not end (hang/fault)


def parse_counts(path: Path) -> PluginCounts:
    """Read ekcount's output file (complete or still being written)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise DeviceError(f"the QEMU instruction-count plugin wrote no output ({exc})") from exc
    inferences: List[InferenceCount] = []
    total = None
    begin = op_begin = None
    ops: List[int] = []
    class_names: List[str] = []
    classes_at: List[int] = []      # the class counters written right after the last B or E
    classes_begin: Optional[List[int]] = None
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("# classes "):
            class_names = line.split()[2:]
            continue
        if not line or line.startswith("#"):
            continue
        kind, _, value = line.partition(" ")
        if kind == "C":
            fields = value.split()
            if len(fields) != len(class_names) or not all(f.isdigit() for f in fields):
                if number == len(lines):
                    break  # last line still being written
                raise DeviceError(f"{path}:{number}: unreadable plugin class counts {line!r}")
            classes_at = [int(f) for f in fields]
            if begin is not None and classes_begin is None:
                classes_begin = classes_at
            elif inferences and inferences[-1].classes is None and classes_begin is not None:
                inferences[-1].classes = {n: b - a for n, a, b in zip(class_names, classes_begin, classes_at)}
                classes_begin = None
            continue
        if not value.strip().isdigit():
            if number == len(text.splitlines()):
                break  # last line still being written
            raise DeviceError(f"{path}:{number}: unreadable plugin output line {line!r}")
        count = int(value)
        if kind == "B":
            begin, ops, op_begin, classes_begin = count, [], None, None
        elif kind == "b" and begin is not None:
            op_begin = count
        elif kind == "e" and op_begin is not None:
            ops.append(count - op_begin)
            op_begin = None
        elif kind == "E" and begin is not None:
            inferences.append(InferenceCount(count - begin, ops))
            begin = None
        elif kind == "X":
            total = count
        elif kind not in "BbeE":
            raise DeviceError(f"{path}:{number}: unknown plugin event {kind!r}")
    return PluginCounts(inferences, total, open_inference=begin is not None)
