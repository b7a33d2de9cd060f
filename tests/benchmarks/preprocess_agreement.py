"""Measure how far every preprocessing implementation is from the Pillow reference (printed table).

    python tests/benchmarks/preprocess_agreement.py [--edge]      # real photos (+ generated edge cases)

For each spec scenario and implementation: images compared, max and mean |difference| in input LSB,
share of elements off by more than 1 LSB, PSNR, and the files an implementation could not read.
The bounds asserted in tests/preprocessing/test_implementations.py come from this table.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.preprocessing.edge_cases import PHOTOS, write_edge_cases  # noqa: E402
from tests.preprocessing.scenarios import SCENARIOS  # noqa: E402

from edgekit.preprocessing.spec import PreprocessSpec  # noqa: E402
from edgekit.preprocessing.base import implementation  # noqa: E402
from edgekit.preprocessing.parity import Units, aggregate, compare_tensors  # noqa: E402
from edgekit.preprocessing.sources import list_images  # noqa: E402

IMPLS = ("opencv", "torchvision", "tf", "c")


def measure(images, scenarios=SCENARIOS, impls=IMPLS):
    rows = []
    for name, data in scenarios.items():
        spec = PreprocessSpec.from_dict(data)
        ref = implementation("pillow", spec).run_many(images)
        units = Units.for_spec(spec)
        for impl in impls:
            try:
                pipeline = implementation(impl, spec)
            except Exception as exc:  # the library cannot express the spec
                rows.append((name, impl, None, str(exc).splitlines()[0]))
                continue
            start = time.perf_counter()
            out = pipeline.run_many(images)
            seconds = time.perf_counter() - start
            diffs = compare_tensors([p.name for p in images], ref, out, units)
            rows.append((name, impl, aggregate(diffs, ref, out, units) | {"seconds": seconds},
                         [d.name for d in diffs if d.status != "compared" and d.status != "both_error"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edge", action="store_true", help="add the generated edge cases")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        images = list_images(PHOTOS)
        if args.edge:
            images += list_images(write_edge_cases(Path(tmp) / "edge"))
        print(f"{len(images)} images: {', '.join(p.name for p in images)}\n")
        print("| scenario | impl | compared | max LSB | mean LSB | >1 LSB | PSNR dB | one-sided failures |")
        print("|---|---|---|---|---|---|---|---|")
        for name, impl, agg, extra in measure(images):
            if agg is None:
                print(f"| {name} | {impl} | unsupported: {extra} |||||| ")
                continue
            print(f"| {name} | {impl} | {agg['compared']} | {agg['max_abs_lsb']:.3f} | {agg['mean_abs_lsb']:.4f} | "
                  f"{agg['over_1_lsb']:.4%} | {agg['psnr_db']:.1f} | {', '.join(extra) or '-'} |")


if __name__ == "__main__":
    main()
