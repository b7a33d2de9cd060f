"""The generated C code as an implementation: compiled for the host with gcc and run on every image.

Pillow decodes the file (EXIF orientation, alpha, 16-bit and CMYK rules of the spec, as on a device
where the camera delivers decoded pixels); the generated C (``codegen.generate_c``) does color
conversion, resize, crop, values, quantization and layout. Images are grouped by size: one
executable per (spec, frame size, pixel format), cached by the hash of its sources.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

from edgekit.errors import InternalError, ToolMissingError, UserError
from edgekit.preprocessing.base import IMPLEMENTATIONS, ImageReadError, Result, SpecPreprocessor
from edgekit.preprocessing.codegen import DTYPES, ENGINE_DIR, generate_c
from edgekit.preprocessing.decode import decode_pillow

log = logging.getLogger(__name__)

CFLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off")
NUMPY_DTYPES = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8}


def build_dir() -> Path:
    base = os.environ.get("EDGEKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "edgekit"
    )
    return Path(base) / "preprocess_c"


def compiler() -> str:
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        raise ToolMissingError(cc, "apt-get install gcc (or set CC to a C99 compiler)")
    return cc


def _compile(cmd: list, cwd: Path, what: str) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise InternalError(f"{what} does not compile:\n{done.stderr[-2000:]}")


def _cached(key: str, build) -> Path:
    """Folder build_dir()/key, created atomically by ``build(staging)`` when missing."""
    folder = build_dir() / key
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    try:
        build(staging)
        try:
            os.replace(staging, folder)
        except OSError:  # another process built it first
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def _engine_objects(engine_h: str, engine_c: str) -> Path:
    """ek_preprocess.o + host_driver.o (the driver takes the config through ek_pp_host_config.h)."""
    driver = (ENGINE_DIR / "host_driver.c").read_text()
    key = hashlib.sha256("\0".join([engine_h, engine_c, driver, " ".join(CFLAGS)]).encode()).hexdigest()[:24]

    def build(stage: Path) -> None:
        (stage / "ek_preprocess.h").write_text(engine_h)
        (stage / "ek_preprocess.c").write_text(engine_c)
        (stage / "host_driver.c").write_text(driver)
        (stage / "ek_pp_host_config.h").write_text(
            '#include "ek_preprocess.h"\nextern const ek_pp_config ek_pp_host_config;\n')
        _compile([compiler(), *CFLAGS, "-c", "ek_preprocess.c", "-o", "ek_preprocess.o"], stage, "ek_preprocess.c")
        _compile([compiler(), *CFLAGS, '-DEK_PP_CONFIG_HEADER="ek_pp_host_config.h"', "-DEK_PP_CONFIG=ek_pp_host_config",
                  "-c", "host_driver.c", "-o", "host_driver.o"], stage, "host_driver.c")

    return _cached(f"engine-{key}", build)


def build_host_program(sources: Dict[str, str], symbol: str) -> Path:
    """Compile generated sources with firmware/preprocess/host_driver.c into an executable.

    The engine and driver objects are built once; each set of tables (one per frame size) is
    compiled and linked on its own. Cached by content hash under build_dir().
    """
    engine = _engine_objects(sources["ek_preprocess.h"], sources["ek_preprocess.c"])
    table_c, table_h = sources[f"{symbol}.c"], sources[f"{symbol}.h"]
    key = hashlib.sha256((str(engine) + table_c + table_h + " ".join(CFLAGS)).encode()).hexdigest()[:24]

    def build(stage: Path) -> None:
        (stage / f"{symbol}.h").write_text(table_h)
        (stage / f"{symbol}.c").write_text(table_c)
        # the driver refers to ek_pp_host_config; the linker makes it an alias of the generated symbol
        _compile([compiler(), *CFLAGS, f"-I{engine}", "-c", f"{symbol}.c", "-o", "tables.o"], stage, "generated tables")
        _compile([compiler(), "tables.o", str(engine / "ek_preprocess.o"), str(engine / "host_driver.o"),
                  f"-Wl,--defsym=ek_pp_host_config={symbol}", "-o", "ek_pp_host"], stage, "the host program")

    return _cached(f"host-{key}", build) / "ek_pp_host"


@IMPLEMENTATIONS.register("c")
class CPreprocessor(SpecPreprocessor):
    """Generated C (gcc, host build) after a Pillow decode."""

    kind = "c"
    library = "generated C (edgekit codegen, gcc host build)"
    tools = ("pillow",)

    def _run(self, path: Path) -> np.ndarray:
        result = self.run_many([path])[0]
        if isinstance(result, ImageReadError):
            raise result
        return result

    def run_many(self, paths: Sequence[Path]) -> List[Result]:
        results: List[Result] = [None] * len(paths)  # type: ignore[list-item]
        groups: Dict[Tuple[Tuple[int, int], str], List[Tuple[int, np.ndarray]]] = {}
        for i, path in enumerate(paths):
            try:
                pixels = decode_pillow(Path(path), self.spec)
            except self.read_errors as exc:
                results[i] = ImageReadError(Path(path), exc.message if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}")
                continue
            fmt = "gray8" if pixels.shape[2] == 1 else "rgb888"
            groups.setdefault((pixels.shape[:2], fmt), []).append((i, pixels))
        for (hw, fmt), items in groups.items():
            try:
                outputs = self.run_frames(np.stack([p for _, p in items]), hw, fmt)
            except UserError as exc:
                for i, _ in items:
                    results[i] = ImageReadError(Path(paths[i]), exc.message)
                continue
            for (i, _), out in zip(items, outputs):
                results[i] = out
        return results

    def run_frames(self, frames: np.ndarray, hw: Tuple[int, int], fmt: str) -> List[np.ndarray]:
        """Run the generated C on (N, H, W, C) uint8 frames; one tensor per frame."""
        sources = generate_c(self.spec, input_size=hw, input_format=fmt, symbol="ek_pp_model")
        exe = build_host_program(sources, "ek_pp_model")
        shape = self.spec.sample_shape(self.spec.output_hw(hw))
        dtype = NUMPY_DTYPES[self.spec.dtype]
        with tempfile.TemporaryDirectory(prefix="edgekit-pp-") as work:
            src, dst = Path(work) / "in.raw", Path(work) / "out.raw"
            src.write_bytes(np.ascontiguousarray(frames, dtype=np.uint8).tobytes())
            done = subprocess.run([str(exe), str(src), str(dst)], capture_output=True, text=True)
            if done.returncode != 0:
                raise InternalError(f"generated preprocessing failed: {done.stderr.strip()}")
            flat = np.frombuffer(dst.read_bytes(), dtype=dtype)
        per = int(np.prod(shape))
        if flat.size != per * len(frames):
            raise InternalError(f"generated preprocessing wrote {flat.size} values, expected {per * len(frames)}")
        return [flat[k * per : (k + 1) * per].reshape(shape).copy() for k in range(len(frames))]

    def notes(self) -> List[str]:
        return ["decoding (and EXIF orientation) by Pillow; the generated C starts from decoded 8-bit pixels",
                f"integer-only engine with {DTYPES[self.spec.dtype][1]} lookup tables: expected bit-exact with the reference"]
