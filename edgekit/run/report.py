"""run.json (machines), report.md (people) and PNG plots for one device run; every number signed."""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from edgekit import __version__
from edgekit.provenance import host_info, sha256_file, tool_versions, utc_now
from edgekit.report import fmt, json_safe
from edgekit.results import Figure
from edgekit.run.base import RunRequest, RunResult
from edgekit.run.measurement.energy import estimate_from_profile, unavailable
from edgekit.run.results import (ArtifactRef, ColdStart, CoremlSection, DeviceRef, Json, LatencySummary, OutputSample, OutputTensor,
                                 RunConfig, RunReport, Signature, Thermal, updated)
from edgekit.run.measurement.stats import latency_summary, throughput
from edgekit.run.measurement.thermal import ThrottleCriteria, attach_sensors, sample_readings, thermal_verdict, window_series
from edgekit import schemas

log = logging.getLogger(__name__)

RUN_TOOLS = ("edgekit", "numpy", "ai-edge-litert", "onnxruntime", "tflite-micro", "coremltools", "ppk2-api", "smbus2")
PLOT_POINTS = 20000  # at most this many per-iteration points in the time plot (evenly thinned beyond)


def final_energy(result: RunResult, request: RunRequest, wall_s: Optional[float]) -> Figure:
    """The runner's measurement, else the profile's estimate, else 'unavailable' with every reason."""
    if result.energy is not None:
        return result.energy
    if not result.complete:
        return unavailable(f"the run did not complete ({result.incomplete_reason})")
    count = len(result.latencies_ms)
    if count and wall_s:
        estimate = estimate_from_profile(result.device.profile, wall_s / count, request.options.threads)
        if estimate:
            return estimate
    reasons = [result.extra.get("energy_unavailable_reason") or "the runner measured no energy"]
    reasons.append("no --power-monitor given" if not request.options.power_monitor else "")
    profile = result.device.profile
    reasons.append(f"device profile {profile.get('name')!r} has no power_model (idle_w, full_load_w, cores)" if profile
                   else "no device profile with a power model")
    return unavailable("; ".join(r for r in reasons if r))


def thermal_section(result: RunResult, request: RunRequest, wall_s: Optional[float], criteria: ThrottleCriteria) -> Thermal:
    readings = [sample_readings(s) for s in result.sensors]
    available = list(result.extra.get("sensors_available", []))
    if request.sustain_s <= 0:
        return Thermal(sustained=False, sensors_available=available, readings=readings,
                       note="single run; use --sustain SECONDS for the window series and the throttling verdict")
    windows = attach_sensors(window_series(result.timestamps_s, result.latencies_ms, request.window_s, wall_s), readings)
    throttle_c = (result.device.profile.get("thermal") or {}).get("throttle_c")
    verdict = thermal_verdict(windows, readings, available, criteria=criteria, throttle_c=throttle_c)
    return Thermal(sustained=True, window_s=request.window_s, windows=windows, readings=readings, verdict=verdict)


def outputs_summary(result: RunResult) -> List[OutputSample]:
    return [OutputSample(sample=i, tensors=[OutputTensor(name=n, dtype=str(a.dtype), shape=list(a.shape),
                                                         sha256=hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())
                                            for n, a in sample.items()])
            for i, sample in enumerate(result.outputs)]


def cold_start_note(result: RunResult) -> Optional[str]:
    if result.load_ms is None:
        return None
    if result.runtime.get("name") == "coremltools":
        return ("load = MLModel(path, compute_units): Core ML compiles the package and loads it (coremltools already "
                "imported; its import time is runtime_import); first_inference = the first predict alone")
    return ("load = model file read + interpreter creation + tensor allocation (runtime library already "
            "imported; its import time is runtime_import); first_inference = the first invoke alone")


MCU_MEMORY_FACTS = ("arena_bytes", "flash_bytes", "ram_bytes")  # repeated at run.json's top level


def build_run_report(result: RunResult, request: RunRequest, *, inputs_description: Dict[str, Json],
                     criteria: ThrottleCriteria = ThrottleCriteria()) -> RunReport:
    """run.json of one run (without the plots and latencies file, which ``write_run_outputs`` adds)."""
    if "placement" in result.runtime and not result.extra.get("coreml"):  # a Core ML run from a remote runner (ssh to a Mac)
        from edgekit.run.runners.host import coreml_section

        unit = str(result.runtime.get("compute_units", "all"))
        result.extra["coreml"] = coreml_section([unit], {unit: result}, {}, unit)
    wall_s = result.extra.get("warm_wall_s")
    device = result.device
    profile = device.profile or {}
    artifact = Path(request.artifact)
    artifact_sha = sha256_file(artifact)
    memory = result.memory.present()
    top_level = {**result.work.present(), **{k: v for k, v in memory.items() if k in MCU_MEMORY_FACTS}}
    return RunReport(
        edgekit_run=1,
        complete=result.complete,
        incomplete_reason=result.incomplete_reason or None,
        fault=result.fault,
        artifact=ArtifactRef(path=str(artifact), sha256=artifact_sha),
        device=DeviceRef(name=device.name, kind=device.kind, address=device.address,
                         profile=profile.get("name"), profile_path=profile.get("_path")),
        runtime=json_safe(result.runtime),
        config=RunConfig(iterations=request.iterations, warmup=request.warmup, sustain_s=request.sustain_s,
                         window_s=request.window_s, timeout_s=request.timeout_s, **request.options.config(),
                         inputs=json_safe(inputs_description)),
        cold_start_ms=ColdStart(load=result.load_ms, first_inference=result.first_inference_ms,
                                runtime_import=result.extra.get("runtime_import_ms")),
        cold_start_note=cold_start_note(result),
        latency_ms=LatencySummary(**latency_summary(result.latencies_ms)),
        latency_note="warm iterations; each latency covers the runtime's invoke call only" if result.latencies_ms else
        "no per-inference latencies measured on this device (see the work and estimate fields)",
        throughput_ips=throughput(len(result.latencies_ms), wall_s),
        memory=result.memory,
        energy_uj_per_inference=final_energy(result, request, wall_s),
        thermal=thermal_section(result, request, wall_s, criteria),
        work=result.work,
        outputs=outputs_summary(result),
        outputs_file="outputs.npz" if result.outputs else None,
        extra=json_safe({k: v for k, v in result.extra.items() if k not in ("energy_unavailable_reason", "runtime_import_ms", "coreml")}),
        **({"coreml": result.extra["coreml"]} if result.extra.get("coreml") else {}),  # per compute unit setting
        **top_level,  # MCU facts (instructions_per_inference, arena_bytes, ...) at the top level too
        signature=Signature(artifact_sha256=artifact_sha, device_profile=profile.get("name"), device=device.name,
                            runtime=json_safe(result.runtime), tools=tool_versions(RUN_TOOLS), host=host_info(),
                            created=utc_now(), edgekit=__version__),
    )


# --- Markdown --------------------------------------------------------------------------------------
def _ms(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.4g} ms"


def markdown(report: RunReport) -> str:
    """report.md, rendered from the typed run report."""
    lat, cold, energy = report.latency_ms, report.cold_start_ms, report.energy_uj_per_inference
    device, runtime, inputs = report.device, report.runtime, report.config.inputs
    lines = [f"# edgekit run: {Path(report.artifact.path).name} on {device.name}", ""]
    if not report.complete:
        lines += [f"**INCOMPLETE RUN:** {report.incomplete_reason}. The figures below cover what was measured before it stopped.", ""]
    lines += [
        f"- Artifact sha256 `{report.artifact.sha256}`",
        f"- Device `{device.name}` ({device.kind}{', ' + device.address if device.address else ''}), "
        f"profile `{device.profile or 'none'}`",
        f"- Runtime: {', '.join(f'{k} {v}' for k, v in runtime.items() if v is not None) or 'not reached'}",
        f"- Inputs: {inputs.get('kind', inputs.get('path', ''))}, "
        f"{inputs.get('samples', inputs.get('selected', '?'))} sample(s)",
        f"- Signed {report.signature.created} on {report.signature.host.get('hostname')} "
        f"({report.signature.host.get('platform')})",
        "",
        "## Cold start and latency",
        "",
        "| runtime import | load / init | first inference | p50 | p90 | p99 | max | mean | std | warm iterations | throughput |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {_ms(cold.runtime_import)} | {_ms(cold.load)} | {_ms(cold.first_inference)} | {_ms(lat.p50)} | {_ms(lat.p90)} | {_ms(lat.p99)} | "
        f"{_ms(lat.max)} | {_ms(lat.mean)} | {_ms(lat.std)} | {lat.count} | "
        f"{fmt(report.throughput_ips) + ' /s' if report.throughput_ips else '–'} |",
        "",
        "; ".join(n for n in (report.latency_note, report.cold_start_note) if n) + ".",
        "",
    ]
    if report.coreml:
        lines += coreml_lines(report.coreml) + [""]
    lines += ["## Memory", ""]
    lines += [f"- {k}: {v:,}" if isinstance(v, int) else f"- {k}: {v}" for k, v in report.memory.present().items()] or ["- not reported"]
    lines += ["", "## Energy per inference", ""]
    if energy.method == "unavailable":
        lines.append(f"**unavailable**: {energy.reason}")
    else:
        lines.append(f"**{fmt(energy.value)} µJ** ({energy.method}; source: {energy.source})")
        details = energy.model_extra or {}
        for key in ("model", "note", "average_power_w"):
            if details.get(key) is not None:
                lines.append(f"- {key}: {fmt(details[key]) if isinstance(details[key], float) else details[key]}")
    lines += ["", "## Thermal", ""] + _thermal_lines(report.thermal)
    work = report.work.present()
    if work:
        lines += ["", "## Work counted on the device", ""] + [f"- {k}: {v}" for k, v in work.items() if not isinstance(v, (dict, list))]
    lines += [""] + [f"![{Path(name).stem.replace('_', ' ')}]({name})\n" for name in report.plots]
    return "\n".join(lines)


def coreml_lines(coreml: CoremlSection) -> List[str]:
    """The per-compute-unit table and each setting's placement (Core ML's estimate, labelled as such)."""
    from edgekit.coreml.macos import placement_line

    lines = ["## Core ML compute units", "",
             f"The figures above are the `{coreml.primary}` run; {coreml.note}.", "",
             "| compute units | load | first inference | p50 | p90 | p99 | max | warm iterations | peak RSS | "
             f"max abs diff vs {coreml.outputs_reference} | placement (preferred device; estimated) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in coreml.compute_units:
        if row.error:
            lines.append(f"| {row.compute_units} | **failed**: {row.error.replace('|', '/')} |" + " |" * 9)
            continue
        lat, placement = row.latency_ms, row.placement or {}
        where = placement_line(placement.get("summary")) if placement.get("available") else f"unavailable: {placement.get('reason')}"
        rss = f"{row.peak_rss_bytes / 2**20:.1f} MiB" if row.peak_rss_bytes else "–"
        diff = "reference" if row.compute_units == coreml.outputs_reference else \
            ("–" if row.outputs_max_abs_diff is None else f"{row.outputs_max_abs_diff:.3g}")
        lines.append(f"| {row.compute_units} | {_ms(row.load_ms)} | {_ms(row.first_inference_ms)} | {_ms(lat.p50)} | "
                     f"{_ms(lat.p90)} | {_ms(lat.p99)} | {_ms(lat.max)} | {lat.count} | {rss} | {diff} | {where} |")
    lines += ["", f"Placement: {coreml.placement_source}; per-op detail in run.json (`coreml.compute_units[].placement.ops`).", ""]
    for row in coreml.compute_units:
        summary = (row.placement or {}).get("summary")
        if not summary:
            continue
        lines += [f"- `{row.compute_units}`: " + "; ".join(
            f"{device}: " + ", ".join(f"{op} x{n}" for op, n in entry["op_types"].items())
            for device, entry in summary["by_device"].items())]
    return lines


def cell(value: Optional[float]) -> str:
    return fmt(value) if value is not None else "–"


def _thermal_lines(thermal: Thermal) -> List[str]:
    sensors = ", ".join(thermal.sensors_available or []) or "none on this device"
    if not thermal.sustained:
        return [f"Sensors: {sensors}. {thermal.note}."]
    v = thermal.verdict
    state = {True: "**throttling detected**", False: "no throttling detected", None: "undetermined"}[v.throttling_detected]
    lines = [f"Verdict: {state}" + (f", onset at {v.onset_s:.1f} s (first shown by {v.first_signal})" if v.onset_s is not None else ""),
             "",
             f"- Sustained-to-peak throughput: {fmt(v.sustained_to_peak) if v.sustained_to_peak is not None else '–'} "
             f"(peak {fmt(v.peak_throughput_ips)} /s, sustained {fmt(v.sustained_throughput_ips)} /s)",
             "- Signals: " + (", ".join(f"{k} at {s.onset_s:.1f} s" for k, s in v.signals.items()) or "none"),
             f"- Sensors: {sensors}",
             f"- Latency test: {v.criteria.rule}"
             + ("" if v.latency_test.usable else f" — not usable: {v.latency_test.reason}"),
             "", "| window start (s) | count | p50 ms | p90 ms | p99 ms | mean ms | throughput /s | max temp °C |",
             "|---|---|---|---|---|---|---|---|"]
    for w in thermal.windows or []:
        temp = max(w.temperature_c.values()) if w.temperature_c else None
        lines.append(f"| {w.start_s:.1f} | {w.count} | {cell(w.p50_ms)} | {cell(w.p90_ms)} | "
                     f"{cell(w.p99_ms)} | {cell(w.mean_ms)} | {fmt(w.throughput_ips)} | {fmt(temp) if temp else '–'} |")
    return lines


# --- plots -----------------------------------------------------------------------------------------
def write_plots(folder: Path, result: RunResult, report: RunReport) -> List[str]:
    if not result.latencies_ms:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat = np.asarray(result.latencies_ms)
    title = f"{Path(report.artifact.path).name} on {report.device.name}"
    fig, ax = plt.subplots(figsize=(7, 4))
    lo, hi = max(float(lat.min()), 1e-6), max(float(lat.max()), 1e-6) * 1.0001
    ax.hist(lat, bins=np.geomspace(lo, hi, 80) if hi / lo > 1.01 else 10, color="#4477aa")
    ax.set_xscale("log")
    for key, style in (("p50", "-"), ("p90", "--"), ("p99", ":")):
        value = getattr(report.latency_ms, key)
        ax.axvline(value, color="k", linestyle=style, label=f"{key} {value:.3g} ms")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("iterations")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "latency_hist.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    t = np.asarray(result.timestamps_s)
    step = max(1, lat.size // PLOT_POINTS)
    ax.plot(t[::step], lat[::step], ".", markersize=1.5, color="#999999", label="iterations")
    thermal = report.thermal
    if thermal.sustained and thermal.windows:
        windows = [w for w in thermal.windows if w.count]
        mids = [w.start_s + w.length_s / 2 for w in windows]
        for key, color in (("p50_ms", "#228833"), ("p90_ms", "#ccbb44"), ("p99_ms", "#ee6677"), ("mean_ms", "#4477aa")):
            ax.plot(mids, [getattr(w, key) for w in windows], "-o", markersize=3, color=color, label=f"window {key[:-3]}")
        onset = thermal.verdict.onset_s if thermal.verdict else None
        if onset is not None:
            ax.axvline(onset, color="red", linestyle="--", label=f"throttling onset {onset:.1f} s")
    ax.set_yscale("log")
    ax.set_xlabel("time since warm start (s)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "latency_over_time.png", dpi=100)
    plt.close(fig)
    return ["latency_hist.png", "latency_over_time.png"]


def write_run_outputs(folder: Path, result: RunResult, report: RunReport) -> RunReport:
    """Into an (atomic staging) folder: run.json, report.md, report.html, plots, outputs.npz (device outputs per sample),
    latencies.npz (every warm iteration's start time and latency, for re-analysis). Returns the report as written."""
    folder = Path(folder)
    if result.outputs:
        arrays = {f"s{i}__{name}": a for i, sample in enumerate(result.outputs) for name, a in sample.items()}
        with open(folder / "outputs.npz", "wb") as handle:
            np.savez(handle, **arrays)
    if result.latencies_ms:
        with open(folder / "latencies.npz", "wb") as handle:
            np.savez(handle, t_s=np.asarray(result.timestamps_s), latency_ms=np.asarray(result.latencies_ms))
        report = updated(report, latencies_file="latencies.npz")
    report = updated(report, plots=write_plots(folder, result, report))
    (folder / "run.json").write_text(schemas.dumps("run", json_safe(report.to_dict())))
    (folder / "report.md").write_text(markdown(report))
    from edgekit.report_html.page import write_page
    from edgekit.report_html.run import run_page

    write_page(folder / "report.html", run_page(report))
    return report
