"""`edgekit firmware --emit library`: the emitted folder linked into firmware written here, not by edgekit.

The test application (its own vector table, reset code, linker script and main; semihosting output) links the
libraries through CMake (Debian's cmake + arm-none-eabi-gcc, the library's own toolchain file) and runs under QEMU:
on mps2-an386 two libraries in one firmware (KWS compiled from source with add_subdirectory, the demo digits model
prebuilt through find_package), on mps3-an547 the KWS library prebuilt for the Cortex-M55. Outputs are compared with
LiteRT BUILTIN_REF, bit for bit. One emit per (model, core) and one build per board, shared by a module fixture.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from tests.firmware.opmodels import reference
from tests.schema_check import check_file

REPO = Path(__file__).resolve().parents[2]
KWS = REPO / "tests" / "fixtures" / "mlperf_tiny" / "kws_ref_model_int8.tflite"
TOOLS = ("arm-none-eabi-gcc", "cmake", "make", "qemu-system-arm")
needs_tools = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                                 reason="needs " + ", ".join(TOOLS) + " (make install: APT_PACKAGES)")

# board -> (QEMU machine, FLASH origin/length, RAM origin/length)
BOARDS = {
    "mps2-an386": ("mps2-an386", 0x00000000, 0x400000, 0x20000000, 0x400000),
    "mps3-an547": ("mps3-an547", 0x10000000, 0x80000, 0x30000000, 0x80000),
}

STARTUP_C = r"""
/* The test application's own startup: vector table, .data/.bss init, FPU on, main, semihosting exit. */
#include <stdint.h>
extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _estack[];
int main(void);
void sh_exit(int code);
void Reset_Handler(void) {
  for (uint32_t *s = _sidata, *d = _sdata; d < _edata;) *d++ = *s++;
  for (uint32_t *d = _sbss; d < _ebss;) *d++ = 0;
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
  __asm volatile("dsb\n\tisb" ::: "memory");
#endif
  sh_exit(main());
}
void Fault_Handler(void) { sh_exit(99); }
__attribute__((section(".vectors"), used)) void (*const vectors[16])(void) = {
  (void (*)(void))(uintptr_t)_estack, Reset_Handler, Fault_Handler, Fault_Handler, Fault_Handler, Fault_Handler,
  Fault_Handler, Fault_Handler, 0, 0, 0, Fault_Handler, Fault_Handler, 0, Fault_Handler, Fault_Handler};
static int sh_call(int op, const void *arg) {
  register int r0 __asm("r0") = op;
  register const void *r1 __asm("r1") = arg;
  __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
void sh_write(const char *s) { sh_call(0x04, s); }
void sh_exit(int code) {
  uint32_t block[2] = {0x20026u, (uint32_t)code};
  sh_call(0x20, block);
  for (;;) {}
}
"""

LINKER = """
MEMORY {{ FLASH (rx) : ORIGIN = {fo:#x}, LENGTH = {fl:#x}  RAM (rwx) : ORIGIN = {ro:#x}, LENGTH = {rl:#x} }}
ENTRY(Reset_Handler)
SECTIONS {{
  .vectors : {{ KEEP(*(.vectors)) }} > FLASH
  .text : {{ *(.text .text.*) *(.rodata .rodata.*) . = ALIGN(4); }} > FLASH
  .ARM.exidx : {{ *(.ARM.exidx*) }} > FLASH
  .data : {{ _sdata = .; *(.data .data.*) . = ALIGN(4); _edata = .; }} > RAM AT > FLASH
  _sidata = LOADADDR(.data);
  .bss (NOLOAD) : {{ _sbss = .; *(.bss .bss.*) *(COMMON) . = ALIGN(4); _ebss = .; }} > RAM
  .app_arena (NOLOAD) : {{ . = ALIGN(16); *(.app_arena) }} > RAM
  _estack = ORIGIN(RAM) + LENGTH(RAM);
}}
"""


def main_c(libs: List[str]) -> str:
    """main(): init every library, copy the test's input in, invoke, print the int8 outputs in hex."""
    includes = "".join(f'#include "{n}.h"\n#include "{n}_input.h"\n' for n in libs)
    runs = "".join(f"""
  if ({n}_init() != {n.upper()}_OK) {{ sh_write("ERR {n} init: "); sh_write({n}_message()); sh_write("\\n"); return 1; }}
  {n}_set_op_hook(count_op, &ops);
  ops = 0;
  memcpy({n}_input(0)->data, {n}_input_data, {n}_input(0)->bytes);
  if ({n}_invoke() != {n.upper()}_OK) {{ sh_write("ERR {n} invoke: "); sh_write({n}_message()); return 2; }}
  print_hex("{n}", (const uint8_t *){n}_output(0)->data, {n}_output(0)->bytes, ops);
""" for n in libs)
    return f"""#include <stddef.h>
#include <stdint.h>
#include <string.h>
{includes}
void sh_write(const char *s);
static int32_t ops;
static void count_op(void *user, int32_t op, int32_t opcode, int phase) {{
  (void)op; (void)opcode;
  if (phase == 1) ++*(int32_t *)user;
}}
static void print_hex(const char *name, const uint8_t *p, size_t n, int32_t nops) {{
  static char line[4096];
  static const char hex[] = "0123456789abcdef";
  size_t k = 0;
  const char *s = "OUT ";
  while (*s) line[k++] = *s++;
  while (*name) line[k++] = *name++;
  line[k++] = ' ';
  line[k++] = (char)('0' + nops / 10);
  line[k++] = (char)('0' + nops % 10);
  line[k++] = ' ';
  for (size_t i = 0; i < n && k + 3 < sizeof line; ++i) {{ line[k++] = hex[p[i] >> 4]; line[k++] = hex[p[i] & 15]; }}
  line[k++] = '\\n';
  line[k] = 0;
  sh_write(line);
}}
int main(void) {{{runs}
  return 0;
}}
"""


def input_header(name: str, data: np.ndarray) -> str:
    body = ", ".join(str(int(v)) for v in data.astype(np.int8).ravel())
    return f"static const int8_t {name}_input_data[] = {{{body}}};\n"


def cmake_lists(subdirs: Dict[str, Path], packages: Dict[str, Path]) -> str:
    lines = ["cmake_minimum_required(VERSION 3.13)", "project(libapp C)"]
    lines += [f"add_subdirectory({p} {n})" for n, p in subdirs.items()]
    lines += [f"find_package({n} REQUIRED PATHS {p} NO_DEFAULT_PATH)" for n, p in packages.items()]
    libs = " ".join(f"{n}::{n}" for n in [*subdirs, *packages])
    lines += ["add_executable(app.elf main.c startup.c)",
              "target_include_directories(app.elf PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})",
              f"target_link_libraries(app.elf PRIVATE {libs} m)",
              "target_link_options(app.elf PRIVATE -T${CMAKE_CURRENT_SOURCE_DIR}/link.ld -nostartfiles "
              "--specs=nano.specs --specs=nosys.specs -Wl,-Map=app.map)"]
    return "\n".join(lines) + "\n"


def build_and_run(work: Path, board: str, libs: Dict[str, Path], inputs: Dict[str, np.ndarray],
                  subdirs: List[str], defines: Dict[str, str]) -> Dict[str, tuple]:
    """Write the app, configure + build with CMake and the first library's toolchain file, run it under QEMU:
    {library: (ops counted by the hook, output bytes)}."""
    machine, fo, fl, ro, rl = BOARDS[board]
    app = work / "app"
    app.mkdir(parents=True)
    (app / "startup.c").write_text(STARTUP_C)
    (app / "link.ld").write_text(LINKER.format(fo=fo, fl=fl, ro=ro, rl=rl))
    (app / "main.c").write_text(main_c(list(libs)))
    for n, x in inputs.items():
        (app / f"{n}_input.h").write_text(input_header(n, x))
    (app / "CMakeLists.txt").write_text(cmake_lists({n: libs[n] for n in subdirs},
                                                    {n: p for n, p in libs.items() if n not in subdirs}))
    toolchain = next(iter(libs.values())) / "cmake" / "arm-none-eabi.cmake"
    build = work / "build"
    configure = ["cmake", "-S", str(app), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={toolchain}",
                 "-DCMAKE_BUILD_TYPE=Release", *[f"-D{k}={v}" for k, v in defines.items()]]
    for cmd in (configure, ["cmake", "--build", str(build), "-j2"]):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    elf = build / "app.elf"
    run = subprocess.run(["qemu-system-arm", "-M", machine, "-nographic", "-monitor", "none", "-serial", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"QEMU exit {run.returncode}:\n{run.stdout}\n{run.stderr}"
    found = {m.group(1): (int(m.group(2)), bytes.fromhex(m.group(3)))
             for m in re.finditer(r"^OUT (\w+) (\d+) ([0-9a-f]*)$", run.stdout + run.stderr, re.M)}
    assert set(found) == set(libs), run.stdout
    return {"elf": elf, **found}


def emit(main, model: Path, out: Path, name: str, *args: str) -> Path:
    assert main(["firmware", str(model), "--emit", "library", "--name", name, "-o", str(out), *args]) == 0
    return out


@pytest.fixture(scope="module")
def libraries(tmp_path_factory, demo_quantized):
    """KWS and digits libraries for the Cortex-M4F (mps2-an386) and KWS for the Cortex-M55 (mps3-an547)."""
    from edgekit.cli import main

    root = tmp_path_factory.mktemp("libraries")
    digits = demo_quantized / "model_int8.tflite"
    return {
        "root": root, "digits_model": digits,
        "kws": emit(main, KWS, root / "kws", "kws", "--board", "mps2-an386"),
        "digits": emit(main, digits, root / "digits", "digits", "--cpu", "cortex-m4", "--fpu", "fpv4-sp-d16",
                       "--arena-section", ".app_arena:1048576"),
        "kws55": emit(main, KWS, root / "kws55", "kws", "--cpu", "cortex-m55"),
    }


def _inputs(model: Path, seed: int) -> np.ndarray:
    from tests.firmware.opmodels import random_input

    return random_input(model.read_bytes(), np.random.default_rng(seed))[0]


@pytest.fixture(scope="module")
def an386_run(libraries):
    x = {"kws": _inputs(KWS, 1), "digits": _inputs(libraries["digits_model"], 2)}
    out = build_and_run(libraries["root"] / "an386", "mps2-an386",
                        {"kws": libraries["kws"], "digits": libraries["digits"]}, x, subdirs=["kws"],
                        defines={"KWS_ARENA_SECTION": ".app_arena"})
    return out, x


@needs_tools
@pytest.mark.slow
def test_two_libraries_in_one_firmware_are_bit_exact_on_an386(libraries, an386_run):
    out, x = an386_run
    for name, model in (("kws", KWS), ("digits", libraries["digits_model"])):
        ops, got = out[name]
        want = reference(model.read_bytes(), [x[name]])[0]
        groups = json.loads((libraries[name] / "library.json").read_text())["streamed_groups"]
        assert ops == _num_ops(model) - sum(g["last_op"] - g["first_op"] for g in groups)  # a group: one hook call
        assert np.array_equal(np.frombuffer(got, dtype=np.int8), want.astype(np.int8).ravel()), name
    # the arenas were placed where the application said: the CMake option (source build) and --arena-section
    syms = subprocess.run(["arm-none-eabi-nm", "-S", str(out["elf"])], capture_output=True, text=True).stdout
    sections = subprocess.run(["arm-none-eabi-objdump", "-t", str(out["elf"])], capture_output=True, text=True).stdout
    for name in ("kws", "digits"):
        line = next(l for l in sections.splitlines() if l.endswith(f" {name}_arena"))
        assert ".app_arena" in line, line
        size = int(next(l for l in syms.splitlines() if l.endswith(f" {name}_arena")).split()[1], 16)
        assert size == json.loads((libraries[name] / "library.json").read_text())["memory"]["arena_bytes"]


@needs_tools
@pytest.mark.slow
def test_prebuilt_m55_library_is_bit_exact_on_an547(libraries):
    x = {"kws": _inputs(KWS, 3)}
    out = build_and_run(libraries["root"] / "an547", "mps3-an547", {"kws": libraries["kws55"]}, x, subdirs=[],
                        defines={})
    want = reference(KWS.read_bytes(), [x["kws"]])[0]
    assert np.array_equal(np.frombuffer(out["kws"][1], dtype=np.int8), want.astype(np.int8).ravel())
    info = json.loads((libraries["kws55"] / "library.json").read_text())
    assert info["core"]["gcc_flags"][0] == "-mcpu=cortex-m55" and info["prebuilt"]["built"]


def _num_ops(model: Path) -> int:
    from edgekit.tflite_graph import read_graph

    return len(read_graph(model.read_bytes(), str(model)).ops)


def test_library_json_lists_files_and_every_symbol_is_prefixed(libraries):
    lib = libraries["kws"]
    info = json.loads((lib / "library.json").read_text())
    assert info["schema"] == "edgekit.firmware-library/1"
    assert check_file(lib / "library.json") == ("edgekit.firmware-library/1", [])
    listed = {f["path"]: f["bytes"] for f in info["files"]}
    on_disk = {str(p.relative_to(lib)): p.stat().st_size for p in lib.rglob("*") if p.is_file()
               and p.name != "library.json"}
    assert listed == on_disk
    for must in ("include/kws.h", "src/kws.c", "src/kws_memory.c", "lib/libkws.a", "CMakeLists.txt",
                 "kwsConfig.cmake", "cmake/arm-none-eabi.cmake", "zephyr/module.yml", "zephyr/CMakeLists.txt",
                 "zephyr/Kconfig", "library.properties", "kws.mk", "README.md"):
        assert must in listed, must
    assert info["prebuilt"]["global_symbols"] and all(s.startswith("kws_") for s in info["prebuilt"]["global_symbols"])
    header = (lib / "include" / "kws.h").read_text()
    assert f"#define KWS_ARENA_BYTES {info['memory']['arena_bytes']}u" in header
    assert "ek_" not in re.sub(r"/\*.*?\*/", "", header, flags=re.S)  # the API exposes no runtime name


def test_arduino_layout_compiles_with_the_arduino_builder_include_rules(libraries, tmp_path):
    """Mimics the Arduino builder for a 1.5-format library (library.properties + src/): only src/ is on the include
    path, every .c/.cpp under src/ is compiled (recursively) with Arduino's GNU dialect flags (-std=gnu11 /
    -std=gnu++11, -Os), the sketch is C++ and includes <kws.h>; the objects link into an ELF."""
    if shutil.which("arm-none-eabi-g++") is None:
        pytest.skip("arm-none-eabi-g++ missing (gcc-arm-none-eabi ships it)")
    lib = tmp_path / "libraries" / "kws"
    shutil.copytree(libraries["kws"], lib)
    props = dict(line.split("=", 1) for line in (lib / "library.properties").read_text().splitlines() if "=" in line)
    assert props["name"] == "kws" and props["includes"] == "kws.h"
    sketch = tmp_path / "sketch.ino.cpp"
    sketch.write_text('#include <kws.h>\nint main() { return kws_init() == KWS_OK ? 0 : 1; }\n')
    flags = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-Os", "-ffunction-sections",
             "-fdata-sections", f"-I{lib / 'src'}"]
    objects = []
    for src in sorted((lib / "src").rglob("*")):
        if src.suffix not in (".c", ".cpp"):
            continue
        obj = tmp_path / (src.name + ".o")
        gcc = ["arm-none-eabi-gcc", "-std=gnu11"] if src.suffix == ".c" else ["arm-none-eabi-g++", "-std=gnu++11"]
        done = subprocess.run([*gcc, *flags, "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        objects.append(str(obj))
    done = subprocess.run(["arm-none-eabi-g++", "-std=gnu++11", *flags, "-c", str(sketch), "-o",
                           str(tmp_path / "sketch.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    link = subprocess.run(["arm-none-eabi-gcc", *flags[:4], "-Wl,--gc-sections", "--specs=nano.specs",
                           "--specs=nosys.specs", str(tmp_path / "sketch.o"), *objects, "-lm", "-o",
                           str(tmp_path / "sketch.elf")], capture_output=True, text=True)
    assert link.returncode == 0, link.stderr


def test_zephyr_module_cmake_is_valid_without_a_zephyr_tree(libraries, tmp_path):
    """Zephyr itself is not installable here: module.yml is checked as Zephyr's schema requires it, and the module's
    CMakeLists runs under cmake with recording stand-ins of the zephyr_* functions; every source it names exists."""
    import yaml

    lib = libraries["kws"]
    module = yaml.safe_load((lib / "zephyr" / "module.yml").read_text())
    assert module["name"] == "kws" and module["build"] == {"cmake": "zephyr", "kconfig": "zephyr/Kconfig"}
    kconfig = (lib / "zephyr" / "Kconfig").read_text()
    assert re.search(r"^config KWS\n\tbool ", kconfig, re.M) and kconfig.count("\nif KWS") == 1
    script = tmp_path / "check.cmake"
    record = tmp_path / "calls.txt"
    stubs = "".join(f"function({fn})\n  file(APPEND ${{RECORD}} \"{fn};${{ARGV}}\\n\")\nendfunction()\n"
                    for fn in ("zephyr_library_named", "zephyr_library_sources", "zephyr_include_directories",
                               "zephyr_library_include_directories", "zephyr_library_compile_options",
                               "zephyr_library_compile_definitions"))
    script.write_text(f"set(CONFIG_KWS y)\nset(RECORD {record})\nfile(WRITE ${{RECORD}} \"\")\n{stubs}"
                      f"include({lib / 'zephyr' / 'CMakeLists.txt'})\n")
    done = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = [line.split(";") for line in record.read_text().splitlines()]
    assert ["zephyr_library_named", "kws"] in calls
    sources = [s for call in calls if call[0] == "zephyr_library_sources" for s in call[1:]]
    assert sources and all(Path(s).is_file() for s in sources), sources
    listed = {Path(s).resolve() for s in sources}
    assert (lib / "src" / "kws_memory.c").resolve() in listed and (lib / "src" / "kws.c").resolve() in listed
    pytest.skip("module.yml, Kconfig and the module's CMake calls checked; building it needs a Zephyr tree "
                "(west + the Zephyr SDK), which no registry here provides")


@pytest.mark.parametrize("args, message", [
    (["--cpu", "cortex-m4", "--fpu", "fpv5-d16"], "a cortex-m4 has no fpv5-d16 FPU"),
    (["--cpu", "cortex-m0"], "the runtime's kernels are built for cortex-m4, cortex-m7, cortex-m33, cortex-m55"),
    (["--cpu", "cortex-m7", "--fpu", "none", "--float-abi", "hard"], "a float ABI of hard needs an FPU"),
    (["--name", "2kws"], "is not a C identifier"),
    (["--name", "kws-model"], "is not a C identifier"),
    (["--name", "int"], "is a C keyword"),
    (["--arena-section", ".dtcm:4096"], "section .dtcm holds 4,096: "),
    (["--board", "mps2-an386", "--cpu", "cortex-m4"], "--board and --cpu both given"),
    (["--name", "ek_kws"], "starts with ek_, the runtime's own prefix"),
])
def test_bad_input_is_refused_before_anything_is_written(cli, capsys, tmp_path, args, message):
    out = tmp_path / "lib"
    assert cli("firmware", str(KWS), "--emit", "library", "-o", str(out), *args) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_makefile_fragment_builds_and_links_the_prebuilt_archive(libraries, tmp_path):
    """A user Makefile includes kws.mk: the application links $(KWS_LIB) and compiles $(KWS_MEMORY_SRC) with its own
    flags; the library's sources listed in $(KWS_SRCS) all exist."""
    lib = libraries["kws"]
    (tmp_path / "main.c").write_text('#include "kws.h"\nint main(void) { return kws_init() == KWS_OK ? 0 : 1; }\n')
    (tmp_path / "Makefile").write_text(
        f"include {lib}/kws.mk\n"
        "CC := arm-none-eabi-gcc\n"
        "CFLAGS := $(KWS_CPU_FLAGS) -O2 -std=c99 $(KWS_INCLUDES)\n"
        "app.elf: main.c $(KWS_MEMORY_SRC) $(KWS_LIB)\n"
        "\t$(CC) $(CFLAGS) -Wl,--gc-sections --specs=nano.specs --specs=nosys.specs main.c $(KWS_MEMORY_SRC) "
        "$(KWS_LIB) -lm -o $@\n"
        "srcs:\n\t@echo $(KWS_SRCS)\n")
    done = subprocess.run(["make", "-C", str(tmp_path), "app.elf"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    srcs = subprocess.run(["make", "-s", "-C", str(tmp_path), "srcs"], capture_output=True, text=True).stdout.split()
    assert srcs and all(Path(s).is_file() for s in srcs)
    assert {Path(s).name for s in srcs} >= {"kws.c", "kws_model.c", "registry.c", "ek_prepared.c"}


def test_library_options_without_emit_library_are_refused(cli, capsys, tmp_path):
    assert cli("firmware", str(KWS), "--name", "kws", "-o", str(tmp_path / "p")) != 0
    assert "--name: only with --emit library" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
