"""`edgekit compile MODEL.tflite --target gpu` (dispatched from edgekit.compile.cli)."""
from __future__ import annotations

from pathlib import Path

CPU_OPS_SHOWN = 5  # ops left on the CPU named on the console (all of them in report.md / gpu.json)


def cmd_compile_gpu(args) -> int:
    from edgekit.console import say_all
    from edgekit.mobile.gpu_delegate import compile_for_gpu

    outdir = args.outdir or Path("out") / "compile" / f"{args.model.stem}-gpu"
    report = compile_for_gpu(args.model, outdir)
    lines = [f"GPU delegate: {report.ops_accepted} of {report.ops_total} ops accepted, {report.partitions} "
             f"partition(s), {report.ops_on_gpu} ops on the GPU; MACs on the CPU "
             f"{100 * report.macs_on_cpu_share:.1f} % ({report.macs_on_cpu:,} of {report.macs_total:,})"]
    on_cpu = [op for op in report.ops if not op.on_gpu]
    for op in on_cpu[:CPU_OPS_SHOWN]:
        why = op.analyzer if op.analyzer != "accepted" else op.delegate_rule
        lines.append(f"  on the CPU: #{op.index} {op.op} -> {op.output[:40]}: "
                     f"{why if why != 'accepted' else 'outside the largest partition'}")
    if len(on_cpu) > CPU_OPS_SHOWN:
        lines.append(f"  ... and {len(on_cpu) - CPU_OPS_SHOWN} more on the CPU (all listed in report.md)")
    lines.append(f"wrote {outdir}/gpu.json, report.md, manifest.json")
    say_all(lines)
    return 0


def cmd_compile_ane(args) -> int:
    from edgekit.console import say_all
    from edgekit.coreml.ane_placement import compile_for_ane

    outdir = args.outdir or Path("out") / "compile" / f"{args.model.stem}-ane"
    report = compile_for_ane(args.model, outdir)
    say_all([f"{len(report.ops)} ops ({', '.join(f'{k} x{v}' for k, v in report.op_counts.items())})",
             f"Neural Engine placement: {report.ops[0].neural_engine if report.ops else 'no ops'}",
             f"wrote {outdir}/coreml_placement.json, report.md (per-op table: report.md)"])
    return 0


# --target name -> (handler, the `edgekit compile` target flags it takes: none, both read the model as it is)
TARGETS = {"gpu": (cmd_compile_gpu, ()), "ane": (cmd_compile_ane, ())}
