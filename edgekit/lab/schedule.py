"""Run the whole matrix: quantize each model once, build each (model, board) firmware once, then run the cells
in parallel across boards with a free slot (a board runs one cell at a time unless it is a QEMU board with
``instances: N``). Finished cells of an earlier run are skipped; a board that fails marks its remaining cells
and the others go on."""
from __future__ import annotations

import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Dict, List, Optional

from edgekit.errors import EdgekitError
from edgekit.lab.cells import FAILED, BoardUnavailable, Cell, base_row, finished_row, run_cell, write_json_atomically
from edgekit.lab.matrix import Matrix, ModelEntry
from edgekit.lab.results import LabRow, LabTable, QuantizedModel

log = logging.getLogger(__name__)


def quantize_once(model: ModelEntry, outdir: Path) -> QuantizedModel:
    """The int8 model of a matrix entry: the given .tflite, or OUT/models/NAME/model_int8.tflite made once by
    edgekit quantize (kept across reruns)."""
    if model.calibration is None:
        return {"int8": model.model, "quantized": False}
    folder = Path(outdir) / "models" / model.name
    int8 = folder / "model_int8.tflite"
    if int8.is_file():
        return {"int8": int8, "quantized": "earlier run"}
    from edgekit.quantize import quantize

    started = time.monotonic()
    result = quantize(str(model.model), model.calibration, folder)
    return {"int8": result.outdir / result.main_file, "quantized": True, "seconds": round(time.monotonic() - started, 2)}


def prebuild(cell: Cell) -> Optional[str]:
    """Build the cell's firmware into the firmware cache (QEMU boards and serial boards with a profile); the
    error text when it cannot be built (the cell then reports it)."""
    if cell.int8 is None or cell.board.kind == "labgrid":
        return None   # a place's board is known from its tags: the runner builds before it takes the lock
    from edgekit.firmware.generate import cached_firmware

    board = cell.board.options.get("profile") or cell.board.address
    if cell.board.kind == "serial" and not cell.board.options.get("profile"):
        return None
    try:
        cached_firmware(Path(cell.int8).read_bytes(), str(board), source=str(cell.int8))
    except EdgekitError as exc:
        return exc.message.splitlines()[0]
    return None


def run_matrix(matrix: Matrix, outdir: Path, *, parallel: Optional[int] = None,
               on_cell: Callable[[LabRow], None] = lambda row: None) -> LabTable:
    """Every cell of the matrix -> the table (also written by edgekit.lab.table)."""
    outdir = Path(outdir)
    workers = parallel or matrix.parallel
    started = time.monotonic()
    models: Dict[str, QuantizedModel] = {}
    for model in matrix.models:
        try:
            models[model.name] = quantize_once(model, outdir)
        except EdgekitError as exc:
            models[model.name] = {"int8": None, "error": exc.message.splitlines()[0]}
            log.warning("model %s was not quantized: %s", model.name, models[model.name]["error"])
    cells = [Cell(m, b, models[m.name]["int8"], models[m.name].get("error")) for m in matrix.models for b in matrix.boards]
    rows: Dict[str, LabRow] = {}
    pending: List[Cell] = []
    for cell in cells:
        done = finished_row(outdir, cell)
        if done is not None:
            done["resumed"] = True
            rows[cell.key] = done
        else:
            pending.append(cell)
    build_started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(prebuild, pending))
    build_s = time.monotonic() - build_started
    run_started = time.monotonic()
    busy: Dict[str, int] = {b.name: 0 for b in matrix.boards}
    limit = {b.name: b.instances for b in matrix.boards}
    broken: Dict[str, str] = {}
    running: Dict[Future, Cell] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            for cell in list(pending):
                if cell.board.name in broken:
                    pending.remove(cell)
                    rows[cell.key] = _board_failed(cell, outdir, broken[cell.board.name])
                    on_cell(rows[cell.key])
                elif len(running) < workers and busy[cell.board.name] < limit[cell.board.name]:
                    pending.remove(cell)
                    busy[cell.board.name] += 1
                    running[pool.submit(run_cell, cell, matrix, outdir)] = cell
            if not running:
                continue
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in finished:
                cell = running.pop(future)
                busy[cell.board.name] -= 1
                try:
                    rows[cell.key] = future.result()
                except BoardUnavailable as exc:
                    broken[cell.board.name] = str(exc)
                    rows[cell.key] = finished_row_or_failed(cell, outdir, str(exc))
                on_cell(rows[cell.key])
    from edgekit.lab.table import table_json

    return table_json(matrix, [rows[c.key] for c in cells], models, workers=workers,
                      wall_s=time.monotonic() - started, build_s=build_s, run_s=time.monotonic() - run_started)


def _board_failed(cell: Cell, outdir: Path, reason: str) -> LabRow:
    from edgekit.lab.cells import cell_folder

    row = base_row(cell)
    row.update(status=FAILED, error=f"board unavailable: {reason}")
    write_json_atomically(cell_folder(outdir, cell) / "cell.json", row)
    return row


def finished_row_or_failed(cell: Cell, outdir: Path, reason: str) -> LabRow:
    import json

    from edgekit.lab.cells import cell_folder

    try:
        return json.loads((cell_folder(outdir, cell) / "cell.json").read_text())
    except (OSError, ValueError):
        return _board_failed(cell, outdir, reason)
