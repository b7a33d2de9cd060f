"""Issue 26: the application firmware is the library + edgekit's startup + its UART server (one code path).

The application project compiles the model API the library emits (templates/library: api.h.in, api.c.in,
memory.c.in) as model/edgekit_model.{h,c}; its own sources call only that API. Checked on the generated sources
(against a library emitted for the same model), on the linked objects (the app's undefined symbols: none is a
runtime symbol) and by booting the firmware under QEMU (the generator's boot check, bit-exact INFER).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgekit.firmware import boards as B

NM = "arm-none-eabi-nm"
needs_tools = pytest.mark.skipif(any(shutil.which(t) is None for t in ("arm-none-eabi-gcc", NM, "make")),
                                 reason="needs arm-none-eabi-gcc, arm-none-eabi-nm and make")
APP_SOURCES = ("main.c", "ek_pipeline.c", "ek_pipeline.h", "mlperf_harness.c")
# runtime internals an application would call without the API
RUNTIME_CALLS = re.compile(r"\bek_(prepared_\w+|init|invoke|reset_variables|last_error|get_input|get_output|"
                           r"set_op_hook|num_inputs|num_outputs)\s*\(")


def _symbols(obj: Path, *flags: str) -> set:
    out = subprocess.run([NM, *flags, str(obj)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip() and not line.endswith(":")}


@pytest.fixture(scope="module")
def app_and_library(tmp_path_factory):
    from edgekit.firmware.generate import generate_firmware
    from edgekit.firmware.library import generate_library
    from tests.firmware.test_qemu import conv_pool_model

    out = tmp_path_factory.mktemp("one-path")
    model = conv_pool_model()
    path = out / "conv-pool.tflite"
    path.write_bytes(model)
    app = generate_firmware(path, "mps2-an386", out / "app", build=True)
    lib = generate_library(path, out / "lib", name="edgekit_model", board="mps2-an386")
    return model, app, lib.outdir


def test_app_sources_use_only_the_public_model_api():
    for name in APP_SOURCES:
        text = (B.APP_DIR / name).read_text()
        assert '#include "ek_runtime.h"' not in text and "ek_app_runtime.h" not in text, name
        assert not RUNTIME_CALLS.search(text), f"{name} calls the runtime directly: {RUNTIME_CALLS.search(text)[0]}"
        if name.endswith(".c"):
            assert '#include "edgekit_model.h"' in text and "edgekit_model_invoke()" in text, name
    assert not (B.APP_DIR / "ek_app_runtime.h").exists()


@needs_tools
def test_app_compiles_the_library_api_source(app_and_library):
    _, app, lib = app_and_library
    model_dir = app.outdir / "model"
    lib_text = (lib / "src" / "edgekit_model.c").read_text()
    # the library renames its runtime symbols edgekit_model_ek_* and binds its own arrays; otherwise the same text
    lib_text = lib_text.replace("edgekit_model_ek_", "ek_").replace(
        "edgekit_model_model_data", "ek_model_data").replace("edgekit_model_prepared_data", "ek_prepared_data")
    lib_text = lib_text.replace('#include "edgekit_model_model.h"', '#include "model_data.h"\n#include "prepared_data.h"')
    assert (model_dir / "edgekit_model.c").read_text() == lib_text
    strip_target = lambda s: re.sub(r"offline memory plan for [^*]*\*/", "", s)  # noqa: E731
    assert strip_target((model_dir / "edgekit_model.h").read_text()) == \
        strip_target((lib / "include" / "edgekit_model.h").read_text())
    assert "model/edgekit_model.c" in (app.outdir / "Makefile").read_text()


@needs_tools
def test_app_objects_call_no_runtime_symbol(app_and_library):
    _, app, _ = app_and_library
    build = app.outdir / "build"
    assert build.is_dir(), "generate_firmware(build=True) keeps build/"
    runtime_defined = set()
    for obj in (build / "runtime").rglob("*.o"):
        runtime_defined |= _symbols(obj, "-g", "--defined-only")
    assert {"ek_prepared_init", "ek_prepared_invoke"} <= runtime_defined
    main_undefined = _symbols(build / "app" / "main.c.o", "-u")
    assert not main_undefined & runtime_defined, sorted(main_undefined & runtime_defined)
    assert {"edgekit_model_init", "edgekit_model_invoke", "edgekit_model_input", "edgekit_model_output",
            "edgekit_model_set_op_hook", "edgekit_model_reset"} <= main_undefined
    # the API source is the one object of the application that calls into the runtime
    api_undefined = _symbols(build / "model" / "edgekit_model.c.o", "-u")
    assert {"ek_prepared_init", "ek_prepared_invoke", "ek_prepared_reset"} <= api_undefined


@needs_tools
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="needs qemu-system-arm")
def test_app_on_the_api_runs_bit_exact_with_per_op_counts(app_and_library):
    from edgekit.firmware.qemu import QemuSession
    from tests.firmware import opmodels as om

    model, app, _ = app_and_library
    board = B.load_board("mps2-an386")
    with QemuSession(board, app.elf, count_instructions=True) as qemu:
        info = qemu.info
        assert info.ready and info.op_count == 2 and info.arena_used == app.info.arena_bytes
        assert 0 < info.state_used <= app.info.state_bytes
        x = np.random.default_rng(3).integers(-128, 128, size=(1, 8, 8, 4)).astype(np.int8)
        result = qemu.infer([x])
        np.testing.assert_array_equal(result.outputs[0], om.reference(model, [x])[0])
        # conv + pool run as one row-streamed group (firmware.json plan.streamed_groups): one op hook, one count
        groups = [(g["first_op"], g["last_op"]) for g in app.info.plan["streamed_groups"]]
        assert groups == [(0, 1)] and len(result.op_instructions) == 1
        assert 0 < result.op_instructions[0] < result.instructions
