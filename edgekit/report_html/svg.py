"""Inline SVG charts, generated in Python (no JavaScript, no external fonts or images).

Every chart is one ``<svg id=...>`` string; its marks carry ``data-*`` attributes with the figures they draw
(tests read them back), and a ``<title>`` child each, which browsers show on hover.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Callable, List, Optional, Sequence, Tuple

# colour-blind-safe categorical palette (Paul Tol's "bright"), then greys
PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#332288", "#117733",
           "#882255")
# viridis at 9 stops, interpolated linearly (a sequential scale readable in grey)
VIRIDIS = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725")
TENSOR_COLOURS = tuple(PALETTE[i] for i in (0, 1, 2, 4, 5, 7, 8, 9))  # not the scratch / region colours
FONT = 11        # px, the text of every chart
LABEL_W = 190    # px, the label column of horizontal bar charts


def esc(text: object) -> str:
    """Text for an SVG/HTML text node or attribute."""
    return escape(str(text), quote=True)


def human(value: float) -> str:
    """A compact figure for an axis tick: 950, 12.5k, 3.1M, 2G."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def nice_ticks(high: float, count: int = 5) -> List[float]:
    """0 and round steps up to at least ``high`` (1, 2, 2.5 or 5 x 10^n)."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(math.ceil(high / step - 1e-9)) + 1)]


def viridis(t: float) -> str:
    """The colour of ``t`` in [0, 1] on the viridis scale."""
    t = min(1.0, max(0.0, t)) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    mix = [round(int(a[k:k + 2], 16) * (1 - (t - i)) + int(b[k:k + 2], 16) * (t - i)) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def _svg(chart_id: str, width: float, height: float, title: str, body: Sequence[str]) -> str:
    return (f'<svg id="{esc(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(title)}">'
            f"<title>{esc(title)}</title>" + "".join(body) + "</svg>")


def _text(x: float, y: float, text: object, *, anchor: str = "start", cls: str = "", size: int = FONT) -> str:
    klass = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{klass}>{esc(text)}</text>')


# --- horizontal bars ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bar:
    """One bar: its label, value, hover text and colour group (bars of one group share a colour)."""

    label: str
    value: float
    tip: str = ""
    group: str = ""
    mark: Optional[float] = None   # a threshold drawn across the bar's row


def hbar_chart(chart_id: str, bars: Sequence[Bar], *, axis_label: str, title: str, width: int = 760,
               high: Optional[float] = None, value_text: Optional[Callable[[float], str]] = None) -> str:
    """Horizontal bars, one row each, on a linear axis from 0 (to ``high`` when given); colours by group with a
    legend; a bar's ``mark`` is a red tick across its row (a threshold)."""
    row_h, top, bottom = 18, 8, 44
    groups = list(dict.fromkeys(b.group for b in bars if b.group))
    legend_h = 18 if groups else 0
    height = top + row_h * max(1, len(bars)) + bottom + legend_h
    plot_w = width - LABEL_W - 70
    ticks = nice_ticks(high if high is not None else max([b.value for b in bars] +
                                                         [b.mark for b in bars if b.mark is not None] + [0.0]))
    scale = plot_w / ticks[-1]
    body = []
    for t in ticks:
        x = LABEL_W + t * scale
        body.append(f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + row_h * len(bars)}"/>')
        body.append(_text(x, top + row_h * len(bars) + 14, human(t), anchor="middle"))
    for i, b in enumerate(bars):
        y = top + i * row_h
        colour = PALETTE[groups.index(b.group) % len(PALETTE)] if b.group else PALETTE[0]
        body.append(_text(LABEL_W - 6, y + row_h - 5, b.label, anchor="end"))
        body.append(f'<rect class="bar" x="{LABEL_W}" y="{y + 2}" width="{max(b.value * scale, 0.5):.2f}" '
                    f'height="{row_h - 4}" fill="{colour}" data-label="{esc(b.label)}" data-value="{b.value:g}">'
                    f"<title>{esc(b.tip or f'{b.label}: {b.value:,g}')}</title></rect>")
        body.append(_text(LABEL_W + b.value * scale + 4, y + row_h - 5, (value_text or human)(b.value), cls="value"))
        if b.mark is not None:
            x = LABEL_W + b.mark * scale
            body.append(f'<line class="marker" x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + row_h}" '
                        f'data-mark="{b.mark:g}"><title>threshold {b.mark:g}</title></line>')
    axis_y = top + row_h * len(bars) + 30
    body.append(_text(LABEL_W + plot_w / 2, axis_y, axis_label, anchor="middle"))
    x = LABEL_W
    for k, g in enumerate(groups):
        body.append(f'<rect x="{x}" y="{axis_y + 8}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>')
        body.append(_text(x + 14, axis_y + 17, g))
        x += 24 + 7 * len(g)
    return _svg(chart_id, width, height, title, body)


# --- one stacked bar (a memory split) -------------------------------------------------------------------------------
def split_bar(chart_id: str, parts: Sequence[Tuple[str, int]], *, capacity: Optional[int], title: str,
              width: int = 760) -> str:
    """One bar split into parts (bytes, across the whole width), then a thin bar of used against the memory's
    capacity when given; legend below."""
    left, plot_w, top, bar_h = 10, width - 20, 22, 26
    used = sum(v for _, v in parts)
    scale = plot_w / max(used, 1)
    body = [_text(left, 14, f"{used:,} B" + (f" used of {capacity:,} B ({used / capacity:.1%})" if capacity else ""))]
    x = float(left)
    for k, (label, value) in enumerate(parts):
        w = value * scale
        body.append(f'<rect class="part" x="{x:.2f}" y="{top}" width="{w:.2f}" height="{bar_h}" '
                    f'fill="{PALETTE[k % len(PALETTE)]}" data-label="{esc(label)}" data-bytes="{value}">'
                    f"<title>{esc(f'{label}: {value:,} B ({value / max(used, 1):.1%} of used)')}</title></rect>")
        x += w
    ly = top + bar_h + 20
    if capacity:
        body.append(f'<rect class="capacity" x="{left}" y="{top + bar_h + 6}" width="{plot_w}" height="6" '
                    f'data-capacity="{capacity}"><title>{esc(f"capacity {capacity:,} B")}</title></rect>')
        body.append(f'<rect x="{left}" y="{top + bar_h + 6}" width="{max(plot_w * used / max(capacity, used), 0.8):.2f}" '
                    f'height="6" fill="#57606a"><title>{esc(f"used {used:,} B of {capacity:,} B")}</title></rect>')
        ly += 10
    lx = left
    for k, (label, value) in enumerate(parts):
        text = f"{label} {value:,} B"
        if lx + 20 + 6.5 * len(text) > width:
            lx, ly = left, ly + 18
        body.append(f'<rect x="{lx}" y="{ly - 10}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>')
        body.append(_text(lx + 14, ly, text))
        lx += 30 + 6.5 * len(text)
    return _svg(chart_id, width, ly + 10, title, body)


# --- the memory plan as a timeline ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """One arena buffer: bytes [offset, offset + size) alive from op ``first_op`` to op ``last_op`` inclusive
    (-1: a graph input, there before op 0; ``ops``: a graph output, kept to the end)."""

    key: str           # "t3" for tensor 3, "s5" for op 5's scratch
    label: str
    offset: int
    size: int
    first_op: int
    last_op: int
    kind: str = "tensor"   # tensor | alias | scratch | region (a row-streamed group's region)


@dataclass(frozen=True)
class Band:
    """A row-streamed group: ops first_op..last_op run row by row."""

    first_op: int
    last_op: int
    label: str


@dataclass(frozen=True)
class TimelineGeometry:
    """Where op indices and arena offsets land: x from op -1 to op ``ops`` + 1, y from offset 0 (top) down."""

    ops: int
    arena_bytes: int
    left: float = 70.0
    top: float = 30.0
    plot_w: float = 660.0
    plot_h: float = 300.0

    def x(self, op: float) -> float:
        return self.left + (op + 1) / (self.ops + 2) * self.plot_w

    def y(self, offset: float) -> float:
        return self.top + offset / max(self.arena_bytes, 1) * self.plot_h


def overlapping_pairs(blocks: Sequence[Block]) -> List[Tuple[Block, Block]]:
    """Pairs alive at one op whose bytes intersect (planned overlaps: an output over its dying input);
    a RESHAPE alias is its root's buffer (same bytes, by design): its root's pairs stand for it."""
    pairs = []
    buffers = [b for b in blocks if b.kind != "alias"]
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if a.first_op <= b.last_op and b.first_op <= a.last_op and \
                    a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                pairs.append((a, b))
    return pairs


def memory_timeline(chart_id: str, blocks: Sequence[Block], *, ops: int, arena_bytes: int, title: str,
                    bands: Sequence[Band] = (), op_labels: Sequence[str] = ()) -> str:
    """Tensor lifetimes (x: op index) against arena offsets (y: bytes, 0 at the top); row-streamed groups as
    shaded bands, planned overlaps hatched, aliases dashed, scratch in grey."""
    g = TimelineGeometry(ops=ops, arena_bytes=max(arena_bytes, max((b.offset + b.size for b in blocks), default=1)))
    width, height = g.left + g.plot_w + 20, g.top + g.plot_h + 62
    body = ['<defs><pattern id="{0}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#000" stroke-width="2" '
            'stroke-opacity="0.55"/></pattern></defs>'.format(esc(chart_id))]
    for band in bands:
        x0, x1 = g.x(band.first_op), g.x(band.last_op + 1)
        body.append(f'<rect class="band" x="{x0:.2f}" y="{g.top - 14}" width="{x1 - x0:.2f}" height="{g.plot_h + 14}" '
                    f'data-first-op="{band.first_op}" data-last-op="{band.last_op}"><title>{esc(band.label)}</title></rect>')
        body.append(_text((x0 + x1) / 2, g.top - 4, f"streamed {band.first_op}-{band.last_op}", anchor="middle",
                          size=9))
    body.append(f'<rect class="frame" x="{g.left}" y="{g.top}" width="{g.plot_w}" height="{g.plot_h}"/>')
    for t in nice_ticks(g.arena_bytes, 6):
        if t <= g.arena_bytes:
            body.append(f'<line class="grid" x1="{g.left}" y1="{g.y(t):.1f}" x2="{g.left + g.plot_w}" y2="{g.y(t):.1f}"/>')
            body.append(_text(g.left - 4, g.y(t) + 4, human(t), anchor="end"))
    step = max(1, math.ceil((ops + 2) / 30))
    for op in range(-1, ops + 1, step):
        name = "in" if op == -1 else ("out" if op == ops else str(op))
        tip = op_labels[op] if 0 <= op < len(op_labels) else name
        body.append(f'<text x="{(g.x(op) + g.x(op + 1)) / 2:.1f}" y="{g.top + g.plot_h + 14:.1f}" font-size="9" '
                    f'text-anchor="middle">{esc(name)}<title>{esc(tip)}</title></text>')
    body.append(_text(g.left + g.plot_w / 2, g.top + g.plot_h + 32, "operator (lifetime: producer to last consumer)",
                      anchor="middle"))
    body.append(f'<text x="14" y="{g.top + g.plot_h / 2:.1f}" font-size="{FONT}" text-anchor="middle" '
                f'transform="rotate(-90 14 {g.top + g.plot_h / 2:.1f})">arena offset (bytes)</text>')
    colours = {"scratch": "#bbbbbb", "region": "#ccbb44"}
    for k, b in enumerate(blocks):
        x0, x1, y0 = g.x(b.first_op), g.x(b.last_op + 1), g.y(b.offset)
        h = max(g.y(b.offset + b.size) - y0, 0.8)
        fill = colours.get(b.kind, TENSOR_COLOURS[k % len(TENSOR_COLOURS)])
        dash = ' stroke-dasharray="4 2"' if b.kind == "alias" else ""
        tip = (f"{b.label}: {b.size:,} B at offset {b.offset:,}, ops {b.first_op}..{b.last_op}"
               f"{' (' + b.kind + ')' if b.kind != 'tensor' else ''}")
        body.append(f'<rect class="block {b.kind}" x="{x0:.2f}" y="{y0:.2f}" width="{x1 - x0:.2f}" height="{h:.2f}" '
                    f'fill="{fill}"{dash} data-key="{esc(b.key)}" data-offset="{b.offset}" data-bytes="{b.size}" '
                    f'data-first-op="{b.first_op}" data-last-op="{b.last_op}"><title>{esc(tip)}</title></rect>')
    for a, b in overlapping_pairs(blocks):
        ops0, ops1 = max(a.first_op, b.first_op), min(a.last_op, b.last_op)
        lo, hi = max(a.offset, b.offset), min(a.offset + a.size, b.offset + b.size)
        tip = f"{a.label} and {b.label} share {hi - lo:,} B at op {ops0}" + ("" if ops0 == ops1 else f"..{ops1}")
        body.append(f'<rect class="overlap" x="{g.x(ops0):.2f}" y="{g.y(lo):.2f}" '
                    f'width="{g.x(ops1 + 1) - g.x(ops0):.2f}" height="{max(g.y(hi) - g.y(lo), 0.8):.2f}" '
                    f'fill="url(#{esc(chart_id)}-hatch)" data-pair="{esc(a.key)},{esc(b.key)}">'
                    f"<title>{esc(tip)}</title></rect>")
    legend = [("tensor", PALETTE[0]), ("scratch", colours["scratch"]), ("streamed region", colours["region"])]
    x = g.left
    for label, colour in legend + [("planned overlap", f"url(#{esc(chart_id)}-hatch)")]:
        body.append(f'<rect x="{x}" y="{height - 18}" width="10" height="10" fill="{colour}" stroke="#333" stroke-width="0.5"/>')
        body.append(_text(x + 14, height - 9, label))
        x += 30 + 6.5 * len(label)
    return _svg(chart_id, width, height, title, body)


# --- heat-map -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HeatCell:
    """One cell: its row and column, the value that colours it (None: grey) and its text lines."""

    row: str
    column: str
    value: Optional[float]
    lines: Tuple[str, ...]
    status: str = "ok"
    tip: str = ""


def heatmap(chart_id: str, rows: Sequence[str], columns: Sequence[str], cells: Sequence[HeatCell], *, title: str,
            scale_label: str, log: bool = True) -> str:
    """Rows x columns; colour = value on viridis (log10 when ``log``); cells without a value in grey."""
    cell_w, cell_h, left, top = 150, 58, 150, 30
    width, height = max(left + cell_w * len(columns) + 30, left + 360), top + cell_h * len(rows) + 76
    values = [math.log10(c.value) if log else c.value for c in cells if c.value]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if log and hi - lo < 1.0:   # the colours span at least one decade: near-equal cells look near-equal
        lo, hi = (lo + hi) / 2 - 0.5, (lo + hi) / 2 + 0.5
    body = []
    for j, column in enumerate(columns):
        body.append(_text(left + (j + 0.5) * cell_w, top - 10, column, anchor="middle"))
    for i, row in enumerate(rows):
        body.append(_text(left - 8, top + (i + 0.5) * cell_h + 4, row, anchor="end"))
    for c in cells:
        i, j = rows.index(c.row), columns.index(c.column)
        x, y = left + j * cell_w, top + i * cell_h
        t = None
        if c.value:
            v = math.log10(c.value) if log else c.value
            t = 0.5 if hi == lo else (v - lo) / (hi - lo)
        fill = viridis(t) if t is not None else "#dddddd"
        ink = "#ffffff" if t is not None and t < 0.55 else "#000000"
        body.append(f'<rect class="cell {esc(c.status)}" x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" '
                    f'fill="{fill}" data-row="{esc(c.row)}" data-column="{esc(c.column)}" '
                    f'data-value="{"" if c.value is None else f"{c.value:g}"}"><title>{esc(c.tip or " ".join(c.lines))}</title></rect>')
        for k, line in enumerate(c.lines):
            body.append(f'<text x="{x + cell_w / 2 - 1:.1f}" y="{y + 18 + 14 * k:.1f}" font-size="{FONT}" '
                        f'text-anchor="middle" style="fill:{ink}">{esc(line)}</text>')
    sy = top + cell_h * len(rows) + 16
    steps = 40
    for k in range(steps):
        body.append(f'<rect x="{left + k * 6}" y="{sy}" width="6.5" height="10" fill="{viridis(k / (steps - 1))}"/>')
    unit = (lambda v: human(10 ** v)) if log else human
    body.append(_text(left, sy + 24, unit(lo)))
    body.append(_text(left + steps * 6, sy + 24, unit(hi), anchor="end"))
    body.append(_text(left, sy + 40, scale_label))
    return _svg(chart_id, width, height, title, body)


# --- vertical bars (a small histogram / per-sample values) ----------------------------------------------------------
def column_chart(chart_id: str, labels: Sequence[str], values: Sequence[float], *, axis_label: str, title: str,
                 marker: Optional[Tuple[float, str]] = None, width: int = 760) -> str:
    """Vertical columns with labels below; ``marker`` (value, text): a dashed horizontal line (e.g. a threshold)."""
    left, top, plot_h = 60, 14, 180
    plot_w = width - left - 20
    high = max(list(values) + ([marker[0]] if marker else []) + [0.0])
    ticks = nice_ticks(high)
    scale = plot_h / ticks[-1]
    col_w = plot_w / max(1, len(values))
    body = []
    for t in ticks:
        y = top + plot_h - t * scale
        body.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}"/>')
        body.append(_text(left - 4, y + 4, human(t), anchor="end"))
    for k, (label, value) in enumerate(zip(labels, values)):
        x = left + k * col_w
        h = max(value, 0.0) * scale
        body.append(f'<rect class="column" x="{x + col_w * 0.1:.2f}" y="{top + plot_h - h:.2f}" width="{col_w * 0.8:.2f}" '
                    f'height="{h:.2f}" fill="{PALETTE[0]}" data-label="{esc(label)}" data-value="{value:g}">'
                    f"<title>{esc(f'{label}: {value:.4g}')}</title></rect>")
        body.append(f'<text x="{x + col_w / 2:.1f}" y="{top + plot_h + 12:.1f}" font-size="9" text-anchor="end" '
                    f'transform="rotate(-30 {x + col_w / 2:.1f} {top + plot_h + 12:.1f})">{esc(label[:24])}</text>')
    if marker:
        y = top + plot_h - marker[0] * scale
        body.append(f'<line class="marker" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}"/>')
        body.append(_text(left + plot_w - 4, y - 4, marker[1], anchor="end"))
    body.append(f'<text x="14" y="{top + plot_h / 2:.1f}" font-size="{FONT}" text-anchor="middle" '
                f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{esc(axis_label)}</text>')
    return _svg(chart_id, width, top + plot_h + 70, title, body)
