"""Preprocessing parity: one PreprocessSpec (edgekit.preprocessing.spec), every implementation tested against it.

Modules (each with one job):
    spec                                 PreprocessSpec: preprocess.json, the pipeline every implementation follows
    geometry, resample, decode, values   the spec's steps (Pillow's algorithms, in numpy where needed)
    base                                 Preprocessor + the IMPLEMENTATIONS registry
    pillow_impl (reference), opencv_impl, torchvision_impl, tf_impl, c_impl (+ codegen)
    sources                              reference/candidate strings: spec, IMPL:spec, module:function, tensor folder
    parity, diagnose, report             preprocess-parity: compare, name the cause, write reports
    calib_check, calib_report            calib-check
    export_params                        the value stage as Core ML ImageType / TFLite metadata parameters
    cli                                  the two CLI commands
    demo                                 the classic skew on the demo model

Public entry points (imported lazily so that ``import edgekit.preprocessing`` stays cheap):
``generate_c``, ``implementation``, ``open_pipeline``, ``run_parity``, ``calib_check``.
"""
from __future__ import annotations

from typing import Any

_EXPORTS = {
    "generate_c": "edgekit.preprocessing.codegen",
    "build_tables": "edgekit.preprocessing.codegen",
    "implementation": "edgekit.preprocessing.base",
    "IMPLEMENTATIONS": "edgekit.preprocessing.base",
    "open_pipeline": "edgekit.preprocessing.sources",
    "list_images": "edgekit.preprocessing.sources",
    "run_parity": "edgekit.preprocessing.parity",
    "Thresholds": "edgekit.preprocessing.parity",
    "calib_check": "edgekit.preprocessing.calib_check",
    "coreml_image_type": "edgekit.preprocessing.export_params",
    "tflite_normalization": "edgekit.preprocessing.export_params",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        module = importlib.import_module(_EXPORTS[name])
        if name == "IMPLEMENTATIONS":
            return module.load_implementations()
        return getattr(module, name)
    raise AttributeError(f"module 'edgekit.preprocessing' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
