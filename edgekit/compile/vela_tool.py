"""Arm Vela (ethos-u-vela) as a tool: its accelerators and config files, one run as a subprocess, its output parsed.

Vela is run as a subprocess (``python -m ethosu.vela`` of this interpreter) rather than in-process: its C++
core (regor) segfaults on some damaged inputs, and a subprocess gives a timeout and clean stdout/stderr capture.
Everything here only reads Vela's own files and messages; nothing is estimated by edgekit.
"""
from __future__ import annotations

import configparser
import csv
import functools
import logging
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from edgekit.compile.result import VelaLayer
from edgekit.errors import ConversionError, ToolMissingError, UserError
from edgekit.progress import step_progress

log = logging.getLogger(__name__)

VELA_INSTALL = "pip install ethos-u-vela==5.2.0"
SHIPPED_CONFIG = "Arm/vela.ini"   # the reference config inside the wheel (ethosu/config_files/Arm/vela.ini)
OPTIMISE = ("Performance", "Size")
DEFAULT_TIMEOUT_S = 300.0


def _vela():
    try:
        from ethosu.vela import architecture_features, vela  # noqa: F401
    except ImportError:
        raise ToolMissingError("ethos-u-vela (Arm Vela)", VELA_INSTALL) from None
    return architecture_features


@functools.lru_cache(maxsize=1)
def accelerators() -> Tuple[str, ...]:
    """Every --accelerator-config this Vela accepts (read from Vela itself)."""
    return tuple(_vela().Accelerator.member_list())


@functools.lru_cache(maxsize=1)
def vela_version() -> str:
    from edgekit.provenance import tool_version

    _vela()
    return tool_version("ethos-u-vela") or "unknown"


def config_files_dir() -> Path:
    return Path(_vela().CONFIG_FILES_PATH)


def resolve_config(config: Optional[str]) -> Path:
    """A --config value -> the .ini file: a path, or a name under Vela's config_files (e.g. Arm/vela.ini)."""
    name = config or SHIPPED_CONFIG
    path = Path(name)
    if path.is_file():
        return path.resolve()
    shipped = config_files_dir() / name
    if shipped.is_file():
        return shipped
    raise UserError(f"Vela config file {name!r} not found (neither a file nor one of Vela's shipped configs)",
                    fix=f"pass a path to a vela.ini, or {SHIPPED_CONFIG} (`vela --list-config-files` lists the shipped ones)")


def config_sections(path: Path) -> Tuple[List[str], List[str]]:
    """(system configs, memory modes) defined in a Vela .ini file."""
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise UserError(f"Vela config {path} cannot be parsed: {exc}", fix="fix the .ini syntax") from exc
    systems = [s.split(".", 1)[1] for s in parser.sections() if s.startswith("System_Config.")]
    modes = [s.split(".", 1)[1] for s in parser.sections() if s.startswith("Memory_Mode.")]
    return systems, modes


@dataclass(frozen=True)
class VelaOptions:
    """What to compile for. ``None`` system config / memory mode = Vela's own default for the accelerator."""

    accelerator: str = "ethos-u55-128"
    system_config: Optional[str] = None
    memory_mode: Optional[str] = None
    config: Optional[str] = None          # a .ini path or a shipped name; None = Vela's shipped Arm/vela.ini
    optimise: str = "Performance"
    timeout_s: float = DEFAULT_TIMEOUT_S

    def problems(self) -> List[str]:
        """Every option Vela would refuse, each naming the valid values (all collected, not the first only)."""
        found: List[str] = []
        valid = accelerators()
        if self.accelerator not in valid:
            found.append(f"unknown accelerator config {self.accelerator!r}; Vela {vela_version()} accepts: {', '.join(valid)}")
        if self.optimise not in OPTIMISE:
            found.append(f"--optimise {self.optimise!r} must be one of {', '.join(OPTIMISE)}")
        try:
            path = resolve_config(self.config)
        except UserError as exc:
            return found + [exc.message]
        systems, modes = config_sections(path)
        if self.system_config is not None and self.system_config not in systems:
            found.append(f"system config {self.system_config!r} is not in {path.name} ({path}); it defines: "
                         f"{', '.join(systems) or 'none'}")
        if self.memory_mode is not None and self.memory_mode not in modes:
            found.append(f"memory mode {self.memory_mode!r} is not in {path.name} ({path}); it defines: "
                         f"{', '.join(modes) or 'none'}")
        if self.config is not None and (self.system_config is None or self.memory_mode is None):
            found.append(f"with --config, Vela needs both --system-config and --memory-mode (it refuses its internal "
                         f"defaults with a config file); {path.name} defines system configs: {', '.join(systems)}; "
                         f"memory modes: {', '.join(modes)}")
        return found

    def cli_args(self) -> List[str]:
        args = ["--accelerator-config", self.accelerator, "--optimise", self.optimise]
        if self.config is not None:
            args += ["--config", str(resolve_config(self.config))]
        if self.system_config is not None:
            args += ["--system-config", self.system_config]
        if self.memory_mode is not None:
            args += ["--memory-mode", self.memory_mode]
        return args


@dataclass
class CpuOperator:
    """An operator Vela leaves on the CPU, with Vela's own reason(s)."""

    op: str
    ofm: str
    reasons: List[str] = field(default_factory=list)


SummaryCell = Union[int, float, str]   # a cell of Vela's summary CSV: a number where it writes one


@dataclass
class VelaRun:
    """The files and messages of one successful Vela run."""

    command: List[str]
    stdout: str
    stderr: str
    vela_tflite: Path
    summary_csv: Path
    per_layer_csv: Path
    summary: Dict[str, SummaryCell]      # Vela's summary CSV row: column -> number or text, as Vela writes it
    layers: List[VelaLayer]
    cpu_operators: List[CpuOperator]
    cpu_passthrough: List[str]           # "Passthrough = deq (outputs [1, 8, 8, 8])" lines of --show-cpu-operations
    warnings: List[str]


_FAILURE_MARKERS = ("Error", "error:", "Failed", "failed", "Exception")


def failure_reason(stdout: str, stderr: str) -> str:
    """Vela's own words for a failure: the exception message lines (without the Python traceback frames)."""
    text = (stderr or "") + "\n" + (stdout or "")
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Warning: No ") and not ln.startswith("Tensor '")]
    tb_end = [i for i, ln in enumerate(lines) if re.match(r"^\w+(\.\w+)*(Error|Exception): ", ln)]
    if tb_end:
        message = lines[tb_end[-1]:]
        message[0] = re.sub(r"^\w+(\.\w+)*(Error|Exception): ", "", message[0])
        return "\n".join(message)[-3000:]
    picked = [ln for ln in lines if any(m in ln for m in _FAILURE_MARKERS) and not ln.lstrip().startswith("File ")]
    return "\n".join(picked or lines[-8:])[-3000:]


def run_vela(model: Path, options: VelaOptions, workdir: Path, *, display: str = "") -> VelaRun:
    """Compile ``model`` with Vela into ``workdir``; a failure raises ConversionError with Vela's reason.

    ``display`` names the model in messages (the user's file name when ``model`` is a staged copy)."""
    display = display or model.name
    problems = options.problems()
    if problems:
        raise UserError(problems[0] if len(problems) == 1 else
                        f"{len(problems)} problems with the Vela options:\n" + "\n".join(f"  - {p}" for p in problems))
    workdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "ethosu.vela", str(model), "--output-dir", str(workdir),
               *options.cli_args(), "--verbose-performance", "--show-cpu-operations"]
    log.debug("vela: %s", " ".join(command))
    compiled = step_progress("Vela", 1)  # seconds even for MLPerf Tiny models
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=options.timeout_s, cwd=workdir)
        compiled(1)
    except subprocess.TimeoutExpired:
        raise ConversionError(f"Vela took longer than {options.timeout_s:.0f} s on {display}",
                              fix="try --optimise Size or a smaller model") from None
    if proc.returncode != 0:
        if proc.returncode < 0:
            name = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else proc.returncode
            reason = (f"Vela crashed ({name}) on {display}; its last output:\n"
                      f"{failure_reason(proc.stdout, proc.stderr) or '(none)'}")
        else:
            reason = f"Vela rejected {display}:\n{failure_reason(proc.stdout, proc.stderr)}"
        raise ConversionError(reason, fix="fix the model (re-export it) or leave the offending layers out; "
                                          "`vela --supported-ops-report` lists what Ethos-U runs")
    stem = model.stem
    vela_tflite = workdir / f"{stem}_vela.tflite"
    per_layer = workdir / f"{stem}_per-layer.csv"
    summaries = sorted(workdir.glob(f"{stem}_summary_*.csv"))
    missing = [p.name for p in (vela_tflite, per_layer) if not p.is_file()] + ([] if summaries else ["*_summary_*.csv"])
    if missing:
        raise ConversionError(f"Vela exited 0 but did not write {', '.join(missing)} (Vela {vela_version()})",
                              fix="run `vela` by hand on the model to see what it printed")
    cpu_ops, passthrough = parse_cpu_operators(proc.stdout + "\n" + proc.stderr)
    return VelaRun(command, proc.stdout, proc.stderr, vela_tflite, summaries[0], per_layer, parse_summary(summaries[0]),
                   parse_per_layer(per_layer), cpu_ops, passthrough, parse_warnings(proc.stdout + "\n" + proc.stderr))


def _number(text: str) -> SummaryCell:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


TEXT_COLUMNS = ("name", "target", "operator", "original_operator")


def parse_summary(path: Path) -> Dict[str, SummaryCell]:  # VelaRun.summary
    """Vela's one-row summary CSV, column -> number or text (read by key in build_compile_json)."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if len(rows) != 1:
        raise ConversionError(f"Vela summary {path.name} has {len(rows)} rows, expected 1")
    return {k: _number(v) for k, v in rows[0].items()}


# per-layer CSV column -> our key
_LAYER_COLUMNS = {
    "Original Operator": "original_operator", "NNG Operator": "operator", "Target": "target",
    "Staging Usage": "staging_usage_bytes", "Peak% (Staging)": "staging_peak_percent", "Op Cycles": "cycles",
    "Network% (cycles)": "cycles_percent", "NPU": "npu_cycles", "SRAM AC": "sram_access_cycles",
    "DRAM AC": "dram_access_cycles", "OnFlash AC": "on_chip_flash_access_cycles",
    "OffFlash AC": "off_chip_flash_access_cycles", "MAC Count": "macs", "Network% (MAC)": "macs_percent",
    "Util% (MAC)": "mac_utilization_percent", "Name": "name",
}


def parse_per_layer(path: Path) -> List[VelaLayer]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        unknown = [c for c in _LAYER_COLUMNS if c not in (reader.fieldnames or [])]
        if unknown:
            raise ConversionError(f"Vela per-layer CSV {path.name} lacks columns {', '.join(unknown)} "
                                  f"(Vela {vela_version()}; edgekit reads the 5.2 layout)")
        return [VelaLayer(index=i, **{key: _number(row[col]) if key not in TEXT_COLUMNS else row[col]
                                      for col, key in _LAYER_COLUMNS.items()}) for i, row in enumerate(reader)]


_CPU_WARNING = re.compile(r"^Warning \(supported operators\) operator: (?P<op>[A-Z0-9_]+), ofm: '(?P<ofm>.*)'\s*$")


def parse_cpu_operators(text: str) -> Tuple[List[CpuOperator], List[str]]:
    """Vela's 'Warning (supported operators) operator: X, ofm: 'T'' + 'Reason: ...' lines, and the CPU: lines."""
    ops: List[CpuOperator] = []
    passthrough: List[str] = []
    current: Optional[CpuOperator] = None
    for line in text.splitlines():
        match = _CPU_WARNING.match(line)
        if match:
            current = CpuOperator(match["op"], match["ofm"])
            ops.append(current)
            continue
        stripped = line.strip()
        if current is not None and stripped.startswith("Reason:"):
            current.reasons.append(stripped[len("Reason:"):].strip())
            continue
        if current is not None and stripped and current.reasons and not stripped.startswith(("Warning", "#", "CPU", "NPU")):
            current.reasons[-1] += " " + stripped
            continue
        current = None
        if stripped.startswith("CPU: "):
            passthrough.append(stripped[len("CPU: "):])
    return ops, passthrough


def parse_warnings(text: str) -> List[str]:
    """Vela's other warnings worth keeping (defaults it chose, deprecations), without the per-tensor noise."""
    return [ln.strip() for ln in text.splitlines()
            if ln.startswith("Warning") and "(supported operators)" not in ln]
