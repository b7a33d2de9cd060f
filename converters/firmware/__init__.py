"""Firmware backend: a full-int8 .tflite -> a Cortex-M firmware project (edgekit runtime or TFLM), sized to a board."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from edgekit.converters import CONVERTERS
from edgekit.support import SupportReport

ModelLike = Union[str, Path, bytes, "object"]


def _bytes_of(model: ModelLike):
    """(bytes, source name) of a path, raw bytes, or a TFLiteModel."""
    from edgekit.firmware.generate import load_model_bytes

    data = getattr(model, "data", None)
    if isinstance(data, (bytes, bytearray)):
        return bytes(data), str(getattr(model, "source", "<bytes>"))
    return load_model_bytes(model)


@CONVERTERS.register("firmware")
class FirmwareConverter:
    """int8 .tflite -> firmware project; targets are the runtimes ("edgekit", "tflm")."""

    name = "firmware"
    target = "edgekit"
    stage = "compile"  # not a quantizer: `edgekit quantize --format` does not offer it

    def check_support(self, model: ModelLike, target: str = target) -> SupportReport:
        """Every operator accepted or rejected for ``target`` ("edgekit" or "tflm"), with location and reason."""
        from edgekit.firmware.support import check_support
        from edgekit.tflite_graph import read_graph

        data, source = _bytes_of(model)
        return check_support(read_graph(data, source), target)

    def convert(self, model: ModelLike, *, board: str = "mps2-an386", outdir: Optional[Path] = None,
                runtime: str = target, build: bool = False, **options: Any):
        """Generate (and with ``build`` compile) the project; returns edgekit.firmware.generate.FirmwareResult.

        ``options`` belong to the runtime (edgekit.firmware.backends: ``optimize`` for edgekit); a runtime refuses
        an option it does not take."""
        from edgekit.firmware.generate import generate_firmware

        data, source = _bytes_of(model)
        return generate_firmware(data, board, outdir, runtime=runtime, build=build, source=source, **options)
