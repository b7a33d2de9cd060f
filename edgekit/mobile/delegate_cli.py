"""`edgekit compile MODEL.tflite --target gpu` (dispatched from edgekit.compile.cli)."""
from __future__ import annotations

from pathlib import Path


def cmd_compile_gpu(args) -> int:
    from edgekit.mobile.gpu_delegate import compile_for_gpu

    outdir = args.outdir or Path("out") / "compile" / f"{args.model.stem}-gpu"
    report = compile_for_gpu(args.model, outdir)
    print(f"wrote {outdir}/gpu.json, report.md, manifest.json")
    print(f"GPU delegate: {report['ops_accepted']} of {report['ops_total']} ops accepted, {report['partitions']} "
          f"partition(s), {report['ops_on_gpu']} ops on the GPU; MACs on the CPU "
          f"{100 * report['macs_on_cpu_share']:.1f} % ({report['macs_on_cpu']:,} of {report['macs_total']:,})")
    for op in report["ops"]:
        if not op["on_gpu"]:
            why = op["analyzer"] if op["analyzer"] != "accepted" else op["delegate_rule"]
            print(f"  on the CPU: #{op['index']} {op['op']} -> {op['output'][:60]}: "
                  f"{why if why != 'accepted' else 'outside the largest partition'}")
    return 0


def cmd_compile_ane(args) -> int:
    from edgekit.mobile.coreml_placement import compile_for_ane

    outdir = args.outdir or Path("out") / "compile" / f"{args.model.stem}-ane"
    report = compile_for_ane(args.model, outdir)
    print(f"wrote {outdir}/coreml_placement.json, report.md")
    print(f"{len(report['ops'])} ops ({', '.join(f'{k} x{v}' for k, v in report['op_counts'].items())}); "
          f"Neural Engine placement: {report['ops'][0]['neural_engine'] if report['ops'] else 'no ops'}")
    return 0
