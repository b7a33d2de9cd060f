"""Vela backend: a full-int8 .tflite -> an Arm Ethos-U NPU model (ethos-u-vela), with Vela's performance estimate."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from edgekit.converters import CONVERTERS
from edgekit.support import OpSupport, SupportReport

ModelLike = Union[str, Path]


@CONVERTERS.register("vela")
class VelaConverter:
    """int8 .tflite -> model_vela.tflite; targets are Vela's accelerator configs (ethos-u55-128, ...)."""

    name = "vela"
    target = "ethos-u55-128"
    stage = "compile"  # not a quantizer: `edgekit quantize --format` does not offer it
    options = ("system_config", "memory_mode", "config", "optimise", "timeout")  # `edgekit compile` flags it takes

    @staticmethod
    def targets() -> tuple:
        from edgekit.compile.vela_tool import accelerators

        return accelerators()

    def check_support(self, model: ModelLike, target: str = target, **vela_options) -> SupportReport:
        """Every operator of the model: on the NPU (accepted) or left on the CPU with Vela's own reason.

        Runs Vela (it is the authority on what Ethos-U runs) into a scratch folder and reads its placement."""
        from edgekit.compile.npu import vela_estimate
        from edgekit.compile.vela_tool import VelaOptions
        from edgekit.tflite_graph import read_graph

        result, _ = vela_estimate(model, VelaOptions(accelerator=target, **vela_options))
        graph = read_graph(Path(model).read_bytes(), str(model))
        on_cpu = {}
        for op in result.report.placement.cpu_operators:
            on_cpu.setdefault((op.op, op.ofm), op.reasons)
        report = SupportReport(f"vela-{target}")
        for op in graph.ops:
            ofm = graph.tensors[op.outputs[0]].name if op.outputs else ""
            reasons = on_cpu.get((op.label, ofm))
            if reasons is None:
                report.ops.append(OpSupport(op.label, graph.location(op), True))
            else:
                report.ops.append(OpSupport(op.label, graph.location(op), False,
                                            "left on the CPU by Vela: " + "; ".join(reasons or ["no reason given"])))
        return report

    def convert(self, model: ModelLike, *, target: str = target, outdir: Optional[Path] = None,
                system_config: Optional[str] = None, memory_mode: Optional[str] = None, config: Optional[str] = None,
                optimise: str = "Performance", timeout_s: float = 300.0):
        """Compile with Vela; with ``outdir`` write model_vela.tflite, compile.json, report.md, plot, manifest.

        Returns edgekit.compile.npu.CompileResult (``report`` = compile.json)."""
        from edgekit.compile.npu import compile_for_npu, vela_estimate
        from edgekit.compile.vela_tool import VelaOptions

        options = VelaOptions(accelerator=target, system_config=system_config, memory_mode=memory_mode, config=config,
                              optimise=optimise, timeout_s=timeout_s)
        if outdir is None:
            return vela_estimate(model, options)[0]
        return compile_for_npu(model, options, Path(outdir))
