"""Flash and RAM of a linked firmware: ELF sections (pyelftools) and a static stack estimate (gcc call graph).

Flash = .text + read-only data (the model array included) + the .data initialisation image.
RAM = .data + .bss (the arena and runtime state arrays live in .bss) + the stack, which is either
measured (high-water mark of a QEMU run) or estimated here from ``-fstack-usage -fcallgraph-info=su``:
the deepest call chain from the entry point, where an indirect call (the kernels' prepare/eval through the
ek_kernel table) may reach any function that is never called directly. Frames of library functions compiled
without the flags (newlib's memcpy, ...) are unknown and counted as 0; recursion makes the estimate unbounded.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

log = logging.getLogger(__name__)

MODEL_SYMBOL = "ek_model_data"
STACK_SECTION_NAMES = (".stack", ".stack_dummy", ".heap", ".heap_dummy")
EXCEPTION_FRAME_BYTES = 104  # Cortex-M exception entry with an FP context (26 words); added once for interrupts


@dataclass
class ElfSizes:
    """Bytes per role in a linked ELF."""

    text: int
    rodata: int
    data: int
    bss: int
    reserved_stack: int              # NOBITS sections named like a stack/heap reservation (part of bss)
    model: int                       # size of the ek_model_data symbol (0 if absent)
    sections: Dict[str, Dict[str, int]] = field(default_factory=dict)

    @property
    def flash_bytes(self) -> int:
        return self.text + self.rodata + self.data

    @property
    def static_ram_bytes(self) -> int:
        """.data + .bss without a linker-reserved stack/heap (that is accounted for separately)."""
        return self.data + self.bss - self.reserved_stack

    @property
    def code_bytes(self) -> int:
        """Flash that is not the model: code, constants, .data image."""
        return self.flash_bytes - self.model

    def to_json(self) -> dict:
        return {"text": self.text, "rodata": self.rodata, "data": self.data, "bss": self.bss,
                "reserved_stack_heap": self.reserved_stack, "model": self.model, "flash_bytes": self.flash_bytes,
                "static_ram_bytes": self.static_ram_bytes, "sections": self.sections}


def elf_sizes(elf: Path) -> ElfSizes:
    """Classify allocated sections by their flags (exec / read-only / writable / zero-initialised)."""
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    text = rodata = data = bss = reserved = model = 0
    sections: Dict[str, Dict[str, int]] = {}
    with open(elf, "rb") as handle:
        f = ELFFile(handle)
        for s in f.iter_sections():
            flags = s["sh_flags"]
            if not flags & SH_FLAGS.SHF_ALLOC or s["sh_size"] == 0:
                continue
            size = int(s["sh_size"])
            sections[s.name] = {"address": int(s["sh_addr"]), "bytes": size}
            if s["sh_type"] == "SHT_NOBITS":
                bss += size
                if s.name.startswith(STACK_SECTION_NAMES):
                    reserved += size
            elif flags & SH_FLAGS.SHF_EXECINSTR:
                text += size
            elif flags & SH_FLAGS.SHF_WRITE:
                data += size
            else:
                rodata += size
        symtab = f.get_section_by_name(".symtab")
        if symtab is not None:
            for sym in symtab.get_symbol_by_name(MODEL_SYMBOL) or []:
                model = max(model, int(sym["st_size"]))
    return ElfSizes(text, rodata, data, bss, reserved, model, sections)


# --- static stack estimate ---------------------------------------------------------------------------------

_NODE = re.compile(r'node:\s*\{\s*title:\s*"([^"]+)"\s*label:\s*"([^"]*)"')
_EDGE = re.compile(r'edge:\s*\{\s*sourcename:\s*"([^"]+)"\s*targetname:\s*"([^"]+)"')
_FRAME = re.compile(r"(\d+) bytes \((static|dynamic|dynamic,bounded)\)")
INDIRECT = "__indirect_call"


@dataclass
class StackEstimate:
    bytes: Optional[int]            # None when unbounded (recursion or dynamic frames)
    chain: List[str]
    method: str
    unknown_frames: List[str] = field(default_factory=list)
    dynamic_frames: List[str] = field(default_factory=list)
    recursion: bool = False

    def to_json(self) -> dict:
        return {"bytes": self.bytes, "chain": self.chain, "method": self.method,
                "unknown_frames": sorted(self.unknown_frames)[:20], "dynamic_frames": self.dynamic_frames,
                "recursion": self.recursion}


def _read_callgraphs(files: Iterable[Path]) -> Tuple[Dict[str, int], Dict[str, Set[str]], Set[str]]:
    frames: Dict[str, int] = {}
    edges: Dict[str, Set[str]] = {}
    dynamic: Set[str] = set()
    for path in files:
        text = path.read_text(errors="replace")
        for title, label in _NODE.findall(text):
            m = _FRAME.search(label.replace("\\n", "\n"))
            if m:
                frames[title] = int(m.group(1))
                if m.group(2) != "static":
                    dynamic.add(title)
        for src, dst in _EDGE.findall(text):
            edges.setdefault(src, set()).add(dst)
    return frames, edges, dynamic


def elf_functions(elf: Path) -> Set[str]:
    """Names of the functions that survived linking (--gc-sections drops the unused ones)."""
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as handle:
        symtab = ELFFile(handle).get_section_by_name(".symtab")
        return {s.name for s in symtab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"} if symtab else set()


_CALL_RELOCS = {"R_ARM_THM_CALL", "R_ARM_CALL", "R_ARM_THM_JUMP24", "R_ARM_JUMP24", "R_ARM_THM_JUMP19",
                "R_ARM_PLT32", "R_ARM_THM_JUMP11", "R_ARM_THM_JUMP8"}


def address_taken(build_dir: Path) -> Set[str]:
    """Functions whose address is stored or loaded somewhere (function-pointer tables, vector table, callbacks):
    every relocation against a function that is not a call, read from the object files."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
    from elftools.elf.descriptions import describe_reloc_type

    taken: Set[str] = set()
    for obj in sorted(Path(build_dir).rglob("*.o")):
        with open(obj, "rb") as handle:
            f = ELFFile(handle)
            for section in f.iter_sections():
                if not isinstance(section, RelocationSection) or ".debug" in section.name:
                    continue
                symtab = f.get_section(section["sh_link"])
                for reloc in section.iter_relocations():
                    if describe_reloc_type(reloc["r_info_type"], f) in _CALL_RELOCS:
                        continue
                    sym = symtab.get_symbol(reloc["r_info_sym"])
                    kind = sym["st_info"]["type"]
                    if kind == "STT_FUNC":
                        taken.add(sym.name)
                    elif kind == "STT_SECTION" and sym["st_shndx"] not in ("SHN_UNDEF", "SHN_ABS"):
                        name = f.get_section(sym["st_shndx"]).name
                        if name.startswith(".text."):  # -ffunction-sections: .text.<function>
                            taken.add(name[len(".text."):])
    return taken


def estimate_stack(build_dir: Path, entry: str = "main", *, linked: Optional[Set[str]] = None) -> StackEstimate:
    """Worst-case stack depth from ``entry`` over the call graph in ``build_dir``'s .ci files (+ one exception frame).

    Indirect calls may reach any linked function whose address is taken (relocations in the object files);
    ``linked``: function names in the final ELF (the linker dropped the others)."""
    files = sorted(Path(build_dir).rglob("*.ci"))
    method = ("static estimate: deepest call chain from gcc -fstack-usage -fcallgraph-info=su; an indirect call may "
              "reach any linked function whose address is taken (object-file relocations); "
              f"+ {EXCEPTION_FRAME_BYTES} B for one exception frame; library frames without stack info count 0")
    if not files:
        return StackEstimate(None, [], "no call graph files (-fcallgraph-info=su) found: no estimate")
    frames, edges, dynamic = _read_callgraphs(files)
    callers: Dict[str, Set[str]] = {}
    for src, targets in edges.items():
        for dst in targets:
            callers.setdefault(dst, set()).add(src)
    above_entry: Set[str] = set()  # the startup code that calls the entry cannot be an indirect target
    todo = [f for f in frames if f == entry or f.endswith(":" + entry)]
    while todo:
        for caller in callers.get(todo.pop(), ()):
            if caller not in above_entry:
                above_entry.add(caller)
                todo.append(caller)
    taken = address_taken(Path(build_dir))
    indirect_targets = [f for f in frames if f.rsplit(":", 1)[-1] in taken and f not in above_entry
                        and f != entry and not f.endswith(":" + entry)
                        and (linked is None or f.rsplit(":", 1)[-1] in linked)]
    unknown: Set[str] = set()
    recursion = False
    memo: Dict[str, Tuple[int, List[str]]] = {}
    active: Set[str] = set()

    def depth(fn: str) -> Tuple[int, List[str]]:
        nonlocal recursion
        if fn in memo:
            return memo[fn]
        if fn in active:
            if fn == INDIRECT:  # pointer calls nested inside a pointer call: counted once
                return 0, []
            recursion = True
            return 0, [fn + " (recursion)"]
        active.add(fn)
        own = frames.get(fn)
        if own is None and fn != INDIRECT:
            unknown.add(fn)
        targets = set(edges.get(fn, ()))
        if fn == INDIRECT:  # a dispatcher reached through a pointer is not taken to call itself again
            targets = {t for t in indirect_targets if t not in active}
        best: Tuple[int, List[str]] = (0, [])
        for t in sorted(targets):
            d = depth(t)
            if d[0] > best[0]:
                best = d
        active.discard(fn)
        result = ((own or 0) + best[0], ([] if fn == INDIRECT else [fn]) + best[1])
        memo[fn] = result
        return result

    candidates = [entry] if entry in frames else [f for f in frames if f.endswith(":" + entry)]
    if not candidates:
        return StackEstimate(None, [], f"entry {entry!r} not found in the call graph: no estimate")
    total, chain = depth(candidates[0])
    bounded = not recursion and not (set(chain) & dynamic)
    return StackEstimate(total + EXCEPTION_FRAME_BYTES if bounded else None, chain, method, sorted(unknown),
                         sorted(set(chain) & dynamic), recursion)


# --- flash split from the linker map -------------------------------------------------------------------------

_MAP_ENTRY = re.compile(r"^ (\S+)?\s*0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S+)$")
_FLASH_OUTPUT = (".vectors", ".isr_vector", ".text", ".rodata", ".data", ".ARM.exidx", ".ARM.extab", ".init_array",
                 ".fini_array", ".preinit_array", ".init", ".fini")


def flash_split(map_path: Path) -> Dict[str, int]:
    """Flash bytes by role from a GNU ld map (-Wl,-Map): model, prepared model data, the generated model API,
    runtime core, kernels,
    startup + protocol + board, C library. Input sections of allocated, loaded output sections only."""
    text = Path(map_path).read_text(errors="replace")
    start = text.find("Linker script and memory map")
    lines = text[start:].splitlines() if start >= 0 else []
    split = {"model": 0, "prepared": 0, "model_api": 0, "runtime_core": 0, "runtime_kernels": 0, "startup_protocol": 0,
             "libc": 0}
    output = ""
    pending: Optional[str] = None
    for line in lines:
        if line and not line[0].isspace():
            output = line.split()[0]
            pending = None
            continue
        if output not in _FLASH_OUTPUT:
            continue
        stripped = line.strip()
        if stripped.startswith(".") and len(stripped.split()) == 1:
            pending = stripped  # long input-section name: address, size and file follow on the next line
            continue
        m = _MAP_ENTRY.match(line if pending is None else f" {pending} {stripped}")
        pending = None
        if not m or "*fill*" in line:
            continue
        size, origin = int(m.group(3), 16), m.group(4)
        if size == 0 or origin.startswith("0x"):
            continue
        split[_role(origin)] += size
    return split


def _role(origin: str) -> str:
    if origin.endswith("model/model_data.c.o"):
        return "model"
    if origin.endswith("model/prepared_data.c.o"):
        return "prepared"
    if origin.endswith(("model/edgekit_model.c.o", "model/edgekit_model_memory.c.o")):
        return "model_api"  # the generated per-model C API (edgekit.firmware.app_api), the app's own glue before
    if "/runtime/src/kernels/" in origin:
        return "runtime_kernels"
    if "/runtime/src/" in origin:
        return "runtime_core"
    if origin.endswith(".o") and not ".a(" in origin:
        return "startup_protocol"
    return "libc"
