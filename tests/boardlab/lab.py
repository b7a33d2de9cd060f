"""A real labgrid lab on localhost for tests: labgrid-coordinator, labgrid-exporter(s) exporting a
NetworkSerialPort (raw TCP) per emulated place, places created and tagged with labgrid-client."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool(name: str) -> str:
    found = BIN / name
    return str(found) if found.exists() else (shutil.which(name) or name)


class Lab:
    """Processes this lab started (stopped by pid only)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.exporters: Dict[str, subprocess.Popen] = {}
        self.serial_ports: Dict[str, int] = {}
        self.coordinator = self._spawn("coordinator", [tool("labgrid-coordinator"), "-l", self.address])
        self._wait_listening(self.port)

    def _spawn(self, name: str, cmd: List[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        return subprocess.Popen(cmd, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_listening(self, port: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"labgrid-coordinator did not listen on {port}: {(self.workdir / 'coordinator.log').read_text()}")

    def client(self, *args: str, user: Optional[str] = None) -> str:
        env = dict(os.environ, LG_COORDINATOR=self.address, **({"LG_USERNAME": user} if user else {}))
        proc = subprocess.run([tool("labgrid-client"), *args], env=env, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"labgrid-client {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
        return proc.stdout

    def add_emulated_place(self, place: str, board: str = "mps2-an386") -> None:
        """An exporter (named after the place) with one NetworkSerialPort, and a place matching it, tagged."""
        port = self.serial_ports[place] = free_port()
        group = f"emulated-{board}"
        config = self.workdir / f"exporter-{place}.yaml"
        config.write_text(f"{group}:\n  NetworkSerialPort:\n    host: 127.0.0.1\n    port: {port}\n    protocol: raw\n")
        self.exporters[place] = self._spawn(f"exporter-{place}", [tool("labgrid-exporter"), "-c", self.address,
                                                                  "-n", f"exp-{place}", str(config)])
        deadline = time.monotonic() + 30
        while f"exp-{place}/{group}/NetworkSerialPort" not in self.client("resources"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"exporter of {place} did not register: "
                                   f"{(self.workdir / f'exporter-{place}.log').read_text()}")
            time.sleep(0.2)
        self.client("-p", place, "create")
        self.client("-p", place, "add-match", f"exp-{place}/{group}/*")
        self.client("-p", place, "set-tags", f"board={board}")

    def holder(self, place: str) -> Optional[str]:
        """Who holds the place ('host/user'), from `labgrid-client who`; None when free."""
        for line in self.client("who").splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == place:
                return f"{parts[1]}/{parts[0]}"
        return None

    def kill_exporter(self, place: str) -> None:
        proc = self.exporters[place]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def place_qemus(self, place: Optional[str] = None) -> list:
        """The QEMU processes (psutil) serving the UART of ``place``, or of every emulated place of this lab."""
        import psutil

        ports = [self.serial_ports[place]] if place else list(self.serial_ports.values())
        found = []
        for proc in psutil.process_iter(["name", "cmdline"]):
            cmdline = proc.info["cmdline"] or ()
            if (proc.info["name"] or "").startswith("qemu-system") and any(
                    f"port={port}," in part for part in cmdline for port in ports):
                found.append(proc)
        return found

    def qemu_count_file(self, place: str) -> Optional[Path]:
        """The instruction-count file of the QEMU serving ``place`` (None when no such QEMU runs)."""
        for proc in self.place_qemus(place):
            plugin = next((part for part in proc.info["cmdline"] if "ekcount" in part), "")
            return Path(plugin.split("out=")[1].split(",")[0]) if "out=" in plugin else None
        return None

    def kill_place_qemus(self) -> None:
        """Kill the QEMU of every emulated place of this lab: a client killed by a failed test cannot close the QEMU
        its bootstrap driver started (QEMU runs in its own session, as a powered board would), and a leaked one
        burns a CPU for the rest of the suite."""
        import psutil

        for proc in self.place_qemus():
            try:
                proc.kill()
                proc.wait(timeout=10)
            except psutil.NoSuchProcess:
                pass

    def stop(self) -> None:
        self.kill_place_qemus()
        for proc in [*self.exporters.values(), self.coordinator]:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
