"""The typed ``coreml`` part of run.json: one row per Core ML compute-unit setting (edgekit.run.host.coreml_section)."""
from __future__ import annotations

from typing import Dict, List, Optional

from edgekit.results import Section
from edgekit.run.results import Json, LatencySummary


class CoremlRow(Section):
    """One compute-unit setting: its figures, or (``complete`` false) the error that stopped it."""

    compute_units: str
    complete: bool
    error: Optional[str] = None
    load_ms: Optional[float] = None
    first_inference_ms: Optional[float] = None
    latency_ms: Optional[LatencySummary] = None
    throughput_ips: Optional[float] = None
    peak_rss_bytes: Optional[int] = None
    outputs_max_abs_diff: Optional[float] = None
    # Core ML's per-op plan as edgekit.coreml.macos reports it (available, ops, summary | reason): coreml/'s shape
    placement: Optional[Dict[str, Json]] = None


class CoremlSection(Section):
    compute_units: List[CoremlRow]
    primary: str                     # the setting whose run gives run.json's main figures
    outputs_reference: str           # the setting the others' outputs are compared with
    placement_source: str
    note: str
