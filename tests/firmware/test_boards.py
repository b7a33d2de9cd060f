"""MCU board profiles (devices/*.yaml, kind: mcu): validation, generated linker script and config header,
firmware for the real boards compiled and linked (their hardware tests skip without a probe), pyocd flashing."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from edgekit._resources import data_dir
from edgekit.errors import DeviceNotFoundError, ToolMissingError, UnknownNameError, UserError
from edgekit.firmware import boards as B
from edgekit.firmware import flash as F

REAL_BOARDS = ["nucleo-l4r5zi", "nucleo-h7a3zi-q", "nrf52840-dk"]
QEMU_BOARDS = ["mps2-an386", "mps2-an500", "mps2-an505", "mps3-an547"]
needs_gcc = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"),
                               reason="arm-none-eabi-gcc is needed (apt-get install gcc-arm-none-eabi "
                                      "libnewlib-arm-none-eabi)")


def test_every_mcu_profile_validates():
    assert set(B.mcu_board_names()) >= set(REAL_BOARDS + QEMU_BOARDS)
    assert set(B.qemu_board_names()) >= set(QEMU_BOARDS)
    for name in B.mcu_board_names():
        board = B.load_board(name)
        assert board.flash.bytes > 0 and board.ram.bytes > board.stack_bytes
        assert board.power_model.source and board.cycle_model.source
        assert board.summary().core == board.core
    an547 = B.load_board("qemu:mps3-an547")
    assert an547.qemu_machine == "mps3-an547" and an547.gcc_flags()[-1] == "-mfpu=auto"
    assert [r.name for r in an547.extra_regions] == ["sram", "isram"]
    l4 = B.load_board("nucleo-l4r5zi")
    assert not l4.is_qemu and l4.pyocd_target == "stm32l4r5zitx" and l4.config_macros()["EK_UART_LPUART"] == "1"
    nrf = B.load_board("nrf52840-dk")
    assert nrf.config_macros()["EK_UART_TX_PIN"] == "6u" and B.nrf_psel("P1.15") == 47


def _write_profile(folder: Path, name: str, **changes) -> None:
    data = yaml.safe_load((data_dir("devices") / "mps2-an386.yaml").read_text())
    data["name"] = name
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(data))


def test_a_broken_profile_lists_every_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(tmp_path))
    _write_profile(tmp_path, "broken", float_abi="medium", soc="vax",
                   memory={"flash": {"origin": 0, "bytes": 0x1000}, "ram": {"origin": 0x800, "bytes": 0x1000}},
                   uart={"driver": "usb", "base": 1, "baud": 115200, "clock_hz": 1},
                   power_model={"active_mw": 5}, cycle_model=None, stack_bytes=1 << 20)
    with pytest.raises(UserError) as exc:
        B.load_board("broken")
    text = str(exc.value)
    for fragment in ("float_abi 'medium'", "soc 'vax' has no firmware/boards/soc/vax.c", "flash and ram overlap",
                     "stack_bytes does not fit", "uart.driver 'usb'", "power_model.source",
                     "cycle_model.cycles_per_instruction"):
        assert fragment in text, fragment
    assert "devices/README.md" in text


def test_non_mcu_and_unknown_profiles_are_refused():
    with pytest.raises(UserError, match="not an MCU board"):
        B.load_board("host")
    with pytest.raises(UnknownNameError, match="mps2-an386"):
        B.load_board("mps9-an999")


def test_linker_script_and_config_header(tmp_path):
    board = B.load_board("nucleo-h7a3zi-q")
    files = B.write_board_files(board, tmp_path, stack_bytes=4096)
    script = files.linker_script.read_text()
    assert "FLASH (rx) : ORIGIN = 0x08000000, LENGTH = 0x200000" in script
    assert "RAM (rwx) : ORIGIN = 0x24000000, LENGTH = 0x100000" in script
    assert "DTCM (rw) : ORIGIN = 0x20000000, LENGTH = 0x20000" in script and "} > DTCM" in script
    assert "EK_STACK_BYTES : 4096" in script
    header = files.config_header.read_text()
    assert '#define EK_BOARD_NAME "nucleo-h7a3zi-q"' in header and "#define EK_ENABLE_CACHES 1" in header
    assert "#define EK_UART_BASE 0x40004800u" in header and "#define EK_SEMIHOSTING 0" in header


def _elf_layout(elf: Path):
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as handle:
        f = ELFFile(handle)
        sections = {s.name: (s["sh_addr"], s["sh_size"]) for s in f.iter_sections() if s["sh_flags"] & 2}  # SHF_ALLOC
        symbols = {s.name: s["st_value"] for s in f.get_section_by_name(".symtab").iter_symbols()}
        vectors = f.get_section_by_name(".vectors").data()
    return sections, symbols, vectors


@needs_gcc
@pytest.mark.parametrize("name", REAL_BOARDS + ["mps3-an547"])
def test_firmware_links_for_the_board(tmp_path, name):
    board = B.load_board(name)
    elf = B.build_selftest(board, tmp_path, "serve")  # -Werror: board sources compile warning-free
    sections, symbols, vectors = _elf_layout(elf)
    initial_sp = int.from_bytes(vectors[0:4], "little")
    reset = int.from_bytes(vectors[4:8], "little")
    assert sections[".vectors"][0] == board.flash.origin
    assert initial_sp == symbols["__stack_top__"] and board.ram.origin < initial_sp <= board.ram.end
    assert symbols["__stack_limit__"] == board.ram.origin  # stack first: an overflow leaves RAM and faults
    assert reset & 1 and board.flash.origin <= reset < board.flash.end and reset == symbols["Reset_Handler"]  # Thumb bit set
    assert board.ram.origin <= sections[".bss"][0] < board.ram.end
    driver = B.UART_DRIVERS[board.uart.driver][0]
    assert {"ek_uart_init", "ek_uart_write", "ek_uart_read", "ek_soc_init", "ek_fault_trap"} <= set(symbols), driver


@needs_gcc
def test_a_firmware_that_does_not_fit_names_the_region(tmp_path):
    board = B.load_board("nrf52840-dk")
    with pytest.raises(UserError) as exc:
        B.build_elf(board, [B.APP_DIR / "selftest.c", B.PROTOCOL_DIR / "ek_proto.c", B.APP_DIR / "ek_serve.c"],
                    tmp_path, include_dirs=[B.APP_DIR, B.PROTOCOL_DIR, B.RUNTIME_INCLUDE], stack_bytes=300_000)
    assert "region `RAM' overflowed by" in str(exc.value)


@needs_gcc
def test_copied_board_files_build_without_the_repository(tmp_path):
    """A generated project copies the board support next to its sources and builds on its own."""
    board = B.load_board("nucleo-l4r5zi")
    project = tmp_path / "project"
    files = B.write_board_files(board, project, copy_sources=True)
    for src in (B.APP_DIR / "selftest.c", B.APP_DIR / "ek_serve.c", B.APP_DIR / "ek_serve.h",
                B.PROTOCOL_DIR / "ek_proto.c", B.PROTOCOL_DIR / "ek_proto.h", B.RUNTIME_INCLUDE / "ek_kernels.h"):
        shutil.copy(src, project / src.name)
    sources = [*files.sources, *(project / n for n in ("selftest.c", "ek_serve.c", "ek_proto.c"))]
    assert all(Path(s).parent == project for s in sources)
    cmd = [B.gcc_path(), *board.gcc_flags(), *B.COMMON_CFLAGS, "-Werror", f"-I{project}", *map(str, sources),
           *B.LINK_FLAGS, f"-Wl,-T,{files.linker_script}", "-lm", "-o", str(project / "fw.elf")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_missing_cross_compiler_names_the_install_step(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolMissingError, match="apt-get install gcc-arm-none-eabi"):
        B.gcc_path()


# ------------------------------------------------------------------ flashing (pyocd)


def test_flashing_needs_a_probe_and_a_real_board(tmp_path):
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    with pytest.raises(UserError, match="emulated board"):
        F.flash_firmware(B.load_board("mps2-an386"), elf)
    probes = F.list_probes()  # real pyocd call, in a subprocess with a timeout
    if probes:
        pytest.skip(f"a debug probe is attached ({probes[0].description}): the no-probe error cannot be shown")
    with pytest.raises(DeviceNotFoundError) as exc:
        F.flash_firmware(B.load_board("nucleo-l4r5zi"), elf)
    assert "no debug probe is attached" in str(exc.value) and "ST-LINK" in str(exc.value)


def test_probe_choice():
    board = B.load_board("nrf52840-dk")
    a, b = F.Probe("A1", "J-Link OB"), F.Probe("B2", "ST-LINK")
    assert F.choose_probe([a], board, None) == a and F.choose_probe([a, b], board, "B2") == b
    with pytest.raises(DeviceNotFoundError, match="2 probes are attached"):
        F.choose_probe([a, b], board, None)
    with pytest.raises(DeviceNotFoundError, match="no attached probe has unique id 'C3'"):
        F.choose_probe([a, b], board, "C3")


@needs_gcc
def test_flash_and_talk_to_a_real_board(tmp_path):
    """Hardware test: set EDGEKIT_HW_BOARD=<profile> with that board's probe attached."""
    name = os.environ.get("EDGEKIT_HW_BOARD")
    if not name:
        pytest.skip("no real board here: set EDGEKIT_HW_BOARD to a profile name (e.g. nucleo-l4r5zi) "
                    "with the board attached to run this hardware test")
    if not F.list_probes():
        pytest.skip(f"EDGEKIT_HW_BOARD={name} but no debug probe is attached")
    import numpy as np

    from edgekit.firmware.transport import connect_serial

    board = B.load_board(name)
    result = F.flash_firmware(board, B.build_selftest(board, tmp_path))
    assert result.serial_port, "the probe's virtual COM port was not found"
    client = connect_serial(result.serial_port, board.uart.baud)
    try:
        assert client.info.board == name and client.info.cycles_available
        x = np.zeros((1, 16), np.int8)
        x[0, 0], x[0, 4] = 100, 2
        reply = client.infer([x])
        assert (reply.outputs[0] == (x ^ np.int8(0x5A))).all()
        assert reply.cycles is not None and reply.cycles > 2 * 100 * 3  # DWT counted at least the loop
        assert client.echo(b"hardware") == b"hardware"
    finally:
        client.transport.close()
