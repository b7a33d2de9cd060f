"""TensorFlow Lite Micro variant: arena measured with the real TFLM python runtime, resolver with exactly the model's ops.

Arena size (``kTensorArenaSize``), measured on this 64-bit host with the ``tflite-micro`` package:

1. ``recorded``: RecordingMicroAllocator's "Arena allocation total" (``print_allocations()`` writes it to
   file descriptor 2, which we capture). It can be too small: planner scratch is not counted.
2. ``min_working_64bit``: a bisection on ``arena_size`` for the smallest arena with which the interpreter
   allocates its tensors (and then really invokes). The requirement is the larger of 1 and 2.
3. 64-bit host vs 32-bit MCU: tensor data and the memory plan (the arena head) are the same on both, but
   the structs in the arena tail hold pointers and shrink on a 32-bit MCU. Two recorded categories are pure
   pointer/int structs whose size exactly halves: TfLiteEvalTensor (24 -> 12 B) and NodeAndRegistration
   (64 -> 32 B); half of their recorded bytes is a lower bound of the saving (``pointer_correction``); other
   structs shrink too. ``estimated_32bit`` = requirement - pointer_correction is therefore an upper bound of
   the MCU's need (real TFLM on QEMU: KWS 23,436 estimated vs 22,784 B measured, IC 55,016 vs 54,352 B,
   AD 3,940 vs 2,704 B).
4. What we emit: ``kTensorArenaSize`` = the 64-bit requirement rounded up to 16 B. We do not subtract the
   correction: the python runtime accepts this size (tested), and on the MCU the 32-bit saving becomes the
   margin (``margin`` = arena_size - estimated_32bit, at least pointer_correction bytes).
   Optimized kernels (CMSIS-NN) request scratch that the python runtime's reference kernels do not; the
   generated main.cc adds ``EK_TFLM_ARENA_EXTRA`` (default 0) and prints ``arena_used_bytes()`` at boot so
   the figure can be re-measured on the device.
"""
from __future__ import annotations

import logging
import re
from typing import Dict, List

import numpy as np

from edgekit.firmware.results import FirmwareInfo, TflmArena
from edgekit.errors import InvalidModelError, ToolMissingError
from edgekit.quiet import captured_output

log = logging.getLogger(__name__)

# The method text every firmware.json carries in tflm_arena.method: the module docstring from "Arena size" on.
ARENA_METHOD = __doc__.split("Arena size", 1)[1].strip() if __doc__ else ""

ALIGN = 16
PROBE_TIMEOUT_S = 120.0  # one arena probe (allocate + invoke) in its child; a hung probe counts as too small
# Recorded categories made only of pointers and ints (size halves from LP64 to ILP32).
POINTER_STRUCTS = {"TfLiteEvalTensor data": "TfLiteEvalTensor (24 -> 12 B)",
                   "NodeAndRegistration struct": "NodeAndRegistration (64 -> 32 B)"}


def _align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


def _fd_captured(fds: tuple = (2,)):
    """Everything written to these file descriptors (TFLM's C++ logging) while inside, always captured."""
    return captured_output(fds, always=True)


def _fd2_captured():
    return _fd_captured((1, 2))


def _runtime():
    try:
        from tflite_micro import runtime
    except ImportError:
        raise ToolMissingError("tflite-micro (TFLM python runtime)", "pip install tflite-micro==0.dev20261023182759") from None
    return runtime


def tflm_version() -> str:
    from edgekit.provenance import tool_version

    return tool_version("tflite-micro") or "unknown"


def make_interpreter(model: bytes, arena_size: int):
    """A TFLM python interpreter, or None when the arena is too small / the model is refused (log swallowed)."""
    runtime = _runtime()
    with _fd2_captured() as log_lines:
        try:
            return runtime.Interpreter.from_bytes(model, arena_size=int(arena_size))
        except (RuntimeError, ValueError):
            pass
    log.debug("TFLM refused arena %d: %s", arena_size, " | ".join(log_lines[-3:]))
    return None


def arena_works(model: bytes, arena_size: int) -> bool:
    """Whether TFLM allocates AND invokes ``model`` with this arena, probed in an isolated child.

    The tflite-micro python runtime crashes (SIGSEGV) at some too-small arena sizes instead of refusing them
    (every MLPerf Tiny model below 512 B, measured); in-process that killed `edgekit firmware --runtime tflm`
    with exit 139. A probe whose child dies by a signal counts as "too small", like a refusal.
    """
    from edgekit.native import ChildError, NativeCrashError, run_isolated

    def probe() -> bool:
        interp = make_interpreter(model, arena_size)
        if interp is None:
            return False
        invoke(interp, zero_inputs(interp))
        return True

    try:
        return run_isolated(f"TFLM arena probe ({arena_size} B)", probe, timeout_s=PROBE_TIMEOUT_S)
    except NativeCrashError as exc:
        log.debug("TFLM crashed with a %d B arena (counted as too small): %s", arena_size, exc)
        return False
    except ChildError as exc:  # e.g. invoke() refused after a successful allocation
        log.debug("TFLM failed with a %d B arena (counted as too small): %s: %s", arena_size, exc.type_name, exc)
        return False


def invoke(interp, inputs: List[np.ndarray]) -> List[np.ndarray]:
    """Run the TFLM python interpreter on int8 inputs; returns its outputs."""
    with _fd2_captured():
        for i, value in enumerate(inputs):
            interp.set_input(np.ascontiguousarray(value), i)
        interp.invoke()
        outputs = []
        i = 0
        while True:
            try:
                outputs.append(np.array(interp.get_output(i)))
            except (IndexError, RuntimeError, ValueError):
                break
            i += 1
            if i > 64:
                break
    return outputs


def zero_inputs(interp) -> List[np.ndarray]:
    values = []
    for i in range(64):
        try:
            with _fd_captured((1, 2)):
                d = interp.get_input_details(i)
        except (IndexError, RuntimeError, ValueError):
            break
        zp = d["quantization_parameters"]["zero_points"]
        fill = int(zp[0]) if len(zp) else 0
        values.append(np.full(tuple(d["shape"]), fill, dtype=d["dtype"]))
    return values


def _parse_recording(lines: List[str]) -> tuple[int, int, int, Dict[str, int]]:
    text = "\n".join(lines)
    def number(pattern: str) -> int:
        m = re.search(pattern, text)
        if not m:
            raise InvalidModelError(f"TFLM did not report its arena use (no {pattern!r} in its log)")
        return int(m.group(1))
    total = number(r"Arena allocation total (\d+) bytes")
    head = number(r"Arena allocation head (\d+) bytes")
    tail = number(r"Arena allocation tail (\d+) bytes")
    categories = {m.group(1): int(m.group(2)) for m in re.finditer(r"'([^']+)' used (\d+) bytes", text)}
    return total, head, tail, categories


def smallest_working_arena(model: bytes, *, start: int, works_at: int) -> int:
    """The smallest arena TFLM allocates and invokes ``model`` with: doubling from ``start`` (capped at ``works_at``,
    a size known to work), then bisection. Every probe runs isolated (arena_works): too-small arenas can crash TFLM.
    """
    lo, hi = 0, max(1, min(start, works_at))
    while hi < works_at and not arena_works(model, hi):
        lo, hi = hi, min(hi * 2, works_at)
    while hi - lo > 1:  # invariant: lo fails (or is 0), hi allocates and invokes
        mid = (lo + hi) // 2
        if arena_works(model, mid):
            hi = mid
        else:
            lo = mid
    return hi


def measure_tflm_arena(model: bytes) -> TflmArena:
    """Measure the arena TFLM needs for ``model`` (see the module docstring for the method)."""
    generous = max(1 << 16, len(model) * 10)
    interp = make_interpreter(model, generous)
    while interp is None and generous < (1 << 28):
        generous *= 4
        interp = make_interpreter(model, generous)
    if interp is None:
        raise InvalidModelError("the TFLM python runtime cannot load this model with any arena size",
                                fix="check that the model uses only operators TFLM supports")
    invoke(interp, zero_inputs(interp))
    with _fd2_captured() as lines:
        interp.print_allocations()
    total, head, tail, categories = _parse_recording(lines)

    # the recorded total, or the size that just worked when nothing was recorded (the log went elsewhere, e.g. under
    # an fd-capturing test runner)
    min_working = smallest_working_arena(model, start=total if total > 0 else generous, works_at=generous)

    requirement = max(total, min_working)
    correction = sum(categories.get(k, 0) // 2 for k in POINTER_STRUCTS)
    estimated_32 = requirement - correction
    arena = _align(requirement)
    margin = arena - estimated_32
    notes = []
    if min_working > total:
        notes.append(f"RecordingMicroAllocator reported {total} B but the smallest working arena is {min_working} B "
                     "(planner scratch is not recorded): the bisection figure is used")
    result = TflmArena(recorded_total=total, recorded_head=head, recorded_tail=tail, categories=categories,
                       min_working_64bit=min_working, pointer_correction=correction, estimated_32bit=estimated_32,
                       margin=margin, arena_size=arena, tflm_version=tflm_version(), notes=notes,
                       method=ARENA_METHOD)
    log.info("TFLM arena: recorded %d, min working %d (64-bit), 32-bit estimate %d, kTensorArenaSize %d",
             total, min_working, estimated_32, arena)
    return result


# --- the generated TFLM project ------------------------------------------------------------------------------

def tflm_arch(board) -> str:
    """TFLM cortex_m_generic TARGET_ARCH for a board (the +fp variants for M4/M7 with a hardware FPU)."""
    if board.cpu in ("cortex-m4", "cortex-m7") and board.fpu != "none" and board.float_abi != "soft":
        return f"{board.cpu}+fp"
    return board.cpu


def resolver_methods(op_names: List[str]) -> List[str]:
    """The MicroMutableOpResolver Add* calls for the model's distinct builtin operators (in first-use order)."""
    from edgekit.firmware.support import TFLM_RESOLVER_METHODS

    return [TFLM_RESOLVER_METHODS[name] for name in op_names]


def generate_tflm_project(data: bytes, graph, board, outdir, *, source: str, build: bool = False):
    """Model array + main.cc (resolver, measured arena, protocol loop) + Makefile for a TFLM checkout."""
    from pathlib import Path

    from edgekit import __version__
    from edgekit.atomic import atomic_output_dir
    from edgekit.errors import ToolMissingError
    from edgekit.firmware import generate as gen
    from edgekit.firmware.boards import write_board_files
    from edgekit.provenance import sha256_bytes
    from edgekit.report import json_safe

    if build:
        raise ToolMissingError("TensorFlow Lite Micro sources (for --build with --runtime tflm)",
                               "clone https://github.com/tensorflow/tflite-micro and run `make TFLM_DIR=...` in the "
                               "generated project; edgekit cannot build TFLM projects on this machine")
    arena = measure_tflm_arena(data)
    ops = graph.op_names
    methods = resolver_methods(ops)
    sha = sha256_bytes(data)
    name = Path(source).name if source != "<bytes>" else "model.tflite"
    outdir = Path(outdir)
    with atomic_output_dir(outdir) as stage:
        board_files = write_board_files(board, stage / "board", copy_sources=True)
        for f in ("ek_serve.c", "ek_serve.h"):
            gen._copy(gen.FIRMWARE_DIR / "app" / f, stage / "app" / f)
        for f in gen.PROTOCOL_FILES:
            gen._copy(gen.FIRMWARE_DIR / "protocol" / f, stage / "protocol" / f)
        gen._copy(gen.RUNTIME_DIR / "include" / "ek_kernels.h", stage / "runtime" / "include" / "ek_kernels.h")
        gen.write_model_files(stage / "model", data, name=name, sha=sha, arena=arena.arena_size, state=0,
                              board=board.name)
        (stage / "model" / "ek_config.h").unlink()  # the TFLM variant sizes its arena in main.cc
        (stage / gen.MODEL_FILE).write_bytes(data)
        (stage / "main.cc").write_text(gen.render((gen.TEMPLATES / "tflm" / "main.cc.in").read_text(), {
            "MODEL_NAME": name, "BOARD": board.name, "EDGEKIT_VERSION": __version__,
            "ARENA_SIZE": arena.arena_size, "OP_COUNT": len(methods), "NUM_OPS": len(graph.ops),
            "RESOLVER_ADDS": "\n".join(f"  if (resolver.{m}() != kTfLiteOk) return kTfLiteError;" for m in methods),
        }, name="main.cc.in"))
        rel = lambda p: str(Path(p).relative_to(stage))  # noqa: E731
        sources = sorted(rel(p) for p in stage.rglob("*") if p.suffix in (".c", ".S", ".cc"))
        help_line, rules, phony = gen._run_rules(board)
        (stage / "Makefile").write_text(gen.render((gen.TEMPLATES / "tflm" / "Makefile.in").read_text(), {
            "MODEL_NAME": name, "BOARD": board.name, "CORE": board.core, "EDGEKIT_VERSION": __version__,
            "RUN_HELP": help_line, "RUN_RULES": rules, "RUN_PHONY": phony, "TFLM_ARCH": tflm_arch(board),
            "CPU_FLAGS": " ".join(board.gcc_flags()),
            "INCLUDES": " ".join(f"-I{i}" for i in ("runtime/include", "board", "protocol", "app", "model")),
            "LDSCRIPT": rel(board_files.linker_script), "SRCS": " \\\n".join(f"  {s}" for s in sources),
        }, name="Makefile.in"))
        info = FirmwareInfo.model_validate(json_safe({
            "edgekit_firmware": 1, "runtime": "tflm",
            "model": {"file": gen.MODEL_FILE, "source": source, "sha256": sha, "bytes": len(data),
                      "inputs": [gen._tensor_json(graph.tensors[i]) for i in graph.inputs],
                      "outputs": [gen._tensor_json(graph.tensors[i]) for i in graph.outputs]},
            "board": {**board.summary().present(), "profile": board.profile.get("_path"),
                      "cpu_flags": board.gcc_flags()},
            "ops": gen.describe_ops(graph), "resolver": {"size": len(methods), "methods": methods},
            "macs": sum(graph.macs().values()),
            "arena_bytes": arena.arena_size, "tflm_arena": arena.to_dict(),
            "flash_bytes": None, "ram_bytes": None,
            "fits": {"flash": {"used": len(data), "available": board.flash.bytes, "fits": len(data) <= board.flash.bytes,
                               "method": "lower bound: the model array only (TFLM is not built here; its core + reference "
                                         "kernels for the MLPerf Tiny ops took ~82 KB more when measured)"},
                     "ram": {"used": arena.estimated_32bit, "available": board.ram.bytes,
                             "fits": arena.arena_size + board.stack_bytes <= board.ram.bytes,
                             "method": "lower bound: the arena (+ the board's stack reservation for `fits`)"}},
            "build": {"built": False, "reason": "TensorFlow Lite Micro sources are not available here; "
                                                "build with `make TFLM_DIR=...`", "tflm_arch": tflm_arch(board)},
            "signature": gen.signature(sha, {"tflite-micro": arena.tflm_version}),
        }))
        fits = {"flash": info.fits.flash, "ram": info.fits.ram}
        problems = [k for k, v in fits.items() if not v.fits]
        if problems:
            from edgekit.errors import DoesNotFitError

            raise DoesNotFitError(
                f"the model does not fit {board.name} with TFLM: "
                + "; ".join(f"{k} needs at least {fits[k].used:,} bytes of {fits[k].available:,}"
                            for k in problems),
                fix="choose a board with more memory or a smaller model")
        (stage / gen.FIRMWARE_JSON).write_text(info.dumps())
        (stage / "README.md").write_text(_readme(info, arena, board, name, methods))
    return gen.FirmwareResult(outdir, info, None)


def _readme(info: FirmwareInfo, arena: TflmArena, board, name: str, methods: List[str]) -> str:
    from edgekit import __version__
    from edgekit.firmware import generate as gen

    help_line = gen._run_rules(board)[0].lstrip("# ").strip()
    notes = "".join(f"Note: {n}.\n\n" for n in arena.notes)
    return gen.render((gen.TEMPLATES / "tflm" / "README.md.in").read_text(), {
        "MODEL_NAME": name, "BOARD": board.name, "EDGEKIT_VERSION": __version__,
        "CREATED": info.signature.created, "HOST": info.signature.host.get("hostname"),
        "MODEL_SHA256": info.model.sha256, "BOARD_DESCRIPTION": board.description, "CORE": board.core,
        "FLASH_AVAILABLE": f"{board.flash.bytes:,}", "RAM_AVAILABLE": f"{board.ram.bytes:,}",
        "OP_COUNT": len(methods), "RUN_LINE": "    " + help_line, "TFLM_ARCH": tflm_arch(board),
        "CPU_FLAGS": " ".join(board.gcc_flags()),
        "OP_LIST": "\n".join(f"- `{m}()`" for m in methods),
        "ARENA_SIZE": f"{arena.arena_size:,}", "TFLM_VERSION": arena.tflm_version,
        "HEAD": f"{arena.recorded_head:,}", "TAIL": f"{arena.recorded_tail:,}", "RECORDED": f"{arena.recorded_total:,}",
        "MIN_WORKING": f"{arena.min_working_64bit:,}",
        "REQUIREMENT": f"{max(arena.recorded_total, arena.min_working_64bit):,}",
        "CORRECTION": f"{arena.pointer_correction:,}", "ESTIMATED_32": f"{arena.estimated_32bit:,}",
        "MARGIN": f"{arena.margin:,}", "ARENA_NOTES": notes,
    }, name="README.md.in")
