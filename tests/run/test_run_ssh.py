"""The SSH runner end to end against a real OpenSSH server started on 127.0.0.1 for this module
(host and user keys generated per run; the "board" python is this venv's python)."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import DeviceError
from edgekit.run.base import DeviceTarget, RunRequest
from tests.run.runtools import free_port, write_ssh_profile

HOSTILE = "-rf ;$(touch PWNED) `touch PWNED2` 'q\" |&>x ü.tflite"


@pytest.fixture
def board(tmp_path, sshd, monkeypatch):
    """A device profile for the test board (its own work folder) in a user profile folder."""
    workdir = tmp_path / "board"
    workdir.mkdir()
    write_ssh_profile(tmp_path, sshd, monkeypatch, "test-board", "this machine behind a test sshd",
                      connection={"workdir": str(workdir)},
                      power_model={"idle_w": 2.0, "full_load_w": 6.0, "cores": 4,
                                   "source": "test figures, not a real board"})
    return workdir


def no_injection(*folders: Path) -> None:
    for folder in (*folders, Path.cwd(), Path.home()):
        assert not list(folder.glob("PWNED*")), f"a command was injected: PWNED file in {folder}"


def test_ssh_end_to_end_with_hostile_file_name(cli, tmp_path, kws_int8, board):
    model = tmp_path / HOSTILE
    model.write_bytes(kws_int8.read_bytes())
    out = tmp_path / "run"
    assert cli("run", model, "--device", "test-board", "-n", "30", "--warmup", "2", "-o", out) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is True and run["device"]["kind"] == "ssh" and run["device"]["profile"] == "test-board"
    assert run["latency_ms"]["count"] == 30 and run["cold_start_ms"]["load"] > 0
    assert run["extra"]["device_python"]["executable"] == sys.executable
    # the profile's power model gives a labelled estimate with its formula, never a bare number
    energy = run["energy_uj_per_inference"]
    assert energy["method"] == "estimated" and energy["value"] > 0 and "test-board" in energy["source"]
    assert "idle_w" in energy["model"] and energy["power_w"] == pytest.approx(3.0)

    host_out = tmp_path / "host"
    assert cli("run", kws_int8, "--device", "host", "-n", "5", "-o", host_out) == 0
    remote, local = np.load(out / "outputs.npz"), np.load(host_out / "outputs.npz")
    assert sorted(remote.files) == sorted(local.files)
    for key in local.files:
        np.testing.assert_array_equal(remote[key], local[key])
    no_injection(tmp_path, board)
    assert not list(board.iterdir()), "the remote work folder was not removed"


def test_ssh_auth_failure(cli, capsys, tmp_path, kws_int8, sshd):
    out = tmp_path / "run"
    code = cli("run", kws_int8, "--device", sshd.device, *sshd.cli_args(key="other_key"), "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and "authentication failed" in err and "Permission denied" in err and "ssh-copy-id" in err
    assert "Traceback" not in err and not out.exists()


def test_ssh_unreachable_port(cli, capsys, tmp_path, kws_int8, sshd):
    out = tmp_path / "run"
    code = cli("run", kws_int8, "--device", f"ssh://{sshd.user}@127.0.0.1:{free_port()}", *sshd.cli_args(), "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach" in err and "Connection refused" in err
    assert "Traceback" not in err and not out.exists()


def test_ssh_board_without_runtime(cli, capsys, tmp_path, kws_int8, sshd):
    """A real python on the board that lacks numpy and LiteRT: one message naming what to install."""
    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    out = tmp_path / "run"
    args = sshd.cli_args()
    args[args.index("--remote-python") + 1] = str(env / "bin" / "python")
    code = cli("run", kws_int8, "--device", sshd.device, *args, "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and "numpy cannot be imported" in err and "pip install" in err and not out.exists()

    args[args.index("--remote-python") + 1] = "/nonexistent/python3"
    code = cli("run", kws_int8, "--device", sshd.device, *args, "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and "/nonexistent/python3" in err and "--remote-python" in err and not out.exists()


def remote_runner_process(workdir: Path):
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "remote_runner.py" in cmd and str(workdir) in cmd:
            return proc
    return None


def sustained_request(model: Path, seconds: float, timeout_s: float, progress) -> RunRequest:
    from edgekit.run.inputs import model_inputs, random_inputs

    return RunRequest(artifact=model, inputs=random_inputs(model_inputs(model)), sustain_s=seconds, window_s=1.0,
                      timeout_s=timeout_s, options={}, progress=progress)


def board_target(sshd, workdir: Path) -> DeviceTarget:
    opts = sshd.options()
    return DeviceTarget("ssh", f"{sshd.user}@127.0.0.1:{sshd.port}", {
        "name": "test-board", "connection": {"workdir": str(workdir), "python": sys.executable,
                                             "identity_file": opts["ssh_identity"], "ssh_options": opts["ssh_options"]}}, "test-board")


def test_ssh_device_disappears_mid_run(tmp_path, kws_int8, sshd):
    """The board's ssh session dies during the warm iterations: DeviceError, measured iterations kept."""
    from edgekit.run.runners.ssh import SshRunner

    workdir = tmp_path / "board"
    workdir.mkdir()
    seen = {"n": 0, "killed": False}

    def progress(n):
        seen["n"] += n
        if seen["n"] >= 300 and not seen["killed"]:
            seen["killed"] = True
            for proc in sshd.session_processes():  # the per-connection sshd and the runner under it
                proc.kill()

    with pytest.raises(DeviceError) as caught:
        SshRunner(board_target(sshd, workdir)).run(sustained_request(kws_int8, 30.0, 10.0, progress))
    error = caught.value
    assert seen["killed"] and ("lost the ssh connection" in error.message or "stopped during" in error.message)
    partial = error.partial
    assert partial.complete is False and partial.incomplete_reason == error.message
    assert len(partial.latencies_ms) >= 300 and partial.load_ms > 0
    assert not list(workdir.iterdir()), "the remote work folder was not removed after the failure"


def test_ssh_hung_runner_times_out_and_is_killed(tmp_path, kws_int8, sshd):
    """The runner on the board stops answering (SIGSTOP): reported after --timeout, partial results kept,
    the stopped process killed by its pid, the work folder removed."""
    from edgekit.run.runners.ssh import SshRunner

    workdir = tmp_path / "board"
    workdir.mkdir()
    state = {"n": 0, "proc": None}

    def progress(n):
        state["n"] += n
        if state["n"] >= 200 and state["proc"] is None:
            state["proc"] = remote_runner_process(workdir)
            state["proc"].send_signal(signal.SIGSTOP)

    start = time.monotonic()
    with pytest.raises(DeviceError) as caught:
        SshRunner(board_target(sshd, workdir)).run(sustained_request(kws_int8, 60.0, 1.5, progress))
    assert time.monotonic() - start < 30
    error = caught.value
    assert "sent nothing for 1.5 s" in error.message and "warm iterations" in error.message
    assert len(error.partial.latencies_ms) >= 200 and error.partial.complete is False
    proc = state["proc"]
    deadline = time.monotonic() + 5
    while proc.is_running() and proc.status() != "zombie" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not proc.is_running() or proc.status() == "zombie", "the hung remote runner was left running"
    assert not list(workdir.iterdir())


def test_hostile_ssh_addresses_are_refused(cli, capsys, tmp_path, kws_int8):
    for device in ("ssh://-oProxyCommand=touch_PWNED@127.0.0.1", "ssh://u@-oProxyCommand=x", "ssh://u@host;id", "ssh://u@h:99999"):
        code = cli("run", kws_int8, "--device", device, "-o", tmp_path / "run")
        err = capsys.readouterr().err
        assert code == 2 and "invalid" in err, device
    no_injection(tmp_path)
