"""The model API of edgekit's application firmware: the library's generated C API (templates/library: api.h.in,
api.c.in, memory.c.in), named ``edgekit_model``, over the application's own model arrays.

`edgekit firmware` (the application) and `edgekit firmware --emit library` thus run one code path: the same
generated API source binds the prepared model to its arena and state, and the application (app/main.c,
app/ek_pipeline.c, app/mlperf_harness.c) calls only ``edgekit_model_*`` functions, plus its startup and its UART
protocol server / harness. Differences from the library, on purpose: the model arrays are model/model_data.c and
model/prepared_data.c (symbols ``ek_model_data`` / ``ek_prepared_data``, which firmware.json sizes), no symbol
prefix (one model per firmware), the kernel list comes from model/ek_kernel_list.h (the registry's), and the
arena goes to ``EK_ARENA_SECTION`` when ek_config.h defines one.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

from edgekit.firmware import generate as G
from edgekit.tflite_graph import Graph

API_NAME = "edgekit_model"
# every file written to model/, compiled by the application's Makefile with the rest of model/
API_FILES = (f"{API_NAME}.h", f"{API_NAME}_config.h", f"{API_NAME}.c", f"{API_NAME}_memory.c")
_APP_ARENA_SECTION = (
    '#include "ek_config.h" /* EK_ARENA_SECTION: the board profile\'s arena region, if any */\n'
    f"#if defined(EK_ARENA_SECTION) && !defined({API_NAME.upper()}_DEFAULT_ARENA_SECTION)\n"
    f"#define {API_NAME.upper()}_DEFAULT_ARENA_SECTION EK_ARENA_SECTION\n#endif\n")


def write_app_api(model_dir: Path, graph: Graph, plan: G.MemoryPlan, *, flash_bytes: int, source: str,
                  board_name: str) -> List[str]:
    """model/edgekit_model.h, _config.h, .c, _memory.c from the library's templates; returns their names."""
    from edgekit.firmware.library import TEMPLATES, api_values, state_bytes_32, write_config

    state_bytes = state_bytes_32(plan, len(graph.inputs), len(graph.outputs))
    values = api_values(API_NAME, flash_bytes, graph, plan, source=source, state_bytes=state_bytes,
                        target_text=f"board {board_name}", section=None,
                        model_includes='#include "model_data.h"\n#include "prepared_data.h"',
                        model_data="ek_model_data", prepared_data="ek_prepared_data")
    values["DEFAULT_SECTION"] = _APP_ARENA_SECTION
    model_dir.mkdir(parents=True, exist_ok=True)
    for template, dest in (("api.h.in", f"{API_NAME}.h"), ("api.c.in", f"{API_NAME}.c"),
                           ("memory.c.in", f"{API_NAME}_memory.c")):
        (model_dir / dest).write_text(G.render((TEMPLATES / template).read_text(), values, name=template))
    # the same build options as the Makefile's runtime_defines; no renames (one model per firmware); the kernels
    # are the registry's list (EK_KERNEL_LIST, model/ek_kernel_list.h)
    write_config(model_dir, API_NAME, plan, symbols=())
    return list(API_FILES)
