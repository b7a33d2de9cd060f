"""Build the edgekit demo model and its real calibration / evaluation data.

    python -m edgekit.demo.train_digits [--out-model PATH] [--data-dir PATH]

Steps (deterministic; no network):

1. Load scikit-learn's bundled handwritten digits (``sklearn.datasets.load_digits``:
   1797 8x8 images, values 0..16; a copy of the test set of the UCI "Optical
   Recognition of Handwritten Digits" data set).
2. Convert each image to 8-bit grayscale: ``pixel = round(v * 255 / 16)``.
3. Split with a fixed seed, stratified by class: 1197 train, 200 calibration,
   400 held-out eval. The calibration and eval images are written as 8x8 mode-"L"
   PNGs ``NNNN.png`` (NNNN = sklearn index) to ``<data-dir>/calib`` and
   ``<data-dir>/eval``, each with ``labels.csv`` and ``preprocess.json``. The train
   images are only kept in memory.
4. Train ``DigitsCNN`` on exactly the values the PNGs hold (uint8 / 255, float32,
   NCHW), then save it with ``torch.export.save`` and check that the saved program,
   run on the PNGs read back from disk, gives the same eval accuracy.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from torch import nn

from edgekit._resources import data_dir
from edgekit.demo.digits_model import digits_cnn

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_MODEL = PACKAGE_DIR / "digits_cnn.pt2"
DEFAULT_DATA_DIR = data_dir("calibration_data") / "digits"

SEED = 0
N_CALIB = 200
N_EVAL = 400
EPOCHS = 40
BATCH_SIZE = 32
LR = 3e-3

# Preprocessing of the PNGs into the model's input; also written as preprocess.json.
PREPROCESS: Dict[str, object] = {
    "name": "digits-8x8-gray",
    "color": "grayscale",
    "size": [8, 8],
    "resize": "bilinear",
    "scale": 1.0 / 255.0,
    "mean": [0.0],
    "std": [1.0],
    "layout": "NCHW",
    "dtype": "float32",
}


# --------------------------------------------------------------------------- data
def load_digits_uint8() -> Tuple[np.ndarray, np.ndarray]:
    """All 1797 digits as uint8 (N, 8, 8) images (0..16 scaled to 0..255) and int64 labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    v = np.asarray(d.images, dtype=np.float64)  # 0..16
    # v * 255 / 16 is exact in float64; only v == 8 gives a .5 (127.5): round half up -> 128.
    img = np.floor(v * 255.0 / 16.0 + 0.5).astype(np.uint8)
    return img, np.asarray(d.target, dtype=np.int64)


def split_indices(labels: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified, seeded split into (train, calib, eval) index arrays, each sorted."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    rest, ev = train_test_split(idx, test_size=N_EVAL, stratify=labels, random_state=SEED)
    tr, ca = train_test_split(rest, test_size=N_CALIB, stratify=labels[rest], random_state=SEED)
    return np.sort(tr), np.sort(ca), np.sort(ev)


def write_preprocess(path: Path) -> None:
    path.write_text(json.dumps(PREPROCESS) + "\n", encoding="utf-8")


def write_split(folder: Path, indices: np.ndarray, images: np.ndarray, labels: np.ndarray) -> None:
    """Write NNNN.png + labels.csv + preprocess.json; remove stale NNNN.png files."""
    folder.mkdir(parents=True, exist_ok=True)
    keep = {f"{int(i):04d}.png" for i in indices}
    for old in folder.glob("[0-9][0-9][0-9][0-9].png"):
        if old.name not in keep:
            old.unlink()
    rows = []
    for i in indices:
        name = f"{int(i):04d}.png"
        Image.fromarray(images[i], mode="L").save(folder / name, format="PNG")
        rows.append((name, int(labels[i])))
    rows.sort()
    with open(folder / "labels.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["file", "label"])
        w.writerows(rows)
    write_preprocess(folder / "preprocess.json")


def load_folder(folder: Path) -> Tuple[np.ndarray, np.ndarray, list]:
    """Read a folder written by :func:`write_split`, preprocessing as its preprocess.json says.

    Returns (x float32 NCHW, y int64, file names).
    """
    spec = json.loads((folder / "preprocess.json").read_text(encoding="utf-8"))
    if spec["color"] != "grayscale" or spec["layout"] != "NCHW":
        raise ValueError(f"unsupported preprocess spec in {folder}: {spec}")
    h, w = spec["size"]
    resample = {"bilinear": Image.BILINEAR, "nearest": Image.NEAREST}[spec["resize"]]
    mean = np.asarray(spec["mean"], dtype=np.float32).reshape(-1, 1, 1)
    std = np.asarray(spec["std"], dtype=np.float32).reshape(-1, 1, 1)
    with open(folder / "labels.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    xs = []
    for r in rows:
        with Image.open(folder / r["file"]) as im:
            im = im.convert("L")
            if im.size != (w, h):
                im = im.resize((w, h), resample)
            a = np.asarray(im, dtype=np.float32)[None]  # (1, H, W)
        xs.append((a * np.float32(spec["scale"]) - mean) / std)
    x = np.stack(xs).astype(spec["dtype"])
    y = np.asarray([int(r["label"]) for r in rows], dtype=np.int64)
    return x, y, [r["file"] for r in rows]


def to_input(images_u8: np.ndarray) -> torch.Tensor:
    """uint8 (N, 8, 8) -> float32 (N, 1, 8, 8) in [0, 1]; the same values load_folder yields."""
    x = images_u8.astype(np.float32)[:, None] * np.float32(PREPROCESS["scale"])
    return torch.from_numpy(np.ascontiguousarray(x))


# ----------------------------------------------------------------------- training
def set_determinism() -> None:
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


def train(x: torch.Tensor, y: torch.Tensor, epochs: int = EPOCHS) -> nn.Module:
    set_determinism()
    model = digits_cnn()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(SEED)
    n = len(x)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, BATCH_SIZE):
            b = perm[s : s + BATCH_SIZE]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            opt.step()
        sched.step()
    return model.eval()


@torch.no_grad()
def logits_batch1(fn, x: torch.Tensor) -> torch.Tensor:
    """Run ``fn`` one image at a time (the exported program has a static batch size of 1)."""
    return torch.cat([fn(x[i : i + 1]) for i in range(len(x))])


@torch.no_grad()
def accuracy(fn, x: torch.Tensor, y: torch.Tensor) -> float:
    pred = logits_batch1(fn, x).argmax(dim=1)
    return float((pred == y).float().mean())


def save_exported(model: nn.Module, path: Path) -> None:
    """torch.export the model and save it atomically.

    torch.export.save names the zip's root folder after the file's stem, so the
    temporary file lives in a temporary folder under the *final* name; a random
    temp file name would end up inside the archive and break byte-reproducibility.
    """
    ep = torch.export.export(model.eval(), (torch.zeros(1, 1, 8, 8),))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    try:
        torch.export.save(ep, str(tmpdir / path.name))
        os.replace(tmpdir / path.name, path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def class_counts(labels: np.ndarray) -> str:
    c = np.bincount(labels, minlength=10)
    return " ".join(f"{k}:{int(v)}" for k, v in enumerate(c))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m edgekit.demo.train_digits", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-model", type=Path, default=DEFAULT_MODEL, help=f"default: {DEFAULT_MODEL}")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help=f"default: {DEFAULT_DATA_DIR}")
    args = ap.parse_args(argv)

    set_determinism()
    images, labels = load_digits_uint8()
    tr, ca, ev = split_indices(labels)
    print(f"digits: {len(labels)} images; train {len(tr)}, calib {len(ca)}, eval {len(ev)}")
    for name, ix in (("train", tr), ("calib", ca), ("eval", ev)):
        print(f"  {name:5s} per class {class_counts(labels[ix])}")

    data_dir = args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    write_preprocess(data_dir / "preprocess.json")
    write_split(data_dir / "calib", ca, images, labels)
    write_split(data_dir / "eval", ev, images, labels)

    x_tr, y_tr = to_input(images[tr]), torch.from_numpy(labels[tr])
    t0 = time.perf_counter()
    model = train(x_tr, y_tr)
    t_train = time.perf_counter() - t0
    print(f"train time: {t_train:.1f} s ({EPOCHS} epochs, torch {torch.__version__}, 1 thread)")

    acc_train = accuracy(model, x_tr, y_tr)
    acc_mem = accuracy(model, to_input(images[ev]), torch.from_numpy(labels[ev]))

    # Evaluate on the PNGs read back from disk, through preprocess.json.
    x_ev, y_ev, files = load_folder(data_dir / "eval")
    expected = [f"{int(i):04d}.png" for i in ev]
    if files != expected or not np.array_equal(x_ev, to_input(images[ev]).numpy()):
        raise RuntimeError("eval PNGs read back from disk differ from the in-memory data")
    x_ev_t, y_ev_t = torch.from_numpy(x_ev), torch.from_numpy(y_ev)
    acc_disk = accuracy(model, x_ev_t, y_ev_t)

    save_exported(model, args.out_model)
    loaded = torch.export.load(str(args.out_model)).module()
    acc_pt2 = accuracy(loaded, x_ev_t, y_ev_t)
    max_diff = float((logits_batch1(loaded, x_ev_t) - logits_batch1(model, x_ev_t)).abs().max())

    print(f"train accuracy: {acc_train:.4f}")
    print(f"eval accuracy (FP32, in memory): {acc_mem:.4f}")
    print(f"eval accuracy (FP32, {len(files)} PNGs from {data_dir / 'eval'}): {acc_disk:.4f}")
    print(f"eval accuracy (reloaded {args.out_model.name}): {acc_pt2:.4f}  max |logit diff| {max_diff:.2e}")
    print(f"saved {args.out_model} ({args.out_model.stat().st_size} bytes)")
    if acc_pt2 != acc_disk:
        print("ERROR: reloaded .pt2 accuracy differs from the trained model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
