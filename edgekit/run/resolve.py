"""The --device argument -> DeviceTarget.

Forms: ``host``, ``macos``, ``ssh://USER@HOST[:PORT]``, ``adb`` / ``adb:SERIAL``, ``qemu:BOARD``,
``serial:PORT``, ``labgrid:PLACE`` (a place of a labgrid lab), or the name of a profile in devices/ (whose ``connection`` key holds one of the forms
above). ``--profile NAME`` attaches a profile's facts (power model, thermal limits) to a connection.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Optional

from edgekit.errors import DeviceNotFoundError, UserError
from edgekit.profiles import Profile, all_profiles, load_profile
from edgekit.run.base import DeviceTarget

CONNECTION_FORMS = ("host", "macos", "ssh://USER@HOST[:PORT]", "adb[:SERIAL]", "qemu:BOARD", "serial:PORT",
                    "labgrid:PLACE")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")
_ADB_SERIAL = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@dataclass(frozen=True)
class SshAddress:
    """An ssh destination, checked by parse_ssh."""

    user: str
    host: str
    port: int

    @classmethod
    def parse(cls, address: str) -> "SshAddress":
        return parse_ssh("ssh://" + address)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}"

    def scp_target(self, remote_path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}:{remote_path}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}:{self.port}"


def parse_ssh(text: str) -> SshAddress:
    """``ssh://user@host[:port]`` -> SshAddress(user, host, port); names that could reach a shell or an ssh
    option (spaces, quotes, leading '-') are refused."""
    rest = text[len("ssh://"):]
    user, at, hostport = rest.rpartition("@")
    if not at:
        raise UserError(f"--device {text!r}: give the user, e.g. ssh://pi@raspberrypi.local")
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ("" if not tail else None)
        valid_host = bool(_IPV6.match(host))
    else:
        host, colon, port_text = hostport.partition(":")
        valid_host = bool(_HOSTNAME.match(host))
    problems = []
    if not _USER.match(user):
        problems.append(f"user {user!r} (letters, digits, . _ - only; not starting with -)")
    if not valid_host:
        problems.append(f"host {host!r} (a host name, an IPv4 address, or [IPv6])")
    port = 22
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            problems.append(f"port {port_text!r} (1-65535)")
        else:
            port = int(port_text)
    elif port_text is None:
        problems.append("text after the ]")
    if problems:
        raise UserError(f"--device {text!r}: invalid " + "; ".join(problems), fix="use ssh://USER@HOST[:PORT]")
    return SshAddress(user, host, port)


def _connection(text: str, profile: Profile, name: str) -> Optional[DeviceTarget]:
    """A connection form -> target, or None when ``text`` is not one."""
    if text == "host":
        return DeviceTarget("host", "", profile, name)
    if text == "macos":
        return DeviceTarget("macos", "", profile, name)
    if text.startswith("ssh://"):
        return DeviceTarget("ssh", str(parse_ssh(text)), profile, name)
    if text == "adb" or text.startswith("adb:"):
        serial = text[4:]
        if serial and not _ADB_SERIAL.match(serial):
            raise UserError(f"--device {text!r}: {serial!r} is not an adb serial (see `adb devices`)")
        return DeviceTarget("adb", serial, profile, name)
    for kind in ("qemu", "serial", "labgrid"):
        if text.startswith(kind + ":"):
            address = text[len(kind) + 1:]
            if not address:
                what = {"qemu": "board", "serial": "port", "labgrid": "place"}[kind]
                raise UserError(f"--device {text!r}: name the {what} after '{kind}:'")
            if kind == "qemu" and not profile and address in all_profiles():
                profile = load_profile(address)
            return DeviceTarget(kind, address, profile, name)
    return None


def resolve_device(text: str, profile_name: Optional[str] = None) -> DeviceTarget:
    """Resolve ``--device`` (and an optional ``--profile``) to a target; unknown names list the known ones."""
    text = (text or "").strip()
    profile = load_profile(profile_name) if profile_name else {}
    if text == "host" and not profile and "host" in all_profiles():
        profile = load_profile("host")
    target = _connection(text, profile, text)
    if target is not None:
        return target
    profiles = all_profiles()
    if text in profiles:
        chosen = load_profile(text)
        connection = chosen.get("connection")
        if isinstance(connection, dict):  # {kind: ..., address: ...} form
            connection = _connection_from_mapping(connection, chosen)
        if not isinstance(connection, str) or not connection:
            kind = (chosen.get("connection") or {}).get("kind") if isinstance(chosen.get("connection"), dict) else None
            raise DeviceNotFoundError(
                f"device profile {text!r} does not say where the device is"
                + (f" (its connection is {kind} without an address or port)" if kind else " (no 'connection' key)"),
                fix=f"pass a connection and attach the profile, e.g. --device {'serial:/dev/ttyACM0' if kind == 'serial' else 'ssh://USER@HOST'} --profile {text}",
            )
        target = _connection(connection, chosen, text)
        if target is None:
            raise UserError(f"device profile {text!r}: connection {connection!r} is not one of {', '.join(CONNECTION_FORMS)}")
        return target
    raise DeviceNotFoundError(
        f"unknown device {text!r}; known profiles: {', '.join(sorted(profiles)) or 'none'}; "
        f"or a connection: {', '.join(CONNECTION_FORMS)}",
        fix="run `edgekit devices` to list the profiles",
    )


def _connection_from_mapping(connection: Dict[str, Any], profile: Profile) -> Optional[str]:  # why: YAML as written
    """The device argument a profile's ``connection:`` mapping (as written in its YAML) stands for."""
    kind = connection.get("kind")
    if kind in ("host", "macos"):
        return kind
    if kind == "ssh" and connection.get("address"):
        return "ssh://" + str(connection["address"])
    if kind == "adb":
        return "adb" + (f":{connection['serial']}" if connection.get("serial") else "")
    if kind == "qemu":
        return "qemu:" + str(connection.get("board") or connection.get("machine") or profile.get("name"))
    if kind == "serial" and connection.get("port"):
        return "serial:" + str(connection["port"])
    return None
