"""The memory sections of a firmware (firmware.json, ``FirmwareInfo``): the arena plan as a timeline of tensor
lifetimes x arena offsets, and the flash and RAM splits as stacked bars."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from edgekit.firmware.plan_types import FlashFigures, PlanReport, RamFigures
from edgekit.firmware.results import FirmwareInfo
from edgekit.report_html.page import bullets, figure, p, table
from edgekit.report_html.svg import Band, Block, esc, memory_timeline, split_bar


def short_name(name: str) -> str:
    """The readable tail of a converter's tensor name ("a/b.c.ReLU_1;;x;1" -> "ReLU_1")."""
    head = name.split(";")[0].rsplit("/", 1)[-1]
    return head.rsplit(".", 1)[-1] if len(head) > 28 else head


def plan_blocks(plan: PlanReport) -> List[Block]:
    """The plan's arena buffers: every tensor (an alias dashed over its root) and every op's scratch; a scratch
    entry of a row-streamed group's first op is that group's region."""
    group_first = {g["first_op"]: g for g in plan.get("streamed_groups") or []}
    blocks = [Block(key=f"t{t['index']}", label=f"t{t['index']} {short_name(t.get('name', ''))}".strip(),
                    offset=t["offset"], size=t["bytes"], first_op=t["first_op"], last_op=t["last_op"],
                    kind="alias" if t["alias_of"] >= 0 else "tensor")
              for t in plan["tensors"] if t["bytes"] > 0]
    for s in plan.get("scratch") or []:
        group = group_first.get(s["op"])
        if group is not None:
            blocks.append(Block(key=f"s{s['op']}", label=f"streamed region of ops {group['ops']}", offset=s["offset"],
                                size=s["bytes"], first_op=group["first_op"], last_op=group["last_op"], kind="region"))
        else:
            blocks.append(Block(key=f"s{s['op']}", label=f"scratch of op {s['op']}", offset=s["offset"],
                                size=s["bytes"], first_op=s["op"], last_op=s["op"], kind="scratch"))
    return blocks


def plan_timeline(info: FirmwareInfo) -> Optional[str]:
    """The memory plan chart (``chart-memory-timeline``), or None for a runtime without an offline plan."""
    plan = info.plan
    if not plan or not plan.get("tensors"):
        return None
    bands = [Band(g["first_op"], g["last_op"], f"ops {g['ops']} row-streamed in a {g['region_bytes']:,} B region")
             for g in plan.get("streamed_groups") or []]
    names = [f"op {o.get('index', k)} {o['name']}" for k, o in enumerate(info.ops)]
    return memory_timeline("chart-memory-timeline", plan_blocks(plan), ops=len(info.ops),
                           arena_bytes=info.arena_bytes or 0, bands=bands, op_labels=names,
                           title=f"memory plan: {info.arena_bytes or 0:,} B arena, --optimize {info.optimize}")


def flash_parts(flash: FlashFigures) -> List[Tuple[str, int]]:
    """Flash bytes by role (the ld map split), the rest of the image as "other"."""
    split = flash.get("split")
    if not split:
        return [("model", flash["model"]), ("code and constants", flash["bytes"] - flash["model"])]
    parts = [("model", split["model"]), ("prepared model", split["prepared"]),
             ("model API", split.get("model_api", 0)), ("runtime core", split["runtime_core"]),
             ("kernels", split["runtime_kernels"]), ("startup + protocol", split["startup_protocol"]),
             ("libc", split["libc"])]
    rest = flash["bytes"] - sum(v for _, v in parts)
    return parts + ([("other", rest)] if rest > 0 else [])


def ram_parts(ram: RamFigures) -> List[Tuple[str, int]]:
    """RAM bytes by role: arena, runtime state, other static data, stack."""
    parts = [("arena", ram["arena"]), ("runtime state", ram["state"])]
    if ram.get("other_static"):
        parts.append(("other .data/.bss", ram["other_static"] or 0))
    return parts + [("stack", ram["stack"]["bytes"])]


def memory_sections(info: FirmwareInfo) -> List[Tuple[str, str]]:
    """(heading, HTML) of the firmware's memory: flash split, RAM split, the plan timeline and its overlaps."""
    sections = []
    board = info.board
    if info.flash:
        sections.append(("Flash", figure(split_bar("chart-flash-split", flash_parts(info.flash),
                                                   capacity=board.flash_bytes, title="flash split"),
                                         info.flash.get("split", {}).get("method") or info.flash["method"])))
    if info.ram:
        stack = info.ram["stack"]
        sections.append(("RAM", figure(split_bar("chart-ram-split", ram_parts(info.ram), capacity=board.ram_bytes,
                                                 title="RAM split"), info.ram["method"])
                         + p(f"stack {stack['bytes']:,} B: {esc(stack['method'])}", "muted")))
    timeline = plan_timeline(info)
    if timeline:
        plan = info.plan or {}
        overlaps = plan.get("overlaps") or []
        groups = plan.get("streamed_groups") or []
        html = figure(timeline, "each box is one arena buffer: its bytes (vertical) while it is alive (horizontal, "
                                "from the op that produces it to its last consumer); hatched: bytes two live buffers "
                                "share by plan (an output written over its dying input, as the kernel's access "
                                "contract allows); dashed: a RESHAPE output sharing its input's bytes")
        if overlaps:
            html += "<h3>Planned overlaps</h3>" + table(
                ["op", "operator", "input", "rule", "why"],
                [(o["op"], o["op_name"], str(o["input"]), o["rule"], o["why"]) for o in overlaps], table_id="overlaps")
        if groups:
            html += "<h3>Row-streamed groups</h3>" + table(
                ["ops", "operators", "region", "windows", "why"],
                [(g["ops"], " + ".join(g["op_names"]), g["region_bytes"],
                  ", ".join(f"{short_name(str(w['tensor']))}: {w['rows']} rows" for w in g["windows"]), g["why"]) for g in groups],
                table_id="streamed-groups")
        plain = plan.get("plain_in_place_tflite")
        notes = [f"offline plan of --optimize {esc(info.optimize)}: arena {info.arena_bytes or 0:,} B"]
        if plain:
            notes.append(f"the in-place .tflite path would need an arena of {plain['arena_bytes']:,} B")
        sections.append(("Memory plan", html + bullets(notes)))
    return sections


def fit_table(rows: Sequence[Tuple[str, int, int, Optional[int], bool, Optional[str]]]) -> str:
    """Used / available / free per memory, with the method of ``used``."""
    return table(["memory", "used (B)", "available (B)", "free (B)", "fits", "how used was obtained"],
                 [(name, used, available, free, fits, method or "") for name, used, available, free, fits, method
                  in rows], table_id="fit")
