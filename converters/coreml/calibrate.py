"""W8A8 calibration in torch (PT2E): observers record activation ranges on the calibration samples.

coremltools' own CoreMLQuantizer cannot be imported with torch 2.13 (it imports the removed
``torch.ao.quantization.quantizer``), and its FX LinearQuantizer inserts nothing into a torch.export graph (ATen ops,
no nn.Modules). So the graph is annotated by the symmetric int8 PT2E quantizer that litert-torch builds on torchao
(per-channel int8 weights, per-tensor int8 activations) with the observer --method asks for, calibrated by
torchao's prepare_pt2e / convert_pt2e, and the resulting quantize/dequantize graph is what ct.convert turns into
Core ML quantize/dequantize ops.
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Callable, List, Sequence

from edgekit.calibration.dataset import Sample
from edgekit.calibration.degenerate import COREML_CONSEQUENCE, TensorRange, check_ranges
from edgekit.errors import ConversionError, EdgekitError, ToolMissingError, first_line
from edgekit.quiet import captured_output

from .options import ACTIVATION_OBSERVERS
from .source import TorchSource
from .torch_runner import one_thread

log = logging.getLogger(__name__)
OBSERVER_EPS = 2 ** -12  # the smallest scale an observer returns (litert-torch's default)


def calibrated_program(source: TorchSource, samples: Sequence[Sample], method: str, tick: Callable[[int], None]):
    """The model with calibrated quantize/dequantize ops, exported in ATen dialect for ct.convert."""
    import numpy as np
    import torch

    try:
        with captured_output(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
            from torchao.quantization.pt2e import observer as observers
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError as exc:
        raise ToolMissingError(f"PT2E quantization ({exc.name})", "pip install litert-torch==0.10.0 (or run `make install`)") from exc
    observer = getattr(observers, ACTIVATION_OBSERVERS[method]).with_args(eps=OBSERVER_EPS)
    config = get_symmetric_quantization_config(is_per_channel=True)
    activation = dataclasses.replace(config.input_activation, observer_or_fake_quant_ctr=observer)
    config = dataclasses.replace(config, input_activation=activation, output_activation=activation)
    example = (source.sample(),)
    try:
        with captured_output(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = torch.export.export(source.callable(), example).module()
            prepared = prepare_pt2e(graph, PT2EQuantizer().set_global(config))
            with torch.no_grad(), one_thread():
                for sample in samples:
                    prepared(torch.from_numpy(np.ascontiguousarray(sample[0], np.float32)))
                    tick(1)
            check_ranges(observed_ranges(prepared), len(samples), COREML_CONSEQUENCE)  # collapsed: refuse first
            converted = convert_pt2e(prepared)
            return torch.export.export(converted, example).run_decompositions({})
    except EdgekitError:
        raise
    except Exception as exc:
        raise ConversionError(
            f"PT2E calibration of {source.model} failed: {first_line(exc)}",
            fix="run with --verbose for the log; --activations float16 (W8) needs no activation calibration",
        ) from exc


def observed_ranges(prepared) -> List[TensorRange]:
    """The range every activation observer of a calibrated PT2E graph recorded, named by the op it observes
    (per-channel weight observers and observers of constants are left out)."""
    found = []
    for node in prepared.graph.nodes:
        if node.op != "call_module" or not node.args or getattr(node.args[0], "op", None) == "get_attr":
            continue
        observer = getattr(prepared, node.target, None)
        lo, hi = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
        if lo is None or hi is None or lo.numel() != 1 or hi.numel() != 1:
            continue
        found.append(TensorRange(str(node.args[0]), float(lo), float(hi)))
    return found
