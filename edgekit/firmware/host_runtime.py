"""The edgekit C int8 runtime compiled for this host and driven from Python.

The same C sources the firmware runs (firmware/runtime) are built with gcc into a shared library, cached
under ``build/host_runtime/<hash>/`` by a hash of the sources and flags, and loaded with ctypes::

    rt = HostRuntime(model_bytes)
    outputs = rt.invoke([x])            # numpy arrays in, numpy arrays out
    rt.plan["arena_bytes"]              # the arena the firmware needs (same planner code as on the device)

``sanitize=True`` runs the model through an AddressSanitizer + UBSan build of the runtime's command-line
driver instead (a subprocess, with exactly-sized state and arena allocations), so an out-of-bounds
access aborts with a sanitizer report rather than going unnoticed.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from edgekit._resources import build_root, data_dir
from edgekit.errors import (
    CalibrationDataError,
    InternalError,
    InvalidModelError,
    ToolMissingError,
    UnsupportedOpError,
)
from edgekit.progress import step_progress
from edgekit.firmware.plan_types import StreamedGroup
from edgekit.support import OpSupport, SupportReport
from edgekit.tflite_graph import read_graph

log = logging.getLogger(__name__)

RUNTIME_DIR = data_dir("firmware") / "runtime"
BUILD_DIR = Path(os.environ.get("EDGEKIT_HOST_RUNTIME_DIR") or build_root() / "host_runtime")
TARGET = "the edgekit firmware runtime"

# Keep in step with firmware/runtime/Makefile.
HOST_CFLAGS = ["-std=c99", "-O2", "-g", "-ffp-contract=off", "-Wall", "-Wextra"]
# -O1, as the sanitizers' own docs advise (and the fuzz build uses): the same checks, ~30 % less compile time than -O2
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-O1"]

EK_STATUS = {0: "OK", 1: "MODEL", 2: "UNSUPPORTED", 3: "SHAPE", 4: "TYPE", 5: "MEMORY", 6: "INTERNAL"}
_EK_ERR_MEMORY = 5
_EK_ERR_UNSUPPORTED = 2
_EK_ERR_INTERNAL = 6
_CUSTOM_OP = 32
# TFLite TensorType -> numpy dtype (the types the runtime handles).
DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}
MAX_DIMS = 6


# --- build --------------------------------------------------------------------------------------------

def runtime_sources() -> List[Path]:
    """C sources of the runtime: core, every kernel present, host helpers."""
    src = RUNTIME_DIR / "src"
    return sorted(src.glob("*.c")) + sorted((src / "kernels").glob("*.c"))


def _headers() -> List[Path]:
    src = RUNTIME_DIR / "src"
    return sorted((RUNTIME_DIR / "include").glob("*.h")) + sorted(src.glob("*.h")) + sorted((src / "kernels").glob("*.h"))


def _compiler(name: Optional[str] = None) -> str:
    cc = name or os.environ.get("CC", "gcc")
    if not shutil.which(cc):
        raise ToolMissingError(cc, f"apt-get install {'clang' if 'clang' in cc else 'gcc'} "
                                   "(needed to build the edgekit runtime for this host)")
    return cc


@lru_cache(maxsize=None)
def _compiler_version(cc: str) -> str:
    return subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[0]


def _build_key(kind: str, cc: str, flags: Sequence[str], files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    h.update(f"{kind}\0{_compiler_version(cc)}\0{' '.join(flags)}\0".encode())
    for f in files:
        h.update(os.path.relpath(f, RUNTIME_DIR).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _build(kind: str, output_name: str, sources: Sequence[Path], flags: Sequence[str], cc: Optional[str] = None) -> Path:
    """Compile into build/host_runtime/<kind>-<hash>/<output_name>, atomically (safe with parallel test processes)."""
    cc = _compiler(cc)
    key = _build_key(kind, cc, flags, list(sources) + _headers())
    final_dir = BUILD_DIR / f"{kind}-{key}"
    target = final_dir / output_name
    if target.exists():
        return target
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{kind}-{key}.", dir=BUILD_DIR))
    try:
        warnings = _compile_and_link(cc, flags, sources, tmp / output_name, kind)
        if warnings:
            log.warning("edgekit host runtime compiler warnings:\n%s", warnings)
        try:
            os.rename(tmp, final_dir)
        except OSError:
            if not target.exists():  # not a lost race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _prune(kind, keep=final_dir)
    return target


def _compile_and_link(cc: str, flags: Sequence[str], sources: Sequence[Path], output: Path, kind: str) -> str:
    """Compile every source to an object file, as many at once as there are CPUs, then link them into ``output``;
    returns the compiler's warnings. The same code as one ``cc flags -o output sources`` call (which also compiles
    each file on its own: no cross-file optimisation either way), in a fraction of the wall time."""
    include = ["-I", str(RUNTIME_DIR / "include"), "-I", str(RUNTIME_DIR / "src")]
    objects_dir = output.parent / "obj"
    objects_dir.mkdir()
    objects = [objects_dir / f"{i:02d}_{Path(src).stem}.o" for i, src in enumerate(sources)]
    commands = [[cc, *flags, *include, "-c", str(src), "-o", str(obj)] for src, obj in zip(sources, objects)]
    link = [cc, *flags, "-o", str(output), *map(str, objects), "-lm"]
    log.info("building the edgekit host runtime (%d files, %s, then linked): %s", len(sources), cc, " ".join(link))
    built = step_progress(f"host runtime ({kind})", len(commands) + 1)  # gcc -O2 of each runtime file: seconds
    results = []
    with ThreadPoolExecutor(max_workers=max(1, min(len(commands), os.cpu_count() or 1))) as pool:
        for done in as_completed([pool.submit(_run_quiet, cmd) for cmd in commands]):
            results.append(done.result())
            built(1)
    failed = [r for r in results if r.returncode != 0]
    if failed:
        raise InternalError("building the edgekit host runtime failed:\n" + "\n".join(r.stderr.strip() for r in failed))
    linked = _run_quiet(link)
    built(1)
    if linked.returncode != 0:
        raise InternalError(f"linking the edgekit host runtime failed:\n{linked.stderr.strip()}")
    shutil.rmtree(objects_dir, ignore_errors=True)
    return "\n".join(r.stderr.strip() for r in [*results, linked] if r.stderr.strip())


def _run_quiet(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


STALE_BUILD_SECONDS = 3600


def _prune(kind: str, keep: Path) -> None:
    """Remove builds of the same kind from older sources (untouched for an hour: no process still needs them)."""
    now = time.time()
    for old in BUILD_DIR.glob(f"{kind}-*"):
        try:
            if old != keep and old.is_dir() and now - old.stat().st_mtime > STALE_BUILD_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass


def build_library() -> Path:
    """libekrt.so for ctypes (cached by source hash)."""
    sources = runtime_sources() + [RUNTIME_DIR / "src" / "host" / "ek_host.c"]
    return _build("lib", "libekrt.so", sources, HOST_CFLAGS + ["-fPIC", "-shared", "-Wl,--no-undefined"])


def build_driver(*, sanitize: bool = False, defines: Sequence[str] = ()) -> Path:
    """The ekrt_run command-line driver, optionally with ASan + UBSan (cached by source hash). ``defines``: extra
    runtime macros (e.g. EK_MODEL_PATHS: the optional kernel paths of a device build, edgekit.firmware.kernel_paths)."""
    sources = runtime_sources() + [RUNTIME_DIR / "src" / "host" / "ekrt_run.c"]
    flags = HOST_CFLAGS + (SANITIZE_FLAGS if sanitize else []) + [f"-D{d}" for d in defines]
    kind = ("asan" if sanitize else "run") + "".join(f"-{d.lower()}" for d in defines)
    return _build(kind, "ekrt_run", sources, flags)


FUZZ_SOURCE = data_dir("firmware") / "fuzz" / "fuzz_runtime.c"
FUZZ_FLAGS = ["-std=c99", "-O1", "-g", "-ffp-contract=off", "-Wall", "-Wextra", "-fsanitize=fuzzer,address,undefined",
              "-fno-sanitize-recover=all"]


def build_fuzzer() -> Path:
    """The libFuzzer target (clang, ASan + UBSan) over reader, planner, prepare and one invoke."""
    return _build("fuzz", "ekrt_fuzz", runtime_sources() + [FUZZ_SOURCE], FUZZ_FLAGS, cc=os.environ.get("CLANG", "clang"))


# --- ctypes mirrors (checked against the C sizes at load time) -----------------------------------------

class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("dims", ctypes.c_int32 * MAX_DIMS), ("bytes", ctypes.c_int32),
        ("scale", ctypes.c_float), ("zero_point", ctypes.c_int32), ("scales", ctypes.c_void_p),
        ("zero_points", ctypes.c_void_p), ("num_scales", ctypes.c_int32), ("ndim", ctypes.c_int8),
        ("type", ctypes.c_int8), ("quantized_dimension", ctypes.c_int8), ("is_constant", ctypes.c_uint8),
    ]


class _PlanEntry(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_int32), ("bytes", ctypes.c_int32), ("first_op", ctypes.c_int32),
                ("last_op", ctypes.c_int32), ("alias_of", ctypes.c_int32)]


class _OverlapInfo(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int32), ("input", ctypes.c_int32), ("d_max", ctypes.c_int32), ("exact", ctypes.c_int32)]


OPTIMIZE_MODES = {"speed": 0, "balanced": 1, "ram": 2}
DEFAULT_OPTIMIZE = "balanced"
_FOR_MVE = 0x100  # EK_OPTIMIZE_FOR_MVE
_FOR_EXPORT = 0x200  # EK_OPTIMIZE_FOR_EXPORT: per-op data of a prepared model lives in flash
_INT8_WEIGHTS = 0x400  # EK_OPTIMIZE_INT8_WEIGHTS: weights stay int8 (no re-laid-out copies)


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("op_index", ctypes.c_int32), ("message", ctypes.c_char_p)]


@lru_cache(maxsize=None)
def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    size_t, vp, i32 = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int32
    sig = {
        "ek_init": (ctypes.c_int, [vp, vp, size_t, vp, size_t, vp, size_t]),
        "ek_invoke": (ctypes.c_int, [vp]),
        "ek_required_bytes": (ctypes.c_int, [vp, size_t, vp, size_t, ctypes.POINTER(size_t), ctypes.POINTER(size_t),
                                             ctypes.POINTER(_Error)]),
        "ek_last_error": (_Error, [vp]),
        "ek_num_inputs": (i32, [vp]), "ek_num_outputs": (i32, [vp]),
        "ek_get_input": (ctypes.POINTER(_Tensor), [vp, i32]),
        "ek_get_output": (ctypes.POINTER(_Tensor), [vp, i32]),
        "ek_get_tensor": (ctypes.POINTER(_Tensor), [vp, i32]),
        "ek_model_opcodes": (i32, [vp, size_t, ctypes.POINTER(i32), i32, ctypes.POINTER(_Error)]),
        "ek_op_name": (ctypes.c_char_p, [i32]),
        "ek_host_sizeof_runtime": (size_t, []), "ek_host_sizeof_tensor": (size_t, []),
        "ek_host_sizeof_plan_entry": (size_t, []), "ek_host_has_kernel": (ctypes.c_int, [i32]),
        "ek_host_info": (ctypes.c_int, [vp, ctypes.POINTER(ctypes.c_int64)]),
        "ek_host_tensor_plan": (ctypes.POINTER(_PlanEntry), [vp]),
        "ek_host_scratch_plan": (ctypes.POINTER(_PlanEntry), [vp]),
        "ek_host_opcode": (i32, [vp, i32]),
        "ek_host_input_index": (i32, [vp, i32]), "ek_host_output_index": (i32, [vp, i32]),
        "ek_init_opt": (ctypes.c_int, [vp, vp, size_t, vp, size_t, vp, size_t, i32]),
        "ek_init_opt_ops": (ctypes.c_int, [vp, vp, size_t, vp, size_t, vp, size_t, i32, vp, i32]),
        "ek_plan_overlapped_work_bytes": (size_t, [vp]),
        "ek_plan_overlapped": (ctypes.c_int, [vp, vp, size_t, ctypes.POINTER(_OverlapInfo), i32]),
        "ek_export_prepared": (ctypes.c_int, [vp, vp, size_t, ctypes.POINTER(size_t)]),
        "ek_prepared_state_bytes": (size_t, [vp, size_t]),
        "ek_prepared_init": (ctypes.c_int, [vp, vp, size_t, vp, size_t, vp, size_t, vp, size_t]),
        "ek_prepared_invoke": (ctypes.c_int, [vp]),
        "ek_prepared_input": (ctypes.POINTER(_Tensor), [vp, i32]),
        "ek_prepared_output": (ctypes.POINTER(_Tensor), [vp, i32]),
        "ek_prepared_last_error": (_Error, [vp]),
        "ek_host_sizeof_prepared": (size_t, []),
        "ek_reset_variables": (None, [vp]), "ek_prepared_reset": (None, [vp]),
        "ek_variables_bytes": (size_t, [vp]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    for what, cls in (("tensor", _Tensor), ("plan_entry", _PlanEntry)):
        c_size = getattr(lib, f"ek_host_sizeof_{what}")()
        if c_size != ctypes.sizeof(cls):
            raise InternalError(f"ctypes mirror of ek_{what} is {ctypes.sizeof(cls)} bytes, C says {c_size}: "
                                "update edgekit/firmware/host_runtime.py after changing ek_kernels.h/ek_runtime.h")
    return lib


def library() -> ctypes.CDLL:
    return _load(str(build_library()))


# --- model checks without a runtime instance ------------------------------------------------------------

def _aligned_copy(data: bytes) -> np.ndarray:
    """The model in a 16-byte aligned buffer (constants are read in place)."""
    raw = np.empty(len(data) + 16, dtype=np.uint8)
    start = (-raw.ctypes.data) % 16
    buf = raw[start:start + len(data)]
    buf[:] = np.frombuffer(data, dtype=np.uint8)
    return buf


def op_codes(model: bytes, *, source: str = "<bytes>") -> List[int]:
    """Builtin code of every operator, read by the C reader (InvalidModelError if malformed)."""
    lib = library()
    buf = _aligned_copy(model)
    err = _Error()
    n = lib.ek_model_opcodes(buf.ctypes.data, len(model), None, 0, ctypes.byref(err))
    if n < 0:
        raise InvalidModelError(f"{source}: {err.message.decode()}", fix="pass an intact .tflite file (TFLite schema 3)")
    codes = (ctypes.c_int32 * max(n, 1))()
    lib.ek_model_opcodes(buf.ctypes.data, len(model), codes, n, ctypes.byref(err))
    return list(codes[:n])


def op_name(code: int) -> str:
    return library().ek_op_name(code).decode()


def support_report(model: bytes, *, source: str = "<bytes>") -> SupportReport:
    """Every operator, marked supported when this build of the runtime has its kernel."""
    lib = library()
    ops = []
    for i, code in enumerate(op_codes(model, source=source)):
        name = op_name(code)
        if code == _CUSTOM_OP:
            name = f"CUSTOM({_custom_code(model, i) or '?'})"
        ok = bool(lib.ek_host_has_kernel(code))
        ops.append(OpSupport(name, f"op #{i}", ok, "" if ok else "no kernel in the edgekit runtime"))
    return SupportReport(TARGET, ops)


def check_supported(model: bytes, *, source: str = "<bytes>") -> SupportReport:
    """Raise UnsupportedOpError listing every unsupported operator at once (before anything is written)."""
    report = support_report(model, source=source)
    if not report.ok:
        raise UnsupportedOpError(report, target=TARGET)
    return report


def _tensor_names(model: bytes) -> Dict[int, str]:
    """Tensor names (index -> name) from edgekit.tflite_graph ({} if it cannot read them)."""
    try:
        return {t.index: t.name for t in read_graph(model).tensors}
    except InvalidModelError:  # names are a nicety; the C reader validated everything that matters
        return {}


def _custom_code(model: bytes, op_index: int) -> Optional[str]:
    """custom_code of a CUSTOM operator (None if unreadable)."""
    try:
        return read_graph(model).ops[op_index].custom_code or None
    except (InvalidModelError, IndexError):
        return None


# --- the runtime ----------------------------------------------------------------------------------------

def _tensor_dict(t: _Tensor, index: int) -> Dict:
    return {
        "index": index,
        "shape": tuple(int(t.dims[d]) for d in range(t.ndim)),
        "dtype": np.dtype(DTYPES.get(t.type, np.uint8)),
        "type": int(t.type),
        "bytes": int(t.bytes),
        "scale": float(t.scale),
        "zero_point": int(t.zero_point),
    }


class HostRuntime:
    """One model loaded into the C runtime (ctypes, or a sanitizer-built subprocess with sanitize=True)."""

    def __init__(self, model_bytes: bytes, *, sanitize: bool = False, source: str = "<bytes>",
                 optimize: Optional[str] = None, plan_mve: bool = False, flash_layouts: bool = True,
                 relaid_ops: Optional[Iterable[int]] = None) -> None:
        """optimize=None runs the .tflite in place with the plain plan (what a device loading the model at run
        time does); "speed" / "balanced" / "ram" prepares the model as the firmware generator does (kernel
        variants for that mode, overlapped plan, prepared blob) and invokes through the prepared path.
        ``flash_layouts=False`` keeps the weights int8 in the prepared blob (no re-laid-out copies in flash:
        slower on Cortex-M4, for boards whose flash cannot hold them). ``relaid_ops`` (with ``optimize`` and
        flash_layouts): a per-op choice instead, only these op indices take their re-laid-out copies, every other op
        keeps its weights int8 (--weights auto's flash budget; ek_init_opt_ops)."""
        if optimize is not None and optimize not in OPTIMIZE_MODES:
            raise InvalidModelError(f"unknown optimize mode {optimize!r}", fix=f"use one of {', '.join(OPTIMIZE_MODES)}")
        self.source = source
        self.model_bytes = bytes(model_bytes)
        self.sanitize = sanitize
        self.optimize = optimize
        self.plan_mve = plan_mve
        self.flash_layouts = flash_layouts
        self.relaid_ops = None if relaid_ops is None else frozenset(int(i) for i in relaid_ops)
        if self.relaid_ops is not None and (optimize is None or not flash_layouts or sanitize):
            raise InternalError("relaid_ops is a per-op choice of a prepared model's layouts: it needs optimize, "
                                "flash_layouts=True and the in-process runtime")
        check_supported(self.model_bytes, source=source)
        self._backend = _DriverBackend(self) if sanitize else _CtypesBackend(self)
        names = _tensor_names(self.model_bytes)
        for spec in self._backend.inputs + self._backend.outputs:
            spec["name"] = names.get(spec["index"], "")

    @property
    def inputs(self) -> List[Dict]:
        """[{name, index, shape, dtype, type, bytes, scale, zero_point}] per graph input."""
        return self._backend.inputs

    @property
    def outputs(self) -> List[Dict]:
        return self._backend.outputs

    @property
    def op_names(self) -> List[str]:
        return list(self._backend.op_names)

    @property
    def prepared(self) -> Optional[Dict]:
        """With optimize: {blob (bytes), arena_bytes, state_slots, optimize, overlaps [{op, input, d_max, exact}],
        plan (the overlapped plan, as .plan)}; None otherwise."""
        return getattr(self._backend, "prepared", None)

    @property
    def plan(self) -> Dict:
        """arena_bytes, state_bytes (this 64-bit host: an upper bound of a 32-bit MCU's), persistent_bytes,
        variables_bytes (of arena_bytes: the resource variables, kept across invocations),
        tensors [{index, offset, bytes, first_op, last_op, alias_of}] for every arena tensor,
        scratch [{op, offset, bytes}]."""
        return self._backend.plan

    def invoke(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """One inference: arrays of exactly the inputs' dtypes and shapes in, new output arrays out. A model with
        resource variables (streaming state) keeps them from one call to the next; ``reset()`` starts over."""
        arrays = self._check_inputs(inputs)
        return self._backend.invoke(arrays)

    def reset(self) -> None:
        """Resource variables back to their initial values: the next invoke runs as on a fresh runtime."""
        self._backend.reset()

    def _check_inputs(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        specs = self.inputs
        if len(inputs) != len(specs):
            raise CalibrationDataError(f"the model has {len(specs)} input(s), {len(inputs)} given")
        problems, arrays = [], []
        for i, (x, spec) in enumerate(zip(inputs, specs)):
            x = np.asarray(x)
            if x.dtype != spec["dtype"]:
                problems.append(f"input {i}: dtype {x.dtype}, the model expects {spec['dtype']}")
            elif tuple(x.shape) != spec["shape"]:
                problems.append(f"input {i}: shape {tuple(x.shape)}, the model expects {spec['shape']}")
            arrays.append(np.ascontiguousarray(x))
        if problems:
            raise CalibrationDataError(problems, fix="pass arrays of exactly the model's input dtypes and shapes")
        return arrays

    def _raise(self, status: int, op_index: int, message: str) -> None:
        """The C runtime's error as the matching edgekit error."""
        name = self._op_name_at(op_index)
        where = f" at op #{op_index} ({name})" if op_index >= 0 else ""
        if status == _EK_ERR_UNSUPPORTED and op_index >= 0:
            error = UnsupportedOpError(SupportReport(TARGET, [OpSupport(name, f"op #{op_index}", False, message)]),
                                       target=TARGET)
            if "scale" in message:  # e.g. SOFTMAX beta * input scale below TFLite's limit: collapsed activations
                error.fix = ("the model's quantization scales are degenerate (activations that collapsed to ~0 during "
                             "calibration, e.g. an untrained model): re-quantize the trained model with real data")
            raise error
        if status == _EK_ERR_UNSUPPORTED:
            raise InvalidModelError(f"{self.source}: not supported by {TARGET}: {message}",
                                    fix="convert the model to full-int8 TFLite with one main graph (resource variables with "
                                        "one CALL_ONCE init subgraph are fine)")
        if status == _EK_ERR_INTERNAL:
            raise InternalError(f"{self.source}: {TARGET} internal error{where}: {message}")
        raise InvalidModelError(f"{self.source}: rejected by {TARGET}{where} [{EK_STATUS.get(status, status)}]: {message}",
                                fix="the model is corrupt or inconsistent; re-export it from the converter")

    def _op_name_at(self, op_index: int) -> str:
        if op_index < 0:
            return ""
        codes = op_codes(self.model_bytes, source=self.source)
        return op_name(codes[op_index]) if op_index < len(codes) else "?"


class _CtypesBackend:
    """The runtime in this process: model, state and arena in numpy buffers kept alive here."""

    def __init__(self, owner: HostRuntime) -> None:
        self.owner = owner
        lib = self.lib = library()
        self.model = _aligned_copy(owner.model_bytes)
        self.rt = ctypes.create_string_buffer(lib.ek_host_sizeof_runtime())
        self.state = np.zeros(0, np.uint8)
        self.arena = np.zeros(0, np.uint8)
        state_len = 0
        for _ in range(4):  # grow the state to what the model needs (the first call learns the counts)
            status = self._init(state_len, 0)
            info = self._info()
            if status == 0 or (status == _EK_ERR_MEMORY and info["state_required"] <= state_len):
                break
            if status != _EK_ERR_MEMORY:
                self._fail()
            state_len = info["state_required"]
            self.state = _aligned_zeros(state_len)
        with_plan = self._info()["state_with_plan"]
        if with_plan > state_len:  # room to keep the memory plan readable after init (self.plan)
            state_len = with_plan
            self.state = _aligned_zeros(state_len)
        arena_len = self._info()["arena_required"]
        self.arena = _aligned_zeros(arena_len)
        if self._init(state_len, arena_len) != 0:
            self._fail()
        self.state_len, self.arena_len = state_len, arena_len
        self.inputs = [_tensor_dict(lib.ek_get_input(self.rt, i).contents, lib.ek_host_input_index(self.rt, i))
                       for i in range(lib.ek_num_inputs(self.rt))]
        self.outputs = [_tensor_dict(lib.ek_get_output(self.rt, i).contents, lib.ek_host_output_index(self.rt, i))
                        for i in range(lib.ek_num_outputs(self.rt))]
        self.op_names = [op_name(lib.ek_host_opcode(self.rt, i)) for i in range(self._info()["num_ops"])]
        self.plan = self._plan()
        self.prepared = self._prepare() if owner.optimize is not None else None

    def _init(self, state_len: int, arena_len: int) -> int:
        mode = OPTIMIZE_MODES[self.owner.optimize] if self.owner.optimize is not None else 0
        mode |= _FOR_MVE if self.owner.plan_mve else 0
        mode |= _FOR_EXPORT if self.owner.optimize is not None and self.owner.flash_layouts else 0
        mode |= _INT8_WEIGHTS if self.owner.optimize is not None and not self.owner.flash_layouts else 0
        if self.owner.relaid_ops is not None:  # per op: 1 = keeps its weights int8 (kept alive: the export reads it)
            count = len(op_codes(self.owner.model_bytes, source=self.owner.source))
            self.int8_ops = np.array([0 if i in self.owner.relaid_ops else 1 for i in range(count)], dtype=np.uint8)
            return self.lib.ek_init_opt_ops(self.rt, self.model.ctypes.data, len(self.model),
                                            self.state.ctypes.data if state_len else None, state_len,
                                            self.arena.ctypes.data if arena_len else None, arena_len, mode,
                                            self.int8_ops.ctypes.data, len(self.int8_ops))
        return self.lib.ek_init_opt(self.rt, self.model.ctypes.data, len(self.model),
                                    self.state.ctypes.data if state_len else None, state_len,
                                    self.arena.ctypes.data if arena_len else None, arena_len, mode)

    def _prepare(self) -> Dict:
        """Overlapped plan, prepared blob, and a prepared runtime over it (used by invoke)."""
        lib = self.lib
        work = _aligned_zeros(lib.ek_plan_overlapped_work_bytes(self.rt))
        max_info = 8 * max(1, self._info()["num_ops"]) + 1
        info = (_OverlapInfo * max_info)()
        if lib.ek_plan_overlapped(self.rt, work.ctypes.data, len(work), info, max_info) != 0:
            self._fail()
        overlaps = []
        for e in info:
            if e.op < 0 or len(overlaps) >= max_info - 1:
                break
            overlaps.append({"op": e.op, "input": e.input, "d_max": e.d_max, "exact": bool(e.exact)})
        plan = self._plan()
        size = ctypes.c_size_t(0)
        lib.ek_export_prepared(self.rt, None, 0, ctypes.byref(size))
        blob = _aligned_zeros(size.value)
        if lib.ek_export_prepared(self.rt, blob.ctypes.data, len(blob), ctypes.byref(size)) != 0:
            self._fail()
        self.blob = blob
        self.prep = ctypes.create_string_buffer(lib.ek_host_sizeof_prepared())
        self.prep_state = _aligned_zeros(max(1, lib.ek_prepared_state_bytes(blob.ctypes.data, len(blob))))
        self.prep_arena = _aligned_zeros(max(1, plan["arena_bytes"]))
        status = lib.ek_prepared_init(self.prep, self.model.ctypes.data, len(self.model), blob.ctypes.data, len(blob),
                                      self.prep_state.ctypes.data, len(self.prep_state),
                                      self.prep_arena.ctypes.data, len(self.prep_arena))
        if status != 0:
            err = lib.ek_prepared_last_error(self.prep)
            raise InternalError(f"{self.owner.source}: the prepared model was rejected: {(err.message or b'').decode()}")
        header = np.frombuffer(blob[:4 * 22].tobytes(), dtype="<u4")
        # op input slots + op output slots (header word 21, blob version 3) + graph inputs + graph outputs
        slots = int(header[16]) + int(header[21]) + int(header[9]) + int(header[10])
        return {"blob": blob.tobytes(), "arena_bytes": plan["arena_bytes"], "state_slots": slots,
                "optimize": self.owner.optimize, "overlaps": overlaps, "plan": plan,
                "streamed_groups": streamed_groups(blob.tobytes())}

    def _info(self) -> Dict[str, int]:
        values = (ctypes.c_int64 * 7)()
        self.lib.ek_host_info(self.rt, values)
        keys = ("state_required", "arena_required", "persistent_bytes", "num_tensors", "num_ops", "ready",
                "state_with_plan")
        return dict(zip(keys, (int(v) for v in values)))

    def _fail(self) -> None:
        err = self.lib.ek_last_error(self.rt)
        self.owner._raise(err.status, err.op_index, (err.message or b"").decode())

    def _plan(self) -> Dict:
        info = self._info()
        tp, sp = self.lib.ek_host_tensor_plan(self.rt), self.lib.ek_host_scratch_plan(self.rt)
        tensors = []
        for i in range(info["num_tensors"]):
            e = tp[i]
            if e.offset >= 0:
                tensors.append({"index": i, "offset": e.offset, "bytes": e.bytes, "first_op": e.first_op,
                                "last_op": e.last_op, "alias_of": e.alias_of})
        scratch = [{"op": i, "offset": sp[i].offset, "bytes": sp[i].bytes}
                   for i in range(info["num_ops"]) if sp[i].bytes > 0]
        return {"arena_bytes": info["arena_required"], "state_bytes": info["state_required"],
                "persistent_bytes": info["persistent_bytes"], "variables_bytes": int(self.lib.ek_variables_bytes(self.rt)),
                "tensors": tensors, "scratch": scratch}

    def reset(self) -> None:
        if self.prepared is not None:
            self.lib.ek_prepared_reset(self.prep)
        else:
            self.lib.ek_reset_variables(self.rt)

    def invoke(self, arrays: List[np.ndarray]) -> List[np.ndarray]:
        lib = self.lib
        prepared = self.prepared is not None
        get_input = (lambda i: lib.ek_prepared_input(self.prep, i)) if prepared else (lambda i: lib.ek_get_input(self.rt, i))
        get_output = (lambda i: lib.ek_prepared_output(self.prep, i)) if prepared else (lambda i: lib.ek_get_output(self.rt, i))
        for i, x in enumerate(arrays):
            t = get_input(i).contents
            ctypes.memmove(t.data, x.ctypes.data, t.bytes)
        if prepared:
            if lib.ek_prepared_invoke(self.prep) != 0:
                err = lib.ek_prepared_last_error(self.prep)
                self.owner._raise(err.status, err.op_index, (err.message or b"").decode())
        elif lib.ek_invoke(self.rt) != 0:
            self._fail()
        outs = []
        for i, spec in enumerate(self.outputs):
            t = get_output(i).contents
            raw = ctypes.string_at(t.data, t.bytes) if t.bytes else b""
            outs.append(np.frombuffer(raw, dtype=spec["dtype"]).reshape(spec["shape"]).copy())
        return outs


def _aligned_zeros(n: int) -> np.ndarray:
    raw = np.zeros(n + 16, dtype=np.uint8)
    start = (-raw.ctypes.data) % 16
    return raw[start:start + n]


class _DriverBackend:
    """The runtime as an ASan + UBSan subprocess (ekrt_run): any sanitizer report becomes an InternalError."""

    def __init__(self, owner: HostRuntime) -> None:
        self.owner = owner
        self.driver = build_driver(sanitize=True)
        self.workdir = tempfile.TemporaryDirectory(prefix="ekrt-")
        self.model_path = Path(self.workdir.name) / "model.tflite"
        self.model_path.write_bytes(owner.model_bytes)
        self.history: List[str] = []  # input files of the invocations since the last reset (stateful models)
        info = json.loads(self._run("info"))
        as_dict = lambda t: {**t, "shape": tuple(t["shape"]), "dtype": np.dtype(DTYPES.get(t["type"], np.uint8))}  # noqa: E731
        self.inputs = [as_dict(t) for t in info["inputs"]]
        self.outputs = [as_dict(t) for t in info["outputs"]]
        self.op_names = info["ops"]
        keys = ("offset", "bytes", "first_op", "last_op", "alias_of")
        self.plan = {
            "arena_bytes": info["arena_bytes"], "state_bytes": info["state_bytes"],
            "persistent_bytes": info["persistent_bytes"], "variables_bytes": info.get("variables_bytes", 0),
            "tensors": [{"index": i, **dict(zip(keys, e))} for i, e in enumerate(info["tensor_plan"]) if e[0] >= 0],
            "scratch": [{"op": i, "offset": e[0], "bytes": e[1]} for i, e in enumerate(info["scratch_plan"]) if e[1] > 0],
        }

    def _run(self, *args: str) -> str:
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
        done = subprocess.run([str(self.driver), str(self.model_path), *args], capture_output=True, text=True,
                              timeout=300, env=env, check=False)
        if done.returncode == 2 and done.stderr.startswith("error: "):
            status_name, _, rest = done.stderr[len("error: "):].partition(" op ")
            op_text, _, message = rest.partition(": ")
            status = next((k for k, v in EK_STATUS.items() if v == status_name), _EK_ERR_INTERNAL)
            self.owner._raise(status, int(op_text), message.strip())
        if done.returncode != 0:
            raise InternalError(f"sanitized edgekit runtime failed (exit {done.returncode}):\n{done.stderr.strip()}")
        return done.stdout

    def invoke(self, arrays: List[np.ndarray]) -> List[np.ndarray]:
        """Each call is a new process: with resource variables it replays every invocation since the last reset
        (ekrt_run runs a sequence), so the state carries over as in the in-process backend."""
        work = Path(self.workdir.name)
        if not self.plan["variables_bytes"]:
            self.history = []
        step = len(self.history)
        for i, x in enumerate(arrays):
            p = work / f"input_{step}_{i}.bin"
            p.write_bytes(x.tobytes())
            self.history.append(str(p))
        self._run("run", str(work), *self.history)
        return [np.fromfile(work / f"output_{i}.bin", dtype=spec["dtype"]).reshape(spec["shape"])
                for i, spec in enumerate(self.outputs)]


    def reset(self) -> None:
        self.history = []


def streamed_groups(blob: bytes) -> List[StreamedGroup]:
    """Row-streamed groups of a prepared blob (ek_stream_group.c): [{first_op, last_op, region_bytes, windows:
    [{tensor, rows}]}], read from the op records (ekp_op.group; a member's scratch_off = window rows)."""
    header = np.frombuffer(blob[:4 * 21], dtype="<u4")
    ops_off, num_ops, rec = int(header[12]), int(header[8]), int(header[19])
    records = []
    for i in range(num_ops):
        at = ops_off + i * rec
        num_outputs, _, outputs_off = (int(v) for v in np.frombuffer(blob, dtype="<i4", count=3, offset=at + 16))
        scratch_off, scratch_len, group = (int(v) for v in np.frombuffer(blob, dtype="<i4", count=3, offset=at + rec - 12))
        output = int(np.frombuffer(blob, dtype="<i4", count=1, offset=outputs_off)[0]) if num_outputs else -1
        records.append((scratch_off, scratch_len, group, output))
    groups: List[StreamedGroup] = []
    for i, (_, region, group, _) in enumerate(records):
        if group > 0:
            windows = [{"tensor": records[i + k - 1][3], "rows": records[i + k][0]} for k in range(1, group + 1)]
            groups.append({"first_op": i, "last_op": i + group, "region_bytes": region, "windows": windows})
    return groups


def prepared_init_error(model_bytes: bytes, blob: bytes) -> Optional[str]:
    """What ek_prepared_init says about ``blob`` for ``model_bytes`` (None if it accepts it): the device-side
    validation (magic, version, length, checksum, model checksum, offsets), run on this host."""
    lib = library()
    model = _aligned_copy(bytes(model_bytes))
    data = _aligned_copy(bytes(blob))
    prep = ctypes.create_string_buffer(lib.ek_host_sizeof_prepared())
    state = _aligned_zeros(max(16, lib.ek_prepared_state_bytes(data.ctypes.data, len(data))))
    arena = _aligned_zeros(1 << 20)
    status = lib.ek_prepared_init(prep, model.ctypes.data, len(model), data.ctypes.data, len(data),
                                  state.ctypes.data, len(state), arena.ctypes.data, len(arena))
    if status == 0:
        return None
    return (lib.ek_prepared_last_error(prep).message or b"").decode() or EK_STATUS.get(status, str(status))
