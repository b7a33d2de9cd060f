"""Each firmware runtime and each device runner owns its options: a flag the chosen one does not take is refused
with one clear message and exit 2, before anything is written; typed results refuse unknown fields."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.conftest import MLPERF

KWS = MLPERF / "kws_ref_model_int8.tflite"


def _fails(cli, capsys, *args):
    code = cli(*args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


def test_tflm_runtime_refuses_the_edgekit_runtimes_optimize(cli, capsys, tmp_path):
    out = tmp_path / "fw"
    err = _fails(cli, capsys, "firmware", KWS, "--runtime", "tflm", "--optimize", "ram", "-o", out)
    assert "--optimize is not an option of the tflm runtime" in err and "no runtime options" in err
    assert not out.exists()


def test_each_backend_declares_its_options():
    from edgekit.firmware.backends import FIRMWARE_BACKENDS

    assert FIRMWARE_BACKENDS.names() == ["edgekit", "ethos-u", "tflm"]
    edgekit = FIRMWARE_BACKENDS.get("edgekit")()
    assert "optimize" in edgekit.options and edgekit.option_problems({"optimize": "ram"}) == []
    assert edgekit.option_problems({"arena": 1}) == ["--arena is not an option of the edgekit runtime (it takes --optimize, --weights)"]


def test_a_runner_refuses_flags_it_does_not_read(cli, capsys, tmp_path):
    out = tmp_path / "run"
    err = _fails(cli, capsys, "run", KWS, "--device", "qemu:mps2-an386", "--threads", "2", "--power-monitor", "rapl",
                 "-o", out)
    assert "--threads does not apply to qemu devices" in err and "--power-monitor does not apply to qemu devices" in err
    assert not out.exists()


def test_runners_declare_the_options_they_read():
    from edgekit.run.results import RunOptions
    from edgekit.run.runners import load_runner_modules
    from edgekit.run.base import RUNNERS

    load_runner_modules()
    fields = set(RunOptions.model_fields)
    for kind in RUNNERS:
        cls = RUNNERS.get(kind)
        assert cls.options and set(cls.options) <= fields, kind
    assert "coordinator" in RUNNERS.get("labgrid").options and "ssh_identity" in RUNNERS.get("ssh").options


def test_typed_results_refuse_unknown_fields_and_figures_without_a_method():
    from edgekit.results import Figure
    from edgekit.run.results import RunOptions, RunWork

    with pytest.raises(ValidationError):
        RunOptions(thread=2)  # a mistyped option is an error, not a silent None
    with pytest.raises(ValidationError):
        RunWork(instructions_per_inferences=3)
    with pytest.raises(ValidationError):
        Figure(value=1.0, method="estimated")  # an estimate needs its source
    options = RunOptions(threads=1, compute_units=["all"])
    assert options.config() == {"threads": 1, "compute_units": ["all"]}
