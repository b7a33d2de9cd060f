"""`edgekit firmware` for a board with an Arm Ethos-U NPU (profile key ``npu``, e.g. corstone-300-ethos-u55).

What it does (and does not): runs Vela for the profile's NPU config; places the Vela-compiled model (the CUSTOM
'ethos-u' operator's command stream + encoded weights) in a 16-byte aligned, loadable section ``.ek_npu_model`` in
the profile's model region (NPU-visible memory); sizes the NPU tensor arena from the compiled model (Vela's scratch
tensors + the operator's input/output tensors) in the profile's arena region; checks that every operator Vela left
on the CPU is one edgekit's runtime runs; writes firmware.json + README.md. It does NOT build or run an inference
firmware: executing the 'ethos-u' operator needs Arm's Ethos-U core driver (ethos-u-core-driver, and TFLite Micro's
ethos-u kernel or an equivalent caller) and the NPU itself (an MPS3 AN552 board or Arm's Corstone-300 FVP), none of
which is available here. With arm-none-eabi-gcc present it links a *placement-check* ELF (board startup + the model
and arena arrays, no inference code) and reads the section addresses back, so the placement is measured, not assumed.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from edgekit import __version__
from edgekit.firmware.ethosu_types import NpuLayout, PlacedSymbol, PlacementCheck
from edgekit.firmware.results import FirmwareInfo
from edgekit.atomic import atomic_output_dir
from edgekit.compile.result import CompileReport
from edgekit.errors import DoesNotFitError, UnsupportedOpError, UserError
from edgekit.firmware.support import check_support
from edgekit.tflite_graph import Graph, read_graph
from edgekit.provenance import host_info, sha256_bytes, tool_versions, utc_now
from edgekit.report import json_safe
from edgekit.support import OpSupport, SupportReport

log = logging.getLogger(__name__)

ETHOSU_OP = "CUSTOM 'ethos-u'"
ALIGN = 16
FIRMWARE_JSON = "firmware.json"
NOT_RUNNABLE = ("Running this firmware needs the Arm Ethos-U core driver (ethos-u-core-driver) with TensorFlow Lite "
                "Micro's ethos-u kernel (or another caller of ethosu_invoke), and the NPU: an MPS3 board with the AN552 "
                "Corstone-300 image or Arm's Corstone-300 Fixed Virtual Platform (FVP_Corstone_SSE-300_Ethos-U55). "
                "None of these is available here, so edgekit generated the placement and did not build or run an "
                "inference firmware. edgekit's own runtime does not implement the CUSTOM 'ethos-u' operator.")
SUPPORTED_MEMORY_MODES = ("Shared_Sram",)


@dataclass(frozen=True)
class NpuProfile:
    accelerator: str
    system_config: str
    memory_mode: str
    config: Optional[str]
    model_region: str
    arena_region: str
    base_address: int
    irq: int
    source: str


def npu_profile(board) -> NpuProfile:
    """The profile's ``npu`` section, validated (every problem listed)."""
    raw = board.profile.get("npu")
    problems: List[str] = []
    if not isinstance(raw, dict):
        raise UserError(f"board {board.name} has no npu section", fix="see devices/corstone-300-ethos-u55.yaml")
    regions = {r.name: r for r in board.extra_regions}
    for key in ("accelerator", "system_config", "memory_mode", "model_region", "arena_region", "source"):
        if not isinstance(raw.get(key), str) or not raw.get(key):
            problems.append(f"npu.{key} (text) is missing")
    for key in ("model_region", "arena_region"):
        if isinstance(raw.get(key), str) and raw[key] not in regions:
            problems.append(f"npu.{key} {raw[key]!r} is not an extra memory region of the profile "
                            f"({', '.join(regions) or 'none'}); the NPU cannot read flash/ram (TCMs)")
    if raw.get("memory_mode") not in SUPPORTED_MEMORY_MODES:
        problems.append(f"npu.memory_mode {raw.get('memory_mode')!r}: firmware placement supports "
                        f"{', '.join(SUPPORTED_MEMORY_MODES)} (weights stay in the model region, arena in SRAM)")
    for key in ("base_address", "irq"):
        if not isinstance(raw.get(key), int) or isinstance(raw.get(key), bool):
            problems.append(f"npu.{key} must be an integer")
    if problems:
        raise UserError(f"board profile {board.name}: " + "; ".join(problems), fix="see devices/README.md (npu keys)")
    return NpuProfile(raw["accelerator"], raw["system_config"], raw["memory_mode"], raw.get("config"),
                      raw["model_region"], raw["arena_region"], raw["base_address"], raw["irq"], raw["source"])


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def ethosu_layout(graph: Graph) -> NpuLayout:
    """The CUSTOM 'ethos-u' operator's tensors: command stream, read-only weights, scratch, fast scratch, I/O."""
    ops = [op for op in graph.ops if op.label == ETHOSU_OP]
    if len(ops) != 1:
        raise UserError(f"the Vela model has {len(ops)} ethos-u operators; edgekit places models with exactly one",
                        fix="compile a model Vela turns into one NPU subgraph")
    op = ops[0]
    t = [graph.tensors[i] for i in op.inputs]
    io = [graph.tensors[i] for i in list(op.inputs[4:]) + list(op.outputs)]
    return {
        "op_index": op.index,
        "command_stream_bytes": t[0].bytes, "read_only_bytes": t[1].bytes,
        # Shared_Sram: Vela passes the same tensor as scratch and fast scratch; count it once
        "scratch_bytes": t[2].bytes,
        "scratch_fast_bytes": t[3].bytes if len(t) > 3 and op.inputs[3] != op.inputs[2] else 0,
        "scratch_fast_is_scratch": len(t) > 3 and op.inputs[3] == op.inputs[2],
        "io_tensors": [{"name": x.name, "type": x.type, "shape": list(x.shape), "bytes": x.bytes} for x in io],
        "io_bytes_aligned": sum(_align(x.bytes) for x in io),
    }


def npu_support(vela_graph: Graph) -> SupportReport:
    """Every operator of the compiled model: the ethos-u op (NPU, needs the driver) and CPU operators (our runtime)."""
    ours = check_support(vela_graph, "edgekit")
    report = SupportReport("corstone-ethos-u (NPU + edgekit runtime)")
    for op, verdict in zip(vela_graph.ops, [o for o in ours.ops if o.op != "SUBGRAPHS"]):
        if op.label == ETHOSU_OP:
            report.ops.append(OpSupport(op.label, vela_graph.location(op), True,
                                        "runs on the Ethos-U NPU through Arm's Ethos-U core driver (not edgekit's runtime, "
                                        "which has no kernel for this custom operator)"))
        elif verdict.supported:
            report.ops.append(OpSupport(op.label, vela_graph.location(op), True,
                                        "left on the CPU by Vela; edgekit's runtime runs it"))
        else:
            report.ops.append(OpSupport(op.label, vela_graph.location(op), False,
                                        f"left on the CPU by Vela, and edgekit's runtime cannot run it: {verdict.reason}"))
    return report


def _c_bytes(data: bytes) -> str:
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    return ",\n  ".join(rows)


def write_model_sources(dest: Path, vela_bytes: bytes, sha: str, arena_bytes: int, npu: NpuProfile,
                        layout: NpuLayout, label: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "ek_npu_config.h").write_text(
        "/* Ethos-U placement, generated by edgekit; see firmware.json. Figures marked estimated come from Vela. */\n"
        "#ifndef EK_NPU_CONFIG_H\n#define EK_NPU_CONFIG_H\n\n#include <stdint.h>\n\n"
        f"#define EK_NPU_BASE_ADDRESS 0x{npu.base_address:08X}u\n#define EK_NPU_IRQ {npu.irq}\n"
        f"#define EK_NPU_ACCELERATOR \"{npu.accelerator}\"\n"
        f"#define EK_NPU_MODEL_BYTES {len(vela_bytes)}u\n"
        f"#define EK_NPU_COMMAND_STREAM_BYTES {layout['command_stream_bytes']}u\n"
        f"#define EK_NPU_READ_ONLY_BYTES {layout['read_only_bytes']}u\n"
        f"#define EK_NPU_SCRATCH_BYTES {layout['scratch_bytes']}u       /* Vela's arena ({label}) */\n"
        f"#define EK_NPU_SCRATCH_FAST_BYTES {layout['scratch_fast_bytes']}u\n"
        f"#define EK_NPU_ARENA_BYTES {arena_bytes}u /* scratch + fast scratch + ethos-u I/O tensors, 16 B aligned */\n\n"
        "extern const uint8_t ek_npu_model[EK_NPU_MODEL_BYTES];\n"
        "extern uint8_t ek_npu_arena[EK_NPU_ARENA_BYTES];\n\n#endif\n")
    (dest / "npu_model.c").write_text(
        f"/* Vela-compiled model ({len(vela_bytes)} bytes, sha256 {sha}), generated by edgekit {__version__}.\n"
        " * Section .ek_npu_model is placed in NPU-visible memory by the linker script. Do not edit. */\n"
        '#include "ek_npu_config.h"\n\n'
        f"const uint8_t ek_npu_model[EK_NPU_MODEL_BYTES] __attribute__((aligned({ALIGN}), section(\".ek_npu_model\"), "
        "used)) = {\n  " + _c_bytes(vela_bytes) + "\n};\n")
    (dest / "npu_arena.c").write_text(
        "/* The Ethos-U tensor arena (NOLOAD, not zeroed), in the profile's arena region. Generated by edgekit. */\n"
        '#include "ek_npu_config.h"\n\n'
        f"uint8_t ek_npu_arena[EK_NPU_ARENA_BYTES] __attribute__((aligned({ALIGN}), section(\".{npu.arena_region}\"), "
        "used));\n")
    (dest / "placement_check.c").write_text(
        "/* Placement check only: references the model and the arena so the linker keeps and places them.\n"
        " * NOT an inference application (that needs the Ethos-U core driver; see README.md). */\n"
        '#include "ek_npu_config.h"\n\n'
        "int main(void)\n{\n  volatile uint8_t sink = ek_npu_model[0];\n  ek_npu_arena[0] = sink;\n  return 0;\n}\n")


def linker_script(board, npu: NpuProfile) -> str:
    """The board's linker script plus a loadable, 16-byte aligned .ek_npu_model section in the model region."""
    region = npu.model_region.upper()
    return board.linker_script() + f"""
/* Ethos-U placement (edgekit.firmware.ethosu): the Vela model in {npu.model_region} (NPU-visible, loaded with the
 * image), 16-byte aligned as the Ethos-U driver requires for the command stream and weights. */
SECTIONS
{{
  .ek_npu_model : ALIGN({ALIGN})
  {{
    __ek_npu_model_start__ = .;
    KEEP(*(.ek_npu_model .ek_npu_model.*))
    __ek_npu_model_end__ = .;
  }} > {region}
}}
ASSERT((__ek_npu_model_start__ % {ALIGN}) == 0, "the Vela model must be {ALIGN}-byte aligned")
"""


def placement_check(stage: Path, board) -> PlacementCheck:
    """Link the placement-check ELF (if arm-none-eabi-gcc exists) and read the symbols' addresses back."""
    from edgekit.firmware.boards import COMMON_CFLAGS, LINK_FLAGS, write_board_files

    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        return {"linked": False, "reason": "arm-none-eabi-gcc not found (apt-get install gcc-arm-none-eabi "
                                           "libnewlib-arm-none-eabi)"}
    work = Path(tempfile.mkdtemp(prefix="ek-npu-link-"))
    try:
        files = write_board_files(board, work / "board")
        cmd = [gcc, *board.gcc_flags(), *COMMON_CFLAGS, *[f"-I{d}" for d in files.include_dirs], f"-I{stage / 'model'}",
               *[str(s) for s in files.sources], *(str(stage / "model" / f) for f in
                                                   ("npu_model.c", "npu_arena.c", "placement_check.c")),
               *LINK_FLAGS, f"-Wl,-T,{stage / 'board' / (board.name + '.ld')}", "-lm", "-o", str(work / "check.elf")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip()[-3000:]
            if "overflowed" in message or "will not fit" in message:
                raise DoesNotFitError(f"the Vela model or the NPU arena does not fit {board.name}:\n{message}",
                                      fix="choose a board with more memory or a smaller model")
            raise UserError(f"linking the placement check for {board.name} failed:\n{message}")
        return {"linked": True, **_symbols(work / "check.elf", board),
                "method": "measured: placement-check ELF linked with arm-none-eabi-gcc, symbols read with pyelftools"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _symbols(elf: Path, board) -> Dict[str, PlacedSymbol]:
    from elftools.elf.elffile import ELFFile

    regions = {r.name: r for r in (board.flash, board.ram, *board.extra_regions)}
    found: Dict[str, PlacedSymbol] = {}
    with open(elf, "rb") as handle:
        symtab = ELFFile(handle).get_section_by_name(".symtab")
        for name in ("ek_npu_model", "ek_npu_arena"):
            sym = symtab.get_symbol_by_name(name)[0]
            addr, size = int(sym["st_value"]), int(sym["st_size"])
            region = next((r.name for r in regions.values() if r.origin <= addr and addr + size <= r.end), None)
            found[name] = {"address": f"0x{addr:08X}", "bytes": size, "region": region, "aligned_16": addr % ALIGN == 0}
    return found


def generate_npu_firmware(data: bytes, board, outdir: Path, *, source: str, build: bool = False):
    """Vela for the board's NPU + the placed model and sized arena; returns edgekit.firmware.generate.FirmwareResult."""
    from edgekit.compile.npu import vela_estimate
    from edgekit.compile.report import write_compile_files
    from edgekit.compile.vela_tool import VelaOptions
    from edgekit.firmware.generate import FirmwareResult, MODEL_FILE

    npu = npu_profile(board)
    options = VelaOptions(accelerator=npu.accelerator, system_config=npu.system_config, memory_mode=npu.memory_mode,
                          config=npu.config)
    name = Path(source).name if source != "<bytes>" else "model.tflite"
    work = Path(tempfile.mkdtemp(prefix="ek-npu-fw-"))
    try:
        model_path = work / "in" / (name if name.endswith(".tflite") else "model.tflite")
        model_path.parent.mkdir()
        model_path.write_bytes(data)
        compiled, run = vela_estimate(model_path, options, keep=work / "vela")
        vela_bytes = compiled.vela_model
        vela_graph = read_graph(vela_bytes, "model_vela.tflite")
        support = npu_support(vela_graph)
        if not support.ok:
            error = UnsupportedOpError(SupportReport(support.target, support.rejected),
                                       target="the Ethos-U NPU or edgekit's runtime")
            error.fix = ("replace these layers with ones the NPU runs (`vela --supported-ops-report`) or ones edgekit's "
                         "runtime runs (edgekit.firmware.support.EDGEKIT_OPS)")
            raise error
        layout = ethosu_layout(vela_graph)
        arena = _align(layout["scratch_bytes"]) + _align(layout["scratch_fast_bytes"]) + layout["io_bytes_aligned"]
        regions = {r.name: r for r in board.extra_regions}
        problems = []
        if len(vela_bytes) > regions[npu.model_region].bytes:
            problems.append(f"Vela model {len(vela_bytes):,} bytes > {npu.model_region} {regions[npu.model_region].bytes:,}")
        if arena > regions[npu.arena_region].bytes:
            problems.append(f"NPU arena {arena:,} bytes > {npu.arena_region} {regions[npu.arena_region].bytes:,}")
        if problems:
            raise DoesNotFitError(f"the model does not fit {board.name}: " + "; ".join(problems),
                                  fix="choose a board with more memory or a smaller model")
        sha = sha256_bytes(data)
        label = compiled.label
        with atomic_output_dir(outdir) as stage:
            (stage / MODEL_FILE).write_bytes(data)
            write_compile_files(stage / "vela", compiled.report, run, vela_bytes)
            write_model_sources(stage / "model", vela_bytes, sha256_bytes(vela_bytes), arena, npu, layout, label)
            (stage / "board").mkdir()
            (stage / "board" / f"{board.name}.ld").write_text(linker_script(board, npu))
            placement = placement_check(stage, board)
            info = firmware_info(data, sha, vela_bytes, board, npu, compiled.report, support, layout, arena,
                                 placement, source=source, build_requested=build)
            (stage / FIRMWARE_JSON).write_text(info.dumps())
            (stage / "README.md").write_text(readme_text(info))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("wrote Ethos-U firmware placement %s", outdir)
    return FirmwareResult(Path(outdir), info, None)


def firmware_info(data: bytes, sha: str, vela_bytes: bytes, board, npu: NpuProfile, compiled: CompileReport,
                  support: SupportReport, layout: NpuLayout, arena: int, placement: PlacementCheck, *,
                  source: str, build_requested: bool) -> FirmwareInfo:
    regions = {r.name: r for r in board.extra_regions}
    label = compiled.estimate.label
    cpu_ops = [o for o in support.ops if o.op != ETHOSU_OP]
    return FirmwareInfo.model_validate(json_safe({
        "edgekit_firmware": 1,
        "runtime": "ethos-u",
        "runnable_here": False,
        "not_runnable_reason": NOT_RUNNABLE,
        "model": {"file": "model.tflite", "source": source, "sha256": sha, "bytes": len(data)},
        "vela_model": {"file": "vela/model_vela.tflite", "sha256": sha256_bytes(vela_bytes), "bytes": len(vela_bytes),
                       "section": ".ek_npu_model", "region": npu.model_region,
                       "region_origin": f"0x{regions[npu.model_region].origin:08X}", "alignment": ALIGN, **{
                           k: layout[k] for k in ("command_stream_bytes", "read_only_bytes")}},
        "npu": {"accelerator": npu.accelerator, "system_config": compiled.target.system_config,
                "memory_mode": compiled.target.memory_mode, "base_address": f"0x{npu.base_address:08X}",
                "irq": npu.irq, "source": npu.source},
        "arena": {"bytes": arena, "region": npu.arena_region, "scratch_bytes": layout["scratch_bytes"],
                  "scratch_fast_bytes": layout["scratch_fast_bytes"], "io_tensors": layout["io_tensors"],
                  "vela_sram_used_bytes": compiled.memory.sram_used_bytes,
                  "method": "Vela's scratch tensor (= its SRAM figure for Shared_Sram, " + label + ") + fast scratch "
                            "+ the ethos-u operator's input/output tensors, each rounded up to 16 bytes"},
        "estimate": {"label": label, "npu_cycles_total": compiled.performance.npu_cycles_total,
                     "inference_time_ms": compiled.performance.inference_time_ms,
                     "note": "NPU part only; CPU-fallback operators are not in Vela's figure"},
        "ops": [{"name": o.op, "location": o.location, "runs_on": "npu" if o.op == ETHOSU_OP else "cpu",
                 "supported": o.supported, "reason": o.reason} for o in support.ops],
        "cpu_fallback_ops": [o.op for o in cpu_ops],
        "cpu_fallback_reasons": compiled.placement.cpu_operators,
        "placement_check": placement,
        "build": {"built": False, "requested": build_requested,
                  "reason": "no inference firmware is built: the Ethos-U core driver and the NPU (board or FVP) are "
                            "not available here (see not_runnable_reason)"},
        "board": {**board.summary().present(), "profile": board.profile.get("_path")},
        "signature": {"model_sha256": sha, "tools": tool_versions(("edgekit", "ethos-u-vela", "pyelftools")),
                      "host": host_info(), "created": utc_now()},
    }))


def _placed(check: PlacementCheck) -> List[Tuple[str, PlacedSymbol]]:
    """The placed arrays of a linked placement check, by symbol name."""
    return [(name, symbol) for name, symbol in (("ek_npu_model", check.get("ek_npu_model")),
                                                ("ek_npu_arena", check.get("ek_npu_arena"))) if symbol is not None]


def readme_text(info: FirmwareInfo) -> str:
    pc = info.placement_check
    placed = ("\n".join(f"- `{k}` at {v['address']} ({v['bytes']:,} bytes) in `{v['region']}`, "
                        f"16-byte aligned: {'yes' if v['aligned_16'] else 'NO'}" for k, v in _placed(pc))
              + f"\n\n({pc['method']})") if pc and pc.get("linked") else f"Not linked: {(pc or {}).get('reason')}"
    ops = "\n".join(f"| {o['name']} | {o['runs_on']} | {o['reason']} |" for o in info.ops)
    return f"""# {Path(info.model.source).name} on {info.board.board} (Ethos-U placement)

Generated by edgekit {__version__} on {info.signature.host.get('hostname')}, {info.signature.created}.
Model sha256 `{info.model.sha256}`.

## This project does not run here

{info.not_runnable_reason}

## What is in it

- `vela/model_vela.tflite`: the Vela-compiled model ({info.vela_model['bytes']:,} bytes; command stream
  {info.vela_model['command_stream_bytes']:,} bytes, encoded weights {info.vela_model['read_only_bytes']:,} bytes),
  and Vela's report (`vela/compile.json`, `vela/report.md`).
- `model/npu_model.c`: that model as `ek_npu_model[]`, 16-byte aligned, in section `.ek_npu_model`, which
  `board/{info.board.board}.ld` places in `{info.vela_model['region']}` ({info.vela_model['region_origin']}),
  memory the NPU can read (it cannot read the TCMs).
- `model/npu_arena.c`: the NPU tensor arena `ek_npu_arena[{info.arena['bytes']:,}]` in `{info.arena['region']}`
  ({info.arena['method']}).
- `model/ek_npu_config.h`: NPU base address {info.npu['base_address']}, IRQ {info.npu['irq']}, sizes.
- `model/placement_check.c`: only references the arrays so that the placement can be linked and checked.

## Placement (linked)

{placed}

## Operators

| operator | runs on | note |
|---|---|---|
{ops}

## NPU estimate

{info.estimate['label']}: {info.estimate['npu_cycles_total']:,} NPU cycles, {info.estimate['inference_time_ms']:.4g} ms
({info.estimate['note']}).

## To run it elsewhere

Add Arm's ethos-u-core-driver and TensorFlow Lite Micro with its ethos-u kernel (or call `ethosu_invoke` on the
command stream yourself), initialise the driver at {info.npu['base_address']} with IRQ {info.npu['irq']}, point the
arena at `ek_npu_arena`, and run the ELF on the Corstone-300 FVP (`FVP_Corstone_SSE-300_Ethos-U55 -a firmware.elf`) or
an MPS3 AN552 board.
"""


def summary_lines(info: FirmwareInfo) -> List[str]:
    """What `edgekit firmware` prints for an Ethos-U board."""
    lines = [f"Ethos-U placement for board {info.board.board} ({info.npu['accelerator']}); NOT built or run:",
             f"  {info.not_runnable_reason}",
             f"Vela model {info.vela_model['bytes']:,} bytes in .ek_npu_model ({info.vela_model['region']}, "
             f"16-byte aligned); NPU arena {info.arena['bytes']:,} bytes in {info.arena['region']}"]
    pc = info.placement_check
    if pc.get("linked"):
        model = pc["ek_npu_model"]
        lines.append(f"linked placement check: ek_npu_model at {model['address']} ({model['region']}), "
                     f"ek_npu_arena at {pc['ek_npu_arena']['address']} ({pc['ek_npu_arena']['region']})")
    else:
        lines.append(f"placement not linked: {pc['reason']}")
    for op in info.ops:
        lines.append(f"  {op['name']}: {op['runs_on']} ({op['reason']})")
    lines.append(f"{info.estimate['label']}: {info.estimate['npu_cycles_total']:,} NPU cycles, "
                 f"{info.estimate['inference_time_ms']:.4g} ms")
    return lines
