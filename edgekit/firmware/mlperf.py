"""`edgekit firmware MODEL --harness mlperf-tiny --task kws|ic|vww|ad`: firmware that is an MLPerf Tiny device under test.

The app (firmware/app/mlperf_harness.c) speaks the EEMBC ULPMark-ML / MLPerf Tiny runner protocol over the board
UART and runs the model on edgekit's runtime. It goes through the same generation path as the normal firmware
(edgekit.firmware.generate: same runtime sources, model array, memory plan and fit checks); only the application
and a board timestamp hook differ. What each task expects on the wire follows the MLPerf Tiny reference
submissions (see the C file's header).

Timestamps: `m-lap-us-N` from a microsecond timer (performance mode) or a pulse on the board's timestamp pin
(energy mode, for the EEMBC interface board). Which timer and pin a board has comes from its profile:

    mlperf:
      timer: cmsdk            # cmsdk (CMSDK APB timer: MPS2 images / QEMU, "emulated time") | dwt (real cores)
      timer_base: 0x40000000  # cmsdk only
      timer_clock_hz: 25000000
      timestamp_pin: PF13     # energy mode (STM32 boards): the pin wired to the interface board (open-drain)
      energy_uart:            # energy mode: the UART wired to the EEMBC IO manager (default: the board UART)
        {driver: stm32_usart, instance: USART3, base: 0x40004800, clock_hz: 120000000, tx_pin: PD8, rx_pin: PD9}

`edgekit firmware --harness` also prints the runner's performance N for the board and writes it as
tests_performance.yaml (edgekit/firmware/mlperf_perf.py).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple, Union

from edgekit.console import say
from edgekit.errors import UserError
from edgekit.firmware.generate import AppSpec, FIRMWARE_DIR, FirmwareResult
from edgekit.firmware.mlperf_perf import PerformanceN
from edgekit.firmware.plan_types import HarnessApp, TimestampSource

HARNESS = "mlperf-tiny"
MODES = ("performance", "energy")
FW_VERSION = "ULPMark for tinyML Firmware V0.0.1"  # EE_FW_VERSION of MLPerf Tiny api/internally_implemented.h
ENERGY_BAUD = 9600  # th_serialport_initialize of the reference submissions in energy mode (the IO manager's rate)
STM32_PIN = re.compile(r"^P([A-K])(\d{1,2})$")
# GPIO ports and their clock enable, per STM32 SoC (reference manuals: RM0432 for STM32L4+)
STM32_GPIO = {"stm32l4r5": {"base": 0x48000000, "stride": 0x400, "rcc_enr": 0x4002104C}}


@dataclass(frozen=True)
class Task:
    """One MLPerf Tiny benchmark as its reference submission takes and reports it."""

    name: str          # kws | ic | vww | ad
    model_id: str      # the runner's model id (tests.yaml key, dataset folder, m-model-[...])
    code: int          # EK_MLPERF_TASK in the C app
    input_format: str  # what the runner sends
    results: str       # what m-results-[...] holds

    input_elements: int = 0   # what the runner's dataset files hold per sample (the reference model's input)
    outputs: int = 0          # class scores (ad: the reconstructed input)
    input_shape: str = ""

    def db_bytes(self, input_elements: int) -> int:
        return input_elements * 4 if self.name == "ad" else input_elements


TASKS = {
    "kws": Task("kws", "kws01", 1, "int8 features as the model takes them (49x10 MFCC)", "12 class scores",
                490, 12, "49x10x1 MFCC"),
    "ic": Task("ic", "ic01", 2, "uint8 RGB pixels (HWC); the device subtracts 128", "10 class scores",
               3072, 10, "32x32x3 RGB"),
    "vww": Task("vww", "vww01", 3, "uint8 RGB pixels (HWC); the device subtracts 128", "2 class scores",
                27648, 2, "96x96x3 RGB"),
    "ad": Task("ad", "ad01", 4, "float32 little-endian spectrogram slices; the device quantizes them with the "
                                "input scale/zero point", "reconstruction error (mean squared error)",
               640, 640, "5 frames x 128 mels"),
}


def task_model_problems(task: Task, input_elements: int, output_elements: int) -> List[str]:
    """Why a model with these input/output sizes cannot be ``task``'s device under test ([] when it can): the
    runner's dataset files and scoring are fixed per task, so a KWS model built as ic01 would get the wrong bytes."""
    if (input_elements, output_elements) == (task.input_elements, task.outputs):
        return []
    fits = [t.name for t in TASKS.values() if (t.input_elements, t.outputs) == (input_elements, output_elements)]
    hint = f"; it matches --task {fits[0]}" if fits else ""
    return [f"{task.name}: the {task.model_id} benchmark sends {task.input_elements} input values per sample "
            f"({task.input_shape}) and scores {task.outputs} outputs; this model takes {input_elements} and gives "
            f"{output_elements}{hint}"]


def task_named(name: str) -> Task:
    if name not in TASKS:
        raise UserError(f"unknown MLPerf Tiny task {name!r}", fix=f"use --task {'|'.join(TASKS)}")
    return TASKS[name]


# ------------------------------------------------------------------ board timestamp hooks


def _hz_text(hz: int) -> str:
    return f"{hz / 1e6:g} MHz" if hz >= 1000000 else f"{hz / 1e3:g} kHz"


def _timestamp_config(board, mode: str) -> Tuple[List[Tuple[Path, str]], List[Tuple[str, str]], TimestampSource]:
    """(files to add, ek_config.h defines, description) of the board's timer and, in energy mode, its pin."""
    spec = dict(board.profile.get("mlperf") or {})
    boards_dir = FIRMWARE_DIR / "boards"
    files = [(boards_dir / "common" / "ek_timestamp.h", "board/ek_timestamp.h")]
    config: List[Tuple[str, str]] = []
    timer = spec.get("timer") or ("dwt" if not board.is_qemu else None)
    if timer == "cmsdk":
        base, clock = spec.get("timer_base"), spec.get("timer_clock_hz")
        if not isinstance(base, int) or not isinstance(clock, int) or clock <= 0:
            raise UserError(f"devices/{board.name}.yaml: mlperf.timer cmsdk needs timer_base and timer_clock_hz "
                            "(a positive number of Hz)", fix="add them to the profile's mlperf section")
        files.append((boards_dir / "timestamp" / "ts_cmsdk_timer.c", "board/ts_cmsdk_timer.c"))
        config += [("EK_TS_TIMER_BASE", f"0x{base:08X}u"), ("EK_TS_TIMER_CLOCK_HZ", f"{clock}u"),
                   ("EK_TS_TIMER_CLOCK_TEXT", f'"{_hz_text(clock)}"')]
        source = (f"CMSDK APB timer at 0x{base:08X} ({_hz_text(clock)}" + (f", {1e6 / clock:.2f} us per tick" if clock < 1000000 else "") + ")"
                  + ("; under QEMU it counts emulated time (QEMU's virtual clock, host time while the guest runs)"
                     if board.is_qemu else ""))
    elif timer == "dwt":
        if board.is_qemu:
            raise UserError(f"{board.name}: QEMU does not model the DWT cycle counter, so it cannot time the harness",
                            fix=f"declare a CMSDK timer in devices/{board.name}.yaml (mlperf.timer: cmsdk)")
        files.append((boards_dir / "timestamp" / "ts_dwt.c", "board/ts_dwt.c"))
        source = f"DWT cycle counter / core clock ({board.firmware_clock_hz / 1e6:g} MHz)"
    else:
        raise UserError(f"board {board.name} declares no microsecond timer for the MLPerf Tiny harness",
                        fix=f"add mlperf.timer (cmsdk with timer_base/timer_clock_hz, or dwt) to devices/{board.name}.yaml")
    described: TimestampSource = {"timer": timer, "timer_source": source}
    if mode == "energy":
        pin = spec.get("timestamp_pin")
        if not pin:
            raise UserError(f"board {board.name} names no timestamp pin for energy mode",
                            fix=f"add mlperf.timestamp_pin (e.g. PF13) to devices/{board.name}.yaml, "
                                "or build --harness-mode performance")
        match = STM32_PIN.match(str(pin))
        gpio = STM32_GPIO.get(board.soc)
        if not match or gpio is None:
            raise UserError(f"{board.name}: no timestamp GPIO driver for pin {pin!r} on soc {board.soc}",
                            fix=f"supported: STM32 pins like PF13 on {', '.join(STM32_GPIO)}")
        port, number = ord(match.group(1)) - ord("A"), int(match.group(2))
        if number > 15:
            raise UserError(f"{board.name}: pin {pin} does not exist (pins are 0..15)")
        files.append((boards_dir / "timestamp" / "ts_gpio_stm32.c", "board/ts_gpio_stm32.c"))
        config += [("EK_TS_GPIO_BASE", f"0x{gpio['base'] + port * gpio['stride']:08X}u"),
                   ("EK_TS_GPIO_PIN", f"{number}u"), ("EK_TS_GPIO_RCC_ENR", f"0x{gpio['rcc_enr']:08X}u"),
                   ("EK_TS_GPIO_RCC_BIT", f"{port}u")]
        described["timestamp_pin"] = str(pin)
        described["timestamp_pin_source"] = spec.get("timestamp_pin_source", "")
    return files, config, described


# ------------------------------------------------------------------ the app


def energy_uart(board) -> "UartConfig":
    """The UART of energy mode: the profile's mlperf.energy_uart (where the EEMBC IO manager is wired, e.g. the
    Arduino D0/D1 USART on a Nucleo) at the reference's 9600 baud, else the board UART at 9600 baud."""
    from edgekit.firmware.boards import UART_DRIVERS, UartConfig

    spec = (board.profile.get("mlperf") or {}).get("energy_uart")
    if not spec:
        return dataclasses.replace(board.uart, baud=ENERGY_BAUD)
    problems = [f"{key} must be a positive integer" for key in ("base", "clock_hz")
                if not isinstance(spec.get(key), int) or spec[key] <= 0]
    if spec.get("driver") not in UART_DRIVERS:
        problems.append(f"driver {spec.get('driver')!r} must be one of {', '.join(UART_DRIVERS)}")
    if problems:
        raise UserError(f"devices/{board.name}.yaml mlperf.energy_uart: " + "; ".join(problems),
                        fix="give driver, base, clock_hz (and tx_pin/rx_pin) of the UART wired to the IO manager")
    return UartConfig(driver=spec["driver"], base=spec["base"], baud=ENERGY_BAUD, clock_hz=spec["clock_hz"],
                      instance=str(spec.get("instance", "")), tx_pin=str(spec.get("tx_pin", "")),
                      rx_pin=str(spec.get("rx_pin", "")))


def harness_app(graph, board, task: Task, mode: str = "performance") -> AppSpec:
    """The AppSpec of the harness for ``graph`` on ``board`` (every problem with the model reported at once)."""
    if mode not in MODES:
        raise UserError(f"unknown harness mode {mode!r}", fix=f"use --harness-mode {'|'.join(MODES)}")
    problems = []
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        problems.append(f"the harness needs one input and one output tensor (the model has {len(graph.inputs)} "
                        f"and {len(graph.outputs)})")
    else:
        tin, tout = graph.tensors[graph.inputs[0]], graph.tensors[graph.outputs[0]]
        if tin.type != "INT8" or tout.type != "INT8":
            problems.append(f"input and output must be int8 (they are {tin.type} and {tout.type}): "
                            "quantize with int8 input/output")
        problems += task_model_problems(task, tin.bytes, tout.bytes)
    if problems:
        raise UserError(f"the model cannot be the {task.model_id} device under test:\n"
                        + "\n".join(f"  - {p}" for p in problems), fix="pass the MLPerf Tiny model of the task")
    tin = graph.tensors[graph.inputs[0]]
    db_bytes = task.db_bytes(tin.bytes)
    files, config, timestamps = _timestamp_config(board, mode)
    files = [(FIRMWARE_DIR / "app" / "mlperf_harness.c", "app/mlperf_harness.c")] + files
    config = [("EK_MLPERF_TASK", str(task.code)), ("EK_MLPERF_MODEL_VERSION", f'"{task.model_id}"'),
              ("EK_MLPERF_DB_BYTES", f"{db_bytes}u"), ("EK_MLPERF_ENERGY_MODE", "1" if mode == "energy" else "0")] + config
    built_board = board
    if mode == "energy":
        built_board = dataclasses.replace(board, uart=energy_uart(board))
    info: HarnessApp = {"harness": HARNESS, "task": task.name, "model_id": task.model_id, "mode": mode,
            "firmware_version": FW_VERSION, "input_format": task.input_format, "input_bytes": db_bytes,
            "results": task.results, "uart_baud": built_board.uart.baud, **timestamps,
            "protocol": "EEMBC ULPMark-ML / MLPerf Tiny runner: commands end with '%', every answer ends with m-ready"}
    return AppSpec(name=HARNESS, files=tuple(files), config=tuple(config), boot_check=False, info=info,
                   board=built_board)


@dataclass
class HarnessFirmwareResult(FirmwareResult):
    """The generated firmware and the runner's performance N for it (also written as tests_performance.yaml)."""

    performance: Optional["PerformanceN"] = None


def generate_harness_firmware(model: Union[Path, str, bytes], board_name: str, outdir: Optional[Path] = None, *,
                              task: str, mode: str = "performance", build: bool = False,
                              cycles_from: Optional[Path] = None) -> FirmwareResult:
    """Generate (and optionally build) the MLPerf Tiny harness firmware for ``model`` on ``board_name``."""
    from edgekit.firmware.boards import load_board
    from edgekit.firmware.generate import generate_firmware, load_model_bytes
    from edgekit.tflite_graph import read_graph

    spec = task_named(task)
    data, source = load_model_bytes(model) if not isinstance(model, (bytes, bytearray)) else (bytes(model), "<bytes>")
    board = load_board(board_name)
    if board.profile.get("npu"):
        raise UserError(f"{board.name} is an NPU board; the MLPerf Tiny harness runs on edgekit's CPU runtime",
                        fix="choose a Cortex-M board (edgekit devices)")
    app = harness_app(read_graph(data, source), board, spec, mode)
    if outdir is None:
        stem = Path(source).stem if source != "<bytes>" else "model"
        outdir = Path("out") / "firmware" / f"{stem}-{board.name}-{HARNESS}-{spec.name}"
    from edgekit.firmware.mlperf_perf import cycles_from_file, performance_n, performance_yaml

    cycles = cycles_from_file(cycles_from) if cycles_from else None  # read first: a bad file leaves no output
    result = generate_firmware(data, board.name, outdir, build=build, source=source, app=app)
    perf = performance_n(spec.model_id, board, int(result.info.macs or 0), cycles=cycles,
                         cycles_source=f"per-class cycle estimate from {cycles_from}")
    (Path(result.outdir) / "tests_performance.yaml").write_text(performance_yaml(perf))
    return HarnessFirmwareResult(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)},
                                 performance=perf)



def harness_command(args) -> int:
    """`edgekit firmware MODEL --harness mlperf-tiny --task TASK [--harness-mode M] [--board B] [-o DIR] [--build]`."""
    problems = []
    if args.harness != HARNESS:
        problems.append("--task needs --harness mlperf-tiny")
    if not args.task:
        problems.append("--harness mlperf-tiny needs --task kws|ic|vww|ad")
    if args.runtime != "edgekit":
        problems.append("the MLPerf Tiny harness runs on edgekit's runtime (leave out --runtime)")
    if problems:
        raise UserError("; ".join(problems))
    result = generate_harness_firmware(args.model, args.board, args.outdir, task=args.task, mode=args.harness_mode,
                                       build=args.build, cycles_from=getattr(args, "cycles_from", None))
    app, fits = result.info.app or {}, result.info.fits
    say(f"wrote {result.outdir} (MLPerf Tiny {app['model_id']} device under test, {app['mode']} mode, "
          f"board {result.info.board.board}, UART {app['uart_baud']} baud)")
    if app["mode"] == "energy":
        from edgekit.firmware.boards import load_board

        uart = energy_uart(load_board(args.board))
        say(f"energy mode UART: {uart.instance or hex(uart.base)} TX {uart.tx_pin or '?'} / RX {uart.rx_pin or '?'} at "
            f"{uart.baud} baud (wire it to the EEMBC IO manager)")
    say(f"input on the wire: {app['input_bytes']} bytes, {app['input_format']}; results: {app['results']}")
    say(f"timestamps: {app.get('timestamp_pin') and 'pulse on ' + app['timestamp_pin'] or app['timer_source']}")
    for key, f in (("flash", fits.flash), ("ram", fits.ram)):
        say(f"{key}: {f.used:,} of {f.available:,} bytes ({'fits' if f.fits else 'DOES NOT FIT'})")
    from edgekit.firmware.mlperf_perf import describe

    say(describe(result.performance))
    say(f"wrote {Path(result.outdir) / 'tests_performance.yaml'} (the runner's performance test file with this N)")
    if result.elf is not None:
        say(f"built {result.elf}")
    return 0
