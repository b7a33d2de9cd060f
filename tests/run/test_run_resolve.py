"""The --device argument, the device profiles in devices/, and `edgekit devices`."""
import json

import pytest

from edgekit.errors import DeviceNotFoundError, UserError
from edgekit.profiles import all_profiles
from edgekit.run.resolve import resolve_device

NON_MCU = ("host", "raspberry-pi-4", "raspberry-pi-5", "jetson-orin-nano", "pixel-8")


def test_connection_forms():
    host = resolve_device("host")
    assert (host.kind, host.address, host.profile["name"]) == ("host", "", "host")
    ssh = resolve_device("ssh://pi@10.0.0.7:2222")
    assert (ssh.kind, ssh.address, ssh.profile) == ("ssh", "pi@10.0.0.7:2222", {})
    assert resolve_device("ssh://root@[::1]").address == "root@[::1]:22"
    assert (resolve_device("adb").kind, resolve_device("adb").address) == ("adb", "")
    assert resolve_device("adb:192.168.1.5:5555").address == "192.168.1.5:5555"
    assert resolve_device("serial:/dev/ttyACM0").address == "/dev/ttyACM0"
    assert resolve_device("macos").kind == "macos"
    attached = resolve_device("ssh://pi@10.0.0.7", "raspberry-pi-4")
    assert attached.profile["name"] == "raspberry-pi-4" and attached.address == "pi@10.0.0.7:22"


def test_profile_names_resolve_through_their_connection():
    pi = resolve_device("raspberry-pi-4")
    assert pi.kind == "ssh" and pi.address == "pi@raspberrypi.local:22" and pi.profile["thermal"]["throttle_c"] == 80
    assert resolve_device("pixel-8").kind == "adb"
    if "mps2-an386" in all_profiles():  # board profiles come with the firmware part
        board = resolve_device("mps2-an386")
        assert (board.kind, board.address) == ("qemu", "mps2-an386")


@pytest.mark.parametrize("text", ["ssh://pi@host name", "ssh://-oProxyCommand=x@h", "ssh://pi@h:0", "ssh://h", "ssh://pi@h;reboot",
                                  "adb:$(reboot)", "qemu:"])
def test_bad_connections(text):
    with pytest.raises(UserError):
        resolve_device(text)


def test_unknown_names_list_profiles_and_forms():
    with pytest.raises(DeviceNotFoundError) as caught:
        resolve_device("rpi4")
    message = caught.value.message
    for name in NON_MCU:
        assert name in message
    assert "ssh://USER@HOST[:PORT]" in message and "adb[:SERIAL]" in message


def test_non_mcu_profiles_state_their_sources():
    profiles = all_profiles()
    for name in NON_MCU:
        p = profiles[name]
        assert p["kind"] in ("host", "linux", "android") and p["description"]
        model = p.get("power_model") or {}
        if model:
            assert "source" in model and model["source"], name
        if (p.get("thermal") or {}).get("throttle_c") is not None:
            assert p["thermal"]["source"], name


def test_devices_command(cli, capsys):
    assert cli("devices") == 0
    table = capsys.readouterr().out
    header = table.splitlines()[0]
    assert header.split()[:3] == ["NAME", "KIND", "CORE"]
    assert "raspberry-pi-4" in table and "2.2-5.4 W" in table and "80 °C" in table and "4x Cortex-A72" in table
    assert cli("devices", "--json") == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["pixel-8"]["kind"] == "android" and rows["jetson-orin-nano"]["ram"] == "8 GiB"
