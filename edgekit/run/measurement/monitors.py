"""Hardware power monitor drivers: Nordic PPK2 (ppk2-api), Joulescope (joulescope), INA219/INA226 (smbus2 or hwmon).

Each is a SamplingMonitor: it returns the device's power in watts per reading; energy.py integrates.
Imports of the vendor packages are lazy: a missing one is a ToolMissingError naming the install step.
"""
from __future__ import annotations

import logging
import statistics
from pathlib import Path
from typing import Dict, Optional

from edgekit.errors import DeviceError, DeviceNotFoundError, ToolMissingError, UserError
from edgekit.run.measurement.energy import POWER_MONITORS, SamplingMonitor

log = logging.getLogger(__name__)


@POWER_MONITORS.register("ppk2")
class Ppk2Monitor(SamplingMonitor):
    """Nordic Power Profiler Kit II over its USB serial port (ppk2-api).

    mode=source (default): the PPK2 powers the device at ``mv`` millivolts (default 3300) and measures its
    current; mode=ampere: it measures current in series with the device's own supply, whose voltage ``mv``
    must then be given. Power = mean current of each chunk x voltage.
    """

    name = "ppk2"
    interval_s = 0.1

    def __init__(self, spec: str, options: Dict[str, str]) -> None:
        super().__init__(spec, options)
        self.port = options.get("address", "")
        self.mode = options.get("mode", "source")
        if self.mode not in ("source", "ampere"):
            raise UserError(f"--power-monitor {spec!r}: mode must be source or ampere")
        if self.mode == "ampere" and "mv" not in options:
            raise UserError(f"--power-monitor {spec!r}: ampere mode needs the supply voltage, e.g. ,mv=3300")
        self.millivolts = int(options.get("mv", 3300))
        self.ppk2 = None

    def open(self) -> None:
        try:
            from ppk2_api.ppk2_api import PPK2_API
        except ImportError:
            raise ToolMissingError("ppk2-api", "pip install ppk2-api") from None
        if not self.port:
            raise UserError("--power-monitor ppk2 needs the serial port, e.g. ppk2:/dev/ttyACM0",
                            fix="list candidates with: python -c 'from ppk2_api.ppk2_api import PPK2_API; print(PPK2_API.list_devices())'")
        try:
            self.ppk2 = PPK2_API(self.port, timeout=1, write_timeout=1)
        except Exception as exc:  # serial.SerialException and OSError
            raise DeviceNotFoundError(f"cannot open PPK2 port {self.port}: {exc}") from exc
        if not self.ppk2.get_modifiers():
            self.close()
            raise DeviceError(f"the PPK2 on {self.port} returned nothing to the metadata request (no calibration data)",
                              fix="check that the port is a PPK2 (not the device's own UART) and that it is powered")
        self.ppk2.set_source_voltage(self.millivolts)
        if self.mode == "source":
            self.ppk2.use_source_meter()
            self.ppk2.toggle_DUT_power("ON")
        else:
            self.ppk2.use_ampere_meter()
        self.ppk2.start_measuring()

    def read_power_w(self) -> Optional[float]:
        data = self.ppk2.get_data()
        if not data:
            return None
        samples, _ = self.ppk2.get_samples(data)
        if not samples:
            return None
        return statistics.fmean(samples) * 1e-6 * self.millivolts * 1e-3  # samples are microamperes

    def close(self) -> None:
        if self.ppk2 is not None:
            try:
                self.ppk2.stop_measuring()
                self.ppk2.ser.close()
            except Exception as exc:  # closing a vanished port
                log.debug("closing PPK2: %s", exc)
            self.ppk2 = None

    def describe(self) -> str:
        return f"Nordic PPK2 on {self.port} ({self.mode} mode, {self.millivolts} mV)"


@POWER_MONITORS.register("joulescope")
class JoulescopeMonitor(SamplingMonitor):
    """Joulescope JS110/JS220: mean current x voltage of short contiguous reads (``js.read``)."""

    name = "joulescope"

    def __init__(self, spec: str, options: Dict[str, str]) -> None:
        super().__init__(spec, options)
        self.serial = options.get("address", "")
        self.chunk_s = float(options.get("interval_s", 0.1))
        self.interval_s = 0.0
        self.device = None

    def open(self) -> None:
        try:
            import joulescope
        except ImportError:
            raise ToolMissingError("joulescope", "pip install joulescope") from None
        try:
            devices = joulescope.scan(config="auto")
        except Exception as exc:  # USB backend errors
            raise DeviceNotFoundError(f"cannot scan for Joulescopes: {exc}") from exc
        chosen = [d for d in devices if not self.serial or self.serial in str(d)]
        if len(chosen) != 1:
            raise DeviceNotFoundError(f"{len(chosen)} Joulescope(s) match {self.serial or 'any'} (found: {[str(d) for d in devices]})",
                                      fix="connect one Joulescope or name its serial: joulescope:SERIAL")
        self.device = chosen[0]
        self.device.open()

    def read_power_w(self) -> Optional[float]:
        data = self.device.read(contiguous_duration=self.chunk_s)
        if data is None or len(data) == 0:
            return None
        current = float(data[:, 0].mean())
        voltage = float(data[:, 1].mean())
        return current * voltage

    def close(self) -> None:
        if self.device is not None:
            try:
                self.device.close()
            finally:
                self.device = None

    def describe(self) -> str:
        return f"Joulescope {self.serial or ''} (mean I x V of {self.chunk_s:g} s reads)".replace("  ", " ")


class Ina2xxMonitor(SamplingMonitor):
    """TI INA219 / INA226 current-shunt monitor: through the Linux ina2xx hwmon driver (``hwmon=DIR``) or
    read directly over I2C with smbus2 (``BUS@ADDR,shunt_ohm=R``)."""

    name = ""
    shunt_lsb_v = 0.0
    bus_lsb_v = 0.0
    bus_shift = 0
    interval_s = 0.02

    def __init__(self, spec: str, options: Dict[str, str]) -> None:
        super().__init__(spec, options)
        self.hwmon = Path(options["hwmon"]) if options.get("hwmon") else None
        self.bus = None
        self.address = 0
        self.bus_number = 0
        self.shunt_ohm = float(options.get("shunt_ohm", 0.1))
        if self.hwmon is None:
            where = options.get("address", "")
            bus, at, addr = where.partition("@")
            try:
                self.bus_number, self.address = int(bus), int(addr, 0)
            except ValueError:
                raise UserError(f"--power-monitor {spec!r}: give the I2C bus and address as BUS@ADDR (e.g. {self.name}:1@0x40) "
                                "or hwmon=/sys/class/hwmon/hwmonN") from None

    def open(self) -> None:
        if self.hwmon is not None:
            if not (self.hwmon / "power1_input").exists() and not (self.hwmon / "curr1_input").exists():
                raise DeviceNotFoundError(f"{self.hwmon} is not an ina2xx hwmon folder (no power1_input / curr1_input)")
            return
        try:
            from smbus2 import SMBus
        except ImportError:
            raise ToolMissingError("smbus2", "pip install smbus2") from None
        try:
            self.bus = SMBus(self.bus_number)
            self._register(0x00)  # configuration register: proves the chip answers
        except OSError as exc:
            self.close()
            raise DeviceNotFoundError(f"no {self.name.upper()} answers on I2C bus {self.bus_number} at {hex(self.address)}: {exc}",
                                      fix="check the wiring and the address (i2cdetect -y BUS)") from exc

    def _register(self, reg: int) -> int:
        word = self.bus.read_word_data(self.address, reg)
        return ((word & 0xFF) << 8) | (word >> 8)  # the INA sends the most significant byte first

    def read_power_w(self) -> Optional[float]:
        if self.hwmon is not None:
            return self._read_hwmon()
        shunt = self._register(0x01)
        shunt = shunt - 0x10000 if shunt & 0x8000 else shunt
        bus_v = (self._register(0x02) >> self.bus_shift) * self.bus_lsb_v
        return bus_v * (shunt * self.shunt_lsb_v / self.shunt_ohm)

    def _read_hwmon(self) -> Optional[float]:
        power = self.hwmon / "power1_input"
        if power.exists():
            text = power.read_text().strip()
            return int(text) * 1e-6 if text else None  # microwatts
        current, voltage = (self.hwmon / "curr1_input").read_text().strip(), (self.hwmon / "in1_input").read_text().strip()
        if not current or not voltage:
            return None
        return int(current) * 1e-3 * int(voltage) * 1e-3  # mA x mV

    def close(self) -> None:
        if self.bus is not None:
            self.bus.close()
            self.bus = None

    def describe(self) -> str:
        where = str(self.hwmon) if self.hwmon else f"I2C bus {self.bus_number} address {hex(self.address)}, shunt {self.shunt_ohm} ohm"
        return f"TI {self.name.upper()} ({where})"


@POWER_MONITORS.register("ina219")
class Ina219Monitor(Ina2xxMonitor):
    name = "ina219"
    shunt_lsb_v = 10e-6    # shunt voltage register LSB (datasheet: 10 uV)
    bus_lsb_v = 4e-3       # bus voltage register bits 15..3, LSB 4 mV
    bus_shift = 3


@POWER_MONITORS.register("ina226")
class Ina226Monitor(Ina2xxMonitor):
    name = "ina226"
    shunt_lsb_v = 2.5e-6   # datasheet: 2.5 uV
    bus_lsb_v = 1.25e-3    # datasheet: 1.25 mV
    bus_shift = 0
