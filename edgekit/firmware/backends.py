"""Firmware backends (the runtime a project is generated for), each owning the options it accepts.

``FIRMWARE_BACKENDS`` maps a runtime name to its backend: ``edgekit`` (edgekit's own int8 runtime, which takes
``optimize``), ``tflm`` (a TensorFlow Lite Micro project) and ``ethos-u`` (the Vela placement for a board with an
NPU; chosen by the board profile). The CLI hands the options the user gave to the chosen backend, which refuses
the ones it does not take; no backend names another backend's options.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Iterable, List

from edgekit.errors import UserError
from edgekit.registry import Registry

if TYPE_CHECKING:
    from edgekit.firmware.generate import AppSpec, FirmwareResult
    from edgekit.tflite_graph import Graph


class FirmwareBackend:
    """One runtime: the options it accepts (name -> what it does) and how it writes a project."""

    name: ClassVar[str] = ""
    options: ClassVar[Dict[str, str]] = {}

    def option_problems(self, given: Iterable[str]) -> List[str]:
        """A sentence for every option named in ``given`` (names, or a mapping of them) this runtime does not take."""
        takes = ", ".join(f"--{o.replace('_', '-')}" for o in self.options) or "no runtime options"
        return [f"--{key.replace('_', '-')} is not an option of the {self.name} runtime (it takes {takes})"
                for key in given if key not in self.options]

    def check_options(self, given: Iterable[str]) -> None:
        problems = self.option_problems(given)
        if problems:
            raise UserError("; ".join(problems), fix=f"leave those options out for the {self.name} runtime")

    def generate(self, data: bytes, graph: "Graph", board, outdir: Path, *, source: str, build: bool,
                 app: "AppSpec", **options: Any) -> "FirmwareResult":  # pragma: no cover - interface
        raise NotImplementedError


FIRMWARE_BACKENDS: Registry[type] = Registry("firmware runtime")


@FIRMWARE_BACKENDS.register("edgekit")
class EdgekitRuntime(FirmwareBackend):
    name = "edgekit"
    options = {"optimize": "speed | balanced | ram: where RAM and speed trade (kernel choice, scratch)",
               "weights": "auto | int8 | relaid: weights kept int8 in flash, re-laid out for speed, or (auto) "
                          "re-laid out per op within a flash budget of 1.2x the .tflite"}

    def generate(self, data, graph, board, outdir, *, source, build, app, optimize=None, weights=None, **options):
        from edgekit.firmware.generate import (DEFAULT_OPTIMIZE, DEFAULT_WEIGHTS, OPTIMIZE_MODES, _generate_edgekit,
                                               check_weights)

        optimize = optimize or DEFAULT_OPTIMIZE
        if optimize not in OPTIMIZE_MODES:
            raise UserError(f"unknown --optimize mode {optimize!r}", fix=f"use one of {', '.join(OPTIMIZE_MODES)}")
        return _generate_edgekit(data, graph, app.board or board, Path(outdir), source=source, build=build,
                                 optimize=optimize, app=app, weights=check_weights(weights or DEFAULT_WEIGHTS))


@FIRMWARE_BACKENDS.register("tflm")
class TflmRuntime(FirmwareBackend):
    name = "tflm"

    def generate(self, data, graph, board, outdir, *, source, build, app, **options):
        from edgekit.firmware.tflm import generate_tflm_project

        return generate_tflm_project(data, graph, board, Path(outdir), source=source, build=build)


@FIRMWARE_BACKENDS.register("ethos-u")
class EthosURuntime(FirmwareBackend):
    """Boards whose profile has an ``npu`` block: Vela + placement (the CPU ops are checked against edgekit)."""

    name = "ethos-u"

    def generate(self, data, graph, board, outdir, *, source, build, app, **options):
        from edgekit.firmware.ethosu import generate_npu_firmware

        return generate_npu_firmware(data, board, Path(outdir), source=source, build=build)


def backend_for(board, runtime: str) -> FirmwareBackend:
    """The backend that generates for ``board``: its NPU's when the profile has one, else ``runtime``'s."""
    return FIRMWARE_BACKENDS.get("ethos-u" if board.profile.get("npu") else runtime)()
