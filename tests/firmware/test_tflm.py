"""`edgekit firmware --runtime tflm`: what can be tested without TensorFlow Lite Micro's C++ sources.

- the op resolver lists exactly the model's operators (MicroMutableOpResolver<N> with N = distinct ops);
- kTensorArenaSize is accepted by the real TFLM python runtime (it allocates and invokes, with outputs equal to
  LiteRT BUILTIN_REF on KWS), and the bisection is tight (one byte less than its minimum fails);
- the model array round-trips: compiled with the host C compiler it holds exactly the .tflite's bytes;
- the project's C parts (board, protocol, protocol server, model array) compile with arm-none-eabi-gcc;
- `make` without TFLM_DIR stops with a message saying what to set.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import ToolMissingError, UnsupportedOpError
from tests.firmware.opmodels import T, build_graph, reference

KWS = "kws_ref_model_int8.tflite"
AD = "ad_autoencoder_int8.tflite"


@pytest.fixture(scope="module")
def kws_tflm(tmp_path_factory):
    from tests.conftest import MLPERF

    model = MLPERF / KWS
    if not model.is_file():
        pytest.skip(f"MLPerf Tiny model {model} not found")
    from edgekit.firmware.generate import generate_firmware

    out = tmp_path_factory.mktemp("tflm") / "kws"
    result = generate_firmware(model, "mps2-an386", out, runtime="tflm")
    return out, model.read_bytes(), result.info.to_dict()


def arena_size(main_cc: str) -> int:
    return int(re.search(r"kTensorArenaSize = (\d+) \+ EK_TFLM_ARENA_EXTRA", main_cc).group(1))


def test_resolver_has_exactly_the_models_ops(kws_tflm):
    from edgekit.tflite_graph import read_graph

    out, model, info = kws_tflm
    main = (out / "main.cc").read_text()
    calls = re.findall(r"resolver\.(Add\w+)\(\)", main)
    assert calls == ["AddConv2D", "AddDepthwiseConv2D", "AddAveragePool2D", "AddReshape", "AddFullyConnected",
                     "AddSoftmax"]
    ops = read_graph(model).op_names
    assert len(calls) == len(set(calls)) == len(ops) == 6
    assert f"MicroMutableOpResolver<{len(ops)}>" in main
    assert info["resolver"] == {"size": 6, "methods": calls}


def test_arena_size_is_accepted_by_the_tflm_python_runtime(kws_tflm):
    from edgekit.firmware import tflm

    out, model, info = kws_tflm
    size = arena_size((out / "main.cc").read_text())
    assert size == info["arena_bytes"] == info["tflm_arena"]["arena_size"] and size % 16 == 0
    interp = tflm.make_interpreter(model, size)
    assert interp is not None, "TFLM refused the generated kTensorArenaSize"
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(1, 49, 10, 1), dtype=np.int8)
    got = tflm.invoke(interp, [x])
    assert np.array_equal(got[0], reference(model, [x])[0])
    # far below the claimed size, TFLM refuses: the number is a real requirement, not padding
    assert tflm.make_interpreter(model, size // 2) is None


def test_bisection_finds_the_smallest_working_arena(mlperf):
    from edgekit.firmware import tflm

    model = (mlperf / AD).read_bytes()
    arena = tflm.measure_tflm_arena(model)
    assert tflm.make_interpreter(model, arena.min_working_64bit) is not None
    assert tflm.make_interpreter(model, arena.min_working_64bit - 1) is None
    # AD: the RecordingMicroAllocator total is too small (planner scratch is not recorded)
    assert arena.recorded_total < arena.min_working_64bit
    assert tflm.make_interpreter(model, arena.recorded_total) is None and arena.notes
    assert arena.arena_size >= arena.min_working_64bit
    assert arena.estimated_32bit == max(arena.recorded_total, arena.min_working_64bit) - arena.pointer_correction
    assert arena.pointer_correction == (arena.categories["TfLiteEvalTensor data"]
                                        + arena.categories["NodeAndRegistration struct"]) // 2 > 0


def test_model_array_round_trips_through_a_c_compiler(kws_tflm, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("host gcc is not installed")
    out, model, _ = kws_tflm
    dump = tmp_path / "dump.c"
    dump.write_text('#include <stdio.h>\n#include "model_data.h"\n'
                    "int main(void) { fwrite(ek_model_data, 1, ek_model_size, stdout); "
                    "return ((unsigned long)ek_model_data % 16) != 0; }\n")
    exe = tmp_path / "dump"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{out / 'model'}", str(dump),
                    str(out / "model" / "model_data.c"), "-o", str(exe)], check=True, capture_output=True)
    done = subprocess.run([str(exe)], capture_output=True, timeout=30)
    assert done.returncode == 0, "ek_model_data is not 16-byte aligned"
    assert done.stdout == model == (out / "model.tflite").read_bytes()


def test_c_parts_compile_for_the_board(kws_tflm, tmp_path):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    out, _, _ = kws_tflm
    makefile = (out / "Makefile").read_text()
    cpu = re.search(r"^CPU_FLAGS := (.*)$", makefile, re.M).group(1).split()
    includes = re.search(r"^INCLUDES := (.*)$", makefile, re.M).group(1).split()
    block = makefile.split("SRCS := \\\n", 1)[1].split("\nOBJS", 1)[0]
    sources = [s for s in re.findall(r"(\S+\.(?:c|S|cc))\b", block) if not s.endswith(".cc")]
    assert "main.cc" in makefile and any(s.endswith("ek_serve.c") for s in sources)
    for src in sources:
        done = subprocess.run(["arm-none-eabi-gcc", *cpu, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", *includes,
                               "-c", src, "-o", str(tmp_path / (Path(src).name + ".o"))],
                              cwd=out, capture_output=True, text=True)
        assert done.returncode == 0, f"{src}: {done.stderr}"


def test_make_own_builds_every_generated_part_without_tflm(kws_tflm, tmp_path):
    """The project's own Makefile compiles all of edgekit's parts (everything but main.cc) with no TFLM checkout."""
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    out, _, _ = kws_tflm
    project = tmp_path / "project"
    shutil.copytree(out, project)
    done = subprocess.run(["make", "-C", str(project), "own"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    built = sorted(p.relative_to(project / "build").as_posix() for p in (project / "build").rglob("*.o"))
    assert "main.cc.o" not in built and "model/model_data.c.o" in built and "app/ek_serve.c.o" in built
    assert any(b.startswith("board/") for b in built) and any(b.startswith("protocol/") for b in built)
    readme = (out / "README.md").read_text()
    for needed in ("micro_interpreter.h", "micro_mutable_op_resolver.h", "libtensorflow-microlite.a", "make own"):
        assert needed in readme, needed


def test_make_without_tflm_dir_says_what_to_set(kws_tflm):
    out, _, _ = kws_tflm
    done = subprocess.run(["make", "-C", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "set TFLM_DIR to a TensorFlow Lite Micro checkout" in done.stdout + done.stderr
    readme = (out / "README.md").read_text()
    assert "Not built by edgekit" in readme and "TFLM_DIR" in readme and "64-bit" in readme


def test_firmware_json_states_method_and_tools(kws_tflm):
    out, model, info = kws_tflm
    saved = json.loads((out / "firmware.json").read_text())
    assert saved["runtime"] == "tflm" and saved["build"]["built"] is False
    arena = saved["tflm_arena"]
    assert arena["recorded_total"] > 0 and "RecordingMicroAllocator" in arena["method"]
    assert saved["signature"]["tools"]["tflite-micro"] == arena["tflm_version"]


def test_build_flag_with_tflm_is_refused_clearly(mlperf, tmp_path):
    from edgekit.firmware.generate import generate_firmware

    with pytest.raises(ToolMissingError) as err:
        generate_firmware(mlperf / AD, "mps2-an386", tmp_path / "out", runtime="tflm", build=True)
    assert "TFLM_DIR" in str(err.value) and not (tmp_path / "out").exists()


def test_custom_op_is_rejected_for_tflm_with_its_location(tmp_path):
    from edgekit.firmware.generate import generate_firmware

    model = build_graph([T([1, 4], name="x"), T([1, 4], name="y")], [("CUSTOM", [0], [1], None)], [0], [1])
    with pytest.raises(UnsupportedOpError) as err:
        generate_firmware(model, "mps2-an386", tmp_path / "out", runtime="tflm")
    (rejected,) = err.value.report.rejected
    assert rejected.location == "op #0 -> tensor 'y'" and "AddCustom" in rejected.reason
    assert not (tmp_path / "out").exists()


def test_a_crashing_arena_probe_counts_as_too_small(mlperf, tmp_path):
    """The tflite-micro python runtime segfaults at small arenas (every MLPerf Tiny model below 512 B): in-process
    that killed `edgekit firmware --runtime tflm` with exit 139. Probes run isolated; a crash means "too small"."""
    import subprocess
    import sys

    from edgekit.firmware import tflm

    model_path = mlperf / KWS
    crash = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                            "from edgekit.firmware import tflm; "
                            "tflm.make_interpreter(Path(sys.argv[1]).read_bytes(), 256)", str(model_path)],
                           capture_output=True, timeout=120)
    assert crash.returncode == -11, (crash.returncode, crash.stderr[-500:])  # the hazard is real: SIGSEGV
    model = model_path.read_bytes()
    assert tflm.arena_works(model, 256) is False
    # a bisection that starts low walks through crashing sizes (64, 128, 256) and still finds the minimum
    found = tflm.smallest_working_arena(model, start=64, works_at=1 << 16)
    assert tflm.arena_works(model, found) and not tflm.arena_works(model, found - 1)
    assert found == tflm.measure_tflm_arena(model).min_working_64bit
