"""Who produced a number: tool versions, host and time, gathered once per process."""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import importlib.metadata
import platform
import socket
from pathlib import Path
from typing import Dict, Iterable

DEFAULT_TOOLS = (
    "edgekit",
    "numpy",
    "tensorflow-cpu",
    "ai-edge-litert",
    "torch",
    "litert-torch",
    "onnx",
    "onnxruntime",
    "onnx2tf",
    "pillow",
    "coremltools",
    "nncf",
    "ethos-u-vela",
)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, or of every file under a folder (sorted, with relative names)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(item.relative_to(path)).encode())
            digest.update(bytes.fromhex(sha256_file(item)))
        return digest.hexdigest()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=None)
def tool_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def tool_versions(tools: Iterable[str] = DEFAULT_TOOLS) -> Dict[str, str]:
    """Installed versions of the tools that can influence a result (missing ones left out)."""
    return {name: v for name in tools if (v := tool_version(name)) is not None}


@functools.lru_cache(maxsize=1)
def host_info() -> Dict[str, str]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
