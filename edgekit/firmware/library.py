"""`edgekit firmware MODEL --emit library`: the model + edgekit's runtime as a folder a user adds to their own firmware.

The folder (see docs/firmware-library.md): ``include/<name>.h`` (a typed C API generated for the model), ``src/`` (the
runtime sources flattened, the API, the prepared model as C arrays, the RAM buffers in ``<name>_memory.c``), a
prebuilt ``lib/lib<name>.a`` for the chosen core, CMake (add_subdirectory / find_package + a toolchain file), a
Zephyr module, an Arduino library layout, a Makefile fragment, README.md and library.json (typed).

Symbols: every external symbol of the runtime is renamed ``<name>_ek_...`` by a generated header that every source
of the library includes first (``src/<name>_config.h``, written from the symbol table of a first compile), so
two libraries link into one firmware without clashes, whether compiled from source or linked prebuilt, and the
sources and the archive are the same code. The build checks that the archive defines no global symbol without the
prefix.

Order of work, so that bad input leaves nothing behind: name, core, section and model checks -> support check ->
memory plan -> arena vs the user's section -> write into a staging folder -> compile twice (symbols, then the
prefixed archive) -> library.json + README.md -> atomic move into place.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from edgekit import __version__
from edgekit.atomic import atomic_output_dir
from edgekit.errors import DoesNotFitError, InternalError, UserError
from edgekit.firmware import generate as G
from edgekit.firmware.constants import CompactConstants, constants_for
from edgekit.firmware.kernel_paths import MODEL_PATHS, path_defines
from edgekit.firmware.library_results import LibraryInfo
from edgekit.firmware.library_target import (LibraryTarget, check_library_name, default_library_name,
                                             library_target, parse_arena_section)
from edgekit.firmware.support import require_support
from edgekit.provenance import sha256_bytes
from edgekit.report import json_safe
from edgekit.tflite_graph import Graph, read_graph

log = logging.getLogger(__name__)

TEMPLATES = G.TEMPLATES / "library"
LIBRARY_JSON = "library.json"
GCC, AR, NM, SIZE = "arm-none-eabi-gcc", "arm-none-eabi-ar", "arm-none-eabi-nm", "arm-none-eabi-size"
# flags of the prebuilt archive besides the core's; -ffp-contract=off keeps the few float steps as on the host
ARCHIVE_CFLAGS = ("-std=c99", "-O2", "-ffp-contract=off", "-ffunction-sections", "-fdata-sections", "-Wall")
API_BYTES_PER_IO_32 = 48     # sizeof(<name>_tensor) on a 32-bit core (data, bytes, type, ndim, shape[6], scale, zp)
STATE_MARGIN = 32            # slack for the context's padding and the state's alignment (the build checks the sum)
# no fused multiply-add in the runtime's few float steps, whatever the build system's flags: GNU dialects (Arduino's
# -std=gnu11, Zephyr) default to -ffp-contract=fast; ISO C (-std=c99) is already off
FP_CONTRACT_OFF = ("#if defined(__clang__)\n#pragma STDC FP_CONTRACT OFF\n"
                   "#elif defined(__GNUC__) && !defined(__STRICT_ANSI__)\n"
                   "#pragma GCC optimize(\"fp-contract=off\") /* bit-exact float steps under -std=gnu* */\n#endif\n")
_TYPE_BYTES = {"INT8": 1, "UINT8": 1, "INT16": 2, "INT32": 4, "FLOAT32": 4}


@dataclass
class LibraryResult:
    outdir: Path
    info: LibraryInfo


def generate_library(model: Union[Path, str, bytes], outdir: Optional[Path] = None, *, name: Optional[str] = None,
                     board: Optional[str] = None, cpu: Optional[str] = None, fpu: Optional[str] = None,
                     float_abi: Optional[str] = None, optimize: Optional[str] = None,
                     arena_section: Optional[str] = None, weights: Optional[str] = None) -> LibraryResult:
    """Write the library folder for ``model`` (see the module docstring); every check runs before anything is written."""
    target = library_target(board, cpu, fpu, float_abi)
    section, capacity = parse_arena_section(arena_section)
    optimize = optimize or G.DEFAULT_OPTIMIZE
    if optimize not in G.OPTIMIZE_MODES:
        raise UserError(f"--optimize {optimize}: valid choices are {', '.join(G.OPTIMIZE_MODES)}")
    data, path_name = G.load_model_bytes(model)
    source = path_name
    stem = Path(source).stem if source != "<bytes>" else "model"
    name = check_library_name(name) if name is not None else default_library_name(stem)
    graph = read_graph(data, source)
    require_support(graph, "edgekit")
    if graph.inputs and any(graph.tensors[i].type not in ("INT8", "FLOAT32") for i in graph.inputs):
        raise UserError(f"{source}: model inputs must be int8 (or float32 feeding a QUANTIZE)")
    # --weights: int8 keeps them int8, relaid takes every re-laid-out copy, auto those within the flash budget as the
    # firmware generator does (1.2x the .tflite; a library target knows no flash size)
    weights = G.check_weights(weights or G.DEFAULT_WEIGHTS)
    plan = G.choose_memory_plan(data, graph, source, optimize, target, weights)
    constants = constants_for(data, plan["prepared_blob"], graph.op_names)  # only what the prepared path reads
    plan["prepared_blob"] = constants.blob
    state_bytes = state_bytes_32(plan, len(graph.inputs), len(graph.outputs))
    if capacity is not None and plan["arena_bytes"] > capacity:
        raise DoesNotFitError(
            f"the arena of {name} needs {plan['arena_bytes']:,} bytes, section {section} holds {capacity:,}: "
            f"{plan['arena_bytes'] - capacity:,} bytes too many",
            fix="give a larger section, try --optimize ram, or leave --arena-section out and place the arena yourself")
    if outdir is None:
        outdir = Path("out") / "firmware" / f"{name}-lib-{target.board or target.cpu}"
    outdir = Path(outdir)
    with atomic_output_dir(outdir) as stage:
        files = write_library(stage, name, data, graph, plan, target, source=source, state_bytes=state_bytes,
                              section=section, constants=constants)
        prebuilt = build_archive(stage, name, target, files, plan)
        info = library_info(stage, name, data, graph, plan, target, source=source, state_bytes=state_bytes,
                            section=section, capacity=capacity, prebuilt=prebuilt, constants=constants)
        (stage / LIBRARY_JSON).write_text(info.dumps())
    log.info("wrote model library %s", outdir)
    return LibraryResult(outdir, info)


# --- sizes -----------------------------------------------------------------------------------------------------

def state_bytes_32(plan: G.MemoryPlan, n_in: int, n_out: int) -> int:
    """State on a 32-bit core: the ek_prepared object + the API's tensors + the prepared model's tensor records
    (+ alignment), rounded up to 16. The generated <name>.c refuses to compile if the real sizes exceed it."""
    need = plan["state_bytes"] + API_BYTES_PER_IO_32 * (max(n_in, 1) + max(n_out, 1)) + STATE_MARGIN
    return (need + 15) // 16 * 16


def tensor_bytes(t) -> int:
    count = 1
    for d in t.shape:
        count *= int(d)
    return count * _TYPE_BYTES.get(t.type, 1)


# --- writing the folder ----------------------------------------------------------------------------------------

def api_values(name: str, flash_bytes: int, graph: Graph, plan: G.MemoryPlan, *, source: str, state_bytes: int,
               target_text: str, section: Optional[str], model_includes: Optional[str] = None,
               model_data: Optional[str] = None, prepared_data: Optional[str] = None) -> Dict[str, Union[str, int]]:
    """The values of the model API templates (api.h.in, api.c.in, memory.c.in). The library's model arrays are
    ``<name>_model_data`` / ``<name>_prepared_data`` (src/<name>_model.h); edgekit's application passes its own
    (model/model_data.h: ``ek_model_data``, ``ek_prepared_data``), so both outputs compile the same API source."""
    upper = name.upper()
    io = []
    for kind, ids in (("INPUT", graph.inputs), ("OUTPUT", graph.outputs)):
        sizes = [tensor_bytes(graph.tensors[i]) for i in ids]
        for k, size in enumerate(sizes):
            io.append(f"#define {upper}_{kind}{k}_BYTES {size}u")
        io.append(f"#define {upper}_{kind}_BYTES {sum(sizes)}u  /* all {kind.lower()}s */")
    return {
        "name": name, "NAME": upper, "EDGEKIT_VERSION": __version__, "MODEL_NAME": Path(source).name,
        "TARGET": target_text, "ARENA_BYTES": plan["arena_bytes"], "STATE_BYTES": state_bytes,
        "MODEL_BYTES": flash_bytes, "PREPARED_BYTES": len(plan["prepared_blob"]), "NUM_INPUTS": len(graph.inputs),
        "NUM_OUTPUTS": len(graph.outputs), "IO_MACROS": "\n".join(io),
        "RUNTIME_VERSION": runtime_version(),
        "MODEL_INCLUDES": model_includes or f'#include "{name}_model.h"',
        "MODEL_DATA": model_data or f"{name}_model_data", "PREPARED_DATA": prepared_data or f"{name}_prepared_data",
        "DEFAULT_SECTION": (f"#ifndef {upper}_DEFAULT_ARENA_SECTION\n#define {upper}_DEFAULT_ARENA_SECTION "
                            f"\"{section}\" /* edgekit firmware --arena-section */\n#endif\n") if section else "",
    }


def runtime_version() -> int:
    """EK_RUNTIME_VERSION of firmware/runtime/include/ek_runtime.h (the API header repeats it; api.c checks)."""
    match = re.search(r"#define\s+EK_RUNTIME_VERSION\s+(\d+)", (G.RUNTIME_DIR / "include" / "ek_runtime.h").read_text())
    if not match:
        raise InternalError("EK_RUNTIME_VERSION not found in firmware/runtime/include/ek_runtime.h")
    return int(match.group(1))


def _values(name: str, data: bytes, graph: Graph, plan: G.MemoryPlan, target: LibraryTarget, *, source: str,
            state_bytes: int, section: Optional[str]) -> Dict[str, Union[str, int]]:
    values = api_values(name, len(data), graph, plan, source=source, state_bytes=state_bytes,
                        target_text=target.describe(), section=section)
    values.update({
        "CPU_FLAGS": " ".join(target.gcc_flags()), "CFLAGS": " ".join([*target.gcc_flags(), *ARCHIVE_CFLAGS]),
        "DEFAULT_SECTION_TEXT": f"{section}, as generated" if section else ".bss",
        "KCONFIG_SECTION": section or "",
        "ARDUINO_VERSION": re.sub(r"[^0-9.]", "", __version__.split("+")[0]) or "0.0.0",
    })
    return values


def _render(template: str, values: Dict[str, Union[str, int]], dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(G.render((TEMPLATES / template).read_text(), values, name=template))


def runtime_sources(ops: Sequence[str]) -> Tuple[List[Path], List[Path], List[str]]:
    """The application's runtime files (generate.runtime_files), checked to flatten into src/ without clashes."""
    sources, headers, wanted = G.runtime_files(list(ops))
    names = [p.name for p in sources + headers]
    if len(set(names)) != len(names):
        raise InternalError("runtime file names clash once flattened into the library's src/: "
                            + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    return sources, headers, wanted


def write_library(stage: Path, name: str, data: bytes, graph: Graph, plan: G.MemoryPlan, target: LibraryTarget, *,
                  source: str, state_bytes: int, section: Optional[str],
                  constants: CompactConstants) -> Dict[str, List[str]]:
    """Every file of the folder except lib/, README.md and library.json. Returns the C sources by role (paths
    relative to ``stage``): "library" (compiled into the archive) and "memory"."""
    values = _values(name, constants.data, graph, plan, target, source=source, state_bytes=state_bytes,
                     section=section)
    src = stage / "src"
    src.mkdir(parents=True)
    sources, headers, _ = runtime_sources(graph.op_names)
    config_include = f'#include "{name}_config.h" /* first: runtime build options + the {name}_ symbol prefix */\n'
    for path in headers:
        shutil.copyfile(path, src / path.name)
    for path in sources:
        (src / path.name).write_text(config_include + path.read_text())
    write_config(src, name, plan, symbols=())
    write_model_arrays(src, name, constants, plan, sha=sha256_bytes(data))
    _render("api.h.in", values, stage / "include" / f"{name}.h")
    (src / f"{name}.h").write_text(f"/* Arduino's include path is src/: the API header is include/{name}.h */\n"
                                   f'#include "../include/{name}.h"\n')
    _render("api.c.in", values, src / f"{name}.c")
    _render("memory.c.in", values, src / f"{name}_memory.c")
    library = sorted(f"src/{p.name}" for p in sources) + [f"src/{name}.c", f"src/{name}_model.c"]
    write_build_files(stage, name, values, library)
    return {"library": library, "memory": [f"src/{name}_memory.c"]}


def write_config(src: Path, name: str, plan: G.MemoryPlan, symbols: Sequence[str], kernels: Sequence[str] = ()) -> None:
    """src/<name>_config.h: the runtime's build options for this model, the symbol prefix (one #define per
    external runtime symbol; empty on the first compile, which finds them) and the kernel objects the API references
    strongly (the registry's references are weak, and a linker takes an archive member only for a strong one)."""
    upper = name.upper()
    options = ["#define EK_PREPARED_ONLY 1 /* no flatbuffer reader, planner or prepare() code */"]
    if not plan.get("streamed_groups"):
        options.append("#define EK_NO_STREAM_GROUPS 1 /* the prepared model has no row-streamed groups */")
    options += [f"#define {m} 1 /* optional kernel paths: only those this model uses (kernel_paths.py) */"
                if m == MODEL_PATHS else f"#define {m} 1" for m in path_defines(plan.get("kernel_paths") or [])]
    renames = "".join(f"#define {s} {name}_{s}\n" for s in symbols)
    (src / f"{name}_config.h").write_text(
        f"/* {name}: build options and symbol prefix of this library's runtime (generated by edgekit {__version__};\n"
        " * do not edit). Every source of the library includes it first, so the prebuilt archive and a build from\n"
        " * source are the same code, and no runtime symbol clashes with another edgekit library. */\n"
        f"#ifndef {upper}_CONFIG_H\n#define {upper}_CONFIG_H\n\n" + "\n".join(options) + "\n" + FP_CONTRACT_OFF +
        f"#define {upper}_PREP_SLOTS {plan['state_slots']}u /* tensor records the prepared model decodes */\n\n"
        f"/* the kernels this model runs: {name}.c references each, so they are linked from lib{name}.a */\n"
        f"#define {upper}_KERNEL_LIST(X)" + "".join(f" X({k})" for k in kernels) + "\n\n"
        f"/* {len(symbols)} runtime symbols, renamed {name}_<symbol> */\n" + renames + "\n#endif\n")


def write_model_arrays(src: Path, name: str, constants: CompactConstants, plan: G.MemoryPlan, *, sha: str) -> None:
    """src/<name>_model.h + .c: the constants the prepared path reads (edgekit.firmware.constants: weights, scales,
    zero points; not the rest of the .tflite) and the prepared model, as const arrays (flash), 16-byte aligned (the
    runtime requires at least that), in a section the user may choose with -D<NAME>_MODEL_SECTION=\".name\"."""
    upper = name.upper()
    blob, data = plan["prepared_blob"], constants.data
    (src / f"{name}_model.h").write_text(
        f"/* {name}: the model's constant data (generated by edgekit {__version__}; do not edit). */\n"
        f"#ifndef {upper}_MODEL_H\n#define {upper}_MODEL_H\n\n#include <stdint.h>\n\n"
        f"extern const uint8_t {name}_model_data[];\nextern const uint8_t {name}_prepared_data[];\n\n#endif\n")
    (src / f"{name}_model.c").write_text(
        f"/* {name}: {len(data)} bytes of constants read by the prepared path (tensor data {constants.tensor_bytes},\n"
        f" * scales and zero points {constants.quantization_bytes}, alignment padding) out of the {constants.model_bytes}-byte "
        f".tflite\n * (sha256 {sha}); prepared model {len(blob)} bytes (--optimize {plan['optimize']}).\n"
        f" * Generated by edgekit {__version__}; do not edit. */\n"
        f'#include "{name}_model.h"\n#include "{name}.h"\n\n'
        f"#ifndef {upper}_MODEL_ALIGN\n#define {upper}_MODEL_ALIGN 16\n#endif\n"
        f"typedef char {name}_model_align_check[({upper}_MODEL_ALIGN >= 16 && ({upper}_MODEL_ALIGN & ({upper}_MODEL_ALIGN - 1)) == 0) ? 1 : -1];\n"
        f"#ifdef {upper}_MODEL_SECTION\n#define {upper}_CONST_ATTR __attribute__((aligned({upper}_MODEL_ALIGN), "
        f"section({upper}_MODEL_SECTION)))\n#else\n#define {upper}_CONST_ATTR __attribute__((aligned({upper}_MODEL_ALIGN)))\n"
        "#endif\n\n"
        f"const uint8_t {name}_model_data[{upper}_MODEL_BYTES] {upper}_CONST_ATTR = {{\n  "
        + G.c_array(data, "model") + "\n};\n\n"
        f"const uint8_t {name}_prepared_data[{upper}_PREPARED_BYTES] {upper}_CONST_ATTR = {{\n  "
        + G.c_array(blob, "prepared") + "\n};\n")


def write_build_files(stage: Path, name: str, values: Dict[str, Union[str, int]], library: List[str]) -> None:
    """CMake (target + package config + toolchain file), Zephyr module, Arduino properties, Makefile fragment."""
    v = dict(values)
    v["CMAKE_SOURCES"] = "\n".join(f"  ${{CMAKE_CURRENT_LIST_DIR}}/{s}" for s in library)
    v["ZEPHYR_SOURCES"] = "\n".join(f"    ${{{name.upper()}_DIR}}/{s}" for s in library)
    v["MAKE_SOURCES"] = " \\\n".join(f"  $({name.upper()}_DIR)/{s}" for s in library)
    _render("CMakeLists.txt.in", v, stage / "CMakeLists.txt")
    _render("Config.cmake.in", v, stage / f"{name}Config.cmake")
    _render("ConfigVersion.cmake.in", v, stage / f"{name}ConfigVersion.cmake")
    _render("cmake/arm-none-eabi.cmake.in", v, stage / "cmake" / "arm-none-eabi.cmake")
    for f in ("module.yml", "CMakeLists.txt", "Kconfig"):
        _render(f"zephyr/{f}.in", v, stage / "zephyr" / f)
    _render("library.properties.in", v, stage / "library.properties")
    _render("lib.mk.in", v, stage / f"{name}.mk")


# --- the prebuilt archive --------------------------------------------------------------------------------------

def _compile_all(stage: Path, sources: Sequence[str], objdir: Path, flags: Sequence[str]) -> List[Path]:
    objdir.mkdir(parents=True, exist_ok=True)

    def one(rel: str) -> Path:
        obj = objdir / (Path(rel).stem + ".o")
        cmd = [GCC, *flags, "-Iinclude", "-Isrc", "-c", rel, "-o", str(obj)]
        done = subprocess.run(cmd, cwd=stage, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise InternalError(f"compiling the library's {rel} failed (a bug in edgekit's generator or runtime):\n"
                                f"{' '.join(cmd)}\n{(done.stdout + done.stderr)[-3000:]}")
        return obj

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, sources))


def _symbols(objects: Sequence[Path]) -> Tuple[List[str], List[str]]:
    """(global symbols defined, weak undefined symbols) in ``objects`` (nm -P)."""
    out = subprocess.run([NM, "-P", *map(str, objects)], capture_output=True, text=True, timeout=120, check=True).stdout
    defined, weak = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or line.endswith(":"):
            continue
        sym, kind = parts[0], parts[1]
        if kind in ("T", "D", "R", "B", "C", "W", "V", "S", "G"):
            defined.add(sym)
        elif kind in ("w", "v"):
            weak.add(sym)
    return sorted(defined), sorted(weak)


def runtime_renames(name: str, objects: Sequence[Path]) -> List[str]:
    """The runtime symbols to prefix: every global the objects define and every weak reference (the registry's
    optional kernels: left bare, another library's kernel would satisfy them), except the API's own <name>_*."""
    defined, weak = _symbols(objects)
    return sorted(s for s in set(defined) | set(weak) if not s.startswith(f"{name}_"))


def prefix_asm_symbols(src: Path, name: str, renames: Sequence[str]) -> List[str]:
    """Symbols of ``renames`` named inside a string literal (top-level asm: ``.global sym``, ``"sym:"``; a macro
    cannot reach into the asm text) are renamed in the copied sources' text instead, word by word. Returns them."""
    files = sorted(src.glob("*.[ch]"))
    texts = {p: p.read_text() for p in files}
    strings = re.compile(r'"(?:[^"\\\n]|\\.)*"')
    named = {w for text in texts.values() for lit in strings.findall(text) for w in re.findall(r"[A-Za-z_]\w*", lit)}
    in_asm = sorted(named & set(renames))
    if in_asm:
        pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, in_asm)) + r")\b")
        for path, text in texts.items():
            new = pattern.sub(lambda m: f"{name}_{m.group(1)}", text)
            if new != text:
                path.write_text(new)
    return in_asm


def kernel_objects(objects: Sequence[Path]) -> List[str]:
    """The ek_kernel_<op> records (read-only data) the objects define."""
    out = subprocess.run([NM, "-P", *map(str, objects)], capture_output=True, text=True, timeout=120, check=True).stdout
    return sorted({p[0] for p in (line.split() for line in out.splitlines())
                   if len(p) >= 2 and p[1] in ("R", "D") and re.match(r"^ek_kernel_\w+$", p[0])})


def build_archive(stage: Path, name: str, target: LibraryTarget, files: Dict[str, List[str]], plan: G.MemoryPlan):
    """Compile the library twice (first to read its symbol table, then with the symbol prefix), archive it into
    lib/lib<name>.a and check that every global symbol it defines carries the prefix. Returns the archive record."""
    from edgekit.firmware.boards import toolchain_version
    from edgekit.firmware.library_results import PrebuiltArchive

    if shutil.which(GCC) is None or shutil.which(AR) is None:
        reason = f"{GCC} not found (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)"
        raise UserError(f"cannot build lib{name}.a: {reason}", fix="install the Arm toolchain, then run again")
    flags = [*target.gcc_flags(), *ARCHIVE_CFLAGS]
    work = stage / ".build"
    try:
        first = _compile_all(stage, files["library"], work / "pass1", flags)
        renames = runtime_renames(name, first)
        in_asm = prefix_asm_symbols(stage / "src", name, renames)
        kernels = kernel_objects(first)
        write_config(stage / "src", name, plan, [s for s in renames if s not in in_asm], kernels)
        objects = _compile_all(stage, files["library"], work / "pass2", flags)
        archive = stage / "lib" / f"lib{name}.a"
        archive.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([AR, "rcs", str(archive), *map(str, objects)], check=True, capture_output=True, timeout=120)
        defined, _ = _symbols([archive])
        bare = [s for s in defined if not s.startswith(f"{name}_")]
        if bare:
            raise InternalError(f"lib{name}.a defines symbols without the {name}_ prefix: {', '.join(bare[:10])}")
        sizes = subprocess.run([SIZE, "-t", str(archive)], capture_output=True, text=True, timeout=60, check=True)
        total = [line.split() for line in sizes.stdout.splitlines() if "(TOTALS)" in line]
        text_b, data_b, bss_b = (int(total[0][0]), int(total[0][1]), int(total[0][2])) if total else (None, None, None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return PrebuiltArchive(built=True, path=f"lib/lib{name}.a", compiler=toolchain_version(), cflags=flags,
                           text_bytes=text_b, data_bytes=data_b, bss_bytes=bss_b,
                           method="measured: arm-none-eabi-size -t of the archive's objects (before the firmware's "
                                  "--gc-sections drops unused functions)",
                           prefixed_symbols=len(renames), global_symbols=defined)


# --- library.json and README.md --------------------------------------------------------------------------------

_ROLES = (("include/", "api-header"), ("lib/", "archive"), ("zephyr/", "zephyr"), ("cmake/", "cmake"))
API_FUNCTIONS = ("init", "init_with", "invoke", "input", "output", "message", "error_op", "status_name", "set_op_hook")


def _role(rel: str, name: str) -> str:
    for prefix, role in _ROLES:
        if rel.startswith(prefix):
            return role
    base = Path(rel).name
    if base in (f"{name}.c", f"{name}.h"):
        return "api-source"
    if base == f"{name}_memory.c":
        return "memory"
    if base.startswith(f"{name}_model."):
        return "model-data"
    if base == f"{name}_config.h":
        return "config"
    if base in ("CMakeLists.txt", f"{name}Config.cmake", f"{name}ConfigVersion.cmake"):
        return "cmake"
    if base == "library.properties":
        return "arduino"
    if base == f"{name}.mk":
        return "make"
    if base.endswith(".md"):
        return "doc"
    return "runtime"


def library_info(stage: Path, name: str, data: bytes, graph: Graph, plan: G.MemoryPlan, target: LibraryTarget, *,
                 source: str, state_bytes: int, section: Optional[str], capacity: Optional[int],
                 prebuilt, constants: CompactConstants) -> LibraryInfo:
    upper = name.upper()
    readme = stage / "README.md"
    readme.write_text(readme_text(name, source, target, plan, state_bytes, prebuilt, section, constants))
    files = [{"path": str(p.relative_to(stage)), "bytes": p.stat().st_size,
              "role": _role(str(p.relative_to(stage)), name)}
             for p in sorted(stage.rglob("*")) if p.is_file() and p.name != LIBRARY_JSON]
    macros = {f"{upper}_ARENA_BYTES": plan["arena_bytes"], f"{upper}_STATE_BYTES": state_bytes,
              f"{upper}_MODEL_BYTES": len(constants.data), f"{upper}_PREPARED_BYTES": plan["prepared_bytes"],
              f"{upper}_NUM_INPUTS": len(graph.inputs), f"{upper}_NUM_OUTPUTS": len(graph.outputs)}
    for kind, ids in (("INPUT", graph.inputs), ("OUTPUT", graph.outputs)):
        for k, i in enumerate(ids):
            macros[f"{upper}_{kind}{k}_BYTES"] = tensor_bytes(graph.tensors[i])
    _, _, kernels = runtime_sources(graph.op_names)
    return LibraryInfo.model_validate(json_safe({
        "name": name,
        "model": {"source": source, "sha256": sha256_bytes(data), "bytes": len(data),
                  "inputs": [G._tensor_json(graph.tensors[i]) for i in graph.inputs],
                  "outputs": [G._tensor_json(graph.tensors[i]) for i in graph.outputs]},
        "core": {"cpu": target.cpu, "fpu": target.fpu, "float_abi": target.float_abi, "board": target.board,
                 "gcc_flags": target.gcc_flags()},
        "optimize": plan["optimize"],
        "api": {"header": f"include/{name}.h", "functions": [f"{name}_{f}" for f in API_FUNCTIONS],
                "macros": macros, "symbol_prefix": f"{name}_"},
        "memory": {"arena_bytes": plan["arena_bytes"], "state_bytes": state_bytes, "model_bytes": len(constants.data),
                   "tflite_bytes": len(data), "constant_tensor_bytes": constants.tensor_bytes,
                   "quantization_bytes": constants.quantization_bytes,
                   "model_note": "flash keeps only the bytes of the .tflite the prepared path reads (constant tensor "
                                 "data, per-channel scales and zero points, 16-byte alignment); names, schema tables "
                                 "and metadata stay on the host",
                   "prepared_bytes": plan["prepared_bytes"], "arena_section": section,
                   "arena_section_bytes": capacity,
                   "method": "arena: the runtime's own offline plan (measured on the host with the device's C code); "
                             "state: 32-bit record sizes + the API's tensors + alignment, checked against the real "
                             "sizeof() when the library compiles"},
        "kernels": kernels,
        "streamed_groups": G.streamed_group_report(plan),
        "files": files,
        "prebuilt": prebuilt.to_dict(),
        "integrations": {
            "cmake": f"add_subdirectory({name}) + target_link_libraries(app PRIVATE {name}::{name})",
            "find_package": f"find_package({name} REQUIRED PATHS <folder> NO_DEFAULT_PATH): the prebuilt archive",
            "toolchain": "cmake -DCMAKE_TOOLCHAIN_FILE=<folder>/cmake/arm-none-eabi.cmake",
            "zephyr": f"-DEXTRA_ZEPHYR_MODULES=<folder> and CONFIG_{upper}=y (zephyr/module.yml)",
            "arduino": "copy the folder into your Arduino libraries folder (library.properties, src/)",
            "make": f"include <folder>/{name}.mk: {upper}_SRCS, {upper}_CFLAGS, {upper}_LIB",
        },
        "signature": G.signature(sha256_bytes(data), {"arm-none-eabi-gcc": prebuilt.compiler}
                                 if prebuilt.compiler else None),
    }))


def readme_text(name: str, source: str, target: LibraryTarget, plan: G.MemoryPlan, state_bytes: int, prebuilt,
                section: Optional[str], constants: CompactConstants) -> str:
    upper = name.upper()
    return G.render((TEMPLATES / "README.md.in").read_text(), {
        "name": name, "NAME": upper, "MODEL_NAME": Path(source).name, "EDGEKIT_VERSION": __version__,
        "TARGET": target.describe(), "ARENA_BYTES": f"{plan['arena_bytes']:,}", "STATE_BYTES": f"{state_bytes:,}",
        "PREPARED_BYTES": f"{plan['prepared_bytes']:,}", "CONSTANT_BYTES": f"{len(constants.data):,}",
        "TFLITE_BYTES": f"{constants.model_bytes:,}", "CFLAGS": " ".join(prebuilt.cflags or []),
        "SECTION_NOTE": f"The arena goes to section `{section}` by default (`--arena-section`)." if section else
                        f"Place the arena with `-D{upper}_ARENA_SECTION='\".dtcm\"'` (default: .bss).",
    }, name="README.md.in")
