"""`edgekit firmware`: an int8 .tflite -> a self-contained Cortex-M project (edgekit runtime), sized to the board.

Order of work, so that a bad model or a model that does not fit leaves nothing behind:
read + support check (every unsupported op listed at once) -> memory plan with the runtime's own planner
(HostRuntime) -> early fit check (model vs flash, arena + state + stack reservation vs RAM) -> write the project
into a staging folder -> link it with its own Makefile to measure flash and RAM from the ELF -> exact fit check
-> firmware.json + README.md + report.html -> atomic move into place.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from edgekit import __version__
from edgekit._resources import data_dir
from edgekit.atomic import atomic_output_dir
from edgekit.errors import DoesNotFitError, InvalidModelError, UserError
from edgekit.firmware import build as fw_build
from edgekit.firmware.constants import CompactConstants, compact_constants, keeps_whole_model, unread_constants
from edgekit.firmware import weight_budget as B
from edgekit.firmware.kernel_paths import group_paths, needed_paths, path_defines
from edgekit.firmware.sizes import ElfSizes, StackEstimate, elf_functions, elf_sizes, estimate_stack, flash_split
from edgekit.firmware.support import KERNELS_DIR, kernel_files, require_support
from edgekit.progress import step_progress
from edgekit.tflite_graph import Graph, read_graph
from edgekit.firmware.plan_types import (BuildRecord, DeviceFigures, FitReport, FlashFigures, HarnessApp, MemoryPlan,
                                         FlashBudget, ModeFigures, OpRow, OverlapRow, PlainPlan, ProjectFiles,
                                         RamFigures,
                                         StackFigure, StreamedGroupRow, TensorJson, VsTflm,
                                         WeightLayouts)
from edgekit.firmware.results import FirmwareInfo, read_firmware_info
from edgekit.run.results import Signature
from edgekit.provenance import host_info, sha256_bytes, sha256_file, tool_versions, utc_now
from edgekit.report import json_safe

log = logging.getLogger(__name__)

FIRMWARE_DIR = data_dir("firmware")
RUNTIME_DIR = FIRMWARE_DIR / "runtime"
TEMPLATES = FIRMWARE_DIR / "templates"
APP_FILES = ("main.c", "ek_serve.c", "ek_serve.h")
PROTOCOL_FILES = ("ek_proto.c", "ek_proto.h")
FIRMWARE_JSON = "firmware.json"
MODEL_FILE = "model.tflite"
DEFAULT_BOARD = "mps2-an386"
TOOLS = ("edgekit", "numpy", "ai-edge-litert", "tflite-micro", "pyelftools")
# Tensor data is read in place from flash; 16 B keeps every int32/float constant aligned, as TFLite requires.
MODEL_ALIGN = 16


@dataclass(frozen=True)
class AppSpec:
    """The application linked around the runtime and model (default: app/main.c serving edgekit's framed protocol).
    Other apps (e.g. edgekit.firmware.mlperf: the MLPerf Tiny harness) go through the same generation path."""

    name: str = "edgekit-protocol"
    files: Tuple[Tuple[Path, str], ...] = tuple((FIRMWARE_DIR / "app" / f, f"app/{f}") for f in APP_FILES) + \
        tuple((FIRMWARE_DIR / "protocol" / f, f"protocol/{f}") for f in PROTOCOL_FILES)
    config: Tuple[Tuple[str, str], ...] = ()   # extra #defines for model/ek_config.h
    boot_check: bool = True                    # boot it under QEMU with edgekit's protocol to measure the stack
    info: Optional[HarnessApp] = None          # added to firmware.json as "app"
    board: Any = None                          # a modified Board to build for (e.g. another baud rate)


DEFAULT_APP = AppSpec()


@dataclass
class FirmwareResult:
    outdir: Path
    info: FirmwareInfo                   # the content of firmware.json
    elf: Optional[Path]                  # build/firmware.elf when built and kept

    @property
    def fits(self) -> bool:
        return self.info.fits_board


# --- small helpers -------------------------------------------------------------------------------------------

def render(template: str, values: Mapping[str, Union[str, int, None]], *, name: str = "template") -> str:
    """Replace {{NAME}} placeholders; every placeholder must be given (Makefile `$(...)` stays untouched)."""
    missing = sorted(set(re.findall(r"\{\{(\w+)\}\}", template)) - set(values))
    if missing:
        raise KeyError(f"{name}: no value for {', '.join(missing)}")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: str(values[m.group(1)]), template)


def c_array(data: bytes, name: str, *, per_line: int = 16) -> str:
    """A ``const uint8_t name[]`` initializer body: 0x.. bytes, 16 per line."""
    hexes = [f"0x{b:02x}" for b in data]
    lines = [", ".join(hexes[i:i + per_line]) for i in range(0, len(hexes), per_line)]
    return ",\n  ".join(lines)


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")[:120] + '"'


def load_model_bytes(model: Union[Path, str, bytes]) -> Tuple[bytes, str]:
    """The model's flatbuffer (files packed after it by the TFLite metadata writer stay on the host)."""
    from edgekit.mobile.tflite_metadata import model_part

    if isinstance(model, (bytes, bytearray)):
        return model_part(bytes(model)), "<bytes>"
    path = Path(model)
    if path.is_dir():
        candidate = path / MODEL_FILE
        if not candidate.is_file():
            raise InvalidModelError(f"{path} is a folder without {MODEL_FILE}", fix="pass the int8 .tflite file")
        path = candidate
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidModelError(f"cannot read model {path}: {exc.strerror}", fix="check the path") from exc
    return model_part(data), str(path)


def firmware_sources_hash() -> str:
    """Hash of every firmware source and template (cache key for generated builds)."""
    h = hashlib.sha256(__version__.encode())
    for sub in ("runtime/include", "runtime/src", "boards", "app", "protocol", "templates"):
        for path in sorted((FIRMWARE_DIR / sub).rglob("*")):
            if path.is_file() and "host" not in path.relative_to(FIRMWARE_DIR).parts:
                h.update(str(path.relative_to(FIRMWARE_DIR)).encode() + b"\0" + path.read_bytes())
    # the app's model API is rendered by app_api.py / library.py; kernel_paths.py picks the optional kernel paths,
    # weight_budget.py the ops that keep re-laid-out weights (--weights auto)
    for module in ("generate.py", "app_api.py", "library.py", "kernel_paths.py", "weight_budget.py"):
        h.update(Path(__file__).with_name(module).read_bytes())
    return h.hexdigest()


# --- the plan and the early fit check ------------------------------------------------------------------------

OPTIMIZE_MODES = ("speed", "balanced", "ram")
DEFAULT_OPTIMIZE = "balanced"
TENSOR_RECORD_BYTES_32 = 56     # sizeof(ek_tensor) on a 32-bit MCU (one per decoded tensor slot)
PREPARED_OBJECT_BYTES_32 = 212  # sizeof(ek_prepared) on a 32-bit MCU (arm-none-eabi-gcc -mcpu=cortex-m4; the device reports it; 164 before ek_op_params grew with the options of issue 25's ops and ek_context with resource-variable state, 204 before the LSTM options)


def plans_for_mve(board) -> bool:
    """Helium boards run kernels that read some windows in place: their overlaps are planned for that."""
    return board is not None and any(f in ("-mcpu=cortex-m55", "-mcpu=cortex-m85") or "+mve" in f
                                     for f in board.gcc_flags())


def memory_plan(model: bytes, graph: Graph, source: str, optimize: str = DEFAULT_OPTIMIZE,
                board=None, flash_layouts: bool = True, plain: Optional[PlainPlan] = None,
                relaid_ops: Optional[Sequence[int]] = None) -> MemoryPlan:
    """The runtime's own plan (same planner code as on the device), prepared for ``optimize``: the overlapped plan,
    the prepared blob (pointer-free; flash), and the plain in-place .tflite plan it replaces, with tensor names.
    ``flash_layouts=False``: weights stay int8 in the blob (no re-laid-out copies; see choose_memory_plan).
    ``plain``: another plan's ``plain`` figures of the same model (the in-place path does not depend on the mode).
    ``relaid_ops``: a per-op choice (--weights auto's budget): only these ops take their re-laid-out copies."""
    from edgekit.firmware.host_runtime import HostRuntime

    rt = HostRuntime(model, source=source, optimize=optimize, plan_mve=plans_for_mve(board),
                     flash_layouts=flash_layouts, relaid_ops=relaid_ops)
    prepared = rt.prepared
    plan = dict(prepared["plan"])
    names = lambda i: graph.tensors[i].name if i < len(graph.tensors) else "?"  # noqa: E731
    for entry in plan["tensors"]:
        entry["name"] = names(entry["index"])
    plan["op_names"] = rt.op_names
    plan["optimize"] = optimize
    plan["prepared_blob"] = prepared["blob"]
    plan["prepared_bytes"] = len(prepared["blob"])
    plan["state_slots"] = prepared["state_slots"]
    int8_ops = None if relaid_ops is None else [i for i in range(len(graph.ops)) if i not in set(relaid_ops)]
    plan["kernel_paths"] = needed_paths(graph, int8_weights=not flash_layouts,  # EK_NEED_* macros of its optional paths
                                        int8_ops=int8_ops)
    # mutable RAM on a 32-bit device: the tensor slots + the ek_prepared object (the host's pointers are wider)
    plan["state_bytes"] = prepared["state_slots"] * TENSOR_RECORD_BYTES_32 + 8 + PREPARED_OBJECT_BYTES_32
    plan["overlaps"] = [dict(o, op_name=rt.op_names[o["op"]]) for o in prepared["overlaps"]]
    plan["streamed_groups"] = [dict(g, ops=rt.op_names[g["first_op"]:g["last_op"] + 1],
                                    windows=[dict(w, name=names(w["tensor"])) for w in g["windows"]])
                               for g in prepared["streamed_groups"]]
    plan["kernel_paths"] = sorted(set(plan["kernel_paths"]) | set(group_paths(g["ops"] for g in plan["streamed_groups"])))
    # the in-place .tflite path as a device loading the model at run time plans it (an export init may keep
    # re-laid-out weights in its state, which the prepared blob takes to flash: not that path's RAM)
    if plain is None:
        in_place = HostRuntime(model, source=source).plan if flash_layouts else rt.plan
        plain = {"arena_bytes": in_place["arena_bytes"], "state_bytes_host": in_place["state_bytes"],
                 "persistent_bytes": in_place["persistent_bytes"]}
    plan["plain"] = dict(plain)
    plan["weight_layouts"] = weight_layouts_report(model, graph, prepared["blob"], flash_layouts)
    return plan


def weight_layouts_report(model: bytes, graph: Graph, blob: bytes, flash_layouts: bool) -> WeightLayouts:
    """What the weights cost in flash with this prepared blob (measured from it): the constants kept, the blob, and the
    originals left out because every op reading them uses its copy (EKP_UNREAD)."""
    whole = keeps_whole_model(graph.op_names)
    kept = len(model) if whole else len(compact_constants(model, blob).data)
    dropped, dropped_bytes = unread_constants(blob)
    what = ("kernels keep re-laid-out weights in the prepared blob (CONV_2D's expanded int16 records, "
            "FULLY_CONNECTED's int16 pairs on Cortex-M4)" if flash_layouts else
            "weights kept int8 (FULLY_CONNECTED dots them with SXTB16 on the fly on Cortex-M4)")
    return {"flash_layouts": flash_layouts,
            "note": f"{what}; flash holds {kept:,} B of the .tflite's constants + the {len(blob):,} B prepared blob; "
                    f"{dropped} original constant(s), {dropped_bytes:,} B, left out: no op reads them (weights and "
                    "biases their kernels re-laid out or folded)",
            "constants_bytes": kept, "prepared_bytes": len(blob),
            "originals_dropped": dropped, "originals_dropped_bytes": dropped_bytes}


# Flash the linked code needs beside the model and the prepared blob: runtime core + kernels + startup, protocol
# and libc measured 17-33 KB on the MLPerf Tiny models (bench_firmware_mlperf.py); 64 KB bounds them with room.
FLASH_CODE_RESERVE = 64 * 1024


WEIGHT_MODES = ("auto", "int8", "relaid")
DEFAULT_WEIGHTS = "auto"


def check_weights(weights: str) -> str:
    """``weights`` if it is a --weights mode, else one clear UserError."""
    if weights not in WEIGHT_MODES:
        raise UserError(f"unknown --weights mode {weights!r}",
                        fix=f"use one of {', '.join(WEIGHT_MODES)} (auto: re-laid-out weights within a flash "
                            "budget of 1.2x the .tflite; int8: weights stay int8; relaid: always the faster "
                            "re-laid-out copies)")
    return weights


def _flash_need(plan: MemoryPlan) -> int:
    """Flash of the model's constants + prepared blob + the code reserve (what the fit check compares)."""
    return _model_flash(plan) + FLASH_CODE_RESERVE


def _board_flash(board) -> Optional[int]:
    """The board's flash bytes, or None for a target without a flash size (a library built for --cpu)."""
    flash = getattr(board, "flash", None)
    return None if flash is None else flash.bytes


def _model_flash(plan: MemoryPlan) -> int:
    """Flash of the model: the .tflite's constants kept + the prepared blob (what FLASH_LIMIT bounds)."""
    return plan["weight_layouts"]["constants_bytes"] + plan["prepared_bytes"]


def _layout_candidates(model: bytes, graph: Graph, source: str, optimize: str, board, int8_blob: bytes,
                       int8_flash: int) -> List[B.LayoutCandidate]:
    """Each op with a re-laid-out copy (its plan alone with that copy differs from the int8-weight plan), with the
    flash that copy costs (measured: that plan's constants + blob over the int8 plan's)."""
    from edgekit.firmware.host_runtime import HostRuntime

    found = []
    for i in B.layout_ops(graph):
        blob = HostRuntime(model, source=source, optimize=optimize, plan_mve=plans_for_mve(board),
                           relaid_ops=[i]).prepared["blob"]
        if blob != int8_blob:
            kept = len(model) if keeps_whole_model(graph.op_names) else len(compact_constants(model, blob).data)
            found.append(B.candidate(graph, i, kept + len(blob) - int8_flash))
    return found


def _budget_plan(model: bytes, graph: Graph, source: str, optimize: str, board, relaid: MemoryPlan,
                 compact: MemoryPlan) -> MemoryPlan:
    """--weights auto when the whole model's re-laid-out copies exceed the flash budget: per op, greedily by
    estimated instructions saved per extra byte (weight_budget.py), measured on the plan it builds."""
    limit = B.flash_limit_bytes(len(model), _board_flash(board), FLASH_CODE_RESERVE)
    int8_flash, relaid_flash = _model_flash(compact), _model_flash(relaid)
    candidates = _layout_candidates(model, graph, source, optimize, board, compact["prepared_blob"], int8_flash)
    chosen = B.choose_layouts(candidates, limit - int8_flash)
    plan = compact
    while chosen:  # the extra bytes were measured one op at a time: check the plan of them all, drop the least useful
        plan = memory_plan(model, graph, source, optimize, board, plain=compact["plain"],
                           relaid_ops=sorted(c.op for c in chosen))
        if _model_flash(plan) <= limit:
            break
        chosen.pop()
        plan = compact
    names = plan["op_names"]
    board_text = (f", {board.name}'s {board.flash.bytes:,} B flash less the {FLASH_CODE_RESERVE:,} B code reserve"
                  if _board_flash(board) is not None else "")
    estimated_all = sum(c.saved_instructions for c in candidates)
    estimated = sum(c.saved_instructions for c in chosen)
    budget: FlashBudget = {
        "limit_ratio": B.FLASH_LIMIT, "limit_bytes": limit, "tflite_bytes": len(model),
        "int8_flash_bytes": int8_flash, "relaid_flash_bytes": relaid_flash, "flash_bytes": _model_flash(plan),
        "estimated_instructions_saved": estimated, "estimated_instructions_saved_relaid": estimated_all,
        "estimate": B.RATE_SOURCE}
    layouts = plan["weight_layouts"]
    layouts.update(weights="auto", relaid_bytes=max(0, plan["prepared_bytes"] - compact["prepared_bytes"]),
                   flash_budget=budget,
                   relaid_ops=[{"op": c.op, "op_name": names[c.op], "extra_bytes": c.extra_bytes, "macs": c.macs,
                                "estimated_instructions_saved": c.saved_instructions}
                               for c in sorted(chosen, key=lambda c: c.op)])
    kept = ", ".join(f"#{c.op} {names[c.op]}" for c in sorted(chosen, key=lambda c: c.op)) or "none"
    layouts["note"] = (
        f"--weights auto: flash budget {limit:,} B (the smaller of {B.FLASH_LIMIT}x the {len(model):,} B .tflite"
        f"{board_text}): re-laid-out weights for {len(chosen)} of {len(candidates)} op(s) ({kept}), taken by "
        f"estimated instructions saved per extra flash byte; flash {_model_flash(plan):,} B (measured; int8 weights "
        f"{int8_flash:,} B, all re-laid out {relaid_flash:,} B); estimated {estimated:,} of the "
        f"{estimated_all:,} instructions per inference all copies would save (estimated); " + layouts["note"])
    log.info("%s: --weights auto: re-laid-out weights for %d of %d ops within a %d B flash budget", source,
             len(chosen), len(candidates), limit)
    return plan


def choose_memory_plan(model: bytes, graph: Graph, source: str, optimize: str, board,
                       weights: str = DEFAULT_WEIGHTS) -> MemoryPlan:
    """``weights`` (--weights): "relaid" = the plan with re-laid-out weights in flash (faster on Cortex-M4), "int8" =
    weights kept int8 (smallest flash), "auto" = re-laid-out copies within a flash budget: all of them when the
    model's flash (constants + prepared blob) stays within weight_budget.FLASH_LIMIT x the .tflite and the board's
    flash beside the code reserve, else per op, greedily by estimated instructions saved per extra byte (down to
    none: the int8 plan), with the choice and the reason recorded in weight_layouts."""
    check_weights(weights)
    if weights == "int8":
        plan = memory_plan(model, graph, source, optimize, board, flash_layouts=False)
        plan["weight_layouts"]["note"] = "--weights int8: " + plan["weight_layouts"]["note"]
        plan["weight_layouts"].update(weights=weights, relaid_bytes=0)
        return plan
    plan = memory_plan(model, graph, source, optimize, board)
    compact = memory_plan(model, graph, source, optimize, board, flash_layouts=False, plain=plan["plain"])
    plan["weight_layouts"].update(weights=weights, relaid_bytes=max(0, plan["prepared_bytes"] - compact["prepared_bytes"]))
    compact["weight_layouts"].update(weights=weights, relaid_bytes=0)
    need = _flash_need(plan)
    limit = B.flash_limit_bytes(len(model), _board_flash(board), FLASH_CODE_RESERVE)
    if weights == "relaid" or _model_flash(plan) <= limit or _flash_need(compact) >= need:
        # (when the int8 plan takes no less flash, the layouts cost nothing; the fit check reports the model as it is)
        why = ("" if weights == "relaid" else
               "int8 weights would take no less flash; " if _flash_need(compact) >= need else
               f"the re-laid-out weights fit the flash budget ({_model_flash(plan):,} B of the model within "
               f"{limit:,} B: {B.FLASH_LIMIT}x the .tflite" + (f" and {board.name}'s {board.flash.bytes:,} B less a "
                                                                f"{FLASH_CODE_RESERVE:,} B code reserve"
                                                                if _board_flash(board) is not None else "") +
               f"; --weights int8 would keep {plan['weight_layouts']['relaid_bytes']:,} B less in the blob, slower "
               "on Cortex-M4); ")
        plan["weight_layouts"]["note"] = f"--weights {weights}: {why}" + plan["weight_layouts"]["note"]
        return plan
    return _budget_plan(model, graph, source, optimize, board, plan, compact)


def early_fit_check(model_bytes: int, arena: int, state: int, board,
                    modes: Optional[Mapping[str, ModeFigures]] = None,
                    plain: Optional[ModeFigures] = None) -> None:
    """Before writing anything: lower bounds (model vs flash; arena + state + stack reservation vs RAM). With
    ``modes`` ({mode: {arena_bytes, state_bytes, prepared_bytes}}), the model fails only if no mode fits, and the
    message says by how many bytes for each mode."""
    problems = []
    if model_bytes > board.flash.bytes:
        problems.append(f"flash: the model alone is {model_bytes:,} bytes, {board.name} has {board.flash.bytes:,}: "
                        f"at least {model_bytes - board.flash.bytes:,} bytes too many")
    ram_need = arena + state + board.stack_bytes
    if ram_need > board.ram.bytes:
        over = {}
        for mode, m in (modes or {}).items():
            need = m["arena_bytes"] + m["state_bytes"] + board.stack_bytes
            over[mode] = need - board.ram.bytes
        if not modes or all(v > 0 for v in over.values()):
            detail = "".join(f"\n      --optimize {mode}: arena {modes[mode]['arena_bytes']:,} + state "
                             f"{modes[mode]['state_bytes']:,} + stack {board.stack_bytes:,}: {v:,} bytes too many"
                             for mode, v in over.items()) if modes else ""
            if plain:
                need = plain["arena_bytes"] + plain["state_bytes"] + board.stack_bytes
                detail += (f"\n      in-place .tflite path (no prepared model): arena {plain['arena_bytes']:,} + state "
                           f"{plain['state_bytes']:,} + stack {board.stack_bytes:,}: "
                           f"{need - board.ram.bytes:,} bytes too many")
            problems.append(f"RAM: arena {arena:,} + runtime state {state:,} + stack reservation {board.stack_bytes:,} = "
                            f"{ram_need:,} bytes, {board.name} has {board.ram.bytes:,}: at least "
                            f"{ram_need - board.ram.bytes:,} bytes too many" + detail)
        else:
            fitting = ", ".join(m for m, v in over.items() if v <= 0)
            problems.append(f"RAM: with this --optimize mode the arena {arena:,} + state {state:,} + stack "
                            f"{board.stack_bytes:,} = {ram_need:,} bytes exceed {board.name}'s {board.ram.bytes:,} "
                            f"by {ram_need - board.ram.bytes:,}; it fits with --optimize {fitting}")
    if problems:
        fix = "choose a board with more memory (edgekit devices) or a smaller model"
        if any("it fits with --optimize" in p for p in problems):
            fix = "use the --optimize mode named above, or a board with more memory"
        raise DoesNotFitError(f"the model does not fit {board.name}:\n" + "\n".join(f"  - {p}" for p in problems),
                              fix=fix)


def fit_report(flash_bytes: int, ram_bytes: int, board) -> FitReport:
    return {
        "flash": {"used": flash_bytes, "available": board.flash.bytes, "free": board.flash.bytes - flash_bytes,
                  "fits": flash_bytes <= board.flash.bytes},
        "ram": {"used": ram_bytes, "available": board.ram.bytes, "free": board.ram.bytes - ram_bytes,
                "fits": ram_bytes <= board.ram.bytes},
    }


def raise_if_not_fitting(fits: FitReport, board, detail: str) -> None:
    bad = [f"{k}: uses {v['used']:,} bytes, {board.name} has {v['available']:,}: {-v['free']:,} bytes too many"
           for k, v in fits.items() if not v["fits"]]
    if bad:
        raise DoesNotFitError(f"the firmware does not fit {board.name} ({detail}):\n" + "\n".join(f"  - {b}" for b in bad),
                              fix="choose a board with more memory (edgekit devices) or a smaller model")


# --- writing the project -------------------------------------------------------------------------------------

def write_c_array(dest: Path, stem: str, data: bytes, *, size_macro: str, header_comment: str, source_comment: str,
                  extra_defines: Tuple[Tuple[str, str], ...] = ()) -> None:
    """<stem>.h + <stem>.c: ``data`` as ``const uint8_t ek_<stem>[]`` (16-byte aligned, in flash) and its size
    ``ek_<name>_size``, where <name> is the stem without ``_data`` (model_data -> ek_model_data, ek_model_size)."""
    symbol, size_symbol = f"ek_{stem}", f"ek_{stem.removesuffix('_data')}_size"
    guard = f"EK_{stem.upper()}_H"
    defines = "".join(f"#define {k} {v}\n" for k, v in ((size_macro, f"{len(data)}u"), *extra_defines))
    (dest / f"{stem}.h").write_text(
        f"/* {header_comment} */\n"
        f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n{defines}\n"
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
        f"extern const uint8_t {symbol}[];\n"
        f"extern const uint32_t {size_symbol};\n"
        "#ifdef __cplusplus\n}\n#endif\n\n#endif\n")
    (dest / f"{stem}.c").write_text(
        f"/* {source_comment} */\n"
        f'#include "{stem}.h"\n\n'
        f"const uint8_t {symbol}[{size_macro}] __attribute__((aligned({MODEL_ALIGN}))) = {{\n  "
        + c_array(data, symbol) + "\n};\n\n"
        f"const uint32_t {size_symbol} = {size_macro};\n")


def write_prepared_files(dest: Path, blob: bytes, *, slots: int, optimize: str) -> None:
    """model/prepared_data.c + .h: the prepared model (pointer-free, checksummed; ek_prepared.c) in flash."""
    dest.mkdir(parents=True, exist_ok=True)
    write_c_array(dest, "prepared_data", blob, size_macro="EK_PREPARED_BYTES",
                  header_comment="The prepared model: records, plan and kernel data computed on the host (generated by edgekit).",
                  source_comment=f"Prepared model (--optimize {optimize}), {len(blob)} bytes. Generated by edgekit {__version__}; do not edit.")
    config = dest / "ek_config.h"
    text = config.read_text().replace(
        "#endif\n",
        "#define EK_PREPARED 1  /* run model/prepared_data.c (no flatbuffer reader, no planner on the device) */\n"
        f"#define EK_PREP_SLOTS {slots}u\n"
        "#undef EK_STATE_BYTES\n"
        "#define EK_STATE_BYTES (EK_PREP_SLOTS * sizeof(ek_tensor) + 8u)  /* decoded tensor records */\n\n#endif\n")
    config.write_text(text)


def write_model_files(dest: Path, model: bytes, *, name: str, sha: str, arena: int, state: int, board: str,
                      extra_config: Tuple[Tuple[str, str], ...] = ()) -> None:
    """model/model_data.c + .h (the flatbuffer as an aligned const array) and model/ek_config.h (the plan's sizes)."""
    dest.mkdir(parents=True, exist_ok=True)
    write_c_array(dest, "model_data", model, size_macro="EK_MODEL_BYTES",
                  extra_defines=(("EK_MODEL_CRC32", f"0x{zlib.crc32(model):08x}u"),),
                  header_comment="The model flatbuffer, embedded as-is (generated by edgekit; see README.md).",
                  source_comment=f"{name}: {len(model)} bytes, sha256 {sha}. Generated by edgekit {__version__}; do not edit.")
    (dest / "ek_config.h").write_text(
        "/* Sizes from edgekit's offline memory plan (generated; see firmware.json). */\n"
        "#ifndef EK_CONFIG_H\n#define EK_CONFIG_H\n\n"
        f"#define EK_ARENA_BYTES {arena}u  /* activations + per-op scratch, offsets planned on the host */\n"
        f"#define EK_STATE_BYTES {state}u  /* runtime bookkeeping; 64-bit host figure, an upper bound on a 32-bit MCU */\n"
        f"#define EK_MODEL_NAME {c_string(name)}\n"
        f"#define EK_MODEL_SHA256 \"{sha}\"\n"
        f"#define EK_TARGET_BOARD {c_string(board)}\n"
        + "".join(f"#define {k} {v}\n" for k, v in extra_config) + "\n#endif\n")


def _copy(src: Path, dst: Path) -> str:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return str(dst)


def runtime_files(ops: List[str]) -> Tuple[List[Path], List[Path], List[str]]:
    """(sources, headers, kernel files) of the device runtime for ``ops``: core + registry + the kernel files of
    ``ops`` only, and every runtime header. The application project and the library (edgekit.firmware.library)
    both take their runtime from here."""
    kernels = kernel_files(KERNELS_DIR)
    wanted: List[str] = []
    for op in ops:
        for f in kernels.get(op, ()):
            if f not in wanted:
                wanted.append(f)
    sources = sorted((RUNTIME_DIR / "src").glob("*.c")) + [KERNELS_DIR / "registry.c"] + \
        [KERNELS_DIR / f for f in wanted]
    headers = sorted((RUNTIME_DIR / "include").glob("*.h")) + sorted((RUNTIME_DIR / "src").glob("*.h")) + \
        sorted(KERNELS_DIR.glob("*.h"))
    return sources, headers, wanted


def copy_runtime(dest: Path, ops: List[str]) -> List[str]:
    """Core runtime + registry + the kernel files of ``ops`` only (+ the kernel-private headers)."""
    sources, headers, wanted = runtime_files(ops)
    for f in headers + sources:
        _copy(f, dest / f.relative_to(RUNTIME_DIR))
    return wanted


def _run_rules(board) -> Tuple[str, str, str]:
    if board.is_qemu:
        semihost = " -semihosting-config enable=on,target=native" if board.semihosting else ""
        rules = (f"run-qemu: $(BUILD)/firmware.elf\n"
                 f"\tqemu-system-arm -M {board.qemu_machine} -nodefaults -display none -no-reboot -serial pty"
                 f"{semihost} -kernel $<\n")
        return (f"#   make run-qemu     boot it in QEMU ({board.qemu_machine}); UART0 on a pty "
                "(or let `edgekit run DIR --device qemu:BOARD` drive it)", rules, "run-qemu")
    target = board.pyocd_target or "TARGET"
    rules = f"flash: $(BUILD)/firmware.elf\n\tpyocd flash -t {target} $<\n"
    return (f"#   make flash        flash it with pyocd (target {target}; install its pack first: "
            f"{board.connection.get('pyocd_pack', 'pyocd pack install ' + target)})", rules, "flash")


def write_makefile(dest: Path, board, *, model_name: str, sources: List[str], includes: List[str], ldscript: str,
                   defines: str = "") -> None:
    help_line, rules, phony = _run_rules(board)
    text = render((TEMPLATES / "edgekit" / "Makefile.in").read_text(), {
        "MODEL_NAME": model_name, "BOARD": board.name, "CORE": board.core, "EDGEKIT_VERSION": __version__,
        "RUN_HELP": help_line, "RUN_RULES": rules, "RUN_PHONY": phony,
        "CPU_FLAGS": " ".join(board.gcc_flags()),
        "INCLUDES": " ".join(f"-I{i}" for i in includes),
        "LDSCRIPT": ldscript,
        "SRCS": " \\\n".join(f"  {s}" for s in sources),
        "DEFINES": defines,
    }, name="Makefile.in")
    (dest / "Makefile").write_text(text)


def runtime_defines(plan: MemoryPlan) -> str:
    """Runtime build flags for this model: a prepared model links no reader/planner/prepare code
    (EK_PREPARED_ONLY), and without row-streamed groups none of their code either (EK_NO_STREAM_GROUPS). The kernel
    table is the model's own list (EK_KERNEL_LIST, model/ek_kernel_list.h) rather than one weak entry per kernel. Optional kernel paths
    (edgekit.firmware.kernel_paths): only those the model uses (EK_MODEL_PATHS, EK_NEED_*)."""
    flags = "-DEK_KERNEL_LIST"
    paths = " ".join(f"-D{m}" for m in path_defines(plan.get("kernel_paths") or []))
    if paths:
        flags += " " + paths
    if plan.get("prepared_blob") is None:
        return flags
    return flags + " -DEK_PREPARED_ONLY" + ("" if plan.get("streamed_groups") else " -DEK_NO_STREAM_GROUPS")


_KERNEL_OBJECT = re.compile(r"const\s+ek_kernel\s+(ek_kernel_\w+)\s*=\s*\{\s*EK_OP_(\w+)\s*,")


def write_kernel_list(dest: Path, ops: List[str]) -> None:
    """model/ek_kernel_list.h: the ek_kernel objects of the model's ops, in first-use order (kernels/registry.c)."""
    symbols: Dict[str, str] = {}
    for path in sorted(KERNELS_DIR.glob("*.c")):
        for match in _KERNEL_OBJECT.finditer(path.read_text(errors="replace")):
            symbols.setdefault(match.group(2), match.group(1))
    wanted: List[str] = []
    for op in ops:
        if op in symbols and symbols[op] not in wanted:
            wanted.append(symbols[op])
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "ek_kernel_list.h").write_text(
        "/* The kernels this model uses (generated by edgekit; kernels/registry.c builds its table from it). */\n"
        "#ifndef EK_KERNEL_LIST_H\n#define EK_KERNEL_LIST_H\n"
        f"#define EK_LINKED_KERNELS {', '.join('&' + w for w in wanted)}\n#endif\n")


def write_project_sources(stage: Path, board, graph: Graph, model: bytes, *, name: str, sha: str,
                          plan: MemoryPlan, app: AppSpec = DEFAULT_APP, flash_model: Optional[bytes] = None
                          ) -> ProjectFiles:
    """Everything `make` needs, copied or generated into ``stage``. ``flash_model``: what model/model_data.c holds
    (with a prepared model, only the constants it reads: edgekit.firmware.constants); default the whole model."""
    from edgekit.firmware.app_api import write_app_api
    from edgekit.firmware.boards import write_board_files

    kernels = copy_runtime(stage / "runtime", graph.op_names)
    board_files = write_board_files(board, stage / "board", copy_sources=True)
    for src, dest in app.files:
        _copy(src, stage / dest)
    write_model_files(stage / "model", model if flash_model is None else flash_model, name=name, sha=sha,
                      arena=plan["arena_bytes"],
                      state=plan["state_bytes"], board=board.name, extra_config=app.config)
    if plan.get("prepared_blob") is not None:
        write_prepared_files(stage / "model", plan["prepared_blob"], slots=plan["state_slots"],
                             optimize=plan["optimize"])
        # the library's generated model API over these arrays: the app calls only edgekit_model_* (app_api.py)
        write_app_api(stage / "model", graph, plan, flash_bytes=len(model if flash_model is None else flash_model),
                      source=name, board_name=board.name)
    write_kernel_list(stage / "model", graph.op_names)
    (stage / MODEL_FILE).write_bytes(model)
    rel = lambda p: str(Path(p).relative_to(stage))  # noqa: E731
    sources = sorted(rel(p) for p in stage.rglob("*") if p.suffix in (".c", ".S"))
    includes = ["runtime/include", "runtime/src", "runtime/src/kernels", "board", "protocol", "app", "model"]
    write_makefile(stage, board, model_name=name, sources=sources, includes=includes,
                   ldscript=rel(board_files.linker_script),
                   defines=runtime_defines(plan))
    return {"kernels": kernels, "sources": sources}


# --- sizes ---------------------------------------------------------------------------------------------------

def measured_sizes(project: Path, board, graph: Graph, *, keep_build: bool, boot_check: bool = True
                   ) -> Tuple[Optional[ElfSizes], Optional[StackEstimate], BuildRecord, Optional[DeviceFigures]]:
    """Link the project (its own Makefile) to read flash/RAM from the ELF; with ``keep_build`` on a QEMU board, also
    boot it once to measure the stack high-water mark. The build folder stays only with keep_build."""
    if not fw_build.toolchain_available():
        return None, None, {"built": False, "reason": f"{fw_build.GCC} or make not found ({fw_build.GCC_INSTALL})"}, None
    build_dir = "build" if keep_build else f".size-build-{os.getpid()}"
    device = None
    try:
        elf = fw_build.make_project(project, build_dir=build_dir, board=board.name)
        sizes = elf_sizes(elf)
        map_file = project / build_dir / "firmware.map"
        split = flash_split(map_file) if map_file.is_file() else None
        stack = estimate_stack(project / build_dir, entry="main", linked=elf_functions(elf))
        from edgekit.firmware.boards import toolchain_version

        build: BuildRecord = {"built": True, "elf": f"{build_dir}/firmware.elf" if keep_build else None,
                 "elf_sha256": sha256_file(elf) if keep_build else None,
                 "toolchain": toolchain_version(), "cflags": "-O2 -ffp-contract=off -ffunction-sections -fdata-sections "
                 "-fstack-usage -fcallgraph-info=su", "ldflags": "-Wl,--gc-sections --specs=nano.specs",
                 "flash_split": split}
        if keep_build and boot_check and board.is_qemu and shutil.which("qemu-system-arm"):
            from edgekit.firmware.qemu import qemu_version

            device = device_measurement(board, elf, graph)
            build["qemu"] = qemu_version()
    finally:
        if not keep_build:
            shutil.rmtree(project / build_dir, ignore_errors=True)
    return sizes, stack, build, device


def _zero_inputs(graph: Graph) -> List[Any]:
    import numpy as np

    values = []
    for i in graph.inputs:
        t = graph.tensors[i]
        if t.type == "INT8":
            values.append(np.full(t.shape, t.zero_points[0] if t.zero_points else 0, dtype=np.int8))
        else:
            values.append(np.zeros(t.shape, dtype=np.float32))
    return values


def device_measurement(board, elf: Path, graph: Graph) -> DeviceFigures:
    """Boot the firmware under QEMU and run one inference (zero-point inputs): the device's own figures."""
    from edgekit.firmware.qemu import QemuSession

    measured = step_progress("QEMU boot + 1 inference", 1)
    with QemuSession(board, elf, count_instructions=False, timeout_s=300.0, boot_timeout_s=30.0) as session:
        info = session.info
        result = session.infer(_zero_inputs(graph))
    measured(1)
    return {"stack_used": max(info.stack_used, int(result.stack_used)), "stack_bytes": info.stack_bytes,
            "state_used": info.state_used, "arena_used": info.arena_used, "machine": board.qemu_machine}


def memory_figures(model: bytes, plan: MemoryPlan, board, sizes: Optional[ElfSizes],
                   stack: Optional[StackEstimate], device: Optional[DeviceFigures] = None
                   ) -> Tuple[FlashFigures, RamFigures]:
    """(flash, ram) sections of firmware.json, each with its method stated."""
    arena, state = plan["arena_bytes"], plan["state_bytes"]
    if sizes is None:
        flash = {"bytes": len(model), "model": len(model), "method": "estimated lower bound: the model array only "
                 "(the firmware was not linked: arm-none-eabi-gcc missing)"}
        stack_json: StackFigure = {"bytes": board.stack_bytes,
                                   "method": "linker reservation of the board profile (not linked)"}
        ram = {"bytes": arena + state + board.stack_bytes, "arena": arena, "state": state, "other_static": None,
               "stack": stack_json, "method": "estimated lower bound: arena + state + stack reservation (not linked)"}
        return flash, ram
    flash = {"bytes": sizes.flash_bytes, "model": sizes.model, "code_and_rodata": sizes.code_bytes,
             "text": sizes.text, "rodata": sizes.rodata, "data_init": sizes.data,
             "method": "measured: linked ELF section sizes (pyelftools): .text + read-only data + .data image"}
    if stack is not None and stack.bytes is not None:
        stack_json = {"bytes": stack.bytes, "estimated": True, "method": stack.method, "chain": stack.chain}
    else:
        stack_json = {"bytes": board.stack_bytes, "estimated": True,
                      "method": "linker reservation (no bounded static estimate: "
                                + ("recursion" if stack and stack.recursion else "no call graph") + ")"}
    if device is not None:
        stack_json = {"bytes": device["stack_used"], "estimated": False,
                      "method": f"measured: high-water mark of the painted stack after boot and one inference under "
                                f"QEMU {device['machine']}", "static_estimate": stack_json}
    other = sizes.static_ram_bytes - arena - state
    ram = {"bytes": sizes.static_ram_bytes + stack_json["bytes"], "arena": arena, "state": state,
           "other_static": other, "data": sizes.data, "bss": sizes.bss - sizes.reserved_stack,
           "stack": stack_json, "stack_reserved": sizes.reserved_stack,
           "linked_bytes": sizes.static_ram_bytes + sizes.reserved_stack,
           "method": "arena + runtime state + other .data/.bss (linked ELF) + stack ("
                     + ("measured on the device)" if device else "static estimate; `edgekit run` measures it on the device)")}
    if device is not None:
        ram["state_used_on_device"] = device["state_used"]
    return flash, ram


# Real TFLM on QEMU mps2-an386 (../shared/TOOLCHAIN.md; quoted, not re-measured) for the committed MLPerf Tiny
# int8 models, by model sha256: smallest working 32-bit arena and instructions with CMSIS-NN.
TFLM_KNOWN = {
    "aeea436800704fce17b17292e4412630ad856e9d777c044c64ef748a880bd0ae": ("MLPerf Tiny KWS", 22784, 7.70e6),
    "3c002613d1b2475eb51dd78dfb85a546c8ae658dee71cf6ade43b022fe205415": ("MLPerf Tiny IC", 54352, 29.9e6),
    "87cf24194ef93d1d9b11a591d805526b98008e351655d29883c825c9c106ba24": ("MLPerf Tiny AD", 2704, 0.58e6),
}


def vs_tflm(sha: str, ram: RamFigures) -> Optional[VsTflm]:
    """Runtime RAM against TFLM's smallest working arena where a real TFLM figure is known for this model."""
    known = TFLM_KNOWN.get(sha)
    runtime = (ram or {}).get("runtime") or {}
    if not known or runtime.get("bytes") is None:
        return None
    name, arena, instructions = known
    return {"model": name, "tflm_min_arena_32bit": arena, "tflm_cmsis_nn_instructions_m4": instructions,
            "ram_ratio": round(runtime["bytes"] / arena, 3),
            "method": "TFLM figures quoted from real TFLM on QEMU mps2-an386 (TOOLCHAIN.md); ours = arena + state"}


_OVERLAP_WHY = {
    "CONV_2D": "raster groups of 4 output pixels (windows copied into the im2col block first on the C/DSP path)",
    "DEPTHWISE_CONV_2D": "channel groups in place: a group's input channels are copied before its outputs are written",
    "AVERAGE_POOL_2D": "raster, pixel by pixel", "MAX_POOL_2D": "raster, pixel by pixel",
    "FULLY_CONNECTED": "rows: each input row is read (or expanded into scratch) before its outputs are written",
    "ADD": "elementwise in increasing order, no broadcast",
}


def overlap_report(plan: MemoryPlan) -> List[OverlapRow]:
    """Per planned overlap: which op's output may overlap which input, by how much and why (firmware.json)."""
    out: List[OverlapRow] = []
    for o in plan.get("overlaps", []):
        name = o.get("op_name", "?")
        rule = "exactly in place" if o["exact"] else f"output_offset - input_offset <= {o['d_max']:,} B"
        if o["input"] < 0:  # a row-streamed group's output over the group's input
            first = -1 - o["input"]
            out.append({"op": o["op"], "op_name": name, "input": "group input", "group_first_op": first, "rule": rule,
                        "why": f"row-streamed group of ops {first}-{o['op']}: output rows are written only below the "
                               "input rows the group still has to read"})
            continue
        out.append({"op": o["op"], "op_name": name, "input": o["input"], "rule": rule,
                    "why": _OVERLAP_WHY.get(name, "kernel access contract (firmware/runtime/README.md)")})
    return out


def streamed_group_report(plan: MemoryPlan) -> List[StreamedGroupRow]:
    """Per row-streamed group (firmware.json): its ops, and the few rows each intermediate tensor keeps in RAM."""
    return [{"ops": f"{g['first_op']}-{g['last_op']}", "first_op": g["first_op"], "last_op": g["last_op"],
             "op_names": g["ops"], "region_bytes": g["region_bytes"],
             "windows": [{"tensor": w["name"] or w["tensor"], "rows": w["rows"]} for w in g["windows"]],
             "why": "fused tiling: the group produces its output row by row, so its intermediate tensors never exist "
                    "whole (MCUNetV2-style; windows slide down as rows are produced)"}
            for g in plan.get("streamed_groups", [])]


def add_splits(flash: FlashFigures, ram: RamFigures, plan: MemoryPlan, build_info: BuildRecord,
               device: Optional[DeviceFigures]) -> None:
    """Flash split from the linker map (model, prepared data, runtime code, startup/protocol/libc) and the RAM the
    runtime needs (arena + mutable state, device-measured when the firmware ran) into firmware.json."""
    split = build_info.get("flash_split") if build_info else None
    if split:
        flash["split"] = {**split, "runtime_code": split["runtime_core"] + split["runtime_kernels"],
                          "method": "measured: input sections of the linked ELF by object file (GNU ld map); "
                                    "runtime code = core + linked kernels (the generated model API, model_api, is its own line)"}
    state = device["state_used"] if device else plan["state_bytes"]
    ram["runtime"] = {"bytes": plan["arena_bytes"] + state, "arena": plan["arena_bytes"], "mutable_state": state,
                      "method": ("measured on the device: arena + the state the runtime reported (ek_prepared object + "
                                 "decoded tensor records)") if device else
                                "estimated: arena + 32-bit state from the prepared model's slot count"}
    if plan.get("variables_bytes"):  # resource variables: arena buffers the planner never reuses (already in arena)
        ram["runtime"]["variables"] = plan["variables_bytes"]


# --- the command ---------------------------------------------------------------------------------------------

def describe_ops(graph: Graph) -> List[OpRow]:
    macs = graph.macs()
    return [{"index": op.index, "name": op.label, "location": graph.location(op), "macs": macs[op.index]}
            for op in graph.ops]


def signature(model_sha: str, extra_tools: Optional[Mapping[str, str]] = None) -> Signature:
    tools = tool_versions(TOOLS)
    tools.update(extra_tools or {})
    return Signature(model_sha256=model_sha, tools=tools, host=host_info(), created=utc_now())


def generate_firmware(model: Union[Path, str, bytes], board_name: str = DEFAULT_BOARD, outdir: Optional[Path] = None,
                      *, runtime: str = "edgekit", build: bool = False, source: Optional[str] = None,
                      app: AppSpec = DEFAULT_APP, **options: Any) -> FirmwareResult:
    """Generate (and optionally build) the firmware project for ``model`` on ``board_name`` into ``outdir``.

    ``options`` are the chosen runtime's own (e.g. ``optimize`` for the edgekit runtime); the backend
    (edgekit.firmware.backends) refuses those it does not take, before anything is written."""
    from edgekit.firmware.backends import backend_for
    from edgekit.firmware.boards import load_board

    data, path_name = load_model_bytes(model)
    source = source or path_name
    graph = read_graph(data, source)
    board = load_board(board_name)
    backend = backend_for(board, runtime)
    backend.check_options({k: v for k, v in options.items() if v is not None})
    stem = Path(source).stem if source != "<bytes>" else "model"
    if backend.name != "ethos-u":  # the NPU backend checks the CPU ops itself
        require_support(graph, runtime)  # every unsupported op, listed at once, before anything is written
    if outdir is None:
        suffix = "" if backend.name in ("edgekit", "ethos-u") else f"-{backend.name}"
        outdir = Path("out") / "firmware" / f"{stem}-{board.name}{suffix}"
    return backend.generate(data, graph, board, Path(outdir), source=source, build=build, app=app,
                            **{k: v for k, v in options.items() if v is not None})


def _generate_edgekit(data: bytes, graph: Graph, board, outdir: Path, *, source: str, build: bool,
                      optimize: str = DEFAULT_OPTIMIZE, app: AppSpec = DEFAULT_APP,
                      weights: str = DEFAULT_WEIGHTS) -> FirmwareResult:
    if graph.inputs and any(graph.tensors[i].type not in ("INT8", "FLOAT32") for i in graph.inputs):
        raise UserError(f"{source}: model inputs must be int8 (or float32 feeding a QUANTIZE)")
    sha = sha256_bytes(data)
    planned = step_progress("memory plan", 1)  # prepares every op on the host runtime: seconds for big models
    plan = choose_memory_plan(data, graph, source, optimize, board, weights)
    planned(1)
    # the model alone against the flash (the prepared data and the code are measured at link time)
    if plan["arena_bytes"] + plan["state_bytes"] + board.stack_bytes > board.ram.bytes:
        modes = {m: {k: p[k] for k in ("arena_bytes", "state_bytes")} for m, p in
                 ((m, memory_plan(data, graph, source, m, board, plain=plan["plain"])) for m in OPTIMIZE_MODES)}
        plain = {"arena_bytes": plan["plain"]["arena_bytes"], "state_bytes": plan["plain"]["state_bytes_host"]}
        early_fit_check(len(data), plan["arena_bytes"], plan["state_bytes"], board, modes, plain)
    early_fit_check(len(data), plan["arena_bytes"], plan["state_bytes"], board)
    name = Path(source).name if source != "<bytes>" else "model.tflite"
    constants = None
    whole_model = keeps_whole_model(graph.op_names)
    if plan.get("prepared_blob") is not None and whole_model is None:  # flash keeps only what the prepared path reads
        constants = compact_constants(data, plan["prepared_blob"])
        plan["prepared_blob"] = constants.blob
    with atomic_output_dir(outdir) as stage:
        written = write_project_sources(stage, board, graph, data, name=name, sha=sha, plan=plan, app=app,
                                        flash_model=constants.data if constants else None)
        sizes, stack, build_info, device = measured_sizes(stage, board, graph, keep_build=build,
                                                          boot_check=app.boot_check)
        flash, ram = memory_figures(data, plan, board, sizes, stack, device)
        add_splits(flash, ram, plan, build_info, device)
        fits = fit_report(flash["bytes"], ram["bytes"], board)
        raise_if_not_fitting(fits, board, "measured from the linked ELF" if sizes else "lower bound")
        info = firmware_info(data, graph, board, plan, flash, ram, fits, written, build_info, source=source, sha=sha,
                             app=app.info, constants=constants)
        (stage / FIRMWARE_JSON).write_text(info.dumps())
        (stage / "README.md").write_text(readme_text(info, board))
        from edgekit.report_html.firmware import firmware_page
        from edgekit.report_html.page import write_page

        write_page(stage / "report.html", firmware_page(info))
    elf = outdir / "build" / fw_build.ELF_NAME if build and sizes is not None else None
    log.info("wrote firmware project %s", outdir)
    return FirmwareResult(outdir, info, elf)


def firmware_info(data: bytes, graph: Graph, board, plan: MemoryPlan, flash: FlashFigures, ram: RamFigures,
                  fits: FitReport, written: ProjectFiles, build_info: BuildRecord, *, source: str,
                  sha: str, runtime: str = "edgekit", app: Optional[HarnessApp] = None,
                  constants: Optional[CompactConstants] = None) -> FirmwareInfo:
    constant_bytes = sum(t.bytes for t in graph.tensors if t.constant)
    op_counts: Dict[str, int] = {}
    for op in graph.ops:
        op_counts[op.label] = op_counts.get(op.label, 0) + 1
    app_info = {} if app is None else {"app": app}
    return FirmwareInfo.model_validate(json_safe({
        "edgekit_firmware": 1,
        "runtime": runtime,
        "model": {"file": MODEL_FILE, "source": source, "sha256": sha, "bytes": len(data),
                  "constant_data_bytes": constant_bytes, "flatbuffer_overhead_bytes": len(data) - constant_bytes,
                  **model_in_flash(data, constants, keeps_whole_model(graph.op_names)),
                  "inputs": [_tensor_json(graph.tensors[i]) for i in graph.inputs],
                  "outputs": [_tensor_json(graph.tensors[i]) for i in graph.outputs]},
        "board": {**board.summary().present(), "profile": board.profile.get("_path"), "cpu_flags": board.gcc_flags(),
                  "stack_reserved_bytes": board.stack_bytes},
        "arena_bytes": plan["arena_bytes"],
        "state_bytes": plan["state_bytes"],
        "state_bytes_note": "measured by the runtime on this 64-bit host: an upper bound of the 32-bit MCU's need "
                            "(the device reports its exact use in `edgekit run`)",
        "flash_bytes": flash["bytes"],
        "ram_bytes": ram["bytes"],
        "flash": flash,
        "ram": ram,
        "fits": fits,
        "ops": describe_ops(graph),
        "op_counts": op_counts,
        "macs": sum(graph.macs().values()),
        "kernels": written.get("kernels", []),
        "plan": {"tensors": plan.get("tensors", []), "scratch": plan.get("scratch", []),
                 "persistent_bytes": plan.get("persistent_bytes"), "optimize": plan.get("optimize"),
                 **({"variables_bytes": plan["variables_bytes"]} if plan.get("variables_bytes") else {}),
                 "prepared_bytes": plan.get("prepared_bytes"), "overlaps": overlap_report(plan),
                 "streamed_groups": streamed_group_report(plan),
                 "weight_layouts": plan.get("weight_layouts"),
                 "plain_in_place_tflite": plan.get("plain")},
        "optimize": plan.get("optimize"),
        "runtime_code_bytes": (flash.get("split") or {}).get("runtime_code"),
        "vs_tflm": vs_tflm(sha, ram),
        "build": build_info,
        "signature": signature(sha, {k: v for k, v in (("arm-none-eabi-gcc", build_info.get("toolchain")),
                                                       ("qemu", build_info.get("qemu"))) if v}),
        **app_info,
    }))


def model_in_flash(data: bytes, constants: Optional[CompactConstants], why_whole: Optional[str] = None) -> Dict[str, Any]:
    """firmware.json model.in_flash: what of the .tflite the firmware keeps in flash, and why."""
    if constants is None:
        return {"in_flash": {"bytes": len(data), "what": "the whole .tflite",
                             "why": why_whole or "the in-place path reads the flatbuffer on the device"}}
    return {"in_flash": {"bytes": len(constants.data), "tensor_bytes": constants.tensor_bytes,
                         "quantization_bytes": constants.quantization_bytes,
                         "what": "the constant tensor data, per-channel scales and zero points the prepared model's "
                                 "records point to, each range 16-byte aligned (model/model_data.c)",
                         "why": "the prepared path reads nothing else of the .tflite: tensor names, the schema's "
                                "tables and metadata stay on the host (model.tflite in this folder)"}}


def _op_table(info: FirmwareInfo) -> str:
    lines = ["| # | operator | output tensor | MACs |", "|---|---|---|---|"]
    for op in info.ops:
        tensor = str(op["location"]).split("-> tensor ", 1)[-1]
        lines.append(f"| {op['index']} | {op['name']} | {tensor} | {op['macs']:,} |")
    lines.append(f"\n{len(info.ops)} operators, {info.macs:,} multiply-accumulates per inference.")
    return "\n".join(lines)


def readme_text(info: FirmwareInfo, board) -> str:
    """README.md of the project, from its typed firmware.json."""
    flash, ram, fits = info.flash or {}, info.ram or {}, info.fits
    help_line = _run_rules(board)[0].lstrip("# ").strip()
    bytes_or = lambda v: f"{v:,}" if isinstance(v, int) else "–"  # noqa: E731
    return render((TEMPLATES / "edgekit" / "README.md.in").read_text(), {
        "MODEL_NAME": Path(info.model.source).name, "BOARD": board.name, "EDGEKIT_VERSION": __version__,
        "CREATED": info.signature.created, "HOST": info.signature.host.get("hostname"),
        "MODEL_SHA256": info.model.sha256, "BOARD_DESCRIPTION": board.description, "CORE": board.core,
        "FLASH_AVAILABLE": f"{board.flash.bytes:,}", "RAM_AVAILABLE": f"{board.ram.bytes:,}",
        "RUN_LINE": "    " + help_line.replace("make ", "make ", 1),
        "CPU_FLAGS": " ".join(board.gcc_flags()),
        "FLASH_BYTES": bytes_or(flash["bytes"]), "FLASH_FIT": "fits" if fits.flash.fits else "DOES NOT FIT",
        "FLASH_METHOD": flash["method"], "MODEL_BYTES": bytes_or(info.model.bytes),
        "CODE_BYTES": bytes_or(flash.get("code_and_rodata")), "KERNEL_COUNT": len(info.kernels or []),
        "RAM_BYTES": bytes_or(ram["bytes"]), "RAM_FIT": "fits" if fits.ram.fits else "DOES NOT FIT",
        "ARENA_BYTES": bytes_or(ram["arena"]), "STATE_BYTES": bytes_or(ram["state"]),
        "OTHER_STATIC": bytes_or(ram.get("other_static")), "STACK_BYTES": bytes_or(ram["stack"]["bytes"]),
        "STACK_METHOD": ram["stack"]["method"], "OP_TABLE": _op_table(info),
        "KERNELS": ", ".join(f"`{k}`" for k in info.kernels or []) or "none",
        "OVERHEAD_BYTES": bytes_or(info.model.flatbuffer_overhead_bytes),
        "RUN_DEVICE": f"qemu:{board.name}" if board.is_qemu else "serial:PORT --flash",
    }, name="README.md.in")


def _tensor_json(t) -> TensorJson:
    return {"name": t.name, "type": t.type, "shape": list(t.shape),
            "scale": t.scales[0] if t.scales else None, "zero_point": t.zero_points[0] if t.zero_points else None}


# --- cached builds for `edgekit run MODEL.tflite` -----------------------------------------------------------

def cache_root() -> Path:
    base = os.environ.get("EDGEKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "edgekit")
    return Path(base) / "firmware"


def cached_firmware(model: bytes, board_name: str, *, source: str = "<bytes>",
                    optimize: str = DEFAULT_OPTIMIZE, weights: str = DEFAULT_WEIGHTS) -> FirmwareResult:
    """Generate + build once per (model, board profile, firmware sources, options); reuse the built project after."""
    from edgekit.firmware.boards import load_board

    board = load_board(board_name)
    profile_text = Path(board.profile["_path"]).read_bytes() if board.profile.get("_path") else b""
    key = hashlib.sha256(model + b"\0" + profile_text + firmware_sources_hash().encode()
                         + optimize.encode() + (b"" if weights == DEFAULT_WEIGHTS else b"\0" + weights.encode())
                         ).hexdigest()[:24]
    outdir = cache_root() / f"{board.name}-{key}"
    info_path = outdir / FIRMWARE_JSON
    elf = outdir / "build" / fw_build.ELF_NAME
    if info_path.is_file() and elf.is_file():
        log.info("reusing the cached firmware build %s", outdir)
        return FirmwareResult(outdir, read_firmware_info(json.loads(info_path.read_text())), elf)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}-", dir=outdir.parent))
    try:
        result = generate_firmware(model, board.name, tmp / "project", build=True, source=source, optimize=optimize,
                                   weights=weights)  # edgekit runtime
        if result.elf is None:
            fw_build.require_toolchain()
        try:
            os.replace(tmp / "project", outdir)
        except OSError:  # another process won the race: use theirs
            if not elf.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return FirmwareResult(outdir, read_firmware_info(json.loads(info_path.read_text())), elf)
