"""Core ML support on any OS: evaluation on Linux, the macOS runtime, ANE placement and iOS packaging.

Core ML lives in two places: the *converter* (PyTorch -> .mlpackage, `edgekit quantize --format coreml`) is a
backend like every other output format, in ``converters/coreml/`` (imported as ``edgekit.converters.coreml``);
everything that reads, runs or ships an .mlpackage is here:

- ``edgekit.coreml.evaluator.MILProgram``: reads an ML Program ``.mlpackage`` (``package``: spec protobuf and
  weight blobs, no Core ML runtime) and evaluates it in numpy (``ops``: one function per MIL op).
- ``edgekit.coreml.runner.CoreMLRunner``: parity runner on top of the evaluator (plus Core ML itself on macOS).
- ``edgekit.coreml.fold_guard``: ``safe_pass_pipeline()``, ``find_requantization_folds()``: the guard against
  coremltools 9.0's ``common::int_op_canonicalization`` fold of dequantize->reshape->quantize.
- ``edgekit.coreml.macos``: the real Core ML runtime (macOS only).
- ``edgekit.coreml.ane_placement``: `edgekit compile MODEL.mlpackage --target ane` (typed result ``CoremlPlacement``
  in ``edgekit/mobile/placement.py``, beside the GPU delegate's).
- ``edgekit.coreml.ios_package``: `edgekit package --ios` (the CLI is ``edgekit/mobile/package_cli.py``).
"""
