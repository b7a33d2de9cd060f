"""TorchRunner: the float PyTorch model itself as the parity reference (FP32 torch vs the Core ML program)."""
from __future__ import annotations

import contextlib
from typing import Iterator, List

import numpy as np

from edgekit.calibration.dataset import InputSpec, Sample
from edgekit.parity.runners import ModelRunner
from edgekit.provenance import tool_version

from .source import TorchSource


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread: batch-1 runs of small models are ~20x slower with intra-op threads on a busy 2-core host,
    and one thread makes the float reference independent of the machine's core count."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


class TorchRunner(ModelRunner):
    """Runs the model in float32 (eval mode, no grad, one thread) on the CPU."""

    def __init__(self, source: TorchSource) -> None:
        self.source = source
        self.module = source.callable()
        self._outputs = None

    def input_specs(self) -> List[InputSpec]:
        return [InputSpec(self.source.input_name, self.source.input_shape, np.dtype(np.float32))]

    def output_names(self) -> List[str]:
        if self.source.program is not None:
            return list(self.source.program.graph_signature.user_outputs)
        if self._outputs is None:
            count = len(self._run([np.zeros(self.source.input_shape, np.float32)]))
            self._outputs = ["output"] if count == 1 else [f"output_{i}" for i in range(count)]
        return self._outputs

    def _run(self, sample: Sample) -> List[np.ndarray]:
        import torch

        with torch.no_grad(), one_thread():
            result = self.module(*[torch.from_numpy(np.ascontiguousarray(a, np.float32)) for a in sample])
        flat = result if isinstance(result, (tuple, list)) else [result]
        return [t.detach().numpy().astype(np.float32) for t in flat]

    def run(self, sample: Sample):
        outputs = self._run(sample)
        return outputs, outputs

    def describe(self) -> dict:
        return {
            "path": self.source.model,
            "sha256": self.source.sha256,
            "format": f"torch ({self.source.kind.value})",
            "runtime": f"torch {tool_version('torch')} (float32, CPU, 1 thread)",
            "inputs": [{"name": self.source.input_name, "shape": list(self.source.input_shape), "dtype": "float32"}],
        }
