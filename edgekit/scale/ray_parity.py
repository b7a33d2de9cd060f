"""Dataset-scale parity on Ray Data.

The dataset is listed into chunks (edgekit.scale.sources); ``map_batches`` hands chunks to a callable
class that holds ONE reference and ONE candidate runner per actor (LiteRT, onnxruntime or our Core ML
evaluator, whatever ``open_runner`` picks), reads and preprocesses the chunk there, runs both models and
returns the chunk's sufficient statistics (edgekit.parity.streaming). The driver merges them: the
result does not depend on the number of workers, and memory does not grow with the dataset.
"""
from __future__ import annotations

import logging
import os
import pickle
import socket
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Tuple

import numpy as np

from edgekit.errors import ToolMissingError, UserError, first_line
from edgekit.parity.compare import check_compatible
from edgekit.parity.output_kind import detect_kind, overrides_for
from edgekit.parity.result import Accuracy, OutputMetrics, ParityReport
from edgekit.parity.streaming import TOP_K, ParitySums
from edgekit.parity.tolerance import Tolerance
from edgekit.scale.ray_start import session_dir, shutdown_local_ray, start_local_ray
from edgekit.scale.sources import Decoding, ScaleSource, read_chunk

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class RaySettings:
    """How to run: ``address`` None = a local Ray started for the run; ``workers`` = actors (one model pair each)."""

    address: Optional[str] = None
    workers: int = 1

    @property
    def engine(self) -> str:
        return "ray (local)" if self.address is None else f"ray ({self.address})"


def _ray():
    try:
        import ray
    except ImportError:
        raise ToolMissingError("ray", "pip install 'ray[data]==2.60.0' (or run `make install`)") from None
    return ray


def connect(settings: RaySettings) -> bool:
    """Join or start Ray; True when this call started it (the caller shuts it down). Unreachable: fails in seconds."""
    ray = _ray()
    if settings.address is not None:
        check_reachable(settings.address)
    if ray.is_initialized():  # a caller (a test, a notebook) already joined a cluster: use it
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    common = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if settings.address is None:
        start_local_ray(ray, num_cpus=max(settings.workers, 1), **common)
        return True
    try:
        ray.init(address=settings.address, **{k: v for k, v in common.items() if k != "include_dashboard"})
    except Exception as exc:  # ConnectionError, RuntimeError, grpc errors: all mean "cannot join"
        raise _unreachable(settings.address, first_line(exc)) from exc
    return True


def check_reachable(address: str) -> None:
    """Within CONNECT_TIMEOUT_S, host:port of ``ray://host:port`` / ``host:port`` must accept a TCP connection AND
    answer as a gRPC server (HTTP/2: its first frame is SETTINGS), so an address that accepts the connection but
    never answers fails in seconds too (``auto`` is left to Ray, which fails at once when no local cluster runs)."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"Ray address {address!r} is not host:port, ray://host:port or auto",
                        fix="pass e.g. --ray-address ray://head-node:10001, --ray-address auto, or --ray for a local Ray")
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S) as sock:
            why = _grpc_answer_problem(sock, deadline)
    except OSError as exc:
        raise _unreachable(address, exc.strerror or str(exc)) from exc
    if why:
        raise _unreachable(address, why)


# HTTP/2 client connection preface + an empty SETTINGS frame (RFC 9113 3.4); a gRPC server answers with SETTINGS
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4


def _grpc_answer_problem(sock: socket.socket, deadline: float) -> Optional[str]:
    """None when the peer answers the HTTP/2 preface with a SETTINGS frame before ``deadline``; else what went wrong."""
    closed = "it accepts the connection and closes it without an answer (not a Ray head/client port)"
    try:
        sock.sendall(_H2_PREFACE)
    except (BrokenPipeError, ConnectionResetError):  # closed before (or while) we spoke: same as closing unanswered
        return closed
    header = b""
    while len(header) < 9:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return (f"it accepts the connection but sent no answer within {CONNECT_TIMEOUT_S:.0f} s "
                    "(not a Ray head/client port, or the cluster is hung)")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(9 - len(header))
        except socket.timeout:
            continue
        except ConnectionResetError:
            return closed
        if not chunk:
            return closed
        header += chunk
    if header[3] != _H2_SETTINGS:
        return f"it answers, but not as a Ray (gRPC) server does (first bytes {header[:9]!r})"
    return None


def _unreachable(address: str, why: str) -> UserError:
    return UserError(f"cannot reach the Ray cluster at {address}: {why}",
                     fix="start it (`ray start --head` on the head node; clients use ray://HEAD:10001), check the address "
                         "and firewall, or run on this machine with --ray instead of --ray-address")


class ParityActor:
    """One reference and one candidate runner per actor; ``__call__`` turns a batch of chunks into their statistics."""

    def __init__(self, reference: str, candidate: str, decoding: Decoding, top_k: int = TOP_K,
                 output_kinds: Tuple[Tuple[str, str], ...] = ()) -> None:
        from edgekit.parity.runners import open_runner

        self.reference, self.candidate = open_runner(Path(reference)), open_runner(Path(candidate))
        self.inputs = self.reference.input_specs()
        self.decoding = decoding
        self.top_k = top_k
        self.overrides = dict(output_kinds)

    def __call__(self, batch: dict) -> dict:
        out = []
        for blob in batch["chunk"]:
            chunk = pickle.loads(blob)
            sums = None
            for row in read_chunk(chunk, self.decoding, self.inputs):
                if row.sample is None:
                    sums = sums or ParitySums.empty(len(self.reference.output_names()), self.top_k)
                    sums.add_corrupt(row.name, row.error)
                    continue
                r, rr = self.reference.run(row.sample)
                c, cr = self.candidate.run(row.sample)
                if sums is None:
                    sums = ParitySums.empty(len(r), self.top_k)
                sizes = [int(np.prod(s.shape[1:])) for s in self.inputs]
                names = self.candidate.output_names()
                kinds = [detect_kind(np.asarray(o)[None], input_sizes=sizes, labelled=row.label is not None and k == 0,
                                     override=self.overrides.get(names[k])) for k, o in enumerate(r)]
                sums.add_sample(row.name, r, c, rr, cr, kinds, row.label)
            out.append(pickle.dumps(sums))
        return {"sums": np.array(out, dtype=object)}


def ray_parity(
    reference: Path, candidate: Path, source: ScaleSource, *, settings: RaySettings, tolerance: Tolerance,
    top_k: int = TOP_K, progress: Optional[Callable[[int], None]] = None,
) -> ParityReport:
    """Parity of two model files over a listed dataset on Ray; the report's data says how it ran."""
    from edgekit.parity.runners import open_runner

    ref_runner, cand_runner = open_runner(Path(reference)), open_runner(Path(candidate))  # fail early, describe
    check_compatible(ref_runner.input_specs(), cand_runner.input_specs())
    overrides_for(cand_runner.output_names(), tolerance.output_kinds)  # an unknown name fails before Ray starts
    ray = _ray()
    started = connect(settings)
    session = session_dir(ray) if started and settings.address is None else None
    t0 = time.perf_counter()
    try:
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        chunks = [{"chunk": pickle.dumps(c)} for c in source.chunks]
        ds = ray.data.from_items(chunks, override_num_blocks=len(chunks))
        with warnings.catch_warnings():  # Ray 2.60 warns that max_restarts & co. will become named parameters
            warnings.simplefilter("ignore")
            stats = ds.map_batches(
                ParityActor, fn_constructor_args=(str(reference), str(candidate), source.decoding, top_k,
                                                  tolerance.output_kinds),
                batch_size=1, compute=ray.data.ActorPoolStrategy(size=settings.workers), num_cpus=1,
                max_restarts=-1, max_task_retries=-1,  # a dying worker is restarted and its chunk retried by Ray
            )
        total = ParitySums.empty(len(cand_runner.output_names()), top_k)
        for batch in stats.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
            for blob in batch["sums"]:
                part = pickle.loads(blob)
                if part is not None:
                    total.merge(part)
                    if progress:
                        progress(part.samples + part.corrupt)
        resources = ray.cluster_resources()
    finally:
        if started:
            shutdown_local_ray(ray, session)
    wall = time.perf_counter() - t0
    report = report_from_sums(ref_runner, cand_runner, total, tolerance)
    return report.with_data({
        "dataset": source.describe(),
        "execution": {"engine": settings.engine, "workers": settings.workers, "cluster_cpus": resources.get("CPU"),
                      "samples": total.samples, "wall_time_s": round(wall, 3),
                      "samples_per_s": round(total.samples / wall, 2) if wall > 0 else None},
        "corrupt": {"count": total.corrupt, "samples": total.corrupt_names},
        "worst_samples": total.worst_samples(),
        "flips": total.flipped_samples(),
    })


def report_from_sums(reference, candidate, sums: ParitySums, tolerance: Tolerance) -> ParityReport:
    """The ParityReport ``compare`` would give on the same samples, from merged statistics."""
    if sums.samples == 0:
        raise UserError(f"no usable samples: all {sums.corrupt} were corrupt, e.g. "
                        + "; ".join(sums.corrupt_names[:3]), fix="fix the data or pass other --data")
    outputs, failures, top1 = [], [], None
    classification = [out.top1_samples > 0 for out in sums.outputs]  # decided per sample, like compare()
    for name, out, flag in zip(candidate.output_names(), sums.outputs, classification):
        metrics = out.metrics(flag)
        outputs.append(OutputMetrics(name=name, kind=out.kind, kind_reason=out.kind_reason, **metrics))
        failures.extend(tolerance.failures(name, metrics, out.kind))
    if sums.labelled and sums.labelled == sums.samples and classification and classification[0]:
        top1 = Accuracy.of(sums.labelled, sums.reference_correct / sums.labelled,
                           sums.candidate_correct / sums.labelled)
    return ParityReport(samples=sums.samples, tolerance=tolerance, failures=failures, outputs=outputs, accuracy=top1,
                        reference=reference.describe(), candidate=candidate.describe())
