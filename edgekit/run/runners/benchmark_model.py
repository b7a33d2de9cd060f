"""LiteRT's ``benchmark_model`` binary on an Android device: which ABI a binary is built for, its command line,
and its output parsed into run.json figures.

Output format (TensorFlow ``tensorflow/lite/tools/benchmark/benchmark_model.cc``, BenchmarkLoggingListener and
``BenchmarkModel::Run``; ``Stat::OutputToStream`` for the ``count=`` lines), e.g.::

    INFO: Initialized session in 119.515ms.
    INFO: count=9 first=87112 curr=51629 min=51629 max=87112 avg=58147.4 std=11478 p5=51629 median=51962 p95=87112
    INFO: count=1000 first=52162 curr=49785 min=49088 max=686105 avg=63743.2 std=60716 p5=49620 median=51891 p95=68628
    INFO: Inference timings in us: Init: 119515, First inference: 87112, Warmup (avg): 58147.4, Inference (avg): 63743.2
    INFO: Memory footprint delta from the start of the tool (MB): init=55.4961 overall=55.4961
    INFO: Overall peak memory footprint (MB) via periodic monitoring: 93.2383

The first ``count=`` line is the warm-up, the second the timed runs (times in microseconds). Older builds print
"Peak memory footprint (MB): init=... overall=..." instead of the delta line; percentiles appear only in newer
builds. Delegates announce themselves with "Replacing N out of M node(s) with delegate (NAME) node, yielding K
partitions".
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Union

from edgekit.errors import UserError
from edgekit.results import Section

# --- the binary --------------------------------------------------------------------------------------
# ELF e_machine -> Android ABI name (https://developer.android.com/ndk/guides/abis)
ELF_MACHINES = {183: ("arm64-v8a", 64), 40: ("armeabi-v7a", 32), 62: ("x86_64", 64), 3: ("x86", 32)}
ANDROID_LINKERS = ("/system/bin/linker64", "/system/bin/linker", "/apex/com.android.runtime/bin/linker64",
                   "/apex/com.android.runtime/bin/linker")
PT_INTERP = 3


@dataclass(frozen=True)
class BinaryInfo:
    abi: str
    bits: int
    interpreter: Optional[str]  # PT_INTERP (None: statically linked)

    @property
    def runs_on_android(self) -> bool:
        return self.interpreter is None or self.interpreter in ANDROID_LINKERS


def read_elf(path: Path) -> BinaryInfo:
    """The ABI (from e_machine and the ELF class) and the program interpreter of an executable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"--benchmark-binary {path}: cannot read it ({exc.strerror})",
                        fix="pass the benchmark_model executable built for the phone (e.g. android_aarch64_benchmark_model)") from exc
    fix = "pass LiteRT's benchmark_model built for Android (e.g. android_aarch64_benchmark_model for arm64-v8a phones)"
    if data[:4] != b"\x7fELF" or len(data) < 52:
        raise UserError(f"--benchmark-binary {path.name} is not an ELF executable", fix=fix)
    elf_class, endian = data[4], data[5]
    if endian != 1:
        raise UserError(f"--benchmark-binary {path.name} is big-endian; Android ABIs are little-endian", fix=fix)
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine not in ELF_MACHINES:
        raise UserError(f"--benchmark-binary {path.name} is built for ELF machine {machine}, not an Android ABI "
                        f"({', '.join(a for a, _ in ELF_MACHINES.values())})", fix=fix)
    abi, bits = ELF_MACHINES[machine]
    if (elf_class == 2) != (bits == 64):
        raise UserError(f"--benchmark-binary {path.name}: ELF class {elf_class} does not match machine {abi}", fix=fix)
    return BinaryInfo(abi, bits, _interpreter(data, bits == 64))


def _interpreter(data: bytes, is64: bool) -> Optional[str]:
    if is64:
        phoff, = struct.unpack_from("<Q", data, 32)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
    else:
        phoff, = struct.unpack_from("<I", data, 28)
        phentsize, phnum = struct.unpack_from("<HH", data, 42)
    for i in range(phnum):
        base = phoff + i * phentsize
        if base + phentsize > len(data):
            break
        p_type, = struct.unpack_from("<I", data, base)
        if p_type != PT_INTERP:
            continue
        if is64:
            offset, = struct.unpack_from("<Q", data, base + 8)
            size, = struct.unpack_from("<Q", data, base + 32)
        else:
            offset, = struct.unpack_from("<I", data, base + 4)
            size, = struct.unpack_from("<I", data, base + 16)
        return data[offset:offset + size].split(b"\0", 1)[0].decode("ascii", "replace")
    return None


def check_binary_for_device(info: BinaryInfo, device_abis: List[str], name: str) -> None:
    """Refuse a binary the phone cannot run: another ABI, or a Linux (glibc) build."""
    problems = []
    if info.abi not in device_abis:
        problems.append(f"it is built for {info.abi}, the device runs {', '.join(device_abis) or 'an unknown ABI'}")
    if not info.runs_on_android:
        problems.append(f"it needs the program interpreter {info.interpreter} (a desktop Linux build), "
                        "Android has /system/bin/linker64")
    if problems:
        wanted = device_abis[0] if device_abis else "the device's ABI"
        raise UserError(f"--benchmark-binary {name} cannot run on this device: " + "; ".join(problems),
                        fix=f"use the Android build of benchmark_model for {wanted} "
                            f"(e.g. android_{'aarch64' if wanted == 'arm64-v8a' else 'arm'}_benchmark_model)")


# --- the command line ----------------------------------------------------------------------------------
DELEGATES = {
    "xnnpack": ["--use_xnnpack=true"],
    "gpu": ["--use_gpu=true"],
    "nnapi": ["--use_nnapi=true"],
    "cpu": ["--use_xnnpack=false"],  # LiteRT's built-in CPU kernels, no delegate
}


def benchmark_arguments(binary: str, model: str, *, delegate: str, num_runs: int, warmup_runs: int,
                        threads: int) -> List[str]:
    """The benchmark_model argv (documented flags of the tool's README)."""
    if delegate not in DELEGATES:
        raise UserError(f"--delegate {delegate!r} is not one of {', '.join(DELEGATES)}")
    return [binary, f"--graph={model}", f"--num_runs={num_runs}", f"--warmup_runs={warmup_runs}",
            f"--num_threads={threads}", "--report_peak_memory_footprint=true", *DELEGATES[delegate]]


# --- the output ----------------------------------------------------------------------------------------
_STAT = re.compile(r"count=(?P<count>\d+)(?P<rest>(?:\s+\w+=[-\d.eE+]+)*)")
_TIMINGS = re.compile(r"Inference timings in us: Init: (?P<init>[\d.eE+]+), First inference: (?P<first>[\d.eE+]+), "
                      r"Warmup \(avg\): (?P<warmup>[\d.eE+-]+|nan), Inference \(avg\): (?P<avg>[\d.eE+-]+|nan)")
_DELTA = re.compile(r"(?:Memory footprint delta from the start of the tool|Peak memory footprint) \(MB\): "
                    r"init=(?P<init>[\d.eE+-]+) overall=(?P<overall>[\d.eE+-]+)")
_PEAK = re.compile(r"Overall peak memory footprint \(MB\) via periodic monitoring: (?P<peak>[\d.eE+-]+)")
_REPLACING = re.compile(r"Replacing (?P<n>\d+)(?: out of (?P<total>\d+))? node\(s\) with delegate \((?P<name>\w+)\) node, "
                        r"yielding (?P<parts>\d+) partitions")
_ERROR = re.compile(r"^(?:ERROR|E\s):\s*(.*)$", re.M)


def _stat(line_rest: str, count: int) -> Dict[str, float]:
    """One statistics line: count and every ``name=value`` it prints (first, curr, min, max, avg, std, p5, median...)."""
    out: Dict[str, float] = {"count": count}
    for key, value in re.findall(r"(\w+)=([-\d.eE+]+)", line_rest):
        out[key] = float(value)
    return out


class ToolMemory(Section):
    init_delta: Optional[float]      # MB
    overall_delta: Optional[float]
    peak: Optional[float]
    note: str


class DelegateUse(Section):
    name: str
    nodes: int
    of_nodes: Optional[int]
    partitions: int


class BenchmarkFigures(Section):
    """What benchmark_model printed, in milliseconds and MiB; ``warmup``/``inference``: the tool's statistics lines
    (count, and the figures that build prints: min, max, avg, std, p5, p50, p95...)."""

    init_ms: float
    first_inference_ms: float
    warmup_avg_ms: float
    inference_avg_ms: float
    warmup: Optional[Dict[str, Union[int, float]]]     # count is an int
    inference: Optional[Dict[str, Union[int, float]]]
    memory_mb: ToolMemory
    delegates: List[DelegateUse]
    gpu_delegate_created: bool
    nnapi_delegate_created: bool
    xnnpack_delegate_created: bool

    def runs(self) -> int:
        """Warm-up plus timed inferences the tool ran."""
        return int((self.inference or {}).get("count", 0) + (self.warmup or {}).get("count", 0))


def parse_benchmark_output(text: str) -> BenchmarkFigures:
    """benchmark_model's stdout+stderr -> figures in milliseconds / MiB, with the delegates it applied.

    Raises UserError naming the tool's own error lines when the final timing line is missing."""
    timings = _TIMINGS.search(text)
    if not timings:
        errors = [e.strip() for e in _ERROR.findall(text)]
        raise UserError("benchmark_model did not report its timings"
                        + (": " + " | ".join(errors[-3:]) if errors else " (no 'Inference timings in us' line)"),
                        fix="run it by hand with the same flags (adb shell) to see why; a delegate the phone lacks fails here")
    stats = [_stat(m.group("rest"), int(m.group("count"))) for m in _STAT.finditer(text) if "first=" in m.group("rest")]
    us_to_ms = 1e-3

    def in_ms(stat: Optional[Dict[str, float]]) -> Optional[Dict[str, float]]:
        if stat is None:
            return None
        return {("p50" if k == "median" else k): (v * us_to_ms if k != "count" else v) for k, v in stat.items()}

    warmup, regular = (stats[-2], stats[-1]) if len(stats) >= 2 else (None, stats[-1] if stats else None)
    delta, peak = _DELTA.search(text), _PEAK.search(text)
    delegates = [DelegateUse(name=m.group("name"), nodes=int(m.group("n")),
                             of_nodes=int(m.group("total")) if m.group("total") else None, partitions=int(m.group("parts")))
                 for m in _REPLACING.finditer(text)]
    return BenchmarkFigures(
        init_ms=float(timings.group("init")) * us_to_ms,
        first_inference_ms=float(timings.group("first")) * us_to_ms,
        warmup_avg_ms=float(timings.group("warmup")) * us_to_ms,
        inference_avg_ms=float(timings.group("avg")) * us_to_ms,
        warmup=in_ms(warmup),
        inference=in_ms(regular),
        memory_mb=ToolMemory(
            init_delta=float(delta.group("init")) if delta else None,
            overall_delta=float(delta.group("overall")) if delta else None,
            peak=float(peak.group("peak")) if peak else None,
            note="benchmark_model's own figures (max RSS of the tool process); the tool says they are approximate",
        ),
        delegates=delegates,
        gpu_delegate_created="Created TensorFlow Lite delegate for GPU" in text,
        nnapi_delegate_created="Created TensorFlow Lite delegate for NNAPI" in text,
        xnnpack_delegate_created="Created TensorFlow Lite XNNPACK delegate for CPU" in text,
    )
