"""Reports of preprocess-parity: parity.json, report.md, worst_diff.png and manifest.json (atomic)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from edgekit.artifact import Artifact, Manifest
from edgekit.atomic import atomic_output_dir
from edgekit.preprocessing.base import Result
from edgekit.preprocessing.parity import PreprocessParityReport, squeeze_batch
from edgekit.preprocessing.parity_result import ParityProvenance, PipelineDescription
from edgekit.provenance import host_info, sha256_file, tool_versions, utc_now
from edgekit.report import fmt
from edgekit.scale.ray_map import Execution

MAX_ROWS = 200
TOOLS = ("edgekit", "numpy", "pillow", "opencv-contrib-python", "torch", "tensorflow-cpu", "ai-edge-litert")


def provenance(images: Sequence[Path], images_root: Optional[Path]) -> ParityProvenance:
    digest = __import__("hashlib").sha256()
    for p in images:
        digest.update(p.name.encode())
        try:
            digest.update(bytes.fromhex(sha256_file(p)))
        except OSError:
            digest.update(b"unreadable")
    return {
        "created": utc_now(),
        "host": host_info(),
        "tools": tool_versions(TOOLS),
        "images": {"path": str(images_root) if images_root else None, "count": len(images), "sha256": digest.hexdigest()},
    }


def _pipeline_line(d: PipelineDescription) -> str:
    text = f"`{d.get('label')}`"
    if d.get("spec"):
        from edgekit.preprocessing.spec import PreprocessSpec

        spec = PreprocessSpec.from_dict(d["spec"])
        text += f" — spec `{spec.name}`: {spec.describe()}"
    if d.get("callable"):
        text += f" — Python callable `{d['callable']}`"
    if d.get("folder"):
        text += f" — tensors from `{d['folder']}`"
    return text


def _execution_lines(e: Optional[Execution]) -> List[str]:
    if not e:
        return []
    return [f"- Ran on {e['engine']} with {e['workers']} worker(s): {e['samples']:,} images in {e['wall_time_s']:.1f} s "
            f"({e['samples_per_s']} images/s); {e['images_listed']}"]


def markdown(report: PreprocessParityReport, prov: ParityProvenance, png: Optional[str]) -> str:
    a = report.aggregate
    lines = [
        "# edgekit preprocess-parity",
        "",
        f"**Verdict: {'PASSED' if report.passed else 'FAILED'}** — {a.get('images', 0)} images, {a.get('compared', 0)} compared"
        + "".join(f", {v} {k.replace('_', ' ')}" for k, v in sorted(a.get("status_counts", {}).items()) if k != "compared"),
        "",
        f"- Reference: {_pipeline_line(report.reference)}",
        f"- Candidate: {_pipeline_line(report.candidate)}",
        f"- Images: `{prov['images']['path']}` ({prov['images']['count']} files, sha256 `{prov['images']['sha256'][:16]}`)",
        f"- Produced {prov['created']} on {prov['host']['hostname']} ({prov['host']['platform']})",
        f"- Tools: {', '.join(f'{k} {v}' for k, v in prov['tools'].items())}",
        f"- Thresholds: {', '.join(f'{k} {v}' for k, v in report.thresholds.to_json().items() if v is not None)}",
        f"- Units: differences in LSB are {report.units}",
        *_execution_lines(report.execution),
        "",
    ]
    if report.failures:
        lines += ["## Failures", ""] + [f"- {f}" for f in report.failures] + [""]
    lines += ["## Differences on the model-input tensor (all compared images)", "", "| metric | value |", "|---|---|"]
    for key in ("max_abs", "mean_abs", "rmse", "psnr_db", "max_abs_lsb", "mean_abs_lsb", "over_1_lsb", "identical_images", "elements"):
        if key in a:
            lines.append(f"| {key} | {fmt(a[key]) if key != 'over_1_lsb' else f'{a[key]:.4%}'} |")
    lines.append("")
    if report.diagnosis:
        d = report.diagnosis
        lines += ["## Diagnosis", ""]
        if not d.get("available"):
            lines += [f"Not available: {d.get('reason')}", ""]
        else:
            lines += [f"**{d['summary']}**", "",
                      f"Perturbed the {d['perturbed']} pipeline ({d['evaluations']} runs) on {len(d['images'])} worst images; "
                      f"mean difference in {d['units']}.", ""]
            if d["causes"]:
                lines += [f"| # | cause | reference | candidate | difference removed ({d['units']}, mean) |", "|---|---|---|---|---|"]
                for i, c in enumerate(d["causes"], 1):
                    removed = fmt(c["removed"]) + (" (+ tensor shapes now match)" if c["fixed_shape"] else "")
                    lines.append(f"| {i} | {c['family']} | {c['reference']} | {c['candidate']} | {removed} |")
                steps = [f"{s['family']} ({fmt(s['mean_abs_lsb_before'])} → {fmt(s['mean_abs_lsb_after'])})"
                         if "refit_with" not in s else f"constants refitted after the {s['refit_with']} change"
                         for s in d["steps"]]
                lines += ["", "Search steps: " + " → ".join(steps), ""] if steps else [""]
            if d.get("fix"):
                lines += ["Both sides were described from their tensors and the decoded images (black box); "
                          "PSNR before → after each explanation:", ""]
                lines += [f"- {c['family']}: {fmt(c['psnr_before_db']) if c['psnr_before_db'] is not None else 'shapes differ'}"
                          f" → {fmt(c['psnr_after_db'])} dB" for c in d["causes"]]
                lines += ["", f"Fix: {d['fix']['text']}", "", "```json", json.dumps(d["fix"]["spec"], indent=2), "```", ""]
    if report.model:
        m = report.model
        lines += ["## Model effect", "", f"Model `{m['model'].get('path')}` sha256 `{m['model'].get('sha256')}` "
                  f"({m['model'].get('runtime')}, {m['model'].get('kernels', '')}).", ""]
        if "flip_rate" in m:
            lines += [f"- Top-1 agreement {m['top1_agreement']:.2%}; **flip rate {m['flip_rate']:.2%}** "
                      f"({m['flipped']} of {m['images']} predictions changed)"]
        if m.get("accuracy"):
            acc = m["accuracy"]
            lines.append(f"- Accuracy on {acc['labels']} labelled images: reference pipeline {acc['reference_top1']:.2%}, "
                         f"candidate pipeline {acc['candidate_top1']:.2%}")
        for o in m["outputs"]:
            lines.append(f"- Output `{o['name']}` drift: max abs {fmt(o['max_abs'])}, mean abs {fmt(o['mae'])}, "
                         f"cosine {fmt(o['cosine'])}, SQNR {fmt(o['sqnr_db'])} dB")
        if m.get("flipped_images"):
            lines += ["", "| image | reference class | candidate class |", "|---|---|---|"]
            lines += [f"| {f['image']} | {f['reference']} | {f['candidate']} |" for f in m["flipped_images"][:50]]
        lines.append("")
    notes = [("reference", n) for n in report.reference.get("notes", [])] + [("candidate", n) for n in report.candidate.get("notes", [])]
    if notes:
        lines += ["## Known implementation differences (by design)", ""] + [f"- {who}: {n}" for who, n in notes] + [""]
    if png:
        lines += [f"![worst image: reference, candidate, difference]({png})", ""]
    errors = [d for d in report.images if d.errors]
    if errors:
        lines += ["## Files that could not be processed", "", "| image | status | reference | candidate |", "|---|---|---|---|"]
        lines += [f"| {d.name} | {d.status} | {d.errors.get('reference', 'ok')} | {d.errors.get('candidate', 'ok')} |" for d in errors]
        lines.append("")
    rows = sorted(report.images, key=lambda d: -d.metrics.get("mean_abs_lsb", d.metrics.get("mean_abs", -1.0)))
    lines += ["## Per image (worst first)", "",
              "| image | status | max abs | mean abs | max LSB | mean LSB | >1 LSB | PSNR dB | prediction ref→cand |",
              "|---|---|---|---|---|---|---|---|---|"]
    for d in rows[:MAX_ROWS]:
        m = d.metrics
        pred = f"{d.model['reference_class']}→{d.model['candidate_class']}" if d.model else "–"
        over = f"{m['over_1_lsb']:.2%}" if "over_1_lsb" in m else "–"
        lines.append(f"| {d.name} | {d.status} | {fmt(m.get('max_abs', '–'))} | {fmt(m.get('mean_abs', '–'))} | "
                     f"{fmt(m.get('max_abs_lsb', '–'))} | {fmt(m.get('mean_abs_lsb', '–'))} | {over} | {fmt(m.get('psnr_db', '–'))} | {pred} |")
    if len(rows) > MAX_ROWS:
        lines.append(f"\n{len(rows) - MAX_ROWS} more images in parity.json.")
    return "\n".join(lines) + "\n"


def _display(t: np.ndarray, channels_first: bool) -> np.ndarray:
    t = squeeze_batch(t).astype(np.float64)
    if t.ndim == 3 and channels_first:
        t = t.transpose(1, 2, 0)
    if t.ndim == 3 and t.shape[2] == 1:
        t = t[:, :, 0]
    lo, hi = float(t.min()), float(t.max())
    return (t - lo) / (hi - lo) if hi > lo else np.zeros_like(t)


def worst_png(path: Path, report: PreprocessParityReport, reference: Sequence[Result], candidate: Sequence[Result]) -> bool:
    """Reference, candidate and |difference| (in LSB where known) of the worst image."""
    worst = report.worst(1)
    if not worst or worst[0].metrics.get("identical"):
        return False
    index = next(i for i, d in enumerate(report.images) if d is worst[0])
    r, c = squeeze_batch(reference[index]), squeeze_batch(candidate[index])
    if r.ndim not in (2, 3):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = report.reference.get("spec") or report.candidate.get("spec") or {}
    channels_first = spec.get("layout") == "NCHW" or (r.ndim == 3 and r.shape[0] in (1, 3) and r.shape[-1] not in (1, 3))
    diff = np.abs(c.astype(np.float64) - r.astype(np.float64))
    if diff.ndim == 3:
        diff = diff.max(axis=0 if channels_first else 2)
    from edgekit.preprocessing.parity import Units
    from edgekit.preprocessing.spec import PreprocessSpec

    unit = "tensor units"
    if spec:
        units = Units.for_spec(PreprocessSpec.from_dict(spec))
        if units.step is not None:
            diff = diff / float(units.step.min())
            unit = "LSB"
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8))
    for ax, img, title in ((axes[0], _display(r, channels_first), "reference"), (axes[1], _display(c, channels_first), "candidate")):
        ax.imshow(img, cmap="gray" if img.ndim == 2 else None, interpolation="nearest")
        ax.set_title(title)
        ax.axis("off")
    im = axes[2].imshow(diff, cmap="magma", interpolation="nearest")
    axes[2].set_title(f"|difference| ({unit}), max {diff.max():.3g}")
    axes[2].axis("off")
    fig.colorbar(im, ax=axes[2], fraction=0.046)
    fig.suptitle(f"worst image: {worst[0].name} (mean {worst[0].metrics.get('mean_abs_lsb', worst[0].metrics['mean_abs']):.3g} {unit})")
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write_reports(outdir: Path, report: PreprocessParityReport, reference: Sequence[Result], candidate: Sequence[Result],
                  images: Sequence[Path], images_root: Optional[Path]) -> List[str]:
    """parity.json, report.md, worst_diff.png (when images differ) and manifest.json, atomically."""
    prov = provenance(images, images_root)
    with atomic_output_dir(outdir) as stage:
        (stage / "parity.json").write_text(report.result(prov).dumps())
        png = "worst_diff.png" if worst_png(stage / "worst_diff.png", report, reference, candidate) else None
        (stage / "report.md").write_text(markdown(report, prov, png))
        manifest = Manifest(command="preprocess-parity", extra={"images": prov["images"]})
        parity_art = manifest.add(Artifact.from_file(stage / "parity.json", format="preprocess-parity-report", stage="parity",
                                                     params={"thresholds": report.thresholds.to_json()}))
        manifest.add(Artifact.from_file(stage / "report.md", format="markdown", stage="report", parent=parity_art))
        if png:
            manifest.add(Artifact.from_file(stage / png, format="png", stage="report", parent=parity_art))
        manifest.write(stage / "manifest.json")
        written = sorted(p.name for p in stage.iterdir())
    return written
