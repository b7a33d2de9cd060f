"""Per-layer quantization analysis: every op output of a float and a quantized model, compared on the same inputs.

This module is the format-independent part: it streams (reference, candidate) tensor pairs into metrics, ranks
layers and writes the LayerReport. A *tracer* per model format runs both models, keeps their intermediate tensors
and says which candidate tensor is compared with which reference tensor:

- ``edgekit.parity.layers_tflite``: two .tflite files on LiteRT BUILTIN_REF with all tensors kept;
- ``edgekit.parity.layers_onnx``: a float .onnx and its QDQ version on onnxruntime (graph optimizations off), each
  op output compared after its QuantizeLinear -> DequantizeLinear, i.e. the value the next op consumes.
- ``edgekit.parity.layers_coreml``: a float32 .mlpackage and its quantized version on edgekit's MIL evaluator.

Damage (the ranking): cumulative SQNR keeps falling downstream of a bad layer, so it blames every later layer.
What a layer itself loses is measured against its worst activation input:
``sqnr_drop_db = min(input SQNR) - output SQNR`` and, in noise terms, ``local_sqnr_db = -10 log10(N_out - N_in)``
with N = 10^(-SQNR/10) the relative noise power: the SQNR the layer would have on exact inputs if its own noise
adds to the incoming one. Layers are ranked by ``local_sqnr_db`` (lowest first): a drop from 120 to 60 dB is harmless,
one from 30 to 20 dB is not, and the drop alone would rank them the other way. SQNR values above ``SQNR_CAP_DB``
(float rounding level) count as the cap; model inputs are compared with the float samples, so the first layer is
not blamed for the input's own rounding. ``grid_sqnr_db`` tells why a layer is damaged: the SQNR of the reference
tensor rounded onto the candidate's own grid alone. A low grid SQNR means the activation range/scale is the
problem (outliers, clipping); a high grid SQNR with a low local SQNR means the op's weights or integer arithmetic
are. ``channel_sqnr_db`` (median of per-channel SQNR over the tracer's channel axis: last for NHWC TFLite, 1 for
NCHW ONNX / Core ML) shows small channels wiped out behind large ones, which per-tensor SQNR hides.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple, Union

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.errors import UserError
from edgekit.parity.layers_result import LayerMeta, LayerRow, LayersFile, TracedModel
from edgekit.provenance import host_info, tool_versions, utc_now
from edgekit.results import JsonObject

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str, int], Callable[[int], None]]
ModelLike = Union[str, Path, Any]   # a path, or a model object a tracer accepts (TFLiteModel)
Grid = Tuple[float, float, float]  # (lowest, highest representable value, step)

SQNR_CAP_DB = 120.0            # float32 rounding noise sits around 140 dB; identical tensors give inf
MIN_MATCHED_FRACTION = 0.5     # fewer matched compute ops than this: the two files are not the same network
DAMAGE_METRIC = ("rank by local_sqnr_db = -10*log10(10^(-out/10) - 10^(-in/10)), out = output SQNR, in = worst input "
                 "SQNR, both capped at 120 dB (lower = more noise added by the layer itself); sqnr_drop_db = in - out")
FILES = ("layers.json", "layers.md", "layers.png")
METRIC_KEYS = ("sqnr_db", "cosine", "max_abs", "rmse", "channel_sqnr_db", "grid_sqnr_db", "clipped_fraction",
               "input_sqnr_db", "sqnr_drop_db", "local_sqnr_db", "likely_cause")


# --------------------------------------------------------------------------------------------------------------
# what a tracer hands to the generic core
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TracedTensor:
    """One compared tensor: a model input or one candidate op output (a row of the report).

    ``key`` identifies the tensor in ``Trace.run`` results and in other rows' ``inputs``; ``grid`` is the candidate's
    quantization grid (None: the candidate value is float); ``inputs`` are keys of the activation tensors the op
    reads (for the worst-input SQNR); ``fields`` are the row's format-specific descriptive fields
    (index, op, tensor, shape, dtype, scale, zero_point, match, reference_tensor, ...), in row order."""

    key: Hashable
    op: str
    fields: LayerRow  # the descriptive fields only; the core adds the metrics
    grid: Optional[Grid] = None
    matched: bool = True
    inputs: Tuple[Hashable, ...] = ()
    channel_axis: int = -1
    int_weights: bool = False       # the op reads quantized weights even though its output is not requantized
    counted: bool = True            # counts as a compute op for the "same network" check (False for inserted ops)


class Trace:
    """Two loaded models of one format, their matched tensors, and a way to run both on one sample."""

    kind: str = ""                       # "tflite" | "onnx" | "mlpackage"
    runtime: str = ""                    # how the tensors were obtained (one line, for the report)
    tools: Tuple[str, ...] = ()          # tool_versions() names
    not_applicable: Dict[str, str] = {}  # metric -> why it is None for this format

    def describe(self) -> Tuple[TracedModel, TracedModel]:
        """({source, sha256, ops} of the reference, the same of the candidate)."""
        raise NotImplementedError

    def tensors(self) -> Tuple[List[TracedTensor], List[TracedTensor]]:
        """(model inputs, candidate op outputs in graph order)."""
        raise NotImplementedError

    def matched_counts(self) -> Dict[str, int]:
        raise NotImplementedError

    def run(self, sample: Sample) -> Dict[Hashable, Tuple[np.ndarray, np.ndarray]]:
        """key -> (reference value in float terms, candidate value in float terms) for every matched tensor."""
        raise NotImplementedError

    def extra_meta(self) -> LayerMeta:
        """Format-specific facts for the report's meta, measured during run() (``notes``: sentences for layers.md)."""
        return {}


# --------------------------------------------------------------------------------------------------------------
# statistics (streamed over samples)
# --------------------------------------------------------------------------------------------------------------
@dataclass
class _Accumulator:
    signal: float = 0.0
    noise: float = 0.0
    dot: float = 0.0
    cand_energy: float = 0.0
    max_abs: float = 0.0
    count: int = 0
    clipped: int = 0
    grid_noise: float = 0.0
    channel_signal: Optional[np.ndarray] = None
    channel_noise: Optional[np.ndarray] = None

    def add(self, ref: np.ndarray, cand: np.ndarray, grid: Optional[Grid], channel_axis: int = -1) -> None:
        r = np.asarray(ref, np.float64).reshape(-1)
        c = np.asarray(cand, np.float64).reshape(-1)
        d = r - c
        # np.sum of products, not BLAS dot: OpenBLAS threads cost 10x on a loaded 2-core machine (measured)
        self.signal += float(np.sum(r * r))
        self.noise += float(np.sum(d * d))
        self.dot += float(np.sum(r * c))
        self.cand_energy += float(np.sum(c * c))
        self.max_abs = max(self.max_abs, float(np.max(np.abs(d))) if d.size else 0.0)
        self.count += r.size
        shape = np.shape(ref)
        if len(shape) >= 2:  # per-channel sums over the channel axis
            channels = shape[channel_axis]
            rc = np.moveaxis(r.reshape(shape), channel_axis, -1).reshape(-1, channels)
            dc = np.moveaxis(d.reshape(shape), channel_axis, -1).reshape(-1, channels)
        else:
            rc, dc = r.reshape(-1, 1), d.reshape(-1, 1)
        cs, cn = np.sum(rc * rc, axis=0), np.sum(dc * dc, axis=0)
        self.channel_signal = cs if self.channel_signal is None else self.channel_signal + cs
        self.channel_noise = cn if self.channel_noise is None else self.channel_noise + cn
        if grid is not None:
            lo, hi, step = grid
            self.clipped += int(np.count_nonzero((r < lo - step / 2) | (r > hi + step / 2)))
            g = np.clip(np.round(r / step) * step, lo, hi) - r  # rounding onto the grid (zero point is on it)
            self.grid_noise += float(np.sum(g * g))

    def metrics(self, quantized: bool) -> LayerRow:
        na, nb = math.sqrt(self.signal), math.sqrt(self.cand_energy)
        cos = 1.0 if na == 0 and nb == 0 else (0.0 if na == 0 or nb == 0 else self.dot / (na * nb))
        return {
            "sqnr_db": _db(self.signal, self.noise),
            "cosine": cos,
            "max_abs": self.max_abs,
            "rmse": math.sqrt(self.noise / self.count) if self.count else 0.0,
            "channel_sqnr_db": self._channel_median(),
            "grid_sqnr_db": _db(self.signal, self.grid_noise) if quantized else None,
            "clipped_fraction": self.clipped / self.count if quantized and self.count else (0.0 if quantized else None),
        }

    def _channel_median(self) -> float:
        """Median over channels of per-channel SQNR: per-tensor SQNR hides wiped-out small channels."""
        if self.channel_signal is None:
            return math.inf
        live = self.channel_signal > 0
        if not np.any(live):
            return _db(0.0, float(np.sum(self.channel_noise)))
        values = [_db(s, n) for s, n in zip(self.channel_signal[live], self.channel_noise[live])]
        return float(np.median(np.array(values, dtype=np.float64)))


def _db(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _capped(value: Optional[float]) -> float:
    if value is None or math.isnan(value):
        return SQNR_CAP_DB
    return min(value, SQNR_CAP_DB)


# --------------------------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------------------------
@dataclass
class LayerReport:
    """Rows are dicts in candidate graph order. Keys of a row:

    index (op index in the candidate), op (op type), tensor (output tensor name), shape, dtype,
    scale / zero_point (``"float"`` when the op's output stayed float), match (name | order | inserted | unmatched;
    ONNX adds node: matched by node name), reference_tensor, format-specific fields (ONNX: node, compared_tensor),
    sqnr_db (cumulative: everything upstream included), cosine, max_abs, rmse,
    local_sqnr_db (noise added by this layer, as an SQNR; the ranking key), channel_sqnr_db (median of per-channel
    SQNR over the channel axis), grid_sqnr_db (the reference tensor rounded
    onto the candidate's grid alone; None for float), clipped_fraction (reference values beyond the int range by
    more than half a step; None for float), input_sqnr_db (worst activation input), sqnr_drop_db (the damage),
    likely_cause (a hint: output grid / weights / nonlinear amplification / requantization),
    rank (1 = most damaged; None when unmatched). Metrics are None for unmatched rows; a metric a format cannot
    give is None and ``meta["not_applicable"]`` says why. ``meta["format"]`` is the tracer's model kind and
    ``meta["notes"]`` (when present) holds format-specific warnings, also printed in layers.md.
    """

    rows: List[LayerRow]
    inputs: List[LayerRow] = field(default_factory=list)
    meta: LayerMeta = field(default_factory=lambda: LayerMeta())

    def ranked(self, n: Optional[int] = None, *, by: str = "local") -> List[LayerRow]:
        """Most damaged first. ``by='local'`` (the ``rank`` field): lowest local_sqnr_db, i.e. most noise added by the
        layer itself; ``by='drop'``: largest sqnr_drop_db. Unmatched rows are left out."""
        scored = _ordered(self.rows, by)
        return scored if n is None else scored[:n]

    def most_sensitive(self) -> Optional[LayerRow]:
        top = self.ranked(1)
        return top[0] if top else None

    def row(self, tensor_or_index: Union[str, int]) -> LayerRow:
        for r in self.rows:
            if r["index"] == tensor_or_index or r["tensor"] == tensor_or_index or r.get("node") == tensor_or_index:
                return r
        raise KeyError(tensor_or_index)

    def result(self) -> LayersFile:
        """The typed layers.json (every row checked against ``LayerRow``)."""
        from edgekit.report import json_safe

        ranking = [{"rank": r["rank"], "index": r["index"], "op": r["op"], "tensor": r["tensor"],
                    "local_sqnr_db": r["local_sqnr_db"], "sqnr_drop_db": r["sqnr_drop_db"]} for r in self.ranked()]
        # json_safe: numpy scalars become Python numbers (inf / nan are read back by the Number fields)
        return LayersFile.model_validate(json_safe({
            "kind": "edgekit-per-layer", **self.meta, "damage_metric": DAMAGE_METRIC, "inputs": self.inputs,
            "ranking": ranking, "layers": self.rows}))

    def to_json(self) -> JsonObject:
        return self.result().to_json()

    def markdown_lines(self, top: int = 5) -> List[str]:
        from edgekit.report import fmt

        m = self.meta
        lines = [
            "# edgekit per-layer quantization analysis",
            "",
            f"- Reference `{m['reference']['source']}` sha256 `{m['reference']['sha256']}`",
            f"- Candidate `{m['candidate']['source']}` sha256 `{m['candidate']['sha256']}`",
            f"- {m['samples_used']} of {m['samples_given']} samples; {m['kernels']}",
            f"- Matched: {m['matched']}",
            f"- Produced {m['created']} on {m['host']['hostname']}; tools: "
            + ", ".join(f"{k} {v}" for k, v in m["tools"].items()),
            f"- Damage: {DAMAGE_METRIC}. Cumulative SQNR (sqnr) includes every upstream error; grid = SQNR of the "
            "float tensor rounded onto the candidate's own grid (low: range/scale problem; high with a large drop: "
            "weights or integer arithmetic).",
        ]
        lines += [f"- `{k}` is not given for this format: {why}" for k, why in m.get("not_applicable", {}).items()]
        lines += [f"- Note: {note}" for note in m.get("notes", [])]
        lines += ["", f"## Most damaging layers (top {top})", ""]
        for r in self.ranked(top):
            where = f" (node `{r['node']}`)" if r.get("node") else ""
            lines.append(f"{r['rank']}. op #{r['index']} {r['op']} `{r['tensor']}`{where}: local {fmt(r['local_sqnr_db'], 3)} dB, "
                         f"drop {fmt(r['sqnr_drop_db'], 3)} dB "
                         f"(input {fmt(r['input_sqnr_db'], 3)} dB -> output {fmt(r['sqnr_db'], 3)} dB, "
                         f"grid {fmt(r['grid_sqnr_db'], 3)} dB, clipped {fmt(r['clipped_fraction'], 3)}); "
                         f"likely cause: {r['likely_cause'] or 'none'}")
        lines += ["", "## All layers (graph order)", "",
                  "| # | op | tensor | shape | dtype | scale | zp | match | sqnr dB | drop dB | channel dB | grid dB | "
                  "local dB | cosine | max abs | rmse | clipped | rank |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            name = r["tensor"] if len(r["tensor"]) <= 60 else "…" + r["tensor"][-59:]
            shape = "x".join(str(s) for s in r["shape"]) if r["shape"] is not None else "?"
            cells = [r["index"], r["op"], f"`{name}`", shape, r["dtype"],
                     fmt(r["scale"]), r["zero_point"], r["match"]] + [
                fmt(r[k], 4) if r[k] is not None else "–"
                for k in ("sqnr_db", "sqnr_drop_db", "channel_sqnr_db", "grid_sqnr_db", "local_sqnr_db", "cosine", "max_abs", "rmse",
                          "clipped_fraction")] + [r["rank"] if r["rank"] is not None else "–"]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        return lines

    def write(self, folder: Path) -> List[str]:
        """layers.json, layers.md and layers.png into ``folder``; returns the file names."""
        from edgekit.parity.layer_plot import plot_layers

        folder = Path(folder)
        (folder / "layers.json").write_text(self.result().dumps())
        (folder / "layers.md").write_text("\n".join(self.markdown_lines()) + "\n")
        plot_layers(self, folder / "layers.png")
        return list(FILES)


# --------------------------------------------------------------------------------------------------------------
# dispatch by model format
# --------------------------------------------------------------------------------------------------------------
_KIND_LABEL = {"tflite": ".tflite", "onnx": ".onnx", "mlpackage": ".mlpackage"}


def _kind_of(model: ModelLike) -> Tuple[str, str]:
    """(format kind, how to name the model in a message)."""
    from edgekit.tflite_model import TFLiteModel

    if isinstance(model, TFLiteModel):
        return "tflite", str(model.source)
    from edgekit.export.detect import detect_kind

    return detect_kind(str(model)).value, str(model)


def _tracer(kind: str):
    if kind == "tflite":
        from edgekit.parity import layers_tflite as module
    elif kind == "onnx":
        from edgekit.parity import layers_onnx as module
    elif kind == "mlpackage":
        from edgekit.parity import layers_coreml as module
    else:
        return None
    return module


def check_per_layer_models(reference: ModelLike, candidate: ModelLike) -> Trace:
    """Both models loaded, matched and checked for a per-layer comparison (UserError before any work if not)."""
    ref_kind, ref_name = _kind_of(reference)
    cand_kind, cand_name = _kind_of(candidate)
    module = _tracer(ref_kind)
    if module is None:
        raise UserError(
            f"per-layer analysis compares two .tflite, two .onnx or two .mlpackage models; the reference {ref_name} "
            f"is a {ref_kind} model",
            fix="compare the float and the quantized model written by `edgekit quantize` (model_float.* and "
                "model_int8.* / model_w8a8.mlpackage), or drop --per-layer",
        )
    if cand_kind != ref_kind:
        label = _KIND_LABEL[ref_kind]
        raise UserError(
            f"per-layer analysis needs two {label} models; the candidate {cand_name} is a {cand_kind} model",
            fix=f"compare model_float{label} with the quantized model made from it (both written by `edgekit "
                "quantize`), or drop --per-layer",
        )
    trace = module.trace(reference, candidate)
    _check_matched(trace)
    return trace


def _check_matched(trace: Trace) -> None:
    _, outputs = trace.tensors()
    compute = [t for t in outputs if t.counted]
    matched = sum(1 for t in compute if t.matched)
    ref, cand = trace.describe()
    if compute and matched < MIN_MATCHED_FRACTION * len(compute):
        raise UserError(
            f"only {matched} of {len(compute)} ops of {cand['source']} have a counterpart in {ref['source']} "
            "(by tensor name or op order): they are not two versions of the same network",
            fix="pass the float model and the quantized model made from it (e.g. model_float.tflite, model_int8.tflite)",
        )


def per_layer_report(
    reference: ModelLike,
    candidate: ModelLike,
    samples: Sequence[Sample],
    *,
    progress: Optional[ProgressFactory] = None,
    max_samples: int = 64,
) -> LayerReport:
    """Compare every op output of ``candidate`` (e.g. int8) with ``reference`` (e.g. float) on the same samples.

    Both are .tflite (paths or TFLiteModel), .onnx or .mlpackage, of the same kind. ``samples`` are in float terms
    (what the reference takes); each tracer feeds a quantized input the sample quantized as that model does. The
    first ``max_samples`` samples are used. ``progress`` is the CLI's progress factory
    (``progress(label, total) -> advance(n)``). Raises UserError for an unsupported or mixed pair of formats,
    models whose inputs/outputs differ, or models with too few ops in common.
    """
    trace = check_per_layer_models(reference, candidate)
    if not samples:
        raise UserError("per-layer analysis got no samples", fix="pass --data with at least one sample")
    return compare_trace(trace, samples, progress=progress, max_samples=max_samples, samples_given=len(samples))


def compare_trace(trace: Trace, samples: Sequence[Sample], *, progress: Optional[ProgressFactory] = None,
                  max_samples: int = 64, samples_given: Optional[int] = None) -> LayerReport:
    """The generic part: stream every matched tensor pair of ``trace`` into metrics, rank, build the report."""
    used = list(samples[:max_samples])
    inputs, outputs = trace.tensors()
    acc: Dict[Hashable, _Accumulator] = {t.key: _Accumulator() for t in inputs + outputs if t.matched}
    shapes: Dict[Hashable, List[int]] = {}
    advance = progress("per-layer", len(used)) if progress else (lambda n: None)
    for sample in used:
        values = trace.run(sample)
        for t in inputs + outputs:
            if not t.matched:
                continue
            r, c = values[t.key]
            shapes.setdefault(t.key, [int(s) for s in np.shape(c)])
            acc[t.key].add(r.reshape(c.shape) if r.size == c.size else r, c, t.grid, t.channel_axis)
        advance(1)
    input_rows = [{**_fields(t, shapes), **acc[t.key].metrics(t.grid is not None)} for t in inputs]
    rows = _rows(outputs, acc, shapes, {t.key: row["sqnr_db"] for t, row in zip(inputs, input_rows)})
    ref, cand = trace.describe()
    meta: LayerMeta = {
        "format": trace.kind,
        "reference": ref,
        "candidate": cand,
        "samples_given": len(samples) if samples_given is None else samples_given,
        "samples_used": len(used),
        "kernels": trace.runtime,
        "matched": trace.matched_counts(),
        "sqnr_cap_db": SQNR_CAP_DB,
        "not_applicable": dict(trace.not_applicable),
        "created": utc_now(),
        "host": host_info(),
        "tools": tool_versions(("edgekit", "numpy", *trace.tools, "matplotlib")),
    }
    meta.update(trace.extra_meta())
    log.info("per-layer: %d tensors compared on %d samples", len(acc), len(used))
    return LayerReport(rows=rows, inputs=input_rows, meta=meta)


def _fields(t: TracedTensor, shapes: Dict[Hashable, List[int]]) -> LayerRow:
    out = LayerRow(**t.fields)
    if out.get("shape") is None:
        out["shape"] = shapes.get(t.key)
    return out


def _rows(outputs: List[TracedTensor], acc: Dict[Hashable, _Accumulator], shapes: Dict[Hashable, List[int]],
          input_sqnr: Dict[Hashable, float]) -> List[LayerRow]:
    sqnr_of: Dict[Hashable, float] = dict(input_sqnr)   # tensor key -> cumulative SQNR
    rows = []
    for t in outputs:
        row = _fields(t, shapes)
        if not t.matched:
            row.update({k: None for k in METRIC_KEYS})
        else:
            row.update(acc[t.key].metrics(t.grid is not None))
            known = [sqnr_of[i] for i in t.inputs if i in sqnr_of]
            worst_in = min((_capped(v) for v in known), default=SQNR_CAP_DB)
            row["input_sqnr_db"] = worst_in
            row["sqnr_drop_db"] = worst_in - _capped(row["sqnr_db"])
            row["local_sqnr_db"] = _local_sqnr(worst_in, _capped(row["sqnr_db"]))
            row["likely_cause"] = _likely_cause(t.op, row["local_sqnr_db"], row["grid_sqnr_db"], t.int_weights)
            sqnr_of[t.key] = row["sqnr_db"]
        row["rank"] = None
        rows.append(row)
    for k, r in enumerate(_ordered(rows, "local"), 1):
        r["rank"] = k
    return rows


def _local_sqnr(input_db: float, output_db: float) -> float:
    """Noise this layer adds, as an SQNR: relative noise power out minus in (noise assumed independent)."""
    added = 10.0 ** (-output_db / 10.0) - 10.0 ** (-input_db / 10.0)
    if added <= 10.0 ** (-SQNR_CAP_DB / 10.0):
        return SQNR_CAP_DB
    return -10.0 * math.log10(added)


# op type names of every traced format (TFLite builtins, ONNX op types, MIL ops)
WEIGHTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL", "CONV_3D",
                "Conv", "ConvTranspose", "Gemm", "MatMul", "conv", "conv_transpose", "linear", "matmul")
AMPLIFYING_OPS = ("SOFTMAX", "LOG_SOFTMAX", "LOGISTIC", "TANH", "EXP", "LOG", "RSQRT", "SQRT", "DIV", "POW",
                  "Softmax", "LogSoftmax", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Div", "Pow",
                  "softmax", "sigmoid", "tanh", "exp", "log", "rsqrt", "sqrt", "real_div", "pow", "inverse")
GRID_EXPLAINS_DB = 3.0  # the output grid alone is within this of the local SQNR: the range/scale is to blame


def _likely_cause(op: str, local_db: float, grid_db: Optional[float], int_weights: bool = False) -> Optional[str]:
    """A hint for the reader, from the op type and how much of the local noise the output grid alone explains."""
    if local_db >= SQNR_CAP_DB:
        return None
    if grid_db is not None and grid_db <= local_db + GRID_EXPLAINS_DB:
        return "activation range/scale (output grid)"
    if grid_db is None:
        if int_weights:
            return "weights or accumulation (quantized weights, output not requantized here)"
        return "float op: incoming error reshaped, nothing rounded here"
    if op in WEIGHTED_OPS:
        return "weights or accumulation"
    if op in AMPLIFYING_OPS:
        return "nonlinear op amplifying incoming error"
    return "integer arithmetic / requantization"


def _ordered(rows: List[LayerRow], by: str) -> List[LayerRow]:
    scored = [r for r in rows if r["sqnr_drop_db"] is not None]
    if by == "local":
        return sorted(scored, key=lambda r: (r["local_sqnr_db"], -r["sqnr_drop_db"], r["index"]))
    if by == "drop":
        return sorted(scored, key=lambda r: (-r["sqnr_drop_db"], r["local_sqnr_db"], r["index"]))
    raise ValueError(f"unknown ranking {by!r}; use 'local' or 'drop'")
