"""Backends, one folder each; every backend registers itself in ``CONVERTERS`` by name.

Installed as ``edgekit.converters``; core code looks converters up by name only.
"""
from __future__ import annotations

import importlib

from edgekit.registry import Registry

CONVERTERS: Registry = Registry("output format")

_BACKENDS = ("tflite", "firmware", "onnx", "vela", "coreml")


def load_backends() -> Registry:
    """Import every backend so that it registers itself (cheap: heavy imports are lazy)."""
    for name in _BACKENDS:
        importlib.import_module(f"{__name__}.{name}")
    return CONVERTERS
