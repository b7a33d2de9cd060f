"""Byte transports to a device for the edgekit protocol: a socket (QEMU's UART chardev, unix or TCP)
and a serial port (pyserial: real boards' USB virtual COM ports, or QEMU's UART on a pty).
Every read takes a timeout; a closed connection raises DeviceError."""
from __future__ import annotations

import logging
import select
import socket
import time
from pathlib import Path
from typing import Callable, Optional, Tuple, Union

from edgekit.errors import DeviceError, DeviceNotFoundError, ToolMissingError
from edgekit.firmware.protocol import DeviceClient, Transport

log = logging.getLogger(__name__)


class SocketTransport(Transport):
    """A connected stream socket (AF_UNIX path or (host, port))."""

    def __init__(self, sock: socket.socket, description: str) -> None:
        self._sock = sock
        self._sock.setblocking(False)
        self.description = description

    @classmethod
    def connect(cls, address: Union[str, Path, Tuple[str, int]], timeout_s: float = 10.0,
                alive: Optional[Callable[[], bool]] = None) -> "SocketTransport":
        """Connect, retrying until ``timeout_s`` while the server is starting (``alive()`` False aborts)."""
        deadline = time.monotonic() + timeout_s
        unix = not isinstance(address, tuple)
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if alive is not None and not alive():
                raise DeviceError(f"the device process exited before its UART at {address} accepted a connection")
            sock = socket.socket(socket.AF_UNIX if unix else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
                sock.connect(str(address) if unix else address)
                return cls(sock, f"UART socket {address}")
            except OSError as exc:
                last_error = exc
                sock.close()
                time.sleep(0.02)
        raise DeviceError(f"could not connect to the device UART at {address} within {timeout_s:.1f} s ({last_error})")

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + 30.0
        while view:
            _, writable, _ = select.select([], [self._sock], [], max(0.0, deadline - time.monotonic()))
            if not writable:
                raise DeviceError(f"{self.description}: the device stopped accepting data (write blocked 30 s)")
            try:
                sent = self._sock.send(view)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise DeviceError(f"{self.description}: connection closed by the device ({exc})") from exc
            view = view[sent:]

    def read(self, timeout_s: float) -> bytes:
        readable, _, _ = select.select([self._sock], [], [], max(0.0, timeout_s))
        if not readable:
            return b""
        try:
            data = self._sock.recv(65536)
        except ConnectionResetError as exc:
            raise DeviceError(f"{self.description}: connection reset by the device ({exc})") from exc
        if not data:
            raise DeviceError(f"{self.description}: connection closed by the device")
        return data

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class SerialTransport(Transport):
    """A serial port through pyserial (``/dev/ttyACM0``, ``COM3``, a pty, or any pyserial URL)."""

    def __init__(self, port: str, baudrate: int = 115200, *, open_timeout_s: float = 5.0) -> None:
        try:
            import serial  # pyserial
        except ImportError:
            raise ToolMissingError("pyserial", "pip install pyserial") from None
        self._serial_module = serial
        self.description = f"serial port {port}"
        deadline = time.monotonic() + open_timeout_s
        while True:
            try:
                self._port = serial.serial_for_url(port, baudrate=baudrate, timeout=0, write_timeout=30.0)
                break
            except (serial.SerialException, OSError) as exc:
                if time.monotonic() >= deadline:
                    raise DeviceNotFoundError(
                        f"cannot open {port}: {exc}",
                        fix="check the cable and the port name (on Linux: ls /dev/ttyACM* /dev/ttyUSB*; "
                            "your user needs the dialout group)") from exc
                time.sleep(0.05)
        self._port.reset_input_buffer()

    def write(self, data: bytes) -> None:
        try:
            self._port.write(data)
            self._port.flush()
        except (self._serial_module.SerialException, OSError) as exc:
            raise DeviceError(f"{self.description}: write failed ({exc})") from exc

    def read(self, timeout_s: float) -> bytes:
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            try:
                waiting = self._port.in_waiting
                data = self._port.read(waiting or 1)
            except (self._serial_module.SerialException, OSError) as exc:
                raise DeviceError(f"{self.description}: the device disappeared ({exc})") from exc
            if data:
                return data
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b""
            fd = getattr(self._port, "fd", None)
            if fd is not None:
                select.select([fd], [], [], min(remaining, 0.25))
            else:
                time.sleep(min(remaining, 0.01))

    def close(self) -> None:
        try:
            self._port.close()
        except (self._serial_module.SerialException, OSError):
            pass



def connect_serial(port: str, baudrate: int = 115200, *, timeout_s: float = 10.0, attempts: int = 2) -> DeviceClient:
    """Open a real board's serial port and say HELLO (retried once: the board may be rebooting after a
    flash, and a BOOT frame or a half-received frame can meet the first HELLO)."""
    transport = SerialTransport(port, baudrate)
    client = DeviceClient(transport, timeout_s=timeout_s)
    for attempt in range(1, attempts + 1):
        try:
            client.hello()
            return client
        except DeviceError as exc:
            if attempt == attempts:
                transport.close()
                raise
            log.info("HELLO attempt %d on %s failed (%s); retrying", attempt, port, exc.message)
            time.sleep(0.5)
    raise AssertionError("unreachable")
