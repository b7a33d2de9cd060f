"""Helpers for the device-runner tests: a real OpenSSH server on 127.0.0.1, model paths, run helpers."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


from tests.conftest import MLPERF

KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"
IC_INT8 = MLPERF / "ic_resnet8_int8.tflite"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {proc.stderr.read().decode(errors='replace')}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("sshd did not start listening")


class SshServer:
    """sshd -D on a free 127.0.0.1 port with per-run host and user keys (StrictModes no, UsePAM no)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.user = os.environ.get("USER") or __import__("getpass").getuser()
        for name in ("host_key", "user_key", "other_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"edgekit-test-{name}", "-f", str(root / name)], check=True)
        shutil.copy(root / "user_key.pub", root / "authorized_keys")
        (root / "sshd_config").write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}", f"PidFile {root / 'sshd.pid'}",
            f"AuthorizedKeysFile {root / 'authorized_keys'}", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PubkeyAuthentication yes", "PermitRootLogin prohibit-password",
            "AllowTcpForwarding no", "X11Forwarding no", "Subsystem sftp internal-sftp", "LogLevel ERROR", "",
        ]))
        if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
            Path("/run/sshd").mkdir(mode=0o755)  # sshd's privilege-separation folder (the sshd service creates it too)
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        self.proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(root / "sshd_config")], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_listening(self.port, self.proc)

    @property
    def device(self) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    def options(self, key: str = "user_key") -> dict:
        return {"ssh_identity": str(self.root / key), "remote_python": sys.executable,
                "ssh_options": ["StrictHostKeyChecking=no", f"UserKnownHostsFile={self.root / 'known_hosts'}"]}

    def cli_args(self, key: str = "user_key") -> list:
        opts = self.options(key)
        return ["--ssh-identity", opts["ssh_identity"], "--remote-python", opts["remote_python"],
                *[a for o in opts["ssh_options"] for a in ("--ssh-option", o)]]

    def session_processes(self):
        """Per-connection sshd processes (children of the listener) and everything they started."""
        import psutil

        return psutil.Process(self.proc.pid).children(recursive=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            for child in self.session_processes():
                try:
                    child.kill()
                except Exception:  # already gone
                    pass
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def write_ssh_profile(tmp_path: Path, sshd: "SshServer", monkeypatch, name: str, description: str,
                      connection: dict | None = None, **profile: object) -> Path:
    """A device profile ``name`` for this machine behind the test sshd, in a user profile folder that
    EDGEKIT_DEVICES_DIR points at; ``connection`` adds keys to its connection, ``profile`` to the profile."""
    import json

    profiles = tmp_path / "profiles"
    profiles.mkdir(exist_ok=True)
    opts = sshd.options()
    path = profiles / f"{name}.yaml"
    path.write_text(json.dumps({
        "name": name, "kind": "linux", "description": description,
        "connection": {"kind": "ssh", "address": f"{sshd.user}@127.0.0.1:{sshd.port}", "python": sys.executable,
                       "identity_file": opts["ssh_identity"], "ssh_options": opts["ssh_options"],
                       **(connection or {})},
        **profile}))
    monkeypatch.setenv("EDGEKIT_DEVICES_DIR", str(profiles))
    return path
