"""`edgekit compile` for Arm Ethos-U NPUs: an int8 .tflite -> Vela-compiled .tflite + Vela's performance estimate.

Order of work, so that bad input leaves nothing behind: read the model (a corrupt file stops here, before Vela,
whose C++ core can crash on one) -> refuse float models (quantize first) -> check the Vela options (all problems
listed, with the valid names) -> run Vela in a scratch folder -> build compile.json from Vela's own CSVs and messages
-> write model_vela.tflite, compile.json, report.md, the per-layer plot and a manifest atomically.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

from edgekit.compile.report import build_compile_json, write_outputs
from edgekit.compile.result import CompileReport
from edgekit.compile.vela_tool import VelaOptions, VelaRun, run_vela
from edgekit.errors import InvalidModelError, UserError
from edgekit.tflite_graph import Graph, read_graph

log = logging.getLogger(__name__)

QUANTIZED_TYPES = ("INT8", "INT16", "UINT8")
VELA_MODEL = "model_vela.tflite"


@dataclass(frozen=True)
class CompileResult:
    outdir: Optional[Path]
    report: CompileReport         # compile.json
    vela_model: bytes             # the compiled flatbuffer (ethos-u custom op + any CPU operators)

    @property
    def label(self) -> str:
        return self.report.estimate.label


def read_model(model: Union[str, Path]) -> tuple[bytes, Graph, Path]:
    path = Path(model)
    if not path.is_file():
        raise InvalidModelError(f"model {path} not found" if not path.exists() else f"{path} is not a file",
                                fix="pass the int8 .tflite (e.g. model_int8.tflite from edgekit quantize)")
    if path.suffix.lower() != ".tflite":
        raise InvalidModelError(f"{path.name}: Vela compiles TFLite flatbuffers (.tflite), not {path.suffix or 'this file'}",
                                fix="quantize to int8 TFLite first: edgekit quantize MODEL --calib DATA")
    data = path.read_bytes()
    return data, read_graph(data, str(path)), path


def require_quantized(graph: Graph, source: str, accelerator: str) -> None:
    """A float model would run entirely on the CPU: refuse it with the fix instead of 'compiling' it."""
    quantized = [op for op in graph.ops
                 if any(0 <= o < len(graph.tensors) and graph.tensors[o].type in QUANTIZED_TYPES for o in op.outputs)]
    if graph.ops and not quantized:
        types = sorted({graph.tensors[o].type for op in graph.ops for o in op.outputs if 0 <= o < len(graph.tensors)})
        raise UserError(f"{Path(source).name} is not quantized: none of its {len(graph.ops)} operators produces int8 "
                        f"tensors (output types: {', '.join(types)}); {accelerator} runs int8/int16 operators only, so "
                        "Vela would leave every operator on the CPU",
                        fix="quantize first: edgekit quantize MODEL --calib DATA, then compile model_int8.tflite")


def vela_estimate(model: Union[str, Path], options: VelaOptions, *, keep: Optional[Path] = None) -> tuple[CompileResult, VelaRun]:
    """Run every check and Vela; return the result (no output folder) and the raw run (its files live in ``keep``)."""
    data, graph, path = read_model(model)
    require_quantized(graph, str(path), options.accelerator)
    problems = options.problems()
    if problems:
        raise UserError(problems[0] if len(problems) == 1 else
                        f"{len(problems)} problems with the compile options:\n" + "\n".join(f"  - {p}" for p in problems))
    work = Path(tempfile.mkdtemp(prefix="edgekit-vela-")) if keep is None else keep
    try:
        # Vela names its outputs after the input's stem: give it a fixed, safe name.
        work.mkdir(parents=True, exist_ok=True)
        staged = work / "model.tflite"
        shutil.copyfile(path, staged)
        run = run_vela(staged, options, work / "vela", display=path.name)
        vela_bytes = run.vela_tflite.read_bytes()
        info = build_compile_json(data, graph, path, options, run, vela_bytes)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return CompileResult(None, info, vela_bytes), run


def compile_for_npu(model: Union[str, Path], options: VelaOptions, outdir: Path) -> CompileResult:
    """`edgekit compile`: checks, Vela, then every output written atomically into ``outdir``."""
    work = Path(tempfile.mkdtemp(prefix="edgekit-vela-"))
    try:
        result, run = vela_estimate(model, options, keep=work)
        write_outputs(Path(outdir), result.report, run, result.vela_model)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("wrote %s", outdir)
    return replace(result, outdir=Path(outdir))
