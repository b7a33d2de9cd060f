"""Each backend owns its options: a format / compile target names the flags it takes, the CLI refuses the others
(exit 2, one message naming every such flag and the backends that take it), and no backend names another's flags."""
from __future__ import annotations

from tests.conftest import MLPERF, REPO

KWS_INT8 = MLPERF / "kws_ref_model_int8.tflite"


def test_quantize_refuses_flags_of_other_formats_naming_who_takes_them(cli, capsys, tmp_path):
    out = tmp_path / "out"
    code = cli("quantize", MLPERF / "kws_ref_model_float32.tflite", "--calib", tmp_path, "--engine", "nncf",
               "--compute-units", "cpu_only", "-o", out)
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "--engine nncf (--format tflite does not take it; it is for --format onnx)" in err
    assert "--compute-units cpu_only (--format tflite does not take it; it is for --format coreml)" in err


def test_compile_refuses_vela_flags_for_the_gpu_target(cli, capsys, tmp_path):
    out = tmp_path / "gpu"
    assert cli("compile", KWS_INT8, "--target", "gpu", "--optimise", "Size", "--system-config", "X", "-o", out) == 2
    err = capsys.readouterr().err
    assert "--target gpu does not take --system-config X, --optimise Size (it takes none of them)" in err
    assert not out.exists()


FLAGS_OF = {  # format-specific flags and the one backend package that may name them
    "coreml": ("--deployment-target", "--compute-units"),
    "onnx": ("--engine",),
    "tflite": ("--io ",),
}


def test_no_backend_names_another_backends_flags():
    found = []
    for owner, flags in FLAGS_OF.items():
        for other in (p for p in (REPO / "converters").iterdir() if p.is_dir() and p.name != owner):
            for source in other.rglob("*.py"):
                text = source.read_text()
                found += [f"{source.relative_to(REPO)} names {flag.strip()}" for flag in flags if flag in text]
    assert not found, found
