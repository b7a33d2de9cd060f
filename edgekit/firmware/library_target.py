"""The core a library is built for (`edgekit firmware --emit library`): from a board profile or --cpu/--fpu/--float-abi,
validated against what the runtime's kernels serve, before anything is written."""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from edgekit.errors import UserError

# cpu -> (FPUs it can have, default FPU). The runtime's kernels and fast paths are built and tested for these cores
# (C kernels everywhere; DSP on M4/M7/M33; Helium on M55 where -mcpu implies MVE: fpu "auto").
CPU_FPUS: Dict[str, Tuple[Tuple[str, ...], str]] = {
    "cortex-m4": (("fpv4-sp-d16", "none"), "fpv4-sp-d16"),
    "cortex-m7": (("fpv5-d16", "fpv5-sp-d16", "none"), "fpv5-d16"),
    "cortex-m33": (("fpv5-sp-d16", "none"), "fpv5-sp-d16"),
    "cortex-m55": (("auto", "none"), "auto"),
}
FLOAT_ABIS = ("hard", "softfp", "soft")
# names a library must not take: C keywords, the runtime's own prefix, names the C library reserves
C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile
while _Bool _Complex _Imaginary""".split())
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class LibraryTarget:
    """The core, FPU and float ABI the library's prepared plan and prebuilt archive are for."""

    cpu: str
    fpu: str
    float_abi: str
    board: Optional[str] = None   # the board profile it came from, if any

    def gcc_flags(self) -> List[str]:
        flags = [f"-mcpu={self.cpu}", "-mthumb", f"-mfloat-abi={self.float_abi}"]
        if self.fpu not in ("none", "auto"):
            flags.append(f"-mfpu={self.fpu}")
        if self.cpu == "cortex-m55" and self.fpu == "none":
            flags[0] = "-mcpu=cortex-m55+nofp+nomve"
        return flags

    @property
    def name(self) -> str:
        return self.board or self.describe()

    def describe(self) -> str:
        return f"{self.cpu}, fpu {self.fpu}, float ABI {self.float_abi}" + (f" (board {self.board})" if self.board else "")


def library_target(board_name: Optional[str], cpu: Optional[str], fpu: Optional[str],
                   float_abi: Optional[str]) -> LibraryTarget:
    """The target of --board B or --cpu C [--fpu F] [--float-abi A]; a combination the kernels cannot serve is refused
    with the valid ones named."""
    if board_name and cpu:
        raise UserError("--board and --cpu both given", fix="give --board B (its core) or --cpu C [--fpu F], not both")
    if board_name:
        if fpu or float_abi:
            raise UserError("--fpu/--float-abi go with --cpu, not --board (the board profile names its FPU)",
                            fix="drop --fpu/--float-abi, or use --cpu instead of --board")
        from edgekit.firmware.boards import load_board

        board = load_board(board_name)
        target = LibraryTarget(board.cpu, board.fpu, board.float_abi, board.name)
    else:
        cpu = (cpu or "cortex-m4").lower()
        if cpu not in CPU_FPUS:
            raise UserError(f"--cpu {cpu}: the runtime's kernels are built for {', '.join(CPU_FPUS)} only",
                            fix="choose one of those cores (a Cortex-M0/M3 without the DSP extension is not served)")
        fpus, default = CPU_FPUS[cpu]
        fpu = fpu or default
        if fpu not in fpus:
            raise UserError(f"--cpu {cpu} --fpu {fpu}: a {cpu} has no {fpu} FPU; it takes {', '.join(fpus)}",
                            fix=f"use --fpu {default} (or none for a core without FPU)")
        float_abi = float_abi or ("soft" if fpu == "none" else "hard")
        target = LibraryTarget(cpu, fpu, float_abi)
    if target.float_abi not in FLOAT_ABIS:
        raise UserError(f"--float-abi {target.float_abi}: valid choices are {', '.join(FLOAT_ABIS)}",
                        fix="use hard (FPU registers), softfp or soft")
    if target.fpu == "none" and target.float_abi != "soft":
        raise UserError(f"{target.describe()}: a float ABI of {target.float_abi} needs an FPU",
                        fix="use --float-abi soft with --fpu none, or name the core's FPU")
    return target


def check_library_name(name: str) -> str:
    """``name`` when it can prefix every C symbol of the library; else a UserError saying why and what would do."""
    fix = "pass --name with letters, digits and underscores, starting with a letter (e.g. kws_model)"
    if not _IDENT.match(name or ""):
        raise UserError(f"--name {name!r} is not a C identifier (it prefixes every function and macro of the library)",
                        fix=fix)
    if name in C_KEYWORDS or keyword.iskeyword(name):
        raise UserError(f"--name {name!r} is a C keyword", fix=fix)
    lowered = name.lower()
    if lowered == "ek" or lowered.startswith("ek_"):
        raise UserError(f"--name {name!r} starts with ek_, the runtime's own prefix", fix=fix)
    if len(name) > 31:
        raise UserError(f"--name {name!r} is {len(name)} characters; keep it to 31 (C99's external-name limit)",
                        fix=fix)
    return name


def default_library_name(stem: str) -> str:
    """A C identifier from a model file's stem (kws_ref_model_int8 -> kws_ref_model_int8; 1-model -> m_1_model)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem).strip("_").lower() or "model"
    if not name[0].isalpha():
        name = "m_" + name
    if name.startswith("ek_") or name == "ek" or name in C_KEYWORDS:
        name = "model_" + name
    return name[:31]


def parse_arena_section(spec: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """--arena-section NAME[:BYTES] -> (section, capacity in bytes or None)."""
    if not spec:
        return None, None
    section, _, size = spec.partition(":")
    if not re.match(r"^\.?[A-Za-z_][A-Za-z0-9_.]*$", section):
        raise UserError(f"--arena-section {spec!r}: {section!r} is not a linker section name",
                        fix="pass e.g. --arena-section .dtcm or --arena-section .sram2:65536")
    if not size:
        return section, None
    try:
        capacity = int(size.replace("_", ""), 0)
    except ValueError:
        raise UserError(f"--arena-section {spec!r}: {size!r} is not a byte count",
                        fix="give the section's size in bytes, e.g. .sram2:65536 or .sram2:0x10000") from None
    if capacity <= 0:
        raise UserError(f"--arena-section {spec!r}: the size must be positive", fix="give the section's size in bytes")
    return section, capacity
