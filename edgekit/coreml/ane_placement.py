"""`edgekit compile MODEL.mlpackage --target ane`: the Core ML program's ops and where they may run.

coremltools documents no per-op Neural Engine support table (its docs list MIL ops and which deployment target
introduced them, not where Core ML places them), and Core ML decides the placement when it compiles the model on
the device. So every op is listed with "decided at runtime" and the way to measure it: on a Mac,
`edgekit run M.mlpackage --device macos --compute-units each` (MLComputePlan: preferred device per op).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from edgekit.errors import InvalidModelError
from edgekit.mobile.placement import CoremlOp, CoremlPlacement

RUNTIME = "decided at runtime, use `edgekit run MODEL.mlpackage --device macos --compute-units each`"
SKIPPED = {"const"}  # constants are not placed


def coreml_report(package: Path) -> CoremlPlacement:
    from edgekit.coreml.evaluator import MILProgram

    package = Path(package)
    if package.suffix != ".mlpackage" or not (package / "Manifest.json").is_file():
        raise InvalidModelError(f"--target ane reads a .mlpackage; {package} is not one",
                                fix="pass the .mlpackage from `edgekit quantize --format coreml`")
    program = MILProgram.load(package)
    ops = [CoremlOp(index=op.index, op=op.op_type, outputs=[n for n, _ in op.outputs], neural_engine=RUNTIME)
           for op in program.operations if op.op_type not in SKIPPED]
    return CoremlPlacement(model=str(package), opset=program.deployment_opset, ops=ops,
                           op_counts=dict(Counter(o.op for o in ops)),
                           source="no documented per-op Neural Engine support in coremltools 9.0; Core ML places ops "
                                  "when it compiles the model on the device (MLComputePlan reports it on macOS)")


def compile_for_ane(package: Path, outdir: Path) -> CoremlPlacement:
    from edgekit.atomic import atomic_output_dir

    report = coreml_report(package)
    lines = [f"# Core ML placement: {Path(package).name}", "", f"Source: {report.source}.", "",
             "| # | op | outputs | Neural Engine |", "|---|---|---|---|"]
    lines += [f"| {o.index} | {o.op} | {', '.join(o.outputs)[:60]} | {o.neural_engine} |" for o in report.ops]
    with atomic_output_dir(Path(outdir)) as stage:
        (stage / "coreml_placement.json").write_text(report.dumps())
        (stage / "report.md").write_text("\n".join(lines) + "\n")
    return report
