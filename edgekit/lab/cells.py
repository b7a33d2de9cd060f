"""One cell of the matrix: one int8 model on one board -> a row (fits, RAM, flash, instructions or latency,
energy with its method, bit-exact) written to OUT/cells/MODEL__BOARD/cell.json, plus the run's own run.json.

QEMU cells run in this process (the emulator is a subprocess; threads wait on its UART). labgrid and serial
cells run `edgekit run` as a child process: labgrid's client keeps process-wide state (one RemotePlaceManager),
so two places are never driven from one process at once."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from edgekit.errors import (DeviceNotFoundError, DoesNotFitError, EdgekitError, ToolMissingError)
from edgekit.lab.matrix import BoardEntry, Matrix, ModelEntry
from edgekit.lab.results import LabRow
from edgekit.run.results import RunReport, read_run_report

log = logging.getLogger(__name__)

OK, NO_FIT, FAILED = "ok", "does-not-fit", "failed"
FINISHED = (OK, NO_FIT)                 # a rerun skips these; failed cells run again
BOARD_LEVEL = (DeviceNotFoundError, ToolMissingError)   # the board itself is unusable: its other cells fail too


class BoardUnavailable(Exception):
    """A board-level failure: every remaining cell of the board is marked with it."""


@dataclass(frozen=True)
class Cell:
    model: ModelEntry
    board: BoardEntry
    int8: Optional[Path]            # the quantized model (None when quantization failed)
    model_error: Optional[str] = None   # why it was not quantized

    @property
    def key(self) -> str:
        return f"{self.model.name}__{self.board.name}"


def cell_folder(outdir: Path, cell: Cell) -> Path:
    return Path(outdir) / "cells" / cell.key


def finished_row(outdir: Path, cell: Cell) -> Optional[LabRow]:
    """The row of a cell finished by an earlier run (ok or does-not-fit) for the same model file, else None."""
    path = cell_folder(outdir, cell) / "cell.json"
    try:
        row: LabRow = json.loads(path.read_text())  # written by run_cell
    except (OSError, json.JSONDecodeError):
        return None
    return row if row.get("status") in FINISHED and row.get("model_sha256") == _sha(cell.int8) else None


def _sha(path: Optional[Path]) -> Optional[str]:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path and Path(path).is_file() else None


def base_row(cell: Cell) -> LabRow:
    return {"model": cell.model.name, "board": cell.board.name, "device": cell.board.device,
            "model_sha256": _sha(cell.int8), "status": None, "fits": None, "ram_bytes": None, "flash_bytes": None,
            "instructions_per_inference": None, "latency_ms": None, "energy_uj": None, "bit_exact": None,
            "error": None, "wall_s": None}


def row_from_run(row: LabRow, run: RunReport) -> LabRow:
    """The table's figures from a run report, each with the method that produced it."""
    memory, work = run.memory, run.work
    row["fits"] = True
    row["ram_bytes"] = memory.ram_bytes if memory.ram_bytes is not None else run.ram_bytes
    row["flash_bytes"] = memory.flash_bytes if memory.flash_bytes is not None else run.flash_bytes
    row["instructions_per_inference"] = work.instructions_per_inference
    estimated = work.latency_ms_estimated
    if run.latency_ms.count and work.latency_method:
        row["latency_ms"] = {"value": run.latency_ms.p50, "method": "measured", "source": work.latency_method}
    elif estimated is not None and estimated.value is not None:
        row["latency_ms"] = {"value": estimated.value, "method": "estimated", "source": estimated.source}
    energy = run.energy_uj_per_inference
    row["energy_uj"] = {"value": energy.value, "method": energy.method, "source": energy.source or energy.reason}
    exact = work.outputs_bit_exact
    row["bit_exact"] = exact.value if exact else None
    row["bit_exact_reference"] = exact.reference if exact else None
    row["complete"] = run.complete
    return row


def write_json_atomically(path: Path, data: LabRow) -> None:
    """Write a JSON file whole or not at all (a temporary file renamed over it)."""
    from edgekit.atomic import write_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(data, indent=2))


def run_cell(cell: Cell, matrix: Matrix, outdir: Path) -> LabRow:
    """Run one cell; never raises for a cell-level failure (the row says what failed). Raises BoardUnavailable
    when the board itself is unusable."""
    folder = cell_folder(outdir, cell)
    folder.parent.mkdir(parents=True, exist_ok=True)
    row = base_row(cell)
    started = time.monotonic()
    board_error: Optional[str] = None
    try:
        if cell.int8 is None:
            raise EdgekitError(f"model {cell.model.name} was not quantized: {cell.model_error}")
        run = _run_in_process(cell, matrix, folder) if cell.board.kind == "qemu" else _run_child(cell, matrix, folder)
        row_from_run(row, run)
        row["status"] = OK if row["complete"] else FAILED
        if not row["complete"]:
            row["error"] = run.incomplete_reason or "incomplete run"
    except DoesNotFitError as exc:
        row.update(status=NO_FIT, fits=False, error=exc.message.splitlines()[0])
    except BOARD_LEVEL as exc:
        row.update(status=FAILED, error=exc.message.splitlines()[0])
        board_error = row["error"]
    except EdgekitError as exc:
        row.update(status=FAILED, error=str(getattr(exc, "message", exc)).splitlines()[0])
    except Exception as exc:  # noqa: BLE001 - one cell's crash must not stop the matrix
        log.exception("cell %s crashed", cell.key)
        row.update(status=FAILED, error=f"{type(exc).__name__}: {exc}")
    row["wall_s"] = round(time.monotonic() - started, 3)
    write_json_atomically(folder / "cell.json", row)
    if board_error:
        raise BoardUnavailable(board_error)
    return row


def _run_in_process(cell: Cell, matrix: Matrix, folder: Path) -> RunReport:
    from edgekit.run.base import RunRequest
    from edgekit.run.cli import write_results
    from edgekit.run.inputs import model_inputs, prepare_inputs
    from edgekit.run.resolve import resolve_device
    from edgekit.run.runners import runner_class

    target = resolve_device(cell.board.device, cell.board.options.get("profile"))
    samples, described = prepare_inputs(cell.int8, None, limit=matrix.inputs, specs=model_inputs(cell.int8))
    request = RunRequest(artifact=cell.int8, inputs=samples, iterations=matrix.iterations, warmup=0,
                         timeout_s=matrix.timeout_s)
    try:
        result = runner_class(target.kind)(target).run(request)
    except EdgekitError as exc:
        partial = getattr(exc, "partial", None)
        if partial is None:
            raise
        result = partial
    return write_results(folder / "run", result, request, described, 0.25)


def _run_child(cell: Cell, matrix: Matrix, folder: Path) -> RunReport:
    board = cell.board
    cmd = [sys.executable, "-m", "edgekit.cli", "run", str(cell.int8), "--device", board.device,
           "-n", str(matrix.iterations), "--warmup", "0", "--input-limit", str(matrix.inputs),
           "--timeout", str(matrix.timeout_s), "-o", str(folder / "run")]
    for key, flag in (("coordinator", "--coordinator"), ("lock_timeout", "--lock-timeout"), ("profile", "--profile")):
        if board.options.get(key) is not None:
            cmd += [flag, str(board.options[key])]
    if board.options.get("flash"):
        cmd.append("--flash")
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    run_json = folder / "run" / "run.json"
    if proc.returncode in (0, 4) and run_json.is_file():
        return read_run_report(json.loads(run_json.read_text()))
    message = next((line for line in proc.stderr.splitlines() if "error:" in line), proc.stderr.strip()[-300:])
    message = message.split("error:", 1)[-1].strip() or f"edgekit run exited with {proc.returncode}"
    unusable = ("cannot be reached", "has no place", "is held by", "cannot open")
    if any(text in message for text in unusable):
        raise DeviceNotFoundError(message)
    if "does not fit" in message:
        raise DoesNotFitError(message)
    raise EdgekitError(message)
