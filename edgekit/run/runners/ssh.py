"""Runs on a Linux board over SSH (Raspberry Pi, Jetson, any host with Python): OpenSSH's ssh/scp, no shell
on our side.

Every ssh/scp call is an argument list; the one string the remote shell reads is built with shlex.quote
from our own words, and the remote files get fixed names inside a fresh ``mktemp -d`` folder, so neither
a hostile model file name nor a path can inject a command. ssh runs in batch mode (keys only, never a
password prompt) with connect and keep-alive timeouts; a board that stops answering is reported, and the
remote runner we started is killed by its process id and its folder removed.
"""
from __future__ import annotations

import logging
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

from edgekit.errors import DeviceError, DeviceNotFoundError, EdgekitError, ToolMissingError, UserError
from edgekit.run.base import RUNNERS, RunRequest, RunResult, Runner
from edgekit.run.measurement.energy import open_monitor
from edgekit.run.runners.session import RUNNER_PROCESS_OPTIONS
from edgekit.run.runners.host import choose_runtime
from edgekit.run.inputs import model_file
from edgekit.run.resolve import SshAddress
from edgekit.run.runners.session import RUNNER_SCRIPT, Collector, StreamingProcess, runner_arguments, run_streaming, write_inputs

log = logging.getLogger(__name__)

SAFE_REMOTE_PATH = re.compile(r"^/[A-Za-z0-9._/+-]+$")
UNREACHABLE = ("Connection refused", "No route to host", "Connection timed out", "Could not resolve hostname",
               "Network is unreachable", "Operation timed out", "Name or service not known", "Connection closed by")
AUTH_FAILED = ("Permission denied", "Too many authentication failures", "no matching host key type")
LOST = ("closed by remote host", "Connection reset", "Broken pipe", "Timeout, server", "not responding")


class SshConnection:
    """ssh/scp argument lists for one board, with batch mode, timeouts and the user's extra options."""

    def __init__(self, address: SshAddress, *, identity: Optional[str] = None, options: Sequence[str] = (),
                 connect_timeout_s: float = 10.0) -> None:
        self.address = address
        common = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(max(connect_timeout_s, 1))}",
                  "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if identity:
            common += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
        for option in options:
            if "=" not in option or option.startswith("-"):
                raise UserError(f"--ssh-option {option!r} must look like Key=Value (e.g. StrictHostKeyChecking=accept-new)")
            common += ["-o", option]
        self.common = common
        self.connect_timeout_s = connect_timeout_s

    def ssh_argv(self, words: Sequence[str]) -> List[str]:
        """ssh running one remote command; every word is quoted for the remote shell."""
        return ["ssh", "-p", str(self.address.port), *self.common, "--", self.address.destination, shlex.join(list(words))]

    def run(self, words: Sequence[str], *, timeout_s: float, what: str) -> str:
        """Run a short remote command; its stdout; classified errors on failure."""
        return self._call(self.ssh_argv(words), "ssh", timeout_s=timeout_s, what=what)

    def upload(self, local: Path, remote_path: str, *, timeout_s: float) -> None:
        if not SAFE_REMOTE_PATH.match(remote_path):
            raise DeviceError(f"refusing to copy to the unusual remote path {remote_path!r}")
        argv = ["scp", "-q", "-P", str(self.address.port), *self.common]
        if Path(local).is_dir():
            argv.append("-r")
        argv += ["--", str(Path(local).resolve()), self.address.scp_target(remote_path)]
        self._call(argv, "scp", timeout_s=timeout_s, what=f"copying {Path(local).name}")

    def _call(self, argv: List[str], tool: str, *, timeout_s: float, what: str) -> str:
        """Run ssh/scp to completion; its stdout, or one classified error."""
        log.debug("%s: %s", tool, argv)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
        except FileNotFoundError:
            raise ToolMissingError(f"{tool} (OpenSSH client)", "apt-get install openssh-client") from None
        except subprocess.TimeoutExpired:
            raise DeviceError(f"ssh {self.address}: {what} did not finish within {timeout_s:g} s") from None
        if done.returncode != 0:
            raise self.classify(done.returncode, done.stderr, what)
        return done.stdout

    def classify(self, code: int, stderr: str, what: str, *, connected: bool = False) -> EdgekitError:
        """One clear error from ssh's exit code and stderr (``connected``: the session had been running)."""
        lines = [l for l in (stderr or "").splitlines() if l.strip() and not l.startswith("Warning: Permanently added")]
        last = lines[-1].strip() if lines else f"exit code {code}"
        text = stderr or ""
        if any(s in text for s in AUTH_FAILED):
            return DeviceNotFoundError(
                f"ssh authentication failed for {self.address}: {last}",
                fix=f"install your public key on the board (ssh-copy-id -p {self.address.port} {self.address.destination}) "
                    "or pass --ssh-identity KEY; edgekit never asks for a password",
            )
        if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
            return DeviceNotFoundError(f"ssh {self.address}: the board's host key is unknown or has changed ({last})",
                                       fix="connect once with ssh to check and accept its key, or pass --ssh-option StrictHostKeyChecking=accept-new")
        if code == 255 and (connected or any(s in text for s in LOST)):
            return DeviceError(f"lost the ssh connection to {self.address} while {what}: {last}",
                               fix="check that the board is still powered and on the network; results so far were kept")
        if code == 255 and any(s in text for s in UNREACHABLE):
            return DeviceNotFoundError(f"cannot reach {self.address} over ssh: {last}",
                                       fix="check the address and port, that the board is powered and on the network, and that sshd runs")
        if code == 127:
            return ToolMissingError(f"a program on {self.address} ({last})",
                                    "install Python 3 with numpy and ai-edge-litert (or tflite-runtime) on the board, or pass --remote-python PATH")
        if code == 255:
            return DeviceNotFoundError(f"ssh to {self.address} failed while {what}: {last}")
        return DeviceError(f"ssh {self.address}: {what} failed (exit code {code}): {last}")


@RUNNERS.register("ssh")
class SshRunner(Runner):
    """Copy model + inputs + runner script to a fresh folder on the board, run, stream results, clean up."""

    kind = "ssh"
    options = RUNNER_PROCESS_OPTIONS | {"compute_units", "remote_python", "ssh_identity", "ssh_options",
                                        "connect_timeout_s"}

    def _connection_settings(self) -> dict:
        """The profile's connection mapping (python, workdir, identity_file, ssh_options), {} without one."""
        conn = (self.target.profile or {}).get("connection")
        return dict(conn) if isinstance(conn, dict) else {}

    def connection(self, request: RunRequest) -> SshConnection:
        conn = self._connection_settings()
        identity = request.options.ssh_identity or conn.get("identity_file")
        options = list(conn.get("ssh_options") or []) + list(request.options.ssh_options)
        return SshConnection(SshAddress.parse(self.target.address), identity=identity, options=options,
                             connect_timeout_s=float(request.options.connect_timeout_s or 10.0))

    def remote_python(self, request: RunRequest) -> str:
        return str(request.options.remote_python or self._connection_settings().get("python") or "python3")

    def run(self, request: RunRequest) -> RunResult:
        model = model_file(request.artifact)
        request.runtime = choose_runtime(model, request.runtime)
        ssh = self.connection(request)
        python = self.remote_python(request)
        base = str(self._connection_settings().get("workdir", "/tmp"))
        remote_dir = ssh.run(["mktemp", "-d", f"{base.rstrip('/')}/edgekit-run.XXXXXXXX"],
                             timeout_s=ssh.connect_timeout_s + 20, what="creating a work folder").strip()
        if not SAFE_REMOTE_PATH.match(remote_dir):
            raise DeviceError(f"ssh {ssh.address}: mktemp returned an unusable path {remote_dir!r}",
                              fix="set the profile's connection.workdir to a plain folder such as /tmp")
        try:
            monitor = open_monitor(request.options.power_monitor) if request.options.power_monitor else None
            with tempfile.TemporaryDirectory(prefix="edgekit-ssh-") as work:
                inputs = Path(work) / "inputs.npz"
                write_inputs(inputs, request.inputs)
                remote_model = f"{remote_dir}/model{model.suffix.lower()}"
                upload_timeout = 60.0 + model.stat().st_size / 1e6 if model.is_file() else 300.0
                for local, remote in ((RUNNER_SCRIPT, f"{remote_dir}/remote_runner.py"), (inputs, f"{remote_dir}/inputs.npz"),
                                      (model, remote_model)):
                    ssh.upload(local, remote, timeout_s=upload_timeout)
            words = [python, "-u", f"{remote_dir}/remote_runner.py",
                     *runner_arguments(request, remote_model, f"{remote_dir}/inputs.npz")]
            describe = f"the runner on {ssh.address}"

            def classify(process: StreamingProcess, collector: Collector) -> Optional[EdgekitError]:
                code = process.returncode()
                if code in (None, 0):
                    return None
                connected = "device_python" in collector.result.extra  # the runner had said hello: the session was up
                return ssh.classify(code, process.stderr_text(), f"running the {collector.phase}", connected=connected)

            result = run_streaming(lambda: StreamingProcess(ssh.ssh_argv(words), describe=describe), self.target, request,
                                   monitor, classify=classify)
            result.extra["remote_workdir"] = remote_dir
            return result
        except EdgekitError as exc:
            partial = getattr(exc, "partial", None)
            pid = (partial.extra.get("device_python") or {}).get("pid") if partial is not None else None
            if pid:
                self._kill_remote(ssh, int(pid))
            raise
        finally:
            self._cleanup(ssh, remote_dir)

    @staticmethod
    def _kill_remote(ssh: SshConnection, pid: int) -> None:
        """Stop the runner we started on the board (by its pid) after a hang; best effort."""
        try:
            ssh.run(["kill", "-9", str(pid)], timeout_s=ssh.connect_timeout_s + 5, what="stopping the hung runner")
        except EdgekitError as exc:
            log.info("could not stop the remote runner (pid %d; it may have exited already): %s", pid, exc)

    @staticmethod
    def _cleanup(ssh: SshConnection, remote_dir: str) -> None:
        try:
            ssh.run(["rm", "-rf", "--", remote_dir], timeout_s=ssh.connect_timeout_s + 10, what="removing the work folder")
        except EdgekitError as exc:
            log.warning("could not remove %s on %s: %s", remote_dir, ssh.address, exc)
