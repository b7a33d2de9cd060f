"""`edgekit compile MODEL_INT8.tflite --target ethos-u55-128 -o OUTDIR`."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List

if TYPE_CHECKING:
    from edgekit.compile.result import CompileReport

DEFAULT_TARGET = "ethos-u55-128"


def register(subparsers) -> Dict[str, Callable]:
    c = subparsers.add_parser("compile", help="int8 .tflite -> Arm Ethos-U NPU model (Vela) + Vela's performance estimate")
    c.add_argument("model", type=Path, help="full-int8 .tflite (e.g. model_int8.tflite from edgekit quantize)")
    c.add_argument("--target", default=DEFAULT_TARGET,
                   help="Vela accelerator config, e.g. ethos-u55-128 (default), ethos-u55-256, ethos-u65-256 "
                        "(an unknown name lists every one Vela accepts); gpu: which ops LiteRT's GPU delegate takes (.tflite); "
                        "ane: the Core ML program's ops (.mlpackage)")
    c.add_argument("--system-config", help="system config section of the Vela config (default: Vela's default for the "
                                           "accelerator, e.g. Ethos_U55_High_End_Embedded)")
    c.add_argument("--memory-mode", help="memory mode section of the Vela config (default: Vela's, e.g. Shared_Sram)")
    c.add_argument("--config", help="Vela .ini file (default: Arm/vela.ini shipped with Vela); needs --system-config "
                                    "and --memory-mode")
    c.add_argument("--optimise", default="Performance", choices=("Performance", "Size"), help="Vela's strategy")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds Vela may take (default 300)")
    c.add_argument("-o", "--outdir", type=Path, help="output folder (default out/compile/<model>-<target>)")
    return {"compile": cmd_compile}


# the target-specific flags of `edgekit compile`: args attribute -> (flag, default); each target's backend names
# the ones it takes (``options``), and a flag set for a target that does not take it is refused
TARGET_FLAGS = {
    "system_config": ("--system-config", None),
    "memory_mode": ("--memory-mode", None),
    "config": ("--config", None),
    "optimise": ("--optimise", "Performance"),
    "timeout": ("--timeout", 300.0),
}


def _target_backend(target: str):
    """(the handler of --target, the TARGET_FLAGS it takes)."""
    if target in ("gpu", "ane"):  # LiteRT GPU delegate placement / Core ML per-op table (edgekit/mobile)
        from edgekit.mobile import delegate_cli

        return delegate_cli.TARGETS[target]
    from edgekit.converters import CONVERTERS
    import edgekit.converters.vela  # noqa: F401  (registers "vela")

    return _compile_vela, CONVERTERS.get("vela").options


def check_target_flags(args, takes) -> None:
    """Refuse every target-specific flag given that the chosen target does not take (all named at once)."""
    given = [f"{flag} {getattr(args, name)}" for name, (flag, default) in TARGET_FLAGS.items()
             if name not in takes and getattr(args, name) != default]
    if given:
        from edgekit.errors import UserError

        takes_text = ", ".join(TARGET_FLAGS[n][0] for n in takes) or "none of them"
        raise UserError(f"--target {args.target} does not take {', '.join(given)} (it takes {takes_text})",
                        fix="drop those options, or choose a target that uses them")


def cmd_compile(args) -> int:
    handler, takes = _target_backend(args.target)
    check_target_flags(args, takes)
    return handler(args)


def _compile_vela(args) -> int:
    import sys

    from edgekit.console import say_all
    from edgekit.converters import CONVERTERS
    from edgekit.progress import progress_bars

    outdir = args.outdir or Path("out") / "compile" / f"{args.model.stem}-{args.target}"
    converter = CONVERTERS.get("vela")()
    with progress_bars(sys.stderr.isatty()):
        result = converter.convert(args.model, target=args.target, outdir=outdir, system_config=args.system_config,
                                   memory_mode=args.memory_mode, config=args.config, optimise=args.optimise,
                                   timeout_s=args.timeout)
    say_all(summary_lines(result.report, outdir))
    return 0


CPU_OPS_SHOWN = 5  # operators left on the CPU named on the console (all of them in report.md / compile.json)


def summary_lines(info: CompileReport, outdir: Path) -> List[str]:
    """The compile's key figures, one short line each; the configuration and sources in full are in compile.json."""
    p, m, pl, t = info.performance, info.memory, info.placement, info.target
    lines = [f"compiled for {t.accelerator} ({t.system_config}, {t.memory_mode}, {t.npu_clock_hz / 1e6:g} MHz)"]
    lines.append(f"NPU: {p.npu_cycles_total:,} cycles = {p.inference_time_ms:.4g} ms per inference (estimated by "
                 f"Vela, not measured)")
    lines.append(f"MACs: {p.macs_total:,}, utilization {p.mac_utilization_percent:.1f} %")
    lines.append(f"memory: SRAM {m.sram_used_bytes:,} B, off-chip flash {m.off_chip_flash_used_bytes:,} B")
    cpu = pl.cpu_operators
    if pl.all_on_npu:
        lines.append("placement: every operator on the NPU")
    else:
        lines.append(f"placement: {len(cpu)} operator(s) on the CPU:")
        for op in cpu[:CPU_OPS_SHOWN]:
            reason = op.reasons[0] if op.reasons else "no reason given"
            more = f" (+{len(op.reasons) - 1} more reasons)" if len(op.reasons) > 1 else ""
            lines.append(f"  {op.op} -> {_short(op.ofm)}: {_short(reason, 70)}{more}")
        if len(cpu) > CPU_OPS_SHOWN:
            lines.append(f"  ... and {len(cpu) - CPU_OPS_SHOWN} more (all listed in report.md)")
    lines.append(f"wrote {outdir}/model_vela.tflite, compile.json, report.md, per_layer_cycles.png, manifest.json")
    lines.append("configuration and method of every figure: compile.json, report.md")
    return lines


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."
