"""`edgekit run MODEL --device D --pipeline PIPELINE.yaml --inputs IMAGES`: the per-phase latency/energy budget.

A pipeline file names the phases an app runs around the model::

    decode:      {format: auto | jpeg | png | rgb565 | rgb888 | gray8, width: W, height: H, library: pillow | opencv}
    preprocess:  {spec: preprocess.json (or an inline spec), implementation: pillow | opencv | c}
    inference:   {runtime: auto}
    postprocess: {steps: [dequantize, softmax, topk], top_k: 5}   or   {function: module:function, python_path: DIR}

The device-side runner (edgekit/run/runners/pipeline_runner.py, copied next to remote_runner.py) times every phase
on the device itself; the host turns the times into the budget: p50/p90/p99 per phase, share of the total,
energy per phase (measured from RAPL read at the phase boundaries, or power samples attributed to the phase
windows: a host power monitor's, placed on the device's clock with edgekit.run.pipeline.clock, or the Android
battery's, sampled on the phone; else estimated from the device profile's power model and labelled), the
bottleneck and the end-to-end figures, and whether the preprocess output equals the spec's reference.
``implementation: c`` is the generated integer C, built for the device by edgekit.run.pipeline.generated_c. On
microcontrollers (qemu:, serial:) the pipeline takes raw frames, ``implementation: c`` and ``steps: [topk]``
and runs in firmware (edgekit.run.pipeline.mcu).
"""
from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

import numpy as np
from pydantic import PositiveInt
from typing_extensions import TypedDict

from edgekit import schemas
from edgekit.console import say
from edgekit.errors import DeviceError, UserError
from edgekit.userconfig import ConfigSection, Problems, load_yaml, validate
from edgekit.preprocessing.spec import PreprocessSpec
from edgekit.profiles import Profile
from edgekit.report import json_safe
from edgekit.results import JsonObject
from edgekit.run.base import DeviceTarget
from edgekit.run.pipeline.results import (BitExactSummary, Bottleneck, Decode, HostBudget, Inference, LatencySummary,
                                          McuFrameResult, ModelFacts, ModelInput, PhaseEnergy, PhaseRow, Pipeline,
                                          PipelineDevice, PipelineReport, Postprocess, Preprocess, PreprocessCheck,
                                          Quantization, RunnerOutput)
from edgekit.run.results import RunOptions, updated
from edgekit.run.measurement.stats import latency_summary

log = logging.getLogger(__name__)

PHASES = ("decode", "preprocess", "inference", "postprocess")
DECODE_FORMATS = ("auto", "jpeg", "png", "rgb565", "rgb888", "gray8")
RAW_FORMATS = {"rgb565": 2, "rgb888": 3, "gray8": 1}
DECODE_LIBRARIES = ("pillow", "opencv")
IMPLEMENTATIONS = ("pillow", "opencv", "c")
POSTPROCESS_STEPS = ("dequantize", "softmax", "topk")
PIPELINE_RUNNER = Path(__file__).parent.parent / "runners" / "pipeline_runner.py"
REMOTE_RUNNER = Path(__file__).parent.parent / "runners" / "remote_runner.py"
PREFIX = "EKP1 "
ANDROID_SAMPLE_INTERVAL_S = 0.02


# ------------------------------------------------------------------ the pipeline file
MCU_KINDS = ("qemu", "serial")


class DecodeSection(ConfigSection):
    """decode: how frames arrive (encoded images, or raw sensor frames of a stated size)."""

    format: Literal["auto", "jpeg", "png", "rgb565", "rgb888", "gray8"] = "auto"
    width: Optional[PositiveInt] = None
    height: Optional[PositiveInt] = None
    library: Literal["pillow", "opencv"] = "pillow"


class PreprocessSection(ConfigSection):
    """preprocess: the spec (a preprocess.json path or an inline mapping) and its implementation."""

    spec: Union[str, Dict[str, Any]]
    implementation: Optional[Literal["pillow", "opencv", "c"]] = None


class InferenceSection(ConfigSection):
    runtime: str = "auto"


class PostprocessSection(ConfigSection):
    """postprocess: built-in steps (a list), or the user's own module:function."""

    steps: Optional[List[Literal["dequantize", "softmax", "topk"]]] = None
    top_k: PositiveInt = 5
    function: Optional[str] = None
    python_path: Optional[str] = None


class PipelineFile(ConfigSection):
    """The whole PIPELINE.yaml: one section per phase."""

    decode: Optional[DecodeSection] = None
    preprocess: Optional[PreprocessSection] = None
    inference: Optional[InferenceSection] = None
    postprocess: Optional[PostprocessSection] = None


def _check_user_function(function: str, python_path: Optional[str], doc, device_kind: str) -> None:
    """A post-processing module that is not there is the pipeline file's problem, found before any device work: in
    python_path (shipped to the device) when given, else importable here for host/macos runs."""
    import importlib.util

    module = function.partition(":")[0]
    where = doc.where(("postprocess", "function"))
    if python_path is not None:
        folder = Path(python_path)
        candidates = [folder / (module.replace(".", "/") + ".py"), folder / module.replace(".", "/") / "__init__.py"]
        if not folder.is_dir():
            raise UserError(f"{doc.where(('postprocess', 'python_path'))}: postprocess.python_path {folder} is not a folder",
                            fix="point python_path at the folder holding the module")
        if not any(c.is_file() for c in candidates):
            raise UserError(f"{where}: postprocess.function: module {module!r} is not in python_path {folder} "
                            f"(no {candidates[0].name} or {module}/__init__.py)",
                            fix="correct the module name or python_path in the pipeline file")
        return
    if device_kind in ("host", "macos"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UserError(f"{where}: postprocess.function: module {module!r} cannot be imported",
                            fix="add python_path: DIR (the folder holding the module) to postprocess in the pipeline file")


def _phase_of(problem: str) -> tuple:
    """The section a check's message is about (its line is reported): decode, preprocess or postprocess."""
    for phase, starts in (("decode", ("decode",)), ("preprocess", ("preprocess", "the pipeline's spec", "antialias", "cannot read preprocessing spec")),
                          ("postprocess", ("post-processing", "unknown post-processing"))):
        if problem.startswith(starts):
            return (phase,)
    return ()


def load_pipeline(path: Path, device_kind: str = "host") -> Pipeline:
    """Read and validate a pipeline file for a kind of device; every problem in one UserError listing the valid
    choices, each with file:line. Microcontrollers take raw frames, the generated C preprocessing and a top-k
    post-process. The file is checked against ``PipelineFile`` first (types, values, unknown keys)."""
    from edgekit.preprocessing.spec import PreprocessSpec

    path = Path(path)
    doc = load_yaml(path, "pipeline file")
    schema_problems = Problems(doc, "pipeline file")
    parsed = validate(PipelineFile, doc, schema_problems)
    schema_problems.raise_if_any(fix="see the pipeline section of README.md for the phases and their options")
    assert parsed is not None
    data = {k: v.model_dump(exclude_unset=True) for k, v in parsed if v is not None}
    problems: List[str] = []
    unknown = [k for k in data if k not in PHASES]
    if unknown:
        problems.append(f"unknown phase(s) {unknown}; valid phases: {', '.join(PHASES)}")
    decode = dict(data.get("decode") or {})
    fmt = decode.get("format", "auto")
    if fmt not in DECODE_FORMATS:
        problems.append(f"decode format {fmt!r} is not one of {', '.join(DECODE_FORMATS)}")
    if fmt in RAW_FORMATS and not all(isinstance(decode.get(k), int) and decode[k] > 0 for k in ("width", "height")):
        problems.append(f"decode format {fmt} needs the frame size: width and height (positive integers)")
    library = decode.get("library", "pillow")
    if library not in DECODE_LIBRARIES:
        problems.append(f"decode library {library!r} is not one of {', '.join(DECODE_LIBRARIES)}")
    pre = dict(data.get("preprocess") or {})
    mcu = device_kind in MCU_KINDS
    impl = pre.get("implementation", "c" if mcu else "pillow")
    if mcu:
        if impl != "c":
            problems.append(f"preprocess implementation {impl!r} does not run on a microcontroller; valid: c "
                            "(the integer C generated from the spec)")
        if fmt not in RAW_FORMATS:
            problems.append(f"decode format {fmt!r}: a microcontroller receives raw sensor frames; valid: "
                            f"{', '.join(RAW_FORMATS)}")
        if library != "pillow" and "library" in decode:
            problems.append("decode library does not apply to raw frames on a microcontroller")
    elif impl not in IMPLEMENTATIONS:
        problems.append(f"preprocess implementation {impl!r} is not one of {', '.join(IMPLEMENTATIONS)} "
                        "(c: the integer C generated from the spec)")
    spec = None
    if "spec" not in pre:
        problems.append("preprocess needs spec: a preprocessing spec file (preprocess.json) or an inline mapping")
    else:
        try:
            raw = pre["spec"]
            spec = (PreprocessSpec.from_dict(raw, source=str(path)) if isinstance(raw, dict)
                    else PreprocessSpec.load((path.parent / str(raw)) if not Path(str(raw)).is_absolute() else Path(raw)))
        except UserError as exc:
            problems.append(exc.message)
    if spec is not None and spec.quantized:
        problems.append("the pipeline's spec must produce float values (dtype float32): quantization to the model's "
                        "input scale/zero-point is applied from the model")
    if spec is not None and not spec.antialias and impl == "pillow" and spec.resize != "nearest":
        problems.append("antialias: false cannot be expressed with Pillow's resize; use implementation opencv")
    post = dict(data.get("postprocess") or {"steps": ["dequantize", "softmax", "topk"]})
    if mcu and (post.get("function") or [s for s in post.get("steps", ["topk"]) if s not in ("topk", "dequantize")]):
        problems.append("post-processing on a microcontroller is top-k on the int8 output (steps: [topk], top_k: K); "
                        "softmax and Python functions run on host, ssh and adb devices")
    steps = post.get("steps", [] if post.get("function") else ["dequantize", "softmax", "topk"])
    bad = [s for s in steps if s not in POSTPROCESS_STEPS]
    if bad:
        problems.append(f"unknown post-processing step(s) {bad}; valid steps: {', '.join(POSTPROCESS_STEPS)} "
                        "(or function: module:function)")
    if post.get("function") and (":" not in str(post["function"])):
        problems.append(f"post-processing function {post['function']!r} must be module:function")
    inference = dict(data.get("inference") or {})
    for problem in problems:  # each at the line of the phase it is about
        schema_problems.add(_phase_of(problem), problem)
    schema_problems.raise_if_any(fix="see the pipeline section of README.md for the phases and their options")
    python_path = post.get("python_path")
    if python_path:
        python_path = str((path.parent / python_path).resolve()) if not Path(python_path).is_absolute() else python_path
    if post.get("function"):
        _check_user_function(post["function"], python_path, doc, device_kind)
    return Pipeline(
        decode=Decode(format=fmt, library=library, width=decode.get("width"), height=decode.get("height")),
        preprocess=Preprocess(implementation=impl, spec=spec.to_dict() | {"antialias": spec.antialias,
                                                                          "shorter_side": spec.shorter_side,
                                                                          "crop": list(spec.crop) if spec.crop else None}),
        inference=Inference(runtime=inference.get("runtime", "auto")),
        postprocess=Postprocess(steps=list(steps), top_k=int(post.get("top_k", 5)), function=post.get("function"),
                                python_path=python_path),
        source=str(path),
    )


ENCODED_MAGIC = {"jpeg": (b"\xff\xd8\xff",), "png": (b"\x89PNG\r\n\x1a\n",)}


def encoded_format(path: Path) -> Optional[str]:
    """'jpeg' or 'png' from the file's first bytes (whatever its name says), else None."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    return next((fmt for fmt, magics in ENCODED_MAGIC.items() if head.startswith(magics)), None)


def list_frames(inputs: Path, decode: Decode) -> List[Path]:
    """The input files; raw frames must have exactly the stated size, encoded files the stated format (every
    wrong one named, with the expected format)."""
    from edgekit.preprocessing.sources import IMAGE_SUFFIXES

    inputs = Path(inputs)
    if not inputs.exists():
        raise UserError(f"--inputs {inputs} does not exist")
    fmt = decode.format
    files = [inputs] if inputs.is_file() else sorted(p for p in inputs.iterdir() if p.is_file() and not p.name.startswith("."))
    fix = "give frames of the stated format and resolution, or correct decode: in the pipeline file"
    if fmt in RAW_FORMATS:
        expected = decode.width * decode.height * RAW_FORMATS[fmt]
        # only a file of the wrong size is judged by its first bytes (a raw frame may start like a JPEG)
        wrong_size = [p for p in files if p.stat().st_size != expected]
        encoded = [f"{p.name} (a {encoded_format(p).upper()} file)" for p in wrong_size if encoded_format(p)]
        bad = [f"{p.name} ({p.stat().st_size} bytes)" for p in wrong_size if not encoded_format(p)]
        if encoded or bad:
            what = f"{fmt} at {decode.width}x{decode.height} ({expected} bytes)"
            lines = ([f"{len(encoded)} file(s) are encoded images, not raw {what}: {', '.join(encoded[:5])}"] if encoded else [])
            lines += [f"{len(bad)} frame(s) are not {what}: {', '.join(bad[:5])}"] if bad else []
            raise UserError("; ".join(lines), fix=fix)
        return files
    if inputs.is_file() and inputs.suffix.lower() not in IMAGE_SUFFIXES and not encoded_format(inputs):
        raise UserError(f"{inputs.name} is not a JPEG or PNG image; the pipeline's decode format is {fmt}",
                        fix="give JPEG/PNG files, or state the raw frame format: decode: {format: rgb565|rgb888|gray8, "
                            "width: W, height: H}")
    images = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES or encoded_format(p)]
    if fmt in ENCODED_MAGIC:
        wrong = [f"{p.name} ({encoded_format(p).upper() if encoded_format(p) else 'not ' + fmt.upper()})"
                 for p in images if encoded_format(p) != fmt]
        if wrong:
            raise UserError(f"{len(wrong)} file(s) are not {fmt.upper()} as the pipeline's decode format says: "
                            f"{', '.join(wrong[:5])}", fix=f"give {fmt.upper()} files, or set decode: format: auto")
    if not images:
        others = [p.name for p in files]
        raise UserError(f"no input frames in {inputs} for decode format {fmt}"
                        + (f" (found {len(others)} other file(s): {', '.join(others[:5])})" if others else ""),
                        fix="give JPEG/PNG files, or state the raw frame format: decode: {format: rgb565|rgb888|gray8, "
                            "width: W, height: H}")
    return images


def model_facts(artifact: Path, spec: PreprocessSpec) -> ModelFacts:
    """The model input (shape, dtype, quantization) and output quantization; the spec must fit the input."""
    from edgekit.run.inputs import model_file, model_inputs

    model = model_file(artifact)
    (first, *_rest) = model_inputs(artifact)
    quant = Quantization(scale=float(first.scale), zero_point=int(first.zero_point)) if np.issubdtype(first.dtype, np.integer) else None
    out_quant = None
    if model.suffix.lower() == ".tflite":
        from edgekit.tflite_model import TFLiteModel

        out = TFLiteModel.load(model).outputs[0]
        if out.is_quantized:
            out_quant = Quantization(scale=float(out.scale), zero_point=int(out.zero_point))
    h, w = (spec.crop or spec.size or [None, None])
    channels = 1 if spec.color == "grayscale" else 3
    expected = (1, channels, h, w) if spec.layout == "NCHW" else (1, h, w, channels)
    if h is not None and tuple(first.shape) != expected:
        raise UserError(f"the preprocessing spec gives tensors of shape {expected} but the model input {first.name!r} "
                        f"is {tuple(first.shape)}", fix="check size, crop, color and layout in the spec against the model")
    return ModelFacts(model_input=ModelInput(name=first.name, shape=list(first.shape), dtype=str(np.dtype(first.dtype)),
                                             quantization=quant),
                      output_quantization=out_quant)


# ------------------------------------------------------------------ transports
class Workspace:
    """A folder on the device, files copied in, one command run to completion."""

    def __init__(self, target: DeviceTarget, options: RunOptions) -> None:
        self.target, self.options = target, options
        self.local: Optional[tempfile.TemporaryDirectory] = None
        self.ssh = self.adb = None
        self.sync = False  # stamp the runner's clock lines (a host-read power monitor on a remote device)
        self.stamps: List[tuple] = []
        if target.kind in ("host", "macos"):
            self.local = tempfile.TemporaryDirectory(prefix="edgekit-pipeline-")
            self.root = self.local.name
            self.python = sys.executable
        elif target.kind == "ssh":
            from edgekit.run.runners.ssh import SshRunner

            runner = SshRunner(target)
            from edgekit.run.base import RunRequest

            request = RunRequest(Path("."), [], options=options)
            self.board_cc = runner._connection_settings().get("cc")  # the profile may name the board's compiler
            self.ssh = runner.connection(request)
            self.python = runner.remote_python(request)
            self.root = self.ssh.run(["mktemp", "-d", "/tmp/edgekit-pipeline.XXXXXXXX"], timeout_s=30,
                                     what="creating a work folder").strip()
        elif target.kind == "adb":
            import secrets

            from edgekit.run.runners.adb import DEVICE_TMP, Adb

            self.adb = Adb(target.address)
            self.adb.choose_device()
            conn = (target.profile or {}).get("connection")
            self.python = str(options.remote_python or (conn.get("python") if isinstance(conn, dict) else None)
                              or "python3")
            self.root = f"{DEVICE_TMP}/edgekit-pipeline-{secrets.token_hex(4)}"
            self.adb.shell(["mkdir", "-p", self.root], what="creating a work folder")
        else:
            raise UserError(f"--pipeline runs on host, ssh, adb and microcontroller (qemu:, serial:) devices, not "
                            f"{target.kind}", fix="choose one of those devices")

    def put(self, local: Path, name: str) -> str:
        remote = f"{self.root}/{name}"
        if self.local is not None:
            (shutil.copytree if Path(local).is_dir() else shutil.copy)(local, remote)
        elif self.ssh is not None:
            self.ssh.upload(Path(local), remote, timeout_s=300)
        else:
            self.adb.call("push", str(Path(local).resolve()), remote, timeout_s=300, what=f"pushing {Path(local).name}")
        return remote

    def run(self, words: Sequence[str], timeout_s: float) -> str:
        if self.local is None and self.sync:
            return self._run_stamped(words, timeout_s)
        if self.local is not None:
            try:
                done = subprocess.run(list(words), capture_output=True, text=True, timeout=timeout_s, cwd=self.root)
            except subprocess.TimeoutExpired:
                raise DeviceError(f"the pipeline runner did not finish within {timeout_s:g} s") from None
            if done.returncode not in (0, 3):
                raise DeviceError(f"the pipeline runner failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
            return done.stdout
        if self.ssh is not None:
            return self.ssh.run(list(words), timeout_s=timeout_s, what="running the pipeline")
        return self.adb.shell(list(words), timeout_s=timeout_s, what="running the pipeline")

    def _run_stamped(self, words: Sequence[str], timeout_s: float) -> str:
        """ssh/adb, reading the output as it arrives to stamp the runner's clock lines (self.stamps)."""
        from edgekit.run.pipeline.clock import stream_lines

        argv = self.ssh.ssh_argv(list(words)) if self.ssh is not None else self.adb.shell_argv(list(words))
        stdout, stderr, code, self.stamps = stream_lines(argv, timeout_s)
        if code not in (0, 3):
            if self.ssh is not None:
                raise self.ssh.classify(code, stderr, "running the pipeline", connected=bool(stdout))
            raise DeviceError(f"the pipeline runner failed on the adb device (exit {code}): {stderr.strip()[-500:]}")
        return stdout

    def close(self) -> None:
        if self.local is not None:
            self.local.cleanup()
        elif self.ssh is not None:
            try:
                self.ssh.run(["rm", "-rf", "--", self.root], timeout_s=30, what="removing the work folder")
            except Exception as exc:  # noqa: BLE001 - cleanup is best effort
                log.warning("could not remove %s: %s", self.root, exc)
        elif self.adb is not None:
            try:
                self.adb.shell(["rm", "-rf", self.root], timeout_s=15)
            except Exception as exc:  # noqa: BLE001
                log.warning("could not remove %s: %s", self.root, exc)


class PowerSampler(TypedDict):
    """The runner samples the battery itself: the uevent file to read, and how often."""

    uevent: str
    interval_s: float


def run_on_device(target: DeviceTarget, artifact: Path, pipeline: Pipeline, frames: Sequence[Path], *,
                  iterations: int, warmup: int, threads: Optional[int], timeout_s: float, options: RunOptions,
                  monitor=None, power_sampler: Optional[PowerSampler] = None) -> RunnerOutput:
    """Copy runner, model, frames (the generated C library, the user's post-processing module) and run; the
    runner's JSON. ``power_sampler`` ({uevent, interval_s}) makes the runner sample battery power itself."""
    from edgekit.run.runners.host import choose_runtime
    from edgekit.run.inputs import model_file

    model = model_file(artifact)
    config: JsonObject = pipeline.to_dict()  # the runner's config file (JSON read on the device)
    config["inference"] = {"runtime": choose_runtime(model, pipeline.inference.runtime)}
    generated = None
    if pipeline.preprocess.implementation == "c":
        from edgekit.run.pipeline import generated_c as pipeline_c

        ndk = pipeline_c.check_toolchain(target.kind)  # refuse before the device is touched
        generated = (pipeline_c.spec_for_model(pipeline.preprocess.spec_object(), pipeline.model_input),
                     pipeline_c.frame_keys(frames, pipeline.decode), ndk)
    if power_sampler:
        config["power_sampler"] = dict(power_sampler)
    remote_monitor = monitor is not None and target.kind not in ("host", "macos")
    config["clock_sync"] = remote_monitor
    space = Workspace(target, options if isinstance(options, RunOptions) else RunOptions(**options))
    space.sync = remote_monitor
    c_library = None
    try:
        if generated is not None:
            c_library = pipeline_c.prepare_library(space, *generated)
            config["preprocess"] = dict(config["preprocess"], c_library=c_library.path)
        space.put(REMOTE_RUNNER, "remote_runner.py")
        runner = space.put(PIPELINE_RUNNER, "pipeline_runner.py")
        remote_model = space.put(model, f"model{model.suffix.lower()}")
        config["frames"] = [space.put(p, f"frame{i:04d}{p.suffix}") for i, p in enumerate(frames)]
        post = dict(config["postprocess"])
        if post.get("python_path"):
            post["python_path"] = [space.put(Path(post["python_path"]), "user_code")]
        else:
            post["python_path"] = []
        config["postprocess"] = post
        with tempfile.TemporaryDirectory() as tmp:
            cfg_file = Path(tmp) / "pipeline.json"
            cfg_file.write_text(json.dumps(config))
            remote_cfg = space.put(cfg_file, "pipeline.json")
        words = [space.python, "-u", runner, "--config", remote_cfg, "--model", remote_model,
                 "--iterations", str(iterations), "--warmup", str(warmup)]
        if threads:
            words += ["--threads", str(threads)]
        if monitor is not None:
            monitor.begin()
        try:
            stdout = space.run(words, timeout_s=timeout_s)
        finally:
            if monitor is not None:
                monitor.stop()
    finally:
        space.close()
    lines = [l[len(PREFIX):] for l in stdout.splitlines() if l.startswith(PREFIX)]
    if not lines:
        raise DeviceError("the pipeline runner printed no result", fix="run with -v to see the runner's output")
    out: RunnerOutput = json.loads(lines[-1])
    if "error" in out and out.get("user_code"):
        raise UserError(out["error"], fix="check postprocess: function: module:function and python_path: DIR (the "
                                          "folder holding the module) in the pipeline file")
    if "error" in out:
        raise DeviceError(f"the pipeline failed on the device: {out['error']}")
    if c_library is not None:
        out["c_library_built_with"] = c_library.built_with
    if remote_monitor:
        from edgekit.run.pipeline.clock import clock_offset

        offset = clock_offset(space.stamps)
        if offset is None:
            raise DeviceError("the pipeline runner printed no clock lines: the power monitor's samples cannot be "
                              "placed on the device's phase windows")
        out["clock_offset"] = offset
        out["phase_start_host_s"] = {p: [t + offset["offset_s"] for t in ts]
                                     for p, ts in out["phase_start_monotonic_s"].items()}
    return out


# ------------------------------------------------------------------ the budget
def attribute_samples(samples: Sequence[tuple], starts: Sequence[float], durations_ms: Sequence[float]) -> Optional[float]:
    """Mean energy (uJ) of one phase: power samples (monotonic t, W) inside the phase windows times their length.

    Each window gets the mean of the samples inside it, or of the nearest sample when none falls inside
    (windows much shorter than the sampling interval)."""
    if not samples:
        return None
    times = np.array([t for t, _ in samples])
    power = np.array([p for _, p in samples])
    energies = []
    for start, ms in zip(starts, durations_ms):
        end = start + ms / 1e3
        inside = (times >= start) & (times <= end)
        p = power[inside].mean() if inside.any() else power[np.argmin(np.abs(times - (start + end) / 2))]
        energies.append(p * ms / 1e3 * 1e6)
    return float(np.mean(energies))


def samples_inside(samples: Sequence[tuple], starts: Sequence[float], durations_ms: Sequence[float]) -> int:
    """How many power samples fall inside a phase's windows (the rest of its windows took the nearest sample)."""
    times = np.array([t for t, _ in samples])
    return int(sum(((times >= s) & (times <= s + ms / 1e3)).sum() for s, ms in zip(starts, durations_ms)))


def device_power_energy(raw: RunnerOutput, phase: str) -> Optional[PhaseEnergy]:
    """Energy of one phase from power samples the runner took on the device (Android battery), or None."""
    power = raw.get("power") or {}
    samples = [tuple(s) for s in power.get("samples") or []]
    if not samples:
        return None
    starts, durations = raw["phase_start_monotonic_s"][phase], raw["phases_ms"][phase]
    note = (f"{len(samples)} samples over the run, {samples_inside(samples, starts, durations)} inside this phase's "
            f"{len(starts)} windows (a window without one takes the nearest sample); whole-device battery power, idle "
            "and screen included")
    if power.get("battery_status") == "Charging":
        note += "; the battery was CHARGING: the current is the charger's, not the device's draw"
    return PhaseEnergy(value_uj=attribute_samples(samples, starts, durations), method="measured",
                       source=f"{power['source']}: samples attributed to the phase time windows", note=note)


def phase_energy(raw: RunnerOutput, phase: str, mean_s: float, profile: Profile, threads: Optional[int],
                 monitor=None) -> PhaseEnergy:
    """Energy of one phase per run: RAPL, else power samples on the phase windows, else the profile's estimate."""
    from edgekit.run.measurement.energy import estimate_from_profile

    if raw.get("energy_uj"):
        return PhaseEnergy(value_uj=float(np.mean(raw["energy_uj"][phase])), method="measured",
                           source=raw["energy_source"])
    if monitor is not None and getattr(monitor, "samples", None):
        starts = (raw.get("phase_start_host_s") or raw["phase_start_monotonic_s"])[phase]
        energy = PhaseEnergy(value_uj=attribute_samples(monitor.samples, starts, raw["phases_ms"][phase]),
                             method="measured",
                             source=f"{monitor.describe()}: samples attributed to the phase time windows")
        if raw.get("clock_offset"):
            c = raw["clock_offset"]
            energy = updated(energy, note=f"device phase windows placed on this host's clock (offset from {c['lines']} "
                                          f"clock lines, drift {c['drift_s'] * 1e3:.3g} ms over the run)")
        return energy
    device = device_power_energy(raw, phase)
    if device is not None:
        return device
    est = estimate_from_profile(profile or {}, mean_s, threads)
    why = f" ({raw['power_unavailable']})" if raw.get("power_unavailable") else ""
    if est:
        return PhaseEnergy(value_uj=est.value, method="estimated",
                           source=est.source + (f"; not measured: {raw['power_unavailable']}" if why else ""))
    return PhaseEnergy(value_uj=None, method="unavailable",
                       source=f"no power source on this device{why or ' (RAPL not readable, no --power-monitor)'}"
                              " and no power model in a device profile (--profile NAME)")


def budget(raw: RunnerOutput, profile: Profile, threads: Optional[int], monitor=None) -> HostBudget:
    """Per-phase statistics, shares, energy (measured or estimated, labelled) and the bottleneck.

    Energy, first available of: RAPL read by the runner at the phase boundaries; a host power monitor's samples
    or the runner's own battery samples (Android) attributed to the phase windows; the profile's power model
    (estimated); else unavailable with the reason."""
    phases = raw["phases_ms"]
    totals = np.sum([np.asarray(phases[p]) for p in PHASES], axis=0)
    mean_total = float(totals.mean())
    rows = []
    for p in PHASES:
        values = np.asarray(phases[p])
        rows.append(PhaseRow(phase=p, latency_ms=LatencySummary(**latency_summary(values)),
                             share=float(values.mean()) / mean_total,
                             energy=phase_energy(raw, p, float(values.mean()) / 1e3, profile, threads, monitor)))
    bottleneck = max(rows, key=lambda r: r.share)
    energies = [r.energy.value_uj for r in rows]
    methods = sorted({r.energy.method for r in rows})
    return HostBudget(
        phases=rows,
        end_to_end_ms=LatencySummary(**latency_summary(totals)),
        end_to_end_energy_uj=float(sum(energies)) if all(e is not None for e in energies) else None,
        energy_method="/".join(methods),
        bottleneck=Bottleneck(phase=bottleneck.phase, share=bottleneck.share),
        iterations=int(totals.size),
    )


def budget_table(b: HostBudget) -> List[str]:
    lines = ["| phase | p50 ms | p90 ms | p99 ms | share | energy per run | energy source |", "|---|---|---|---|---|---|---|"]
    for r in b.phases:
        lat, e = r.latency_ms, r.energy
        energy = f"{e.value_uj / 1e3:.4g} mJ ({e.method})" if e.value_uj is not None else "unavailable"
        lines.append(f"| {r.phase} | {lat.p50:.4g} | {lat.p90:.4g} | {lat.p99:.4g} | {r.share:.1%} | "
                     f"{energy} | {e.source} |")
    t = b.end_to_end_ms
    total_e = f"{b.end_to_end_energy_uj / 1e3:.4g} mJ ({b.energy_method})" if b.end_to_end_energy_uj is not None else "unavailable"
    lines.append(f"| **end to end** | {t.p50:.4g} | {t.p90:.4g} | {t.p99:.4g} | 100% | {total_e} | |")
    lines += ["", f"Bottleneck: **{b.bottleneck.phase}** ({b.bottleneck.share:.1%} of the mean end-to-end time "
                  f"over {b.iterations} runs)."]
    return lines


def preprocess_check(raw: RunnerOutput, pipeline: Pipeline, frames: Sequence[Path]) -> PreprocessCheck:
    """Did the device's preprocess phase give the spec's reference tensor, bit for bit? Compared on the device's
    own decoded pixels: a frame whose decode differs here (another libjpeg) is not compared, and says so."""
    from edgekit.preprocessing.decode import to_working_color
    from edgekit.preprocessing.pillow_impl import resize_crop_pillow
    from edgekit.preprocessing.values import to_tensor
    from edgekit.run.pipeline.generated_c import spec_for_model
    from edgekit.run.runners.pipeline_runner import decode, digest

    impl = pipeline.preprocess.implementation
    reference = ("edgekit's Pillow reference of the spec on the device's decoded pixels, quantized to the model "
                 "input")
    try:
        spec = spec_for_model(pipeline.preprocess.spec_object(), pipeline.model_input)
    except UserError as exc:
        return PreprocessCheck(implementation=impl, frames=0, identical=0, differ=[], not_compared=[],
                               reference=reference, note=f"not compared: {exc.message}")
    frames_seen, identical, differ, not_compared = 0, 0, [], []
    for path, device in zip(frames, raw.get("preprocess_checks") or []):
        frames_seen += 1
        pixels = np.asarray(decode(Path(path).read_bytes(), pipeline.decode.to_dict()))
        if digest(pixels) != device["pixels_sha256"]:
            not_compared.append(f"{Path(path).name}: the device decoded other pixels than this host")
            continue
        pixels = pixels[:, :, None] if pixels.ndim == 2 else pixels
        tensor = to_tensor(resize_crop_pillow(to_working_color(pixels, spec), spec), spec)[None]
        if digest(tensor) == device["tensor_sha256"]:
            identical += 1
        else:
            differ.append(Path(path).name)
    return PreprocessCheck(implementation=impl, frames=frames_seen, identical=identical, differ=differ,
                           not_compared=not_compared, reference=reference)


def check_line(check: PreprocessCheck) -> str:
    if check.note:
        return f"preprocess output vs the spec's reference: {check.note}"
    line = (f"preprocess output ({check.implementation}) identical to the spec's reference on {check.identical} "
            f"of {check.frames} frames")
    if check.differ:
        line += f"; differs on {', '.join(check.differ[:5])}"
    if check.not_compared:
        line += f"; {len(check.not_compared)} not compared ({check.not_compared[0]})"
    return line


def cmd_pipeline(args, target: DeviceTarget) -> int:
    """The `edgekit run --pipeline` command body."""
    from edgekit.atomic import atomic_output_dir

    if args.inputs is None:
        raise UserError("--pipeline needs --inputs: the files as the app receives them (JPEG/PNG or raw frames)")
    if target.kind == "macos" and sys.platform != "darwin":  # never measure this machine and label it the Mac
        from edgekit.errors import DeviceNotFoundError

        raise DeviceNotFoundError(
            f"--device macos runs on this machine, which is {sys.platform}, not macOS: its figures would be this "
            "machine's, labelled as a Mac's", fix="run edgekit on the Mac itself, or reach it with --device ssh://USER@MAC")
    if not args.artifact.exists():
        raise UserError(f"model {args.artifact} does not exist")
    pipeline = load_pipeline(args.pipeline, target.kind)
    frames = list_frames(args.inputs, pipeline.decode)[: args.input_limit]
    pipeline = pipeline.with_model(model_facts(args.artifact, pipeline.preprocess.spec_object()))
    if target.kind in MCU_KINDS:
        return cmd_mcu_pipeline(args, target, pipeline, frames)
    monitor = None
    if args.power_monitor:  # read on this host; a remote device's phase windows are put on this host's clock
        from edgekit.run.measurement.energy import SamplingMonitor, open_monitor

        monitor = open_monitor(args.power_monitor)
        if monitor.name == "rapl":  # the runner reads RAPL itself, at the phase boundaries
            monitor.close()
            monitor = None
        elif not isinstance(monitor, SamplingMonitor):
            raise UserError(f"--power-monitor {args.power_monitor} gives one energy total, not power samples: it "
                            "cannot be split into phases",
                            fix="use a sampling monitor (ppk2, joulescope, ina219/ina226) with --pipeline; RAPL on a "
                                "Linux device is read by the runner itself at the phase boundaries")
    options = RunOptions(remote_python=args.remote_python,
                         ssh_identity=str(args.ssh_identity) if args.ssh_identity else None, ssh_options=list(args.ssh_option))
    sampler = None
    if target.kind == "adb" and monitor is None:  # the runner samples the battery itself, on the phase windows' clock
        from edgekit.run.runners.adb import BATTERY_SYSFS

        sampler = PowerSampler(uevent=f"{BATTERY_SYSFS}/uevent", interval_s=ANDROID_SAMPLE_INTERVAL_S)
    try:
        raw = run_on_device(target, args.artifact, pipeline, frames, iterations=args.iterations, warmup=args.warmup,
                            threads=args.threads or 1, timeout_s=max(args.timeout * 10, 120.0),
                            options=options, monitor=monitor, power_sampler=sampler)
    finally:
        if monitor is not None:
            monitor.close()
    result = budget(raw, target.profile, args.threads or 1, monitor)
    check = preprocess_check(raw, pipeline, frames)
    report = PipelineReport(
        device=PipelineDevice(kind=target.kind, name=target.name or target.kind, profile=(target.profile or {}).get("name")),
        model=str(args.artifact), pipeline=pipeline, frames=[p.name for p in frames], budget=result,
        runtime=json_safe(raw.get("runtime")), device_python=raw.get("python"),
        results=json_safe(dict(zip((p.name for p in frames), raw["results"]))),
        timing="every phase timed on the device by pipeline_runner.py (time.perf_counter_ns around each phase)",
        preprocess_check=check, c_library_built_with=raw.get("c_library_built_with"))
    md = ["# Pipeline budget", "", f"Model `{args.artifact}` on {report.device.name} ({target.kind}); pipeline "
          f"`{args.pipeline}`; {len(frames)} input file(s), {result.iterations} timed runs.", ""] + budget_table(result)
    md += ["", check_line(check) + "."]
    if raw.get("c_library_built_with"):
        md.append(f"Generated C preprocessing built with {raw['c_library_built_with']}.")
    with atomic_output_dir(args.outdir) as stage:
        (stage / "pipeline.json").write_text(schemas.dumps("pipeline", json_safe(report.to_dict())))
        (stage / "report.md").write_text("\n".join(md) + "\n")
    say("\n".join(budget_table(result)))
    say(check_line(check))
    say(f"wrote {args.outdir}/pipeline.json, report.md")
    # the generated C must equal the reference bit for bit (as on a microcontroller); Pillow/OpenCV are reported
    return 1 if check.implementation == "c" and check.differ else 0


def cmd_mcu_pipeline(args, target: DeviceTarget, pipeline: Pipeline, frames: Sequence[Path]) -> int:
    """qemu:/serial: the firmware pipeline; per-phase instructions and the bit-exactness verdict."""
    from edgekit.atomic import atomic_output_dir
    from edgekit.run.pipeline.mcu import mcu_budget, mcu_table, run_mcu_pipeline

    raw = run_mcu_pipeline(target, args.artifact, pipeline, frames, timeout_s=args.timeout, flash=bool(args.flash))
    board = raw.board
    result = mcu_budget(raw, board.profile)
    exact = raw.bit_exact
    report = PipelineReport(
        device=PipelineDevice(kind=target.kind, name=target.name or target.kind, board=board.name),
        model=str(args.artifact), pipeline=pipeline, frames=[p.name for p in frames], budget=result,
        results={p.name: McuFrameResult(device_topk=d.tolist(), host_topk=h.tolist(), bit_exact=e)
                 for p, d, h, e in zip(frames, raw.device_topk, raw.host_topk, exact)},
        bit_exact=BitExactSummary(frames=len(exact), identical=sum(exact),
                                  reference="the spec's Pillow reference on the same decoded pixels -> LiteRT on the "
                                            "same int8 model -> top-k"),
        firmware_elf=raw.elf)
    decode = pipeline.decode
    md = ["# Pipeline budget (microcontroller)", "", f"Model `{args.artifact}` on {board.name} ({target.kind}); "
          f"{len(frames)} raw {decode.format} frame(s) of {decode.width}x{decode.height}; top-{raw.k} on the device.",
          ""] + mcu_table(result) + [
          "", f"Device output bit-exact with the host reference on {sum(exact)} of {len(exact)} frames."]
    with atomic_output_dir(args.outdir) as stage:
        (stage / "pipeline.json").write_text(schemas.dumps("pipeline", report.to_dict()))
        (stage / "report.md").write_text("\n".join(md) + "\n")
    say("\n".join(mcu_table(result)))
    say(f"device top-{raw.k} bit-exact with the host reference on {sum(exact)} of {len(exact)} frames")
    say(f"wrote {args.outdir}/pipeline.json, report.md")
    return 0 if all(exact) else 1
