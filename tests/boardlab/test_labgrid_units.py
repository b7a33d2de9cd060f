"""The lab pieces that need no running lab: drivers registered in labgrid's factory, the pyOCD command,
the environment config, --device labgrid:PLACE, and a coordinator that cannot be reached."""
import sys
import time

import pytest

labgrid = pytest.importorskip("labgrid", reason="labgrid is pinned in requirements.lock (make install)")

from edgekit.errors import DeviceNotFoundError, UserError  # noqa: E402


def test_drivers_are_registered_in_labgrid_factory():
    from labgrid.factory import target_factory
    from labgrid.protocol import BootstrapProtocol

    import edgekit.boardlab.drivers as drivers

    for name in ("EdgekitPyOCDDriver", "EdgekitQemuBootstrapDriver"):
        cls = target_factory.class_from_string(name)
        assert cls is getattr(drivers, name) and issubclass(cls, BootstrapProtocol)
    assert drivers.EdgekitPyOCDDriver.bindings == {"interface": {"USBDebugger", "NetworkUSBDebugger"}}
    assert drivers.EdgekitQemuBootstrapDriver.bindings == {"port": {"NetworkSerialPort"}}


def test_pyocd_driver_flashes_the_profile_target_through_the_probe_of_the_place(tmp_path):
    """A real board cannot be attached here: the driver is built by labgrid's factory on a target with a
    USBDebugger resource, and its command is checked (the flash itself needs the hardware)."""
    from labgrid.factory import target_factory

    import edgekit.boardlab.drivers  # noqa: F401
    from edgekit.boardlab.drivers import pyocd_load_command

    assert pyocd_load_command("stm32l4r5zitx", "/tmp/fw.elf", "0669FF", "python3") == [
        "python3", "-m", "pyocd", "load", "--target", "stm32l4r5zitx", "--format", "elf", "--uid", "0669FF",
        "/tmp/fw.elf"]
    target = target_factory.make_target("nucleo", {
        "resources": [{"NetworkUSBDebugger": {"host": "labhost", "busnum": 1, "devnum": 2, "path": "1-1",
                                              "vendor_id": 0x0483, "model_id": 0x374B}}],
        "drivers": [{"EdgekitPyOCDDriver": {"target_name": "stm32l4r5zitx"}}]})
    driver = target.get_driver("BootstrapProtocol", activate=False)
    assert isinstance(driver, edgekit.boardlab.drivers.EdgekitPyOCDDriver) and driver.remote
    assert driver.command("/var/cache/labgrid/fw.elf") == [
        "python3", "-m", "pyocd", "load", "--target", "stm32l4r5zitx", "--format", "elf", "/var/cache/labgrid/fw.elf"]


def test_environment_from_board_profiles():
    from edgekit.boardlab.runner import environment_config
    from edgekit.firmware.boards import load_board

    env = environment_config("rack-3", "lab:20408", load_board("mps2-an386"), "qemu")
    assert env == {"targets": {"rack-3": {"resources": [{"RemotePlace": {"name": "rack-3"}}], "drivers": [
        {"EdgekitQemuBootstrapDriver": {"board": "mps2-an386"}}, {"SerialDriver": {"timeout": 10.0}}]}},
        "options": {"coordinator_address": "lab:20408"}}
    real = environment_config("rack-4", "lab:20408", load_board("nucleo-l4r5zi"), "pyocd")
    assert real["targets"]["rack-4"]["drivers"][0] == {"EdgekitPyOCDDriver": {"target_name": "stm32l4r5zitx"}}
    with pytest.raises(UserError, match="not a QEMU board"):
        environment_config("x", "lab:1", load_board("nucleo-l4r5zi"), "qemu")


def test_device_argument_and_coordinator_address(monkeypatch):
    from edgekit.boardlab.place import coordinator_address
    from edgekit.run.resolve import resolve_device

    target = resolve_device("labgrid:rack-3")
    assert (target.kind, target.address) == ("labgrid", "rack-3")
    with pytest.raises(UserError, match="name the place"):
        resolve_device("labgrid:")
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    assert coordinator_address(None) == "127.0.0.1:20408"
    monkeypatch.setenv("LG_COORDINATOR", "lab.example:4000")
    assert coordinator_address(None) == "lab.example:4000"
    assert coordinator_address("10.0.0.2:20408") == "10.0.0.2:20408"
    with pytest.raises(UserError, match="HOST:PORT"):
        coordinator_address("lab.example")


def test_unreachable_coordinator_fails_in_seconds_with_the_address(cli, capsys, mlperf, tmp_path):
    from tests.boardlab.lab import free_port

    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    code = cli("run", mlperf / "ad_autoencoder_int8.tflite", "--device", "labgrid:rack-3", "--coordinator", address,
               "-n", "1", "-o", tmp_path / "out")
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert f"the labgrid coordinator at {address} cannot be reached" in err and "LG_COORDINATOR" in err
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists()


def test_a_sigterm_swallowed_inside_a_destructor_is_raised_again_before_the_next_inference(monkeypatch):
    """The handler's KeyboardInterrupt is lost when SIGTERM lands inside a __del__ ("Exception ignored in ...", as
    labgrid's Step.__del__ showed in CI: the client then ran on); the recorded signal is raised again by infer(),
    and the interpreter's "Exception ignored ... Traceback" print of the swallowed interrupt is kept off stderr
    (it made a clean interrupt look like a crash). Other exceptions lost in a destructor are still printed."""
    import os
    import signal

    from edgekit.boardlab.runner import _sigterm_as_interrupt, raise_pending_signal

    class KilledInDestructor:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode boundary, still inside __del__
                pass

    class BrokenDestructor:
        def __del__(self):
            raise ValueError("a real bug in a destructor")

    printed = []   # what reaches the interpreter's hook (it prints "Exception ignored in ... Traceback")
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    with _sigterm_as_interrupt():
        obj = KilledInDestructor()
        del obj  # the KeyboardInterrupt raised by the handler is swallowed by the interpreter here
        assert printed == []
        broken = BrokenDestructor()
        del broken
        assert [type(u.exc_value) for u in printed] == [ValueError]
        with pytest.raises(KeyboardInterrupt, match="signal 15"):
            raise_pending_signal()
    raise_pending_signal()  # cleared on leaving the context: nothing pending
    assert sys.unraisablehook == printed.append
