"""edgekit works as an installed wheel, not only as a checkout: the wheel ships firmware sources, device profiles
and calibration data as package data (edgekit/_resources.py), and `edgekit deploy` of the demo model runs from a
fresh venv outside the checkout.

The fresh venv gets edgekit only from the wheel; its other dependencies come from the running interpreter's
site-packages folders through a .pth file (listed as plain paths, so their editable-install hooks for the
checkout's edgekit do not run).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit._resources import DATA_DIRS, build_root, data_dir, is_checkout
from edgekit.errors import InternalError
from tests.conftest import REPO

SOURCES = ("pyproject.toml", "README.md", "edgekit", "converters", *DATA_DIRS)


def test_checkout_finds_data_beside_the_package():
    assert is_checkout()
    for name in DATA_DIRS:
        assert data_dir(name) == REPO / name
    assert build_root() == Path(os.environ.get("EDGEKIT_BUILD_DIR") or REPO / "build")
    with pytest.raises(InternalError, match="unknown data folder 'templates'"):
        data_dir("templates")


def _copy_sources(dest: Path) -> Path:
    """The fixed top-level layout only, so the build writes nothing into the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    dest.mkdir()
    for name in SOURCES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def _dependency_dirs() -> list:
    """The running interpreter's site-packages folders (this venv and the ones it layers over)."""
    dirs = [p for p in sys.path if p.rstrip("/").endswith("site-packages") and Path(p).is_dir()]
    assert dirs, sys.path
    assert not any((Path(p) / "edgekit").exists() for p in dirs), "a non-editable edgekit would shadow the wheel"
    return dirs


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                    reason="qemu-system-arm or arm-none-eabi-gcc is not installed")
def test_wheel_installs_and_deploys_the_demo_outside_the_checkout(tmp_path):
    src = _copy_sources(tmp_path / "src")
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-q", "-w", wheels, src])
    (wheel,) = wheels.glob("edgekit-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", python, "install", "--no-deps",
          "--no-index", "-q", wheel])
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (purelib / "zz_edgekit_test_deps.pth").write_text("\n".join(_dependency_dirs()) + "\n")

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EDGEKIT_BUILD_DIR", "EDGEKIT_DEVICES_DIR",
                                                            "EDGEKIT_HOST_RUNTIME_DIR")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), EDGEKIT_CACHE_DIR=str(tmp_path / "cache" / "edgekit"),
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    probe = ("import json, edgekit, edgekit._resources as r; from importlib.resources import files; "
             "print(json.dumps({'package': edgekit.__file__, 'checkout': r.is_checkout(), 'build': str(r.build_root()), "
             "'calib': str(r.data_dir('calibration_data') / 'digits'), "
             "'model': str(files('edgekit.demo') / 'digits_cnn.pt2')}))")
    where = json.loads(_run([python, "-c", probe], cwd=work, env=env).stdout.strip().splitlines()[-1])
    assert where["package"].startswith(str(purelib)) and not where["checkout"], where
    assert where["calib"].startswith(str(purelib)) and where["model"].startswith(str(purelib)), where
    assert where["build"] == str(tmp_path / "cache" / "edgekit" / "build"), where

    printed = _run([venv / "bin" / "edgekit", "schema", "deploy"], cwd=work, env=env).stdout
    assert json.loads(printed) == json.loads((REPO / "edgekit" / "schemas" / "deploy.json").read_text())

    out = work / "demo"
    done = _run([venv / "bin" / "edgekit", "deploy", where["model"], "--calib", Path(where["calib"]) / "calib",
                 "--eval-data", Path(where["calib"]) / "eval", "--board", "mps2-an386", "-o", out],
                cwd=work, env=env, timeout=900)
    report = json.loads((out / "deploy.json").read_text())
    assert report["passed"] and report["device"]["outputs_bit_exact"]["value"] is True, done.stdout
    assert "bit-exact" in done.stdout
    assert (tmp_path / "cache" / "edgekit" / "build" / "qemu_plugin").is_dir()
    assert not list(purelib.glob("edgekit/build")), "nothing is built inside site-packages"
    assert json.loads((out / "deploy.json").read_text())["schema"] == "edgekit.deploy/1"  # conftest validates it
