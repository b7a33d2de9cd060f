"""MCU board profiles (devices/*.yaml, kind: mcu): validation, compiler flags, generated board files, ELF builds.

A ``Board`` is the validated profile. From it come the arm-none-eabi-gcc flags, the board sources in
firmware/boards/ (startup, one UART driver, one SoC file, the instruction-count markers), and two generated
files: the linker script (from firmware/boards/common/linker.ld.in) and ``ek_board_config.h``.
``build_elf`` compiles and links a firmware with them; generated projects use ``write_board_files``.
"""
from __future__ import annotations

import logging
import re
import shutil
import string
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, TypedDict

from edgekit._resources import data_dir
from edgekit.errors import ToolMissingError, UnknownNameError, UserError
from edgekit.profiles import all_profiles, load_profile

if TYPE_CHECKING:
    from edgekit.firmware.results import BoardSummary

log = logging.getLogger(__name__)

FIRMWARE_DIR = data_dir("firmware")
BOARDS_DIR = FIRMWARE_DIR / "boards"
LINKER_TEMPLATE = BOARDS_DIR / "common" / "linker.ld.in"
GCC = "arm-none-eabi-gcc"
GCC_INSTALL = "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi"

UART_DRIVERS = {  # profile uart.driver -> (source file, extra config macros)
    "cmsdk": ("uart_cmsdk.c", {}),
    "stm32_usart": ("uart_stm32.c", {"EK_UART_LPUART": "0"}),
    "stm32_lpuart": ("uart_stm32.c", {"EK_UART_LPUART": "1"}),
    "nrf_uarte": ("uart_nrf_uarte.c", {}),
}
FLOAT_ABIS = ("hard", "softfp", "soft")
FEATURES = ("dsp", "mve", "fpu_dp")
CONNECTION_KINDS = ("qemu", "serial", "fvp")  # fvp: Arm Fixed Virtual Platform, not available here (generate only)
NRF_PIN = re.compile(r"^P(\d)\.(\d{1,2})$")


@dataclass(frozen=True)
class MemoryRegion:
    name: str
    origin: int
    bytes: int
    description: str = ""

    @property
    def end(self) -> int:
        return self.origin + self.bytes


@dataclass(frozen=True)
class UartConfig:
    driver: str
    base: int
    baud: int
    clock_hz: int
    instance: str = ""
    tx_pin: str = ""
    rx_pin: str = ""


class Connection(TypedDict, total=False):
    """A board profile's ``connection`` block: how edgekit reaches the board (the keys it reads; devices/README.md)."""

    kind: str                 # qemu | serial
    machine: str              # qemu-system-arm -M
    semihosting: bool
    flash: str                # pyocd
    pyocd_target: str
    pyocd_pack: str
    usb_vcp: str              # the on-board probe's USB port, named in the no-device message
    model: str
    note: str


@dataclass(frozen=True)
class PowerModel:
    """The board's active power from its profile, with where the figure comes from."""

    active_mw: float
    source: str


@dataclass(frozen=True)
class CycleModel:
    """Core cycles per instruction from the board's profile, with where the figure comes from."""

    cycles_per_instruction: float
    source: str


@dataclass(frozen=True)
class Board:
    """A validated MCU board profile."""

    name: str
    description: str
    core: str
    cpu: str
    fpu: str
    float_abi: str
    features: Tuple[str, ...]
    clock_hz: int
    firmware_clock_hz: int
    soc: str
    flash: MemoryRegion
    ram: MemoryRegion
    extra_regions: Tuple[MemoryRegion, ...]
    stack_bytes: int
    uart: UartConfig
    connection: Connection
    caches: bool
    power_model: PowerModel
    cycle_model: CycleModel
    profile: Mapping[str, Any] = field(repr=False, compare=False)   # the parsed YAML as written (runners read own keys)

    @property
    def is_qemu(self) -> bool:
        return self.connection["kind"] == "qemu"

    @property
    def qemu_machine(self) -> Optional[str]:
        return self.connection.get("machine") if self.is_qemu else None

    @property
    def semihosting(self) -> bool:
        return bool(self.connection.get("semihosting", False))

    @property
    def pyocd_target(self) -> Optional[str]:
        return self.connection.get("pyocd_target")

    def gcc_flags(self) -> List[str]:
        """Target flags for arm-none-eabi-gcc (compile and link)."""
        flags = [f"-mcpu={self.cpu}", "-mthumb", f"-mfloat-abi={self.float_abi}"]
        if self.fpu != "none":
            flags.append(f"-mfpu={self.fpu}")
        return flags

    def sources(self) -> List[Path]:
        """Board support sources to compile into every firmware for this board."""
        driver = UART_DRIVERS[self.uart.driver][0]
        return [
            BOARDS_DIR / "common" / "startup.c",
            BOARDS_DIR / "common" / "ek_markers.S",
            BOARDS_DIR / "drivers" / driver,
            BOARDS_DIR / "soc" / f"{self.soc}.c",
        ]

    def include_dirs(self) -> List[Path]:
        return [BOARDS_DIR / "common"]

    def config_macros(self) -> Dict[str, str]:
        macros = {
            "EK_BOARD_NAME": f'"{self.name}"',
            "EK_CPU_HZ": f"{self.firmware_clock_hz}u",
            "EK_SEMIHOSTING": "1" if self.semihosting else "0",
            "EK_ENABLE_CACHES": "1" if self.caches else "0",
            "EK_UART_BASE": f"0x{self.uart.base:08X}u",
            "EK_UART_BAUD": f"{self.uart.baud}u",
            "EK_UART_CLOCK_HZ": f"{self.uart.clock_hz}u",
        }
        macros.update(UART_DRIVERS[self.uart.driver][1])
        if self.uart.driver == "nrf_uarte":
            macros["EK_UART_TX_PIN"] = f"{nrf_psel(self.uart.tx_pin)}u"
            macros["EK_UART_RX_PIN"] = f"{nrf_psel(self.uart.rx_pin)}u"
        return macros

    def config_header(self) -> str:
        lines = [
            f"/* Board configuration for {self.name}: generated by edgekit.firmware.boards from",
            f" * devices/{self.name}.yaml. Edit the profile, not this file. */",
            "#ifndef EK_BOARD_CONFIG_H",
            "#define EK_BOARD_CONFIG_H",
        ]
        lines += [f"#define {key} {value}" for key, value in self.config_macros().items()]
        lines += ["#endif", ""]
        return "\n".join(lines)

    def linker_script(self, stack_bytes: Optional[int] = None) -> str:
        extra_memory = "".join(
            f"  {r.name.upper()} (rw) : ORIGIN = 0x{r.origin:08X}, LENGTH = 0x{r.bytes:X}\n" for r in self.extra_regions
        )
        extra_sections = "".join(
            f"\n  .{r.name} (NOLOAD) :\n  {{\n    *(.{r.name} .{r.name}.*)\n  }} > {r.name.upper()}\n"
            for r in self.extra_regions
        )
        template = string.Template(LINKER_TEMPLATE.read_text())
        return template.substitute(
            board=self.name,
            description=self.description.replace("*/", "* /"),
            flash_origin=f"0x{self.flash.origin:08X}",
            flash_bytes=f"0x{self.flash.bytes:X}",
            ram_origin=f"0x{self.ram.origin:08X}",
            ram_bytes=f"0x{self.ram.bytes:X}",
            stack_bytes=str(stack_bytes or self.stack_bytes),
            extra_memory=extra_memory,
            extra_sections=extra_sections,
        )

    def summary(self) -> BoardSummary:
        """Key figures for reports and `edgekit devices`."""
        from edgekit.firmware.results import BoardSummary

        return BoardSummary(board=self.name, core=self.core, clock_hz=self.clock_hz,
                            firmware_clock_hz=self.firmware_clock_hz, flash_bytes=self.flash.bytes,
                            ram_bytes=self.ram.bytes, connection=dict(self.connection))


def nrf_psel(pin: str) -> int:
    """nRF PSEL value of a pin named like ``P0.06`` (port * 32 + pin)."""
    match = NRF_PIN.match(pin or "")
    if not match:
        raise UserError(f"nRF pin {pin!r} is not of the form P<port>.<pin>", fix="write e.g. P0.06")
    return int(match.group(1)) * 32 + int(match.group(2))


# ------------------------------------------------------------------ loading and validation


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _region(name: str, raw: Any, problems: List[str]) -> Optional[MemoryRegion]:
    if not isinstance(raw, dict):
        problems.append(f"memory.{name} must be a mapping with origin and bytes")
        return None
    origin, size = _int(raw.get("origin")), _int(raw.get("bytes"))
    if origin is None or origin < 0 or origin > 0xFFFFFFFF:
        problems.append(f"memory.{name}.origin must be an address (integer, e.g. 0x20000000)")
    if size is None or size <= 0:
        problems.append(f"memory.{name}.bytes must be a positive integer")
    if origin is None or size is None or size <= 0 or origin < 0:
        return None
    if origin + size > 1 << 32:
        problems.append(f"memory.{name} ends beyond the 32-bit address space")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        problems.append(f"memory region name {name!r} must be lower-case letters, digits, _")
    return MemoryRegion(name, origin, size, str(raw.get("description", "")))


def validate_profile(data: Mapping[str, Any]) -> Tuple[Optional[Board], List[str]]:  # a parsed YAML, unchecked
    """Check every MCU key; return the Board (None if anything is wrong) and the list of problems."""
    problems: List[str] = []
    for key in ("core", "cpu", "soc", "float_abi", "fpu"):
        if not isinstance(data.get(key), str) or not data.get(key):
            problems.append(f"{key} (text) is missing")
    if data.get("float_abi") not in FLOAT_ABIS:
        problems.append(f"float_abi {data.get('float_abi')!r} must be one of {', '.join(FLOAT_ABIS)}")
    if data.get("float_abi") != "soft" and data.get("fpu") == "none":
        problems.append("fpu: none needs float_abi: soft")
    soc = data.get("soc")
    if isinstance(soc, str) and not (BOARDS_DIR / "soc" / f"{soc}.c").is_file():
        known = sorted(p.stem for p in (BOARDS_DIR / "soc").glob("*.c"))
        problems.append(f"soc {soc!r} has no firmware/boards/soc/{soc}.c (known: {', '.join(known)})")
    features = data.get("features", [])
    if not isinstance(features, list) or any(f not in FEATURES for f in features):
        problems.append(f"features must be a list of {', '.join(FEATURES)}")
        features = []
    for key in ("clock_hz", "firmware_clock_hz", "stack_bytes"):
        if (_int(data.get(key)) or 0) <= 0:
            problems.append(f"{key} must be a positive integer")

    memory = data.get("memory")
    regions: Dict[str, MemoryRegion] = {}
    if not isinstance(memory, dict) or "flash" not in memory or "ram" not in memory:
        problems.append("memory must map at least flash and ram to {origin, bytes}")
    else:
        for name, raw in memory.items():
            region = _region(str(name), raw, problems)
            if region:
                regions[str(name)] = region
        ordered = sorted(regions.values(), key=lambda r: r.origin)
        for a, b in zip(ordered, ordered[1:]):
            if a.end > b.origin:
                problems.append(f"memory regions {a.name} and {b.name} overlap")
        if "ram" in regions and (_int(data.get("stack_bytes")) or 0) >= regions["ram"].bytes:
            problems.append("stack_bytes does not fit in memory.ram")

    uart_raw = data.get("uart")
    uart = None
    if not isinstance(uart_raw, dict):
        problems.append("uart must be a mapping (driver, base, baud, clock_hz)")
    else:
        if uart_raw.get("driver") not in UART_DRIVERS:
            problems.append(f"uart.driver {uart_raw.get('driver')!r} must be one of {', '.join(UART_DRIVERS)}")
        for key in ("base", "baud", "clock_hz"):
            if (_int(uart_raw.get(key)) or 0) <= 0:
                problems.append(f"uart.{key} must be a positive integer")
        if uart_raw.get("driver") == "nrf_uarte":
            for key in ("tx_pin", "rx_pin"):
                if not NRF_PIN.match(str(uart_raw.get(key, ""))):
                    problems.append(f"uart.{key} must name an nRF pin like P0.06")
        if not problems:
            uart = UartConfig(
                driver=uart_raw["driver"], base=uart_raw["base"], baud=uart_raw["baud"], clock_hz=uart_raw["clock_hz"],
                instance=str(uart_raw.get("instance", "")), tx_pin=str(uart_raw.get("tx_pin", "")),
                rx_pin=str(uart_raw.get("rx_pin", "")),
            )

    connection = data.get("connection")
    if not isinstance(connection, dict) or connection.get("kind") not in CONNECTION_KINDS:
        problems.append(f"connection.kind must be one of {', '.join(CONNECTION_KINDS)}")
    elif connection["kind"] == "qemu" and not isinstance(connection.get("machine"), str):
        problems.append("connection.machine (the qemu-system-arm -M name) is missing")
    elif connection["kind"] == "serial" and (connection.get("flash") != "pyocd" or not connection.get("pyocd_target")):
        problems.append("a serial board needs connection.flash: pyocd and connection.pyocd_target")

    for key, number in (("power_model", "active_mw"), ("cycle_model", "cycles_per_instruction")):
        model = data.get(key)
        if not isinstance(model, dict) or not isinstance(model.get(number), (int, float)) or model[number] <= 0:
            problems.append(f"{key}.{number} must be a positive number")
        elif not isinstance(model.get("source"), str) or not model["source"].strip():
            problems.append(f"{key}.source must say where {number} comes from")

    if problems or uart is None:
        return None, problems
    board = Board(
        name=data["name"], description=data["description"], core=data["core"], cpu=data["cpu"], fpu=data["fpu"],
        float_abi=data["float_abi"], features=tuple(features), clock_hz=data["clock_hz"],
        firmware_clock_hz=data["firmware_clock_hz"], soc=data["soc"], flash=regions["flash"], ram=regions["ram"],
        extra_regions=tuple(r for n, r in regions.items() if n not in ("flash", "ram")),
        stack_bytes=data["stack_bytes"], uart=uart,
        connection=Connection(**connection), caches=bool(data.get("caches", False)),
        power_model=PowerModel(data["power_model"]["active_mw"], data["power_model"]["source"]),
        cycle_model=CycleModel(data["cycle_model"]["cycles_per_instruction"], data["cycle_model"]["source"]),
        profile=dict(data),
    )
    return board, []


def board_from_profile(data: Mapping[str, Any]) -> Board:  # a parsed YAML, unchecked
    if data.get("kind") != "mcu":
        raise UserError(
            f"device profile {data.get('name')!r} is of kind {data.get('kind')!r}, not an MCU board",
            fix=f"choose one of: {', '.join(mcu_board_names())}",
        )
    board, problems = validate_profile(data)
    if problems:
        path = data.get("_path", data.get("name"))
        raise UserError(
            f"MCU board profile {path} has {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems),
            fix="see devices/README.md for the MCU profile keys",
        )
    assert board is not None
    return board


def load_board(name: str) -> Board:
    """The validated MCU board profile ``devices/<name>.yaml`` (accepts ``qemu:<name>`` too)."""
    if name.startswith("qemu:"):
        name = name[len("qemu:"):]
    if name not in all_profiles():  # a profile of another kind gets "not an MCU board" below
        raise UnknownNameError("MCU board", name, mcu_board_names())
    return board_from_profile(load_profile(name))


def mcu_board_names() -> List[str]:
    return sorted(n for n, p in all_profiles().items() if p.get("kind") == "mcu")


def qemu_board_names() -> List[str]:
    return sorted(n for n, p in all_profiles().items()
                  if p.get("kind") == "mcu" and (p.get("connection") or {}).get("kind") == "qemu")


# ------------------------------------------------------------------ generated files and builds


@dataclass(frozen=True)
class BoardFiles:
    linker_script: Path
    config_header: Path
    sources: Tuple[Path, ...]
    include_dirs: Tuple[Path, ...]


def write_board_files(board: Board, dest: Path, *, copy_sources: bool = False,
                      stack_bytes: Optional[int] = None) -> BoardFiles:
    """Write ``<board>.ld`` and ``ek_board_config.h`` into ``dest`` (and copy the board sources there
    when ``copy_sources``, for a self-contained project). Returns what to compile and include."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ld = dest / f"{board.name}.ld"
    ld.write_text(board.linker_script(stack_bytes))
    header = dest / "ek_board_config.h"
    header.write_text(board.config_header())
    sources = board.sources()
    includes = [dest] + board.include_dirs()
    if copy_sources:
        copied = []
        for src in sources + [BOARDS_DIR / "common" / "ek_board.h"]:
            target = dest / src.name
            shutil.copyfile(src, target)
            copied.append(target)
        sources = [p for p in copied if p.suffix in (".c", ".S")]
        includes = [dest]
    return BoardFiles(ld, header, tuple(sources), tuple(includes))


def gcc_path() -> str:
    path = shutil.which(GCC)
    if not path:
        raise ToolMissingError(GCC, GCC_INSTALL)
    return path


def toolchain_version() -> str:
    out = subprocess.run([gcc_path(), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.splitlines()[0] if out else GCC


# -ffp-contract=off: no fused multiply-add, so the runtime's few float steps round as on the host
COMMON_CFLAGS = ("-O2", "-g", "-std=c99", "-Wall", "-Wextra", "-ffp-contract=off", "-ffunction-sections",
                 "-fdata-sections")
LINK_FLAGS = ("-nostartfiles", "-Wl,--gc-sections", "--specs=nano.specs", "--specs=nosys.specs")


def build_elf(board: Board, sources: Sequence[Path], out_dir: Path, *, name: str = "firmware",
              include_dirs: Sequence[Path] = (), defines: Optional[Mapping[str, str]] = None,
              cflags: Sequence[str] = (), stack_bytes: Optional[int] = None, timeout_s: float = 600.0) -> Path:
    """Compile ``sources`` plus the board support into ``out_dir/<name>.elf`` (with a .map beside it).

    Raises UserError with the compiler's message when compiling or linking fails (e.g. the
    firmware does not fit: the linker names the region and the overflow)."""
    out_dir = Path(out_dir)
    files = write_board_files(board, out_dir / "board", stack_bytes=stack_bytes)
    elf = out_dir / f"{name}.elf"
    cmd = [gcc_path(), *board.gcc_flags(), *COMMON_CFLAGS, *cflags]
    cmd += [f"-I{d}" for d in (*files.include_dirs, *include_dirs)]
    cmd += [f"-D{k}={v}" if v is not None else f"-D{k}" for k, v in (defines or {}).items()]
    cmd += [str(s) for s in (*files.sources, *sources)]
    cmd += [*LINK_FLAGS, f"-Wl,-T,{files.linker_script}", f"-Wl,-Map,{out_dir / (name + '.map')}", "-lm", "-o", str(elf)]
    log.debug("build %s: %s", elf, " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(f"building {elf.name} for {board.name} took longer than {timeout_s:.0f} s",
                        fix="check the sources for runaway constant data; raise timeout_s") from None
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip()
        raise UserError(f"building {elf.name} for {board.name} failed:\n{message[-4000:]}",
                        fix="fix the compiler or linker error above")
    if proc.stderr.strip():
        log.info("compiler warnings for %s:\n%s", elf.name, proc.stderr.strip())
    return elf


SELFTEST_MODES = {"serve": 0, "silent": 1, "garble": 2}
APP_DIR = FIRMWARE_DIR / "app"
PROTOCOL_DIR = FIRMWARE_DIR / "protocol"
RUNTIME_INCLUDE = FIRMWARE_DIR / "runtime" / "include"


def build_selftest(board: Board, out_dir: Path, mode: str = "serve") -> Path:
    """The board/protocol self-test firmware (firmware/app/selftest.c) for ``board``: ``serve`` speaks the
    protocol with a loop of known instruction count, ``silent`` never answers, ``garble`` answers garbage."""
    if mode not in SELFTEST_MODES:
        raise UserError(f"unknown selftest mode {mode!r}; valid: {', '.join(SELFTEST_MODES)}")
    sources = [APP_DIR / "selftest.c", PROTOCOL_DIR / "ek_proto.c"]
    if mode == "serve":
        sources.append(APP_DIR / "ek_serve.c")
    return build_elf(board, sources, Path(out_dir), name=f"selftest-{mode}",
                     include_dirs=[APP_DIR, PROTOCOL_DIR, RUNTIME_INCLUDE],
                     defines={"EK_SELFTEST_MODE": str(SELFTEST_MODES[mode])}, cflags=["-Werror"])
