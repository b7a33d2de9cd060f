"""Per-layer quantization analysis: every op output of a float and a quantized .tflite, compared on the same inputs.

Both models run on LiteRT with BUILTIN_REF kernels and ``experimental_preserve_all_tensors=True`` (without the
flag most intermediates read back as garbage). Each candidate op output is matched to the reference tensor of the
same name (the MLIR quantizer keeps names); ops whose names differ are aligned by op-type order; QUANTIZE /
DEQUANTIZE ops the quantizer inserted are compared against the reference value of their input and marked
``inserted``. Quantized tensors are dequantized with their own scale / zero point before comparison.

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
are. ``channel_sqnr_db`` (median of per-channel SQNR) shows small channels wiped out behind large ones, which
per-tensor SQNR hides.
"""
from __future__ import annotations

import difflib
import json
import logging
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from edgekit.calibration.dataset import Sample
from edgekit.errors import InvalidModelError, UserError
from edgekit.provenance import host_info, sha256_bytes, tool_versions, utc_now
from edgekit.quiet import captured_output
from edgekit.tflite_model import TensorInfo, TFLiteModel, _interpreter_module, dequantize, quantize_input

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str, int], Callable[[int], None]]
ModelLike = Union[str, Path, TFLiteModel]

SQNR_CAP_DB = 120.0            # float32 rounding noise sits around 140 dB; identical tensors give inf
INSERTED_OPS = ("QUANTIZE", "DEQUANTIZE")
MIN_MATCHED_FRACTION = 0.5     # fewer matched compute ops than this: the two files are not the same network
DAMAGE_METRIC = ("rank by local_sqnr_db = -10*log10(10^(-out/10) - 10^(-in/10)), out = output SQNR, in = worst input "
                 "SQNR, both capped at 120 dB (lower = more noise added by the layer itself); sqnr_drop_db = in - out")
FILES = ("layers.json", "layers.md", "layers.png")


# --------------------------------------------------------------------------------------------------------------
# loading and matching
# --------------------------------------------------------------------------------------------------------------
def _as_model(model: ModelLike, role: str) -> TFLiteModel:
    if isinstance(model, TFLiteModel):
        return model
    path = Path(model)
    from edgekit.export.detect import detect_kind

    kind = detect_kind(str(path))
    if kind.value != "tflite":
        raise UserError(
            f"per-layer analysis needs two .tflite models; the {role} {path} is a {kind.value} model",
            fix="compare model_float.tflite with model_int8.tflite (both written by `edgekit quantize`), "
                "or drop --per-layer",
        )
    return TFLiteModel.load(path)


def _debug_interpreter(model: TFLiteModel):
    """BUILTIN_REF kernels (the bit-exact reference) with every intermediate tensor kept."""
    litert = _interpreter_module()
    try:
        with warnings.catch_warnings(), captured_output((2,)):
            warnings.simplefilter("ignore")
            interp = litert.Interpreter(
                model_content=model.data, num_threads=1,
                experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
                experimental_preserve_all_tensors=True,
            )
            interp.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise InvalidModelError(f"{model.source} cannot be loaded by LiteRT: {str(exc).strip().splitlines()[0]}") from None
    return interp


@dataclass(frozen=True)
class _Pair:
    """One candidate op output and where its float reference value comes from."""

    op_index: int
    op: str
    cand: TensorInfo
    ref: Optional[TensorInfo]
    match: str                     # name | order | inserted | unmatched
    inputs: Tuple[int, ...]        # candidate activation tensors read by the op


def _shapes_agree(a: Sequence[int], b: Sequence[int]) -> bool:
    """Equal shapes; -1 (a dynamic dimension, e.g. the batch) agrees with anything."""
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _check_compatible(ref: TFLiteModel, cand: TFLiteModel) -> None:
    problems = []
    if len(ref.inputs) != len(cand.inputs):
        problems.append(f"{len(ref.inputs)} inputs in {ref.source} but {len(cand.inputs)} in {cand.source}")
    for a, b in zip(ref.inputs, cand.inputs):
        if not _shapes_agree(a.shape, b.shape):
            problems.append(f"input {a.name!r} has shape {list(a.shape)} but {b.name!r} has {list(b.shape)}")
    if len(ref.outputs) != len(cand.outputs):
        problems.append(f"{len(ref.outputs)} outputs in {ref.source} but {len(cand.outputs)} in {cand.source}")
    for a, b in zip(ref.outputs, cand.outputs):
        if not _shapes_agree(a.shape, b.shape):
            problems.append(f"output {a.name!r} has shape {list(a.shape)} but {b.name!r} has {list(b.shape)}")
    if problems:
        raise UserError(
            "per-layer analysis needs two versions of the same network: " + "; ".join(problems),
            fix="pass the float model and the quantized model made from it (model_float.tflite, model_int8.tflite)",
        )


def _same_elements(a: TensorInfo, b: TensorInfo) -> bool:
    return int(np.prod(a.shape)) == int(np.prod(b.shape))


def match_tensors(ref: TFLiteModel, cand: TFLiteModel) -> List[_Pair]:
    """One _Pair per candidate op (its first output), in candidate graph order."""
    ref_by_name: Dict[str, TensorInfo] = {t.name: t for t in ref.inputs}
    for op in ref.ops:
        for o in op.outputs:
            if o >= 0:
                ref_by_name.setdefault(ref.tensor(o).name, ref.tensor(o))
    activations = set(cand.activation_tensors())
    # model inputs pair up by position whatever their names
    cand_to_ref: Dict[int, TensorInfo] = {c.index: r for c, r in zip(cand.inputs, ref.inputs)}
    cand_ops = cand.ops
    pairs: Dict[int, _Pair] = {}
    unmatched: List[int] = []
    for op in cand_ops:
        out = cand.tensor(op.outputs[0])
        inputs = tuple(i for i in op.inputs if i in activations)
        named = ref_by_name.get(out.name)
        if op.name in INSERTED_OPS and (named is None or not _same_elements(named, out)):
            source = cand_to_ref.get(inputs[0]) if inputs else None
            pairs[op.index] = _Pair(op.index, op.name, out, source, "inserted", inputs)
        elif named is not None and _same_elements(named, out):
            pairs[op.index] = _Pair(op.index, op.name, out, named, "name", inputs)
        else:
            pairs[op.index] = _Pair(op.index, op.name, out, None, "unmatched", inputs)
            unmatched.append(op.index)
        if pairs[op.index].ref is not None:
            cand_to_ref[out.index] = pairs[op.index].ref
    if unmatched:
        _align_by_order(ref, cand, pairs, unmatched)
        for op in cand_ops:  # inserted ops behind an op matched by order: take that op's reference now
            p = pairs[op.index]
            if p.ref is not None:
                cand_to_ref[p.cand.index] = p.ref
            elif p.match == "inserted" and p.inputs and p.inputs[0] in cand_to_ref:
                pairs[op.index] = _Pair(p.op_index, p.op, p.cand, cand_to_ref[p.inputs[0]], "inserted", p.inputs)
                cand_to_ref[p.cand.index] = cand_to_ref[p.inputs[0]]
    return [pairs[op.index] for op in cand_ops]


def _align_by_order(ref: TFLiteModel, cand: TFLiteModel, pairs: Dict[int, _Pair], unmatched: List[int]) -> None:
    """Fallback for renamed tensors: align the op-type sequences (inserted ops left out) and pair equal runs."""
    cand_ops = [op for op in cand.ops if op.name not in INSERTED_OPS]
    ref_ops = [op for op in ref.ops if op.name not in INSERTED_OPS]
    taken = {p.ref.index for p in pairs.values() if p.ref is not None and p.match == "name"}
    matcher = difflib.SequenceMatcher(a=[o.name for o in cand_ops], b=[o.name for o in ref_ops], autojunk=False)
    wanted = set(unmatched)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            c, r = cand_ops[block.a + k], ref_ops[block.b + k]
            if c.index not in wanted:
                continue
            out, ref_out = cand.tensor(c.outputs[0]), ref.tensor(r.outputs[0])
            if ref_out.index in taken or not _same_elements(out, ref_out):
                continue
            old = pairs[c.index]
            pairs[c.index] = _Pair(old.op_index, old.op, old.cand, ref_out, "order", old.inputs)
            taken.add(ref_out.index)


# --------------------------------------------------------------------------------------------------------------
# statistics (streamed over samples)
# --------------------------------------------------------------------------------------------------------------
def _grid_limits(info: TensorInfo) -> Optional[Tuple[float, float, float]]:
    """(lowest, highest representable value, step) of a quantized tensor; None for float tensors."""
    if not info.is_quantized or not np.issubdtype(info.dtype, np.integer):
        return None
    q = np.iinfo(info.dtype)
    return info.scale * (q.min - info.zero_point), info.scale * (q.max - info.zero_point), info.scale


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

    def add(self, ref: np.ndarray, cand: np.ndarray, grid: Optional[Tuple[float, float, float]]) -> None:
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
        channels = ref.shape[-1] if np.ndim(ref) >= 2 else 1
        rc, dc = r.reshape(-1, channels), d.reshape(-1, channels)
        cs, cn = np.sum(rc * rc, axis=0), np.sum(dc * dc, axis=0)
        self.channel_signal = cs if self.channel_signal is None else self.channel_signal + cs
        self.channel_noise = cn if self.channel_noise is None else self.channel_noise + cn
        if grid is not None:
            lo, hi, step = grid
            self.clipped += int(np.count_nonzero((r < lo - step / 2) | (r > hi + step / 2)))
            g = np.clip(np.round(r / step) * step, lo, hi) - r  # rounding onto the grid (zero point is on it)
            self.grid_noise += float(np.sum(g * g))

    def metrics(self, quantized: bool) -> dict:
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
        """Median over channels (last axis) of per-channel SQNR: per-tensor SQNR hides wiped-out small channels."""
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

    index (op index in the candidate), op (builtin name), tensor (output tensor name), shape, dtype,
    scale / zero_point (``"float"`` when the op stayed float), match (name | order | inserted | unmatched),
    reference_tensor, sqnr_db (cumulative: everything upstream included), cosine, max_abs, rmse,
    local_sqnr_db (noise added by this layer, as an SQNR; the ranking key), channel_sqnr_db (median of per-channel
    SQNR over the last axis), grid_sqnr_db (the reference tensor rounded
    onto the candidate's grid alone; None for float), clipped_fraction (reference values beyond the int range by
    more than half a step; None for float), input_sqnr_db (worst activation input), sqnr_drop_db (the damage),
    likely_cause (a hint: output grid / weights / nonlinear amplification / requantization),
    rank (1 = most damaged; None when unmatched). Metrics are None for unmatched rows.
    """

    rows: List[dict]
    inputs: List[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def ranked(self, n: Optional[int] = None, *, by: str = "local") -> List[dict]:
        """Most damaged first. ``by='local'`` (the ``rank`` field): lowest local_sqnr_db, i.e. most noise added by the
        layer itself; ``by='drop'``: largest sqnr_drop_db. Unmatched rows are left out."""
        scored = _ordered(self.rows, by)
        return scored if n is None else scored[:n]

    def most_sensitive(self) -> Optional[dict]:
        top = self.ranked(1)
        return top[0] if top else None

    def row(self, tensor_or_index: Union[str, int]) -> dict:
        for r in self.rows:
            if r["index"] == tensor_or_index or r["tensor"] == tensor_or_index:
                return r
        raise KeyError(tensor_or_index)

    def to_json(self) -> dict:
        from edgekit.report import json_safe

        return json_safe({
            "kind": "edgekit-per-layer",
            **self.meta,
            "damage_metric": DAMAGE_METRIC,
            "inputs": self.inputs,
            "ranking": [{"rank": r["rank"], "index": r["index"], "op": r["op"], "tensor": r["tensor"],
                         "local_sqnr_db": r["local_sqnr_db"], "sqnr_drop_db": r["sqnr_drop_db"]} for r in self.ranked()],
            "layers": self.rows,
        })

    def markdown_lines(self, top: int = 5) -> List[str]:
        from edgekit.report import fmt

        m = self.meta
        lines = [
            "# edgekit per-layer quantization analysis",
            "",
            f"- Reference `{m['reference']['source']}` sha256 `{m['reference']['sha256']}`",
            f"- Candidate `{m['candidate']['source']}` sha256 `{m['candidate']['sha256']}`",
            f"- {m['samples_used']} of {m['samples_given']} samples; LiteRT BUILTIN_REF kernels, all tensors kept",
            f"- Matched: {m['matched']}",
            f"- Produced {m['created']} on {m['host']['hostname']}; tools: "
            + ", ".join(f"{k} {v}" for k, v in m["tools"].items()),
            f"- Damage: {DAMAGE_METRIC}. Cumulative SQNR (sqnr) includes every upstream error; grid = SQNR of the "
            "float tensor rounded onto the candidate's own grid (low: range/scale problem; high with a large drop: "
            "weights or integer arithmetic).",
            "",
            f"## Most damaging layers (top {top})",
            "",
        ]
        for r in self.ranked(top):
            lines.append(f"{r['rank']}. op #{r['index']} {r['op']} `{r['tensor']}`: local {fmt(r['local_sqnr_db'], 3)} dB, "
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
            cells = [r["index"], r["op"], f"`{name}`", "x".join(str(s) for s in r["shape"]), r["dtype"],
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
        (folder / "layers.json").write_text(json.dumps(self.to_json(), indent=2) + "\n")
        (folder / "layers.md").write_text("\n".join(self.markdown_lines()) + "\n")
        plot_layers(self, folder / "layers.png")
        return list(FILES)


def check_per_layer_models(reference: ModelLike, candidate: ModelLike) -> Tuple[TFLiteModel, TFLiteModel]:
    """Both models loaded and checked for a per-layer comparison (UserError before any work if not)."""
    ref, cand = _as_model(reference, "reference"), _as_model(candidate, "candidate")
    _check_compatible(ref, cand)
    return ref, cand


def per_layer_report(
    reference: ModelLike,
    candidate: ModelLike,
    samples: Sequence[Sample],
    *,
    progress: Optional[ProgressFactory] = None,
    max_samples: int = 64,
) -> LayerReport:
    """Compare every op output of ``candidate`` (e.g. int8) with ``reference`` (e.g. float) on the same samples.

    ``samples`` are in float terms (what the reference takes); an int8/int16 input is fed the sample quantized with
    that model's own input scale / zero point. The first ``max_samples`` samples are used. ``progress`` is the CLI's
    progress factory (``progress(label, total) -> advance(n)``). Raises UserError for a non-.tflite model, models
    whose inputs/outputs differ, or models with too few ops in common.
    """
    ref, cand = check_per_layer_models(reference, candidate)
    if not samples:
        raise UserError("per-layer analysis got no samples", fix="pass --data with at least one sample")
    pairs = match_tensors(ref, cand)
    compute = [p for p in pairs if p.op not in INSERTED_OPS]
    matched = sum(1 for p in compute if p.ref is not None)
    if compute and matched < MIN_MATCHED_FRACTION * len(compute):
        raise UserError(
            f"only {matched} of {len(compute)} ops of {cand.source} have a counterpart in {ref.source} "
            "(by tensor name or op order): they are not two versions of the same network",
            fix="pass the float model and the quantized model made from it (model_float.tflite, model_int8.tflite)",
        )
    used = list(samples[:max_samples])
    ref_interp, cand_interp = _debug_interpreter(ref), _debug_interpreter(cand)
    acc: Dict[int, _Accumulator] = {p.op_index: _Accumulator() for p in pairs if p.ref is not None}
    input_acc = [_Accumulator() for _ in cand.inputs]
    grids = {p.op_index: _grid_limits(p.cand) for p in pairs}
    advance = progress("per-layer", len(used)) if progress else (lambda n: None)
    for sample in used:
        for interp, model in ((ref_interp, ref), (cand_interp, cand)):
            for info, value in zip(model.inputs, sample):
                interp.set_tensor(info.index, quantize_input(value, info))
            interp.invoke()
        for k, (info, value) in enumerate(zip(cand.inputs, sample)):
            fed = dequantize(cand_interp.get_tensor(info.index), info)
            input_acc[k].add(np.asarray(value, np.float32), fed, _grid_limits(info))
        for p in pairs:
            if p.ref is None:
                continue
            r = dequantize(ref_interp.get_tensor(p.ref.index), p.ref)
            c = dequantize(cand_interp.get_tensor(p.cand.index), p.cand)
            acc[p.op_index].add(r.reshape(c.shape) if r.size == c.size else r, c, grids[p.op_index])
        advance(1)
    inputs = [{"tensor": info.name, **_describe(info), **a.metrics(_grid_limits(info) is not None)}
              for info, a in zip(cand.inputs, input_acc)]
    rows = _rows(pairs, acc, grids, {info.index: row["sqnr_db"] for info, row in zip(cand.inputs, inputs)})
    meta = {
        "reference": {"source": ref.source, "sha256": sha256_bytes(ref.data), "ops": len(ref.ops)},
        "candidate": {"source": cand.source, "sha256": sha256_bytes(cand.data), "ops": len(cand.ops)},
        "samples_given": len(samples),
        "samples_used": len(used),
        "kernels": "LiteRT BUILTIN_REF, experimental_preserve_all_tensors",
        "matched": {m: sum(1 for p in pairs if p.match == m) for m in ("name", "order", "inserted", "unmatched")},
        "sqnr_cap_db": SQNR_CAP_DB,
        "created": utc_now(),
        "host": host_info(),
        "tools": tool_versions(("edgekit", "numpy", "ai-edge-litert", "tensorflow-cpu", "matplotlib")),
    }
    log.info("per-layer: %d ops compared on %d samples", len(acc), len(used))
    return LayerReport(rows=rows, inputs=inputs, meta=meta)


def _describe(info: TensorInfo) -> dict:
    quantized = _grid_limits(info) is not None
    return {
        "shape": [int(s) for s in info.shape],
        "dtype": info.dtype.name,
        "scale": info.scale if quantized else "float",
        "zero_point": info.zero_point if quantized else "float",
    }


def _rows(pairs: List[_Pair], acc: Dict[int, _Accumulator], grids: dict, input_sqnr: Dict[int, float]) -> List[dict]:
    sqnr_of: Dict[int, float] = dict(input_sqnr)   # candidate tensor index -> cumulative SQNR
    rows = []
    for p in pairs:
        row = {"index": p.op_index, "op": p.op, "tensor": p.cand.name, **_describe(p.cand), "match": p.match,
               "reference_tensor": p.ref.name if p.ref is not None else None}
        if p.ref is None:
            row.update({k: None for k in ("sqnr_db", "cosine", "max_abs", "rmse", "channel_sqnr_db", "grid_sqnr_db",
                                          "clipped_fraction", "input_sqnr_db", "sqnr_drop_db", "local_sqnr_db",
                                          "likely_cause")})
        else:
            row.update(acc[p.op_index].metrics(grids[p.op_index] is not None))
            known = [sqnr_of[i] for i in p.inputs if i in sqnr_of]
            worst_in = min((_capped(v) for v in known), default=SQNR_CAP_DB)
            row["input_sqnr_db"] = worst_in
            row["sqnr_drop_db"] = worst_in - _capped(row["sqnr_db"])
            row["local_sqnr_db"] = _local_sqnr(worst_in, _capped(row["sqnr_db"]))
            row["likely_cause"] = _likely_cause(p.op, row["local_sqnr_db"], row["grid_sqnr_db"])
            sqnr_of[p.cand.index] = row["sqnr_db"]
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


WEIGHTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL", "CONV_3D")
AMPLIFYING_OPS = ("SOFTMAX", "LOG_SOFTMAX", "LOGISTIC", "TANH", "EXP", "LOG", "RSQRT", "SQRT", "DIV", "POW")
GRID_EXPLAINS_DB = 3.0  # the output grid alone is within this of the local SQNR: the range/scale is to blame


def _likely_cause(op: str, local_db: float, grid_db: Optional[float]) -> Optional[str]:
    """A hint for the reader, from the op type and how much of the local noise the output grid alone explains."""
    if local_db >= SQNR_CAP_DB:
        return None
    if grid_db is not None and grid_db <= local_db + GRID_EXPLAINS_DB:
        return "activation range/scale (output grid)"
    if grid_db is None:
        return "float op: incoming error reshaped, nothing rounded here"
    if op in WEIGHTED_OPS:
        return "weights or accumulation"
    if op in AMPLIFYING_OPS:
        return "nonlinear op amplifying incoming error"
    return "integer arithmetic / requantization"


def _ordered(rows: List[dict], by: str) -> List[dict]:
    scored = [r for r in rows if r["sqnr_drop_db"] is not None]
    if by == "local":
        return sorted(scored, key=lambda r: (r["local_sqnr_db"], -r["sqnr_drop_db"], r["index"]))
    if by == "drop":
        return sorted(scored, key=lambda r: (-r["sqnr_drop_db"], r["local_sqnr_db"], r["index"]))
    raise ValueError(f"unknown ranking {by!r}; use 'local' or 'drop'")
