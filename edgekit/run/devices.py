"""`edgekit devices`: every device profile with its key figures (core, clock, memory, power, thermal, connection)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from edgekit.profiles import Profile, all_profiles


def _first(profile: Profile, *paths: str) -> Optional[Any]:
    """The first present value among dotted key paths (profiles of different kinds name things differently)."""
    for path in paths:
        node: Any = profile
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


def _bytes(value: Optional[Any]) -> str:
    if not isinstance(value, (int, float)):
        return "–" if value is None else str(value)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{int(value)} B"


def _clock(hz: Optional[Any]) -> str:
    if not isinstance(hz, (int, float)):
        return "–"
    return f"{hz / 1e9:g} GHz" if hz >= 1e9 else f"{hz / 1e6:g} MHz"


def _power(profile: Profile) -> str:
    model = profile.get("power_model") or {}
    if model.get("idle_w") is not None and model.get("full_load_w") is not None:
        return f"{model['idle_w']:g}-{model['full_load_w']:g} W"
    for key, unit, scale in (("active_w", "W", 1), ("active_mw", "mW", 1), ("active_power_mw", "mW", 1), ("budget_w", "W budget", 1)):
        if model.get(key) is not None:
            return f"{model[key] * scale:g} {unit}"
    return "–"


def _connection(profile: Profile) -> str:
    conn = profile.get("connection")
    if isinstance(conn, dict):
        where = next((conn[k] for k in ("address", "machine", "board", "port", "serial") if conn.get(k)), "")
        return f"{conn.get('kind', '?')}" + (f" {where}" if where else "")
    return str(conn) if conn else "–"


def device_rows() -> List[Dict[str, str]]:
    rows = []
    for name, p in sorted(all_profiles().items()):
        throttle = _first(p, "thermal.throttle_c")
        rows.append({
            "name": name,
            "kind": str(p.get("kind")),
            "core": str(_first(p, "core", "cpu") or "–"),
            "clock": _clock(_first(p, "clock_hz", "cpu_clock_hz", "cpu.clock_hz")),
            "ram": _bytes(_first(p, "memory.ram.bytes", "memory.ram_bytes", "ram_bytes")),
            "flash": _bytes(_first(p, "memory.flash.bytes", "memory.flash_bytes", "flash_bytes")),
            "power": _power(p),
            "throttle": f"{throttle:g} °C" if isinstance(throttle, (int, float)) else "–",
            "connection": _connection(p),
            "description": str(p.get("description", "")),
        })
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_table(rows: List[Dict[str, str]]) -> str:
    columns = ("name", "kind", "core", "clock", "ram", "flash", "power", "throttle", "connection")
    limit = {"name": 22, "core": 16, "power": 11, "connection": 16}  # the console stays under 120 columns;
    rows = [{c: _clip(r[c], limit.get(c, 10)) for c in columns} for r in rows]  # --json has every value whole
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) if rows else len(c) for c in columns}
    lines = ["  ".join(c.upper().ljust(widths[c]) for c in columns)]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)
