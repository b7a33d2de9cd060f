"""``implementation: c`` on host, ssh and adb devices: the generated integer C preprocessing as a shared library.

The sources are the engine and the tables edgekit.preprocessing.codegen generates from the spec (the same
code the firmware links), one table set per decoded frame size the inputs have, plus
firmware/preprocess/ek_pp_library.c, which exports find/run functions the device-side runner calls through
ctypes, timing each call as the preprocess phase. The model's input quantization is folded into the value
tables, so the library writes the model's input tensor directly. Where it is built:

- host: with this machine's C compiler (``CC``, else gcc), cached by the hash of its sources (as the host
  runtime is);
- ssh: on the board, with its own compiler (the profile's ``connection.cc``, else cc, gcc or clang). The
  sources are plain C99 and compile in about a second; a native build matches the board's architecture,
  ABI, C library and default CPU flags exactly, where a binary cross-built here would need one cross
  toolchain per architecture and could not be checked against the board's C library. Only a board without
  any compiler gets a cross-built library, when a ``<arch>-linux-gnu-gcc`` for its ``uname -m`` exists here;
- adb: cross-compiled here with the Android NDK's clang for the device's ABI (``ANDROID_NDK_HOME``,
  ``ANDROID_NDK_ROOT``, ``ANDROID_NDK``, or ``ndk/<version>`` under ``ANDROID_HOME``/``ANDROID_SDK_ROOT``):
  phones have no compiler. Without an NDK the run is refused before the device is touched.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import DeviceError, InternalError, ToolMissingError, UserError
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.preprocessing.codegen import ENGINE_DIR, generate_c
from edgekit.run.pipeline.results import Decode, ModelInput

log = logging.getLogger(__name__)

LIBRARY_NAME = "libekpp.so"
LIBRARY_SOURCE = ENGINE_DIR / "ek_pp_library.c"
# No -Werror: a board's compiler may be newer than ours and warn about more.
CFLAGS = ("-std=c99", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-Wall", "-Wextra")
FORMAT_CODES = {"gray8": 1, "rgb888": 3}  # EK_PP_GRAY8, EK_PP_RGB888
ANDROID_TRIPLES = {"arm64-v8a": "aarch64-linux-android", "armeabi-v7a": "armv7a-linux-androideabi",
                   "x86_64": "x86_64-linux-android", "x86": "i686-linux-android"}
ANDROID_API = 21  # the oldest API level every current NDK still targets, for all four ABIs
NDK_VARIABLES = ("ANDROID_NDK_HOME", "ANDROID_NDK_ROOT", "ANDROID_NDK", "NDK_ROOT")
SDK_VARIABLES = ("ANDROID_HOME", "ANDROID_SDK_ROOT")
NDK_FIX = ("install the Android NDK (Android Studio's SDK Manager, or `sdkmanager \"ndk;27.2.12479018\"`) and set "
           "ANDROID_NDK_HOME to its folder; or use implementation pillow or opencv on this device")
CROSS_GCC = {"aarch64": "aarch64-linux-gnu-gcc", "armv7l": "arm-linux-gnueabihf-gcc", "armv6l": "arm-linux-gnueabihf-gcc",
             "x86_64": "x86_64-linux-gnu-gcc", "riscv64": "riscv64-linux-gnu-gcc"}


# ------------------------------------------------------------------ what to build
def spec_for_model(base: PreprocessSpec, model_input: ModelInput) -> PreprocessSpec:
    """The pipeline's float spec as the C computes it: quantized to the model's int8/uint8 input, or float32."""
    quant, dtype = model_input.quantization, model_input.dtype
    if quant is None and dtype == "float32":
        return base
    if quant is None or dtype not in ("int8", "uint8"):
        raise UserError(f"the generated C preprocessing writes int8, uint8 or float32 model inputs; this model's input "
                        f"is {dtype}", fix="use implementation pillow or opencv for this model")
    return base.replace(dtype=dtype).with_quantization(quant.scale, quant.zero_point)


def frame_keys(frames: Sequence[Path], decode: Decode) -> List[Tuple[int, int, str]]:
    """The distinct (height, width, gray8|rgb888) the device-side decode gives for these files.

    Raw frames have the stated size; JPEG/PNG files are decoded here with the runner's own decode function,
    so the sizes are the ones the device will see."""
    if decode.format in ("rgb565", "rgb888", "gray8"):
        return [(int(decode.height), int(decode.width), "gray8" if decode.format == "gray8" else "rgb888")]
    from edgekit.run.runners.pipeline_runner import PipelineFailure, decode as device_decode

    keys = []
    for path in frames:
        try:
            pixels = np.asarray(device_decode(Path(path).read_bytes(), decode.to_dict()))
        except (PipelineFailure, OSError, ValueError) as exc:
            raise UserError(f"cannot decode {Path(path).name} as {decode.format}: {exc}",
                            fix="give JPEG or PNG files, or state the raw frame format in decode:") from None
        h, w = pixels.shape[:2]
        key = (int(h), int(w), "gray8" if pixels.ndim == 2 or pixels.shape[2] == 1 else "rgb888")
        if key not in keys:
            keys.append(key)
    return keys


def library_sources(spec: PreprocessSpec, keys: Sequence[Tuple[int, int, str]]) -> Dict[str, str]:
    """{file name: text}: engine, one table set per frame key, the list header and ek_pp_library.c."""
    files: Dict[str, str] = {}
    includes, configs = [], []
    for i, (h, w, fmt) in enumerate(keys):
        symbol = f"ek_pp_frame{i}"
        files.update(generate_c(spec, input_size=(h, w), input_format=fmt, symbol=symbol))
        includes.append(f'#include "{symbol}.h" /* {w}x{h} {fmt} */')
        configs.append(f"&{symbol}")
    files["ek_pp_library_configs.h"] = ("/* Generated by edgekit run --pipeline: the tables per decoded frame size. */\n"
                                        "#ifndef EK_PP_LIBRARY_CONFIGS_H\n#define EK_PP_LIBRARY_CONFIGS_H\n\n"
                                        + "\n".join(includes) + f"\n\n#define EK_PP_LIBRARY_CONFIGS {', '.join(configs)}\n\n#endif\n")
    files["ek_pp_library.c"] = LIBRARY_SOURCE.read_text()
    return files


def compile_command(cc: Sequence[str], folder: str, files: Dict[str, str], output: str) -> List[str]:
    sources = [f"{folder}/{name}" for name in sorted(files) if name.endswith(".c")]
    return [*cc, *CFLAGS, "-I", folder, *sources, "-o", output]


def build_here(files: Dict[str, str], cc: Sequence[str]) -> Path:
    """Compile on this machine (host build or a cross compiler); cached by compiler + sources."""
    from edgekit.preprocessing.c_impl import build_dir

    key = hashlib.sha256("\0".join([" ".join(cc), " ".join(CFLAGS)] + [f"{k}\0{v}" for k, v in sorted(files.items())])
                         .encode()).hexdigest()[:24]
    folder = build_dir() / f"pipeline-{key}"
    library = folder / LIBRARY_NAME
    if library.is_file():
        return library
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".pipeline-", dir=folder.parent))
    try:
        for name, text in files.items():
            (stage / name).write_text(text)
        done = subprocess.run(compile_command(cc, str(stage), files, str(stage / LIBRARY_NAME)), capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise InternalError(f"the generated preprocessing does not compile with {' '.join(cc)}:\n{done.stderr[-2000:]}")
        try:
            os.replace(stage, folder)
        except OSError:  # another process built it first
            if not library.is_file():
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return library


def host_compiler() -> List[str]:
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc.split()[0]) is None:
        raise ToolMissingError(cc, "apt-get install gcc (or set CC to a C99 compiler): implementation c builds the "
                                   "generated preprocessing for this machine")
    return cc.split()


# ------------------------------------------------------------------ Android NDK
def find_ndk(environ: Optional[Dict[str, str]] = None) -> Path:
    """The Android NDK folder (one holding toolchains/llvm/prebuilt/*/bin/clang), or ToolMissingError."""
    env = os.environ if environ is None else environ
    tried = []
    for var in NDK_VARIABLES:
        if env.get(var):
            tried.append(f"{var}={env[var]}")
            if ndk_clang(Path(env[var])) is not None:
                return Path(env[var])
    for var in SDK_VARIABLES:
        if env.get(var):
            root = Path(env[var])
            candidates = sorted((root / "ndk").glob("*"), key=_version_key, reverse=True) + [root / "ndk-bundle"]
            tried.append(f"{var}={env[var]} (ndk/*, ndk-bundle)")
            for folder in candidates:
                if ndk_clang(folder) is not None:
                    return folder
    where = ("looked at " + "; ".join(tried)) if tried else f"none of {', '.join(NDK_VARIABLES + SDK_VARIABLES)} is set"
    raise ToolMissingError(f"the Android NDK (implementation c on an adb device is cross-compiled with its clang; "
                           f"{where})", NDK_FIX)


def _version_key(path: Path) -> Tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in path.name.split("."))


def ndk_clang(ndk: Path) -> Optional[Path]:
    found = sorted(Path(ndk).glob("toolchains/llvm/prebuilt/*/bin/clang"))
    return found[0] if found else None


def android_compiler(ndk: Path, abi: str) -> List[str]:
    """clang --target=<triple><api> for the device's ABI (getprop ro.product.cpu.abi)."""
    if abi not in ANDROID_TRIPLES:
        raise DeviceError(f"the Android device's ABI {abi!r} is not one of {', '.join(ANDROID_TRIPLES)}",
                          fix="use implementation pillow or opencv on this device")
    return [str(ndk_clang(ndk)), f"--target={ANDROID_TRIPLES[abi]}{ANDROID_API}"]


# ------------------------------------------------------------------ per device
class DeviceLibrary(NamedTuple):
    path: str           # on the device
    built_with: str     # which compiler, where
def check_toolchain(kind: str) -> Optional[Path]:
    """Refuse early (before any device is touched) when the library cannot be built for this kind of device;
    the NDK folder for adb."""
    if kind in ("host", "macos"):
        host_compiler()
    elif kind == "adb":
        return find_ndk()
    return None


def prepare_library(space, spec: PreprocessSpec, keys: Sequence[Tuple[int, int, str]],
                    ndk: Optional[Path] = None) -> DeviceLibrary:
    """Build the library for the workspace's device and put it there: its path on the device and how it was built."""
    files = library_sources(spec, keys)
    if space.local is not None:
        cc = host_compiler()
        return DeviceLibrary(space.put(build_here(files, cc), LIBRARY_NAME), f"{' '.join(cc)} on this host")
    if space.adb is not None:
        abi = space.adb.shell(["getprop", "ro.product.cpu.abi"], what="reading the device ABI").strip()
        cc = android_compiler(ndk or find_ndk(), abi)
        return DeviceLibrary(space.put(build_here(files, cc), LIBRARY_NAME), f"Android NDK {' '.join(cc)} (device ABI {abi})")
    return _prepare_on_board(space, files)


def _prepare_on_board(space, files: Dict[str, str]) -> DeviceLibrary:
    """ssh: upload the sources and compile them on the board; a cross build here only if it has no compiler."""
    ssh = space.ssh
    named = getattr(space, "board_cc", None)
    candidates = [str(named)] if named else ["cc", "gcc", "clang"]
    probe = " || ".join(f"command -v {shlex.quote(c)}" for c in candidates)
    try:
        cc = ssh.run(["sh", "-c", probe], timeout_s=30, what="looking for a C compiler").strip().splitlines()[-1]
    except (DeviceError, ToolMissingError, IndexError):
        cc = ""
    if cc:
        with tempfile.TemporaryDirectory(prefix="edgekit-ppc-") as tmp:
            source = Path(tmp) / "ek_pp_src"
            source.mkdir()
            for name, text in files.items():
                (source / name).write_text(text)
            remote_src = space.put(source, "ek_pp_src")
        output = f"{space.root}/{LIBRARY_NAME}"
        try:
            ssh.run(compile_command([cc], remote_src, files, output), timeout_s=300, what="compiling the generated C")
        except DeviceError as exc:
            raise DeviceError(f"the generated preprocessing did not compile on the board with {cc}: {exc.message}",
                              fix="check the board's C compiler (a C99 cc), or use implementation pillow or opencv") from None
        return DeviceLibrary(output, f"{cc} on the board")
    arch = ssh.run(["uname", "-m"], timeout_s=30, what="reading the board's architecture").strip()
    cross = CROSS_GCC.get(arch)
    if cross is None or shutil.which(cross) is None:
        raise ToolMissingError(
            f"a C compiler on the board (tried {', '.join(candidates)}) or a cross compiler here for {arch or 'its architecture'}",
            f"install one on the board (e.g. sudo apt-get install gcc), or here: apt-get install "
            f"{'gcc-' + cross[:-4].replace('_', '-') if cross else 'a gcc for ' + arch}; or use implementation pillow or opencv")
    library = build_here(files, [cross])
    return DeviceLibrary(space.put(library, LIBRARY_NAME), f"{cross} on this host (the board has no C compiler)")
