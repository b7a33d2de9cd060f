"""compile.json (machines), report.md (people) and the per-layer cycles plot of `edgekit compile`.

Every figure here is Vela's performance *estimate*, read from Vela's own CSVs; each carries the label
"estimated (Vela performance model, <accelerator>, <system config>, <memory mode>, clock X MHz)". The only numbers
edgekit derives are the network MAC utilization (Vela's MACs / (Vela's cycles x the config's MACs per cycle), the
same formula as Vela's per-layer Util%) and unit conversions (KiB -> bytes, s -> ms).
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Dict, Mapping, Union

from edgekit import __version__
from edgekit.artifact import Artifact, Manifest
from edgekit.atomic import atomic_output_dir
from edgekit.compile.vela_tool import VelaOptions, VelaRun, resolve_config, vela_version
from edgekit.tflite_graph import Graph, read_graph
from edgekit.provenance import host_info, sha256_bytes, tool_versions, utc_now
from edgekit.compile.result import (CompileReport, CompileSignature, CompileTarget, CompiledModel, CpuOperator,
                                    Estimate, ModelFacts, NpuMemory, NpuPerformance, Placement, VelaFacts, VelaLayer)

log = logging.getLogger(__name__)

COMPILE_JSON = "compile.json"
REPORT_MD = "report.md"
PLOT_PNG = "per_layer_cycles.png"
VELA_MODEL = "model_vela.tflite"
KIB = 1024


def macs_per_cycle(accelerator: str) -> int:
    """MACs per cycle of an accelerator config: the number in its name (ethos-u55-128 -> 128)."""
    match = re.search(r"-(\d+)$", accelerator)
    if not match:
        raise ValueError(f"accelerator {accelerator!r} has no MACs/cycle suffix")
    return int(match.group(1))


def estimate_label(accelerator: str, system_config: str, memory_mode: str, clock_hz: float) -> str:
    return (f"estimated (Vela performance model, {accelerator}, {system_config}, {memory_mode}, "
            f"clock {clock_hz / 1e6:g} MHz)")


def _kib_to_bytes(value: Any) -> int:
    return int(round(float(value) * KIB))


def _npu_ops(graph: Graph) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for op in graph.ops:
        counts[op.label] = counts.get(op.label, 0) + 1
    return counts


def build_compile_json(data: bytes, graph: Graph, path: Path, options: VelaOptions, run: VelaRun,
                       vela_bytes: bytes) -> CompileReport:
    s = run.summary
    accelerator = options.accelerator
    clock = float(s["core_clock"])
    system_config, memory_mode = str(s["system_config"]), str(s["memory_mode"])
    label = estimate_label(accelerator, system_config, memory_mode, clock)
    cycles = int(s["cycles_total"])
    macs = int(s["nn_macs"])
    per_cycle = macs_per_cycle(accelerator)
    layers = run.layers
    vela_graph = read_graph(vela_bytes, VELA_MODEL)
    cpu_ops = [CpuOperator(op=op.op, ofm=op.ofm, reasons=list(op.reasons)) for op in run.cpu_operators]
    return CompileReport(
        target=CompileTarget(accelerator=accelerator, macs_per_cycle=per_cycle, system_config=system_config,
                             memory_mode=memory_mode, config_file=str(resolve_config(options.config)),
                             config_given=options.config, system_config_given=options.system_config,
                             memory_mode_given=options.memory_mode, optimise=options.optimise, npu_clock_hz=clock),
        estimate=Estimate(label=label, source=f"Vela {vela_version()} performance model (--verbose-performance, "
                                              "*_summary_*.csv, *_per-layer.csv); not a measurement: nothing ran on an NPU"),
        model=ModelFacts(source=str(path), sha256=sha256_bytes(data), bytes=len(data), operators=len(graph.ops),
                         operator_counts=_npu_ops(graph)),
        output=CompiledModel(file=VELA_MODEL, sha256=sha256_bytes(vela_bytes), bytes=len(vela_bytes),
                             operator_counts=_npu_ops(vela_graph),
                             note="the NPU part is one CUSTOM 'ethos-u' operator (command stream + encoded weights); "
                                  "operators Vela could not place stay as TFLite builtins for the CPU"),
        performance=NpuPerformance(
            label=label,
            npu_cycles_total=cycles,
            cycles_npu=int(s["cycles_npu"]),
            cycles_sram_access=int(s["cycles_sram_access"]),
            cycles_dram_access=int(s["cycles_dram_access"]),
            cycles_on_chip_flash_access=int(s["cycles_on_chip_flash_access"]),
            cycles_off_chip_flash_access=int(s["cycles_off_chip_flash_access"]),
            inference_time_s=cycles / clock,
            inference_time_ms=cycles / clock * 1e3,
            vela_inference_time_s=float(s["inference_time"]),
            inferences_per_second=float(s["inferences_per_second"]),
            macs_total=macs,
            mac_utilization_percent=100.0 * macs / (cycles * per_cycle) if cycles else 0.0,
            mac_utilization_method=f"Vela nn_macs / (Vela cycles_total x {per_cycle} MACs/cycle), "
                                   "the formula of Vela's per-layer Util% (MAC)",
            layers_cycles_sum=sum(int(layer.cycles) for layer in layers),
            layers_macs_sum=sum(int(layer.macs) for layer in layers),
        ),
        memory=NpuMemory(
            label=label,
            sram_used_bytes=_kib_to_bytes(s["sram_memory_used"]),
            off_chip_flash_used_bytes=_kib_to_bytes(s["off_chip_flash_memory_used"]),
            on_chip_flash_used_bytes=_kib_to_bytes(s["on_chip_flash_memory_used"]),
            dram_used_bytes=_kib_to_bytes(s["dram_memory_used"]),
            weights_original_bytes=int(s["total_original_weights"]),
            weights_npu_encoded_bytes=int(s["total_npu_encoded_weights"]),
            weights_storage_area=str(s["weights_storage_area"]),
            feature_map_storage_area=str(s["feature_map_storage_area"]),
            arena_cache_size_bytes=int(float(s["arena_cache_size"])),
            method="Vela's tensor allocation for this memory mode (KiB in its summary CSV x 1024)",
        ),
        placement=Placement(
            npu_operators=sum(1 for layer in layers if layer.target == "NPU"),
            cpu_layers=[layer.name for layer in layers if layer.target != "NPU"],
            cpu_operators=cpu_ops,
            cpu_operator_lines=list(run.cpu_passthrough),
            all_on_npu=not cpu_ops and not run.cpu_passthrough,
        ),
        layers=layers,
        vela=VelaFacts(version=vela_version(), command=[_short(c) for c in run.command], warnings=run.warnings),
        signature=CompileSignature(model_sha256=sha256_bytes(data), vela_version=vela_version(),
                                   tools=tool_versions(("edgekit", "ethos-u-vela", "numpy")), host=host_info(),
                                   created=utc_now(), edgekit=__version__),
    )


def _short(arg: str) -> str:
    return Path(arg).name if "/" in arg and Path(arg).name.endswith((".tflite", ".ini")) else arg


# --- people --------------------------------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def report_markdown(info: CompileReport) -> str:
    t, p, m, pl = info.target, info.performance, info.memory, info.placement
    label = info.estimate.label
    lines = [
        f"# edgekit compile: {Path(info.model.source).name} -> {t.accelerator}",
        "",
        f"Every figure below is **{label}**: Vela's performance model, not a measurement. Nothing ran on an NPU.",
        "",
        f"- model sha256 `{info.model.sha256}` ({info.model.bytes:,} bytes, {info.model.operators} operators)",
        f"- compiled: `{info.output.file}` sha256 `{info.output.sha256}` ({info.output.bytes:,} bytes)",
        f"- Vela {info.vela.version}; config {Path(t.config_file).name}, system config `{t.system_config}`, "
        f"memory mode `{t.memory_mode}`, optimise {t.optimise}",
        f"- host {info.signature.host.hostname}, {info.signature.created}",
        "",
        "## Summary (estimated)",
        "",
        "| figure | value |",
        "|---|---|",
        f"| total NPU cycles | {p.npu_cycles_total:,} |",
        f"| inference time at {t.npu_clock_hz / 1e6:g} MHz | {_ms(p.inference_time_s)} |",
        f"| MACs | {p.macs_total:,} |",
        f"| MAC utilization ({t.macs_per_cycle} MACs/cycle) | {p.mac_utilization_percent:.2f} % |",
        f"| SRAM used | {m.sram_used_bytes:,} bytes |",
        f"| off-chip flash used | {m.off_chip_flash_used_bytes:,} bytes |",
        f"| DRAM used | {m.dram_used_bytes:,} bytes |",
        f"| weights: original / NPU-encoded | {m.weights_original_bytes:,} / {m.weights_npu_encoded_bytes:,} bytes |",
        f"| cycles: NPU / SRAM / off-chip flash access | {p.cycles_npu:,} / {p.cycles_sram_access:,} / "
        f"{p.cycles_off_chip_flash_access:,} |",
        "",
        "## Operators left on the CPU",
        "",
    ]
    if pl.all_on_npu:
        lines.append("None: Vela placed every operator on the NPU (one CUSTOM 'ethos-u' operator).")
    else:
        for op in pl.cpu_operators:
            lines.append(f"- `{op.op}` -> `{op.ofm}`: " + "; ".join(op.reasons or ["(Vela gave no reason)"]))
        for line in pl.cpu_operator_lines:
            lines.append(f"- Vela: CPU: {line}")
        lines.append("")
        lines.append("These run on the Cortex-M (TFLite Micro or edgekit's runtime), outside the NPU estimate.")
    lines += ["", f"## Per layer ({label})", "", f"![per-layer NPU cycles]({PLOT_PNG})", "",
              "| # | operator (original -> NPU) | target | cycles | % cycles | MACs | util % | name |",
              "|---|---|---|---|---|---|---|---|"]
    for layer in info.layers:
        name = layer.name.split(";")[0]
        lines.append(f"| {layer.index} | {layer.original_operator} -> {layer.operator} | {layer.target} | "
                     f"{layer.cycles:,} | {layer.cycles_percent:.2f} | {layer.macs:,} | "
                     f"{_utilization(layer)} | {name[:60]} |")
    lines += ["", "util % is Vela's per-layer figure; `–` where the layer has no MACs (e.g. an activation fused into "
              "the previous NPU operation, 0 cycles).", ""]
    lines += ["", f"Sum of per-layer cycles {p.layers_cycles_sum:,} (Vela's total {p.npu_cycles_total:,}).", ""]
    if info.vela.warnings:
        lines += ["## Vela's warnings", ""] + [f"- {w}" for w in info.vela.warnings] + [""]
    return "\n".join(lines)


def plot_layers(info: CompileReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = info.layers
    fig, ax = plt.subplots(figsize=(max(6.0, 0.22 * len(layers) + 2), 4.0))
    colors = ["tab:blue" if layer.target == "NPU" else "tab:red" for layer in layers]
    ax.bar([layer.index for layer in layers], [layer.cycles for layer in layers], color=colors)
    ax.set_xlabel("layer (Vela per-layer order; red = CPU)")
    ax.set_ylabel("cycles")
    ax.set_title(f"{Path(info.model.source).name}: per-layer cycles\n{info.estimate.label}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(outdir: Path, info: CompileReport, run: VelaRun, vela_bytes: bytes) -> None:
    """model_vela.tflite, compile.json, report.md, the plot, Vela's CSVs and log, manifest.json: all or nothing."""
    with atomic_output_dir(outdir) as stage:
        write_compile_files(stage, info, run, vela_bytes)


def write_compile_files(stage: Path, info: Union[CompileReport, Mapping[str, object]], run: VelaRun, vela_bytes: bytes) -> None:
    """The files of write_outputs into an existing (staging) folder (``info``: the report, or its compile.json)."""
    if not isinstance(info, CompileReport):
        info = CompileReport.from_json(info)
    stage.mkdir(parents=True, exist_ok=True)
    (stage / VELA_MODEL).write_bytes(vela_bytes)
    (stage / COMPILE_JSON).write_text(info.dumps())
    (stage / REPORT_MD).write_text(report_markdown(info))
    plot_layers(info, stage / PLOT_PNG)
    (stage / "vela_per_layer.csv").write_bytes(run.per_layer_csv.read_bytes())
    (stage / "vela_summary.csv").write_bytes(run.summary_csv.read_bytes())
    (stage / "vela.log").write_text(run.stdout + ("\n--- stderr ---\n" + run.stderr if run.stderr.strip() else ""))
    params = {"target": info.target.to_dict(), "estimate": info.estimate.label}
    tools = tool_versions(("edgekit", "ethos-u-vela"))
    manifest = Manifest(command="compile", extra={"signature": info.signature})
    source = Artifact(format="tflite", path=Path(info.model.source), sha256=info.model.sha256,
                      stage="quantize", tools={})
    compiled = manifest.add(Artifact.from_file(stage / VELA_MODEL, format="tflite-ethos-u", stage="compile",
                                               parent=source, params=params, tools=tools))
    for name, fmt in ((COMPILE_JSON, "compile-report"), (REPORT_MD, "markdown"), (PLOT_PNG, "png"),
                      ("vela_per_layer.csv", "csv"), ("vela_summary.csv", "csv"), ("vela.log", "log")):
        manifest.add(Artifact.from_file(stage / name, format=fmt, stage="compile", parent=compiled, tools=tools))
    manifest.write(stage / "manifest.json")


def _utilization(layer: VelaLayer) -> str:
    """Vela writes 100 % for a layer with no MACs and no cycles; that is not a utilization."""
    return "–" if not layer.macs else f"{layer.mac_utilization_percent:.2f}"
