"""Core ML support: conversion, evaluation on Linux and the macOS runtime wrapper.

- ``edgekit.coreml.evaluator.MILProgram``: reads an ML Program ``.mlpackage`` (``package``: spec protobuf and
  weight blobs, no Core ML runtime) and evaluates it in numpy (``ops``: one function per MIL op).
- ``edgekit.coreml.runner.CoreMLRunner``: parity runner on top of the evaluator (plus Core ML itself on macOS).
- ``edgekit.coreml.fold_guard``: ``safe_pass_pipeline()``, ``find_requantization_folds()``: the guard against
  coremltools 9.0's ``common::int_op_canonicalization`` fold of dequantize->reshape->quantize.
- ``edgekit.coreml.macos``: the real Core ML runtime (macOS only).
"""
