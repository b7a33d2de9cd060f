"""``LibraryInfo``: library.json of `edgekit firmware --emit library` (a model + edgekit's runtime as a C library the
user links into their own firmware), typed; its schema is edgekit/schemas/firmware-library.json."""
from __future__ import annotations

from typing import ClassVar, Dict, List, Literal, Optional

from edgekit.firmware.plan_types import StreamedGroupRow
from edgekit.firmware.results import TensorInfo
from edgekit.results import Result, Section
from edgekit.run.results import Signature


class LibraryModel(Section):
    """The model the library runs."""

    source: str
    sha256: str
    bytes: int
    inputs: List[TensorInfo]
    outputs: List[TensorInfo]


class LibraryCore(Section):
    """The core the prepared plan and the prebuilt archive are for."""

    cpu: str
    fpu: str
    float_abi: str
    board: Optional[str] = None
    gcc_flags: List[str]


class LibraryMemory(Section):
    """RAM the user provides (arena and state) and constant data in flash, in bytes."""

    arena_bytes: int
    state_bytes: int
    model_bytes: int                      # the constants kept in flash (<name>_model_data)
    prepared_bytes: int
    tflite_bytes: int                     # the .tflite they come from
    constant_tensor_bytes: int
    quantization_bytes: int               # per-channel scales and zero points
    model_note: str
    arena_section: Optional[str] = None
    arena_section_bytes: Optional[int] = None
    method: str


class LibraryFile(Section):
    """One file of the library folder."""

    path: str
    bytes: int
    role: Literal["api-header", "api-source", "memory", "model-data", "runtime", "config", "archive", "cmake",
                  "zephyr", "arduino", "make", "doc"]


class PrebuiltArchive(Section):
    """lib<name>.a, compiled from the folder's own sources for the library's core."""

    built: bool
    path: Optional[str] = None
    reason: Optional[str] = None          # why it was not built
    compiler: Optional[str] = None
    cflags: Optional[List[str]] = None
    text_bytes: Optional[int] = None      # code + read-only data (model and prepared data included)
    data_bytes: Optional[int] = None
    bss_bytes: Optional[int] = None
    method: Optional[str] = None
    prefixed_symbols: Optional[int] = None  # runtime symbols renamed <name>_ek_...
    global_symbols: Optional[List[str]] = None  # every global symbol the archive defines


class LibraryApi(Section):
    """The generated C API."""

    header: str
    functions: List[str]
    macros: Dict[str, int]
    symbol_prefix: str


class LibraryInfo(Result):
    """an edgekit model library: model, core, C API, memory, files, prebuilt archive"""

    SCHEMA: ClassVar[str] = "firmware-library"

    edgekit_library: Literal[1] = 1
    name: str
    model: LibraryModel
    core: LibraryCore
    optimize: str
    api: LibraryApi
    memory: LibraryMemory
    kernels: List[str]
    streamed_groups: List[StreamedGroupRow] = []  # ops run together row by row: the op hook sees each group once
    files: List[LibraryFile]
    prebuilt: PrebuiltArchive
    integrations: Dict[str, str]          # build system -> how to use it
    signature: Signature
