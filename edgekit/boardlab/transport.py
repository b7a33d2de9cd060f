"""Our protocol's byte Transport over a labgrid console driver (SerialDriver on the place's NetworkSerialPort
or USBSerialPort)."""
from __future__ import annotations

from edgekit.errors import DeviceError
from edgekit.firmware.protocol import Transport

READ_CHUNK = 65536


class LabgridSerialTransport(Transport):
    """read/write through ``ConsoleProtocol`` (labgrid's SerialDriver); a closed connection raises DeviceError."""

    def __init__(self, driver, description: str) -> None:
        self.driver = driver
        self.description = description
        sock = getattr(getattr(driver, "serial", None), "_socket", None)  # raw TCP (socket://): no Nagle delays
        if sock is not None:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write(self, data: bytes) -> None:
        try:
            self.driver.write(data)
        except Exception as exc:  # noqa: BLE001 - pyserial / socket errors of any kind mean the line is gone
            raise DeviceError(f"{self.description}: write failed ({exc})") from None

    def read(self, timeout_s: float) -> bytes:
        from pexpect import TIMEOUT

        try:
            return self.driver.read(size=1, timeout=max(0.0, timeout_s), max_size=READ_CHUNK)
        except TIMEOUT:
            return b""
        except Exception as exc:  # noqa: BLE001
            raise DeviceError(f"{self.description}: the connection is gone ({exc})") from None

    def close(self) -> None:
        try:
            self.driver.close()
        except Exception:  # noqa: BLE001
            pass
