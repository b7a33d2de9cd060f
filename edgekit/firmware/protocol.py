"""Host side of the edgekit UART protocol (firmware/protocol/PROTOCOL.md): frame codec, message
payloads, and ``DeviceClient``, which talks to a device over any ``Transport`` with a timeout on
every exchange. A silent, hung, faulting or garbling device raises ``DeviceError`` saying what was
received so far; nothing here waits forever.
"""
from __future__ import annotations

import enum
import logging
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.errors import DeviceError, UserError

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
SYNC = b"\xEB\x90"
HEADER_BYTES = 9
TRAILER_BYTES = 4
MAX_PAYLOAD = 1 << 24


class Msg(enum.IntEnum):
    HELLO = 0x01
    INFER = 0x02
    ECHO = 0x03
    RESET = 0x04
    BOOT = 0x80
    INFO = 0x81
    RESULT = 0x82
    ECHO_REPLY = 0x83
    RESET_REPLY = 0x84
    ERROR = 0xFF


class ErrorCode(enum.IntEnum):
    BAD_CRC = 1
    BAD_HEADER = 2
    UNKNOWN_TYPE = 3
    BAD_LENGTH = 4
    NOT_READY = 5
    INVOKE = 6
    FAULT = 7
    TOO_LONG = 8


# TFLite TensorType codes (as in ek_kernels.h) -> numpy dtypes
TENSOR_TYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}


def _msg_name(code: int) -> str:
    try:
        return Msg(code).name
    except ValueError:
        return f"0x{code:02X}"


# ------------------------------------------------------------------ frame codec


def crc8(data: bytes) -> int:
    """CRC-8, polynomial 0x07, initial value 0 (the header check)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def encode_frame(msg_type: int, seq: int, payload: bytes = b"") -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise UserError(f"payload of {len(payload)} bytes exceeds the protocol maximum of {MAX_PAYLOAD}",
                        fix="send smaller tensors")
    head = struct.pack("<BBI", msg_type & 0xFF, seq & 0xFF, len(payload))
    body = head + bytes([crc8(head)]) + payload
    return SYNC + body + struct.pack("<I", zlib.crc32(body))


@dataclass(frozen=True)
class Frame:
    type: int
    seq: int
    payload: bytes

    @property
    def name(self) -> str:
        return _msg_name(self.type)


@dataclass(frozen=True)
class DecodeIssue:
    """Something the decoder had to throw away."""

    kind: str          # "bad_header" | "bad_crc" | "oversized"
    detail: str


class FrameDecoder:
    """Incremental decoder: feed bytes, get complete valid frames; garbage and damaged frames are
    skipped (recorded in ``issues``) and the decoder resynchronises on the next sync pattern."""

    def __init__(self, max_payload: int = MAX_PAYLOAD) -> None:
        self.max_payload = max_payload
        self._buf = bytearray()
        self.issues: List[DecodeIssue] = []
        self.skipped_bytes = 0
        self.total_bytes = 0
        self.recent = bytearray()   # last bytes received (for error messages)

    def feed(self, data: bytes) -> List[Frame]:
        self.total_bytes += len(data)
        self.recent += data
        del self.recent[:-256]
        self._buf += data
        frames: List[Frame] = []
        while True:
            start = self._buf.find(SYNC)
            if start < 0:
                keep = 1 if self._buf[-1:] == SYNC[:1] else 0
                self.skipped_bytes += len(self._buf) - keep
                del self._buf[: len(self._buf) - keep]
                return frames
            if start:
                self.skipped_bytes += start
                del self._buf[:start]
            if len(self._buf) < HEADER_BYTES:
                return frames
            msg_type, seq, length = struct.unpack_from("<BBI", self._buf, 2)
            if crc8(bytes(self._buf[2:8])) != self._buf[8] or length > MAX_PAYLOAD:
                self.issues.append(DecodeIssue("bad_header", "header CRC-8 mismatch or impossible length"))
                self._drop(1)
                continue
            if length > self.max_payload:
                self.issues.append(DecodeIssue(
                    "oversized", f"{_msg_name(msg_type)} frame announces {length} bytes (limit {self.max_payload})"))
                self._drop(1)
                continue
            end = HEADER_BYTES + length + TRAILER_BYTES
            if len(self._buf) < end:
                return frames
            (crc,) = struct.unpack_from("<I", self._buf, end - TRAILER_BYTES)
            if crc != zlib.crc32(bytes(self._buf[2 : end - TRAILER_BYTES])):
                self.issues.append(DecodeIssue(
                    "bad_crc", f"payload CRC-32 mismatch in a {_msg_name(msg_type)} frame (seq {seq}, {length} bytes)"))
                self._drop(1)  # a frame may start inside a damaged one (e.g. a truncated send): rescan
                continue
            frames.append(Frame(msg_type, seq, bytes(self._buf[HEADER_BYTES : HEADER_BYTES + length])))
            del self._buf[:end]

    def salvage(self) -> List[Frame]:
        """Frames hidden behind an incomplete one (e.g. a fault report sent in the middle of a reply
        the device never finished): rescan the pending bytes from every later sync pattern."""
        frames: List[Frame] = []
        while len(self._buf) > HEADER_BYTES:
            self._drop(1)
            frames += self.feed(b"")
        return frames

    def _drop(self, n: int) -> None:
        self.skipped_bytes += n
        del self._buf[:n]

    @property
    def pending_bytes(self) -> int:
        return len(self._buf)


# ------------------------------------------------------------------ message payloads


@dataclass(frozen=True)
class TensorSpec:
    type_code: int
    shape: Tuple[int, ...]
    scale: float
    zero_point: int
    nbytes: int

    @property
    def dtype(self) -> np.dtype:
        if self.type_code not in TENSOR_TYPES:
            raise DeviceError(f"device reported tensor type code {self.type_code}, which edgekit does not know")
        return np.dtype(TENSOR_TYPES[self.type_code])

    def describe(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"


@dataclass(frozen=True)
class DeviceInfo:
    """The device's answer to HELLO."""

    protocol_version: int
    cycles_available: bool
    ready: bool
    semihosting: bool
    cpu_hz: int
    model_bytes: int
    model_crc32: int
    arena_bytes: int
    arena_used: int
    state_bytes: int
    state_used: int
    stack_bytes: int
    stack_used: int
    init_status: int
    op_count: int
    board: str
    runtime: str
    model_name: str
    init_message: str
    inputs: Tuple[TensorSpec, ...]
    outputs: Tuple[TensorSpec, ...]


@dataclass
class InferResult:
    status: int
    cycles: Optional[int]             # None: the device has no working cycle counter (e.g. QEMU)
    op_cycles: List[int]
    stack_used: int
    outputs: List[np.ndarray]
    latency_s: float = 0.0            # host round-trip time of the INFER exchange (includes UART transfer)


@dataclass(frozen=True)
class DeviceErrorReport:
    code: int
    detail: int
    message: str

    @property
    def code_name(self) -> str:
        try:
            return ErrorCode(self.code).name
        except ValueError:
            return f"code {self.code}"


class _Reader:
    def __init__(self, payload: bytes, what: str) -> None:
        self.data, self.pos, self.what = payload, 0, what

    def take(self, fmt: str) -> Tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise DeviceError(f"device sent a truncated {self.what} payload ({len(self.data)} bytes)")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def str8(self) -> str:
        (n,) = self.take("<B")
        (raw,) = self.take(f"<{n}s")
        return raw.decode("utf-8", errors="replace")

    def rest(self) -> bytes:
        out = self.data[self.pos:]
        self.pos = len(self.data)
        return out


def _tensor_spec(reader: _Reader) -> TensorSpec:
    type_code, ndim = reader.take("<BB")
    dims = reader.take(f"<{ndim}i") if ndim else ()
    scale, zero_point, nbytes = reader.take("<fiI")
    return TensorSpec(type_code, tuple(int(d) for d in dims), float(scale), int(zero_point), int(nbytes))


def parse_info(payload: bytes) -> DeviceInfo:
    r = _Reader(payload, "INFO")
    version, flags = r.take("<HH")
    if version != PROTOCOL_VERSION:
        raise DeviceError(f"device speaks protocol version {version}, this edgekit speaks {PROTOCOL_VERSION}",
                          fix="rebuild and reflash the firmware with this edgekit")
    (cpu_hz, model_bytes, model_crc, arena, arena_used, state, state_used,
     stack, stack_used, init_status, op_count) = r.take("<IIIIIIIIIii")
    board, runtime, model_name, message = r.str8(), r.str8(), r.str8(), r.str8()
    n_in, n_out = r.take("<BB")
    inputs = tuple(_tensor_spec(r) for _ in range(n_in))
    outputs = tuple(_tensor_spec(r) for _ in range(n_out))
    return DeviceInfo(version, bool(flags & 1), bool(flags & 2), bool(flags & 4), cpu_hz, model_bytes, model_crc,
                      arena, arena_used, state, state_used, stack, stack_used, init_status, op_count, board, runtime,
                      model_name, message, inputs, outputs)


def parse_result(payload: bytes, info: DeviceInfo) -> InferResult:
    r = _Reader(payload, "RESULT")
    status, flags, n_ops, cycles, stack_used = r.take("<iHHII")
    op_cycles = list(r.take(f"<{n_ops}I")) if n_ops else []
    data = r.rest()
    expected = sum(t.nbytes for t in info.outputs)
    if len(data) != expected:
        raise DeviceError(f"device RESULT carries {len(data)} output bytes, the model's outputs need {expected}")
    outputs, pos = [], 0
    for spec in info.outputs:
        chunk = data[pos : pos + spec.nbytes]
        pos += spec.nbytes
        outputs.append(np.frombuffer(chunk, dtype=spec.dtype).reshape(spec.shape).copy())
    return InferResult(status, cycles if flags & 1 else None, op_cycles, stack_used, outputs)


def parse_error(payload: bytes) -> DeviceErrorReport:
    r = _Reader(payload, "ERROR")
    code, detail, n = r.take("<HiH")
    (raw,) = r.take(f"<{n}s")
    return DeviceErrorReport(code, detail, raw.decode("utf-8", errors="replace"))


def pack_inputs(inputs: Sequence[np.ndarray], info: DeviceInfo) -> bytes:
    """The INFER payload: every input in the device's dtype and shape, concatenated. Collects all mismatches."""
    problems = []
    if len(inputs) != len(info.inputs):
        problems.append(f"{len(inputs)} input array(s) given, the device model takes {len(info.inputs)}")
    parts = []
    for i, (array, spec) in enumerate(zip(inputs, info.inputs)):
        array = np.asarray(array)
        if array.dtype != spec.dtype:
            problems.append(f"input {i}: dtype {array.dtype} but the device expects {spec.dtype}")
        elif int(np.prod(array.shape)) * array.itemsize != spec.nbytes:
            problems.append(f"input {i}: shape {list(array.shape)} but the device expects {list(spec.shape)}")
        else:
            parts.append(np.ascontiguousarray(array).tobytes())
    if problems:
        raise UserError("inputs do not match the device model:\n" + "\n".join(f"  - {p}" for p in problems),
                        fix="give int8/uint8 inputs quantized with the model's input scale and zero point")
    return b"".join(parts)


# ------------------------------------------------------------------ client


class Transport:
    """A byte pipe to a device. ``read`` returns b"" when nothing arrived within the timeout and raises
    DeviceError when the connection is gone."""

    description = "device"

    def write(self, data: bytes) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def read(self, timeout_s: float) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _preview(data: bytes, limit: int = 48) -> str:
    if not data:
        return "nothing"
    text = data[-limit:].hex(" ")
    return f"{len(data)} byte(s){' (last ' + str(limit) + ')' if len(data) > limit else ''}: {text}"


@dataclass
class DeviceClient:
    """Request/response exchanges with one device. ``context`` is called for extra text for error
    messages (e.g. QEMU's exit status and log tail)."""

    transport: Transport
    timeout_s: float = 10.0
    context: Optional[Callable[[], str]] = None
    _seq: int = 0
    _decoder: FrameDecoder = field(default_factory=FrameDecoder)
    info: Optional[DeviceInfo] = None

    def _fail(self, message: str, since: int, kind: str = "device-error") -> DeviceError:
        """A DeviceError with what was received since ``since``; ``kind`` (hung | disconnected | device-error)
        is attached as its ``fault``."""
        from edgekit.run.faults import FIXES, with_fault

        received = bytes(self._decoder.recent[-(self._decoder.total_bytes - since):]) \
            if self._decoder.total_bytes > since else b""
        issues = "; ".join(i.detail for i in self._decoder.issues[-3:])
        text = f"{self.transport.description}: {message}; received since the request: {_preview(received)}"
        for frame in self._decoder.salvage():
            if frame.type == Msg.ERROR:
                report = parse_error(frame.payload)
                text += f"; inside an unfinished frame the device reported {report.code_name}: {report.message}"
        if issues:
            text += f"; discarded: {issues}"
        extra = self.context() if self.context else ""
        if extra:
            text += f"\n{extra}"
        protocol_fix = "check that the firmware runs and speaks the edgekit protocol; see the device log above"
        fix = FIXES.get(kind, protocol_fix) if self.info is not None else protocol_fix  # it had been serving
        return with_fault(DeviceError(text, fix=fix), kind, message)

    def request(self, msg_type: Msg, payload: bytes, expect: Msg, timeout_s: Optional[float] = None) -> Frame:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        self._seq = (self._seq + 1) & 0xFF or 1
        seq = self._seq
        since = self._decoder.total_bytes
        issues_before = len(self._decoder.issues)
        self.transport.write(encode_frame(msg_type, seq, payload))
        for frames in self._received(timeout, since, f"no {expect.name} reply to {msg_type.name} within {timeout:.1f} s",
                                     f"connection lost while waiting for {expect.name}"):
            for frame in frames:
                if frame.type == Msg.BOOT:
                    raise self._fail(f"the device restarted (sent BOOT) while {msg_type.name} was pending", since)
                if frame.type == Msg.ERROR:
                    report = parse_error(frame.payload)
                    if report.code == ErrorCode.FAULT or frame.seq in (seq, 0):
                        raise self._fail(f"device reported {report.code_name} (detail {report.detail}): "
                                         f"{report.message}", since)
                if frame.seq != seq:
                    log.debug("ignoring stale %s frame seq %d (waiting for %d)", frame.name, frame.seq, seq)
                    continue
                if frame.type != expect:
                    raise self._fail(f"expected {expect.name} but the device sent {frame.name}", since)
                return frame
            if len(self._decoder.issues) > issues_before:
                raise self._fail(f"garbled reply to {msg_type.name}: {self._decoder.issues[-1].detail}", since)

    def _received(self, timeout: float, since: int, timeout_message: str, lost_message: str) -> Iterator[List[Frame]]:
        """The frames decoded from each read until ``timeout`` s have passed (then DeviceError: timeout_message);
        a transport failure raises DeviceError: lost_message."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(timeout_message, since, "hung")
            try:
                data = self.transport.read(min(remaining, 0.25))
            except DeviceError as exc:
                raise self._fail(f"{lost_message} ({exc.message})", since, "disconnected") from exc
            yield self._decoder.feed(data) if data else []

    def wait_boot(self, timeout_s: Optional[float] = None) -> str:
        """Wait for the BOOT frame a device sends when it starts serving; returns the board name."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        since = self._decoder.total_bytes
        for frames in self._received(timeout, since, f"the firmware did not start serving (no BOOT frame within "
                                     f"{timeout:.1f} s)", "connection lost before the firmware booted"):
            for frame in frames:
                if frame.type == Msg.BOOT:
                    r = _Reader(frame.payload, "BOOT")
                    (version,) = r.take("<H")
                    if version != PROTOCOL_VERSION:
                        raise DeviceError(f"device speaks protocol version {version}, this edgekit speaks "
                                          f"{PROTOCOL_VERSION}", fix="rebuild the firmware with this edgekit")
                    return r.str8()
                if frame.type == Msg.ERROR:
                    report = parse_error(frame.payload)
                    raise self._fail(f"device reported {report.code_name} while booting: {report.message}", since)
            if self._decoder.issues:
                raise self._fail(f"garbled data while waiting for BOOT: {self._decoder.issues[-1].detail}", since)

    def hello(self, timeout_s: Optional[float] = None) -> DeviceInfo:
        self.info = parse_info(self.request(Msg.HELLO, b"", Msg.INFO, timeout_s).payload)
        return self.info

    def echo(self, payload: bytes, timeout_s: Optional[float] = None) -> bytes:
        return self.request(Msg.ECHO, payload, Msg.ECHO_REPLY, timeout_s).payload

    def reset(self, timeout_s: Optional[float] = None) -> None:
        """The model's state (resource variables, kept between inferences) back to its initial values."""
        self.request(Msg.RESET, b"", Msg.RESET_REPLY, timeout_s)

    def infer(self, inputs: Sequence[np.ndarray], timeout_s: Optional[float] = None) -> InferResult:
        info = self.info or self.hello()
        if not info.ready:
            raise DeviceError(f"the device runtime failed to initialise (status {info.init_status}): "
                              f"{info.init_message}", fix="check the model and arena size the firmware was built with")
        payload = pack_inputs(inputs, info)
        start = time.monotonic()
        frame = self.request(Msg.INFER, payload, Msg.RESULT, timeout_s)
        result = parse_result(frame.payload, info)
        result.latency_s = time.monotonic() - start
        return result
