#!/usr/bin/env python3
"""edgekit device-side runner: load a model, time inferences, stream results as JSON lines on stdout.

This file is copied as-is to SSH and ADB targets and also runs locally for ``--device host``, so that
every device is measured by the same loop. It needs only the Python standard library, numpy and one
runtime: ``ai_edge_litert`` or ``tflite_runtime`` for .tflite (``tflite_micro`` with ``--runtime tflm``),
``onnxruntime`` for .onnx, ``coremltools`` for .mlpackage on macOS.

Protocol: every line it means for the host starts with ``EKR1 `` followed by one JSON object with an
``event`` key (hello, loaded, first, outputs, warm_start, batch, sensors, warm_end, done, error). Any other
stdout line (a runtime's banner) is ignored by the host. Timing: ``latency`` covers the runtime's invoke
call only (input copies excluded, ONNX Runtime's ``run`` includes its own input/output handling).
Sensors (thermal zones, cpufreq, ``vcgencmd get_throttled``, ``dumpsys thermalservice``) are read raw
here and interpreted on the host (edgekit.run.measurement.thermal). Core ML (``--compute-units``) adds the per-op
placement from MLComputePlan to the ``loaded`` event as ``runtime.placement``, gathered after the load is timed.
"""
from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import platform
import subprocess
import sys
import time

PREFIX = "EKR1 "
FLUSH_S = 0.25  # at most this long between batches of latencies (keeps the host's silence timeout meaningful)


def emit(event: str, **fields) -> None:
    sys.stdout.write(PREFIX + json.dumps(dict(event=event, **fields), separators=(",", ":")) + "\n")
    sys.stdout.flush()


class RunnerFailure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# --- memory ---------------------------------------------------------------------------------------
def peak_rss_bytes():
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # Linux reports KiB


def current_rss_bytes():
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


# --- sensors (raw) --------------------------------------------------------------------------------
def _read(path: str):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _command(argv, timeout=3.0):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def read_thermal_zones(root: str = "/sys/class/thermal") -> dict:
    """{zone type (or zone name): raw millidegree text} for every readable thermal zone."""
    zones = {}
    for zone in sorted(glob.glob(os.path.join(root, "thermal_zone*"))):
        value = _read(os.path.join(zone, "temp"))
        if value is None or not value.lstrip("-").isdigit():
            continue
        name = _read(os.path.join(zone, "type")) or os.path.basename(zone)
        if name in zones:
            name = f"{name}:{os.path.basename(zone)}"
        zones[name] = int(value)
    return zones


def read_cpufreq(root: str = "/sys/devices/system/cpu") -> dict:
    """{cpuN: {"cur_khz": .., "max_khz": ..}} for every CPU with a cpufreq policy."""
    freqs = {}
    for cpu in sorted(glob.glob(os.path.join(root, "cpu[0-9]*"))):
        cur = _read(os.path.join(cpu, "cpufreq", "scaling_cur_freq"))
        if cur is None or not cur.isdigit():
            continue
        top = _read(os.path.join(cpu, "cpufreq", "cpuinfo_max_freq"))
        freqs[os.path.basename(cpu)] = {"cur_khz": int(cur), "max_khz": int(top) if top and top.isdigit() else None}
    return freqs


class SensorReader:
    """Reads every sensor this device has; ``available`` names them (decided once at start)."""

    def __init__(self, want_dumpsys: bool) -> None:
        self.available = []
        if read_thermal_zones():
            self.available.append("thermal_zones")
        if read_cpufreq():
            self.available.append("cpufreq")
        self.vcgencmd = _command(["vcgencmd", "get_throttled"]) is not None
        if self.vcgencmd:
            self.available.append("vcgencmd")
        self.dumpsys = want_dumpsys and _command(["dumpsys", "thermalservice"]) is not None
        if self.dumpsys:
            self.available.append("dumpsys_thermalservice")

    def read(self) -> dict:
        sample = {}
        if "thermal_zones" in self.available:
            sample["thermal_mc"] = read_thermal_zones()
        if "cpufreq" in self.available:
            sample["cpufreq"] = read_cpufreq()
        if self.vcgencmd:
            sample["vcgencmd_throttled"] = (_command(["vcgencmd", "get_throttled"]) or "").strip()
            sample["vcgencmd_temp"] = (_command(["vcgencmd", "measure_temp"]) or "").strip()
            sample["vcgencmd_arm_clock"] = (_command(["vcgencmd", "measure_clock", "arm"]) or "").strip()
        if self.dumpsys:
            sample["dumpsys_thermalservice"] = _command(["dumpsys", "thermalservice"]) or ""
        return sample


# --- runtimes -------------------------------------------------------------------------------------
class LiteRTSession:
    def __init__(self, path: str, threads, resolver: str) -> None:
        try:
            from ai_edge_litert import interpreter as litert
            name = "ai_edge_litert"
        except ImportError:
            try:
                from tflite_runtime import interpreter as litert  # the older package on many boards
                name = "tflite_runtime"
            except ImportError:
                raise RunnerFailure("runtime_missing", "neither ai_edge_litert nor tflite_runtime can be imported "
                                    f"by {sys.executable}") from None
        kwargs = {}
        if threads is not None:
            kwargs["num_threads"] = threads
        resolvers = getattr(litert, "OpResolverType", None)
        if resolver != "default" and resolvers is not None:
            kwargs["experimental_op_resolver_type"] = {
                "builtin": resolvers.BUILTIN_WITHOUT_DEFAULT_DELEGATES, "reference": resolvers.BUILTIN_REF,
            }[resolver]
        try:
            self.interp = litert.Interpreter(model_path=path, **kwargs)
            self.interp.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            raise RunnerFailure("model_load", f"the runtime cannot load {os.path.basename(path)}: {exc}") from None
        self.inputs = [d["index"] for d in self.interp.get_input_details()]
        self.outputs = [(d["name"], d["index"]) for d in self.interp.get_output_details()]
        self.info = {"name": name, "version": _module_version(name), "threads": threads,
                     "op_resolver": {"default": "BUILTIN (default delegates, XNNPACK)", "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
                                     "reference": "BUILTIN_REF"}[resolver]}

    def set_inputs(self, arrays) -> None:
        for index, array in zip(self.inputs, arrays):
            self.interp.set_tensor(index, array)

    def invoke(self) -> None:
        self.interp.invoke()

    def read_outputs(self):
        return [(name, self.interp.get_tensor(index)) for name, index in self.outputs]


class OnnxSession:
    def __init__(self, path: str, threads) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise RunnerFailure("runtime_missing", f"onnxruntime cannot be imported by {sys.executable}") from None
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise RunnerFailure("model_load", f"onnxruntime cannot load {os.path.basename(path)}: {exc}") from None
        self.names = [i.name for i in self.session.get_inputs()]
        self.feeds = {}
        self.last = None
        self.info = {"name": "onnxruntime", "version": ort.__version__, "threads": threads, "provider": "CPUExecutionProvider"}

    def set_inputs(self, arrays) -> None:
        self.feeds = dict(zip(self.names, arrays))

    def invoke(self) -> None:
        self.last = self.session.run(None, self.feeds)

    def read_outputs(self):
        return [(o.name, v) for o, v in zip(self.session.get_outputs(), self.last)]


class TflmSession:
    def __init__(self, path: str, arena_bytes, outputs: int) -> None:
        try:
            from tflite_micro import runtime
        except ImportError:
            raise RunnerFailure("runtime_missing", f"tflite_micro cannot be imported by {sys.executable}") from None
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            self.interp = runtime.Interpreter.from_bytes(data, arena_size=arena_bytes)
        except (ValueError, RuntimeError) as exc:
            raise RunnerFailure("model_load", f"the TFLM runtime cannot load {os.path.basename(path)}: {exc}") from None
        self.outputs = outputs
        self.info = {"name": "tflite_micro", "version": _module_version("tflite_micro", "tflite-micro"),
                     "arena_bytes": arena_bytes if arena_bytes else 10 * len(data),
                     "arena_note": "TFLM python default (10x model size) unless --arena-bytes is given"}

    def set_inputs(self, arrays) -> None:
        for index, array in enumerate(arrays):
            self.interp.set_input(array, index)

    def invoke(self) -> None:
        self.interp.invoke()

    def read_outputs(self):
        return [(f"output_{i}", self.interp.get_output(i)) for i in range(self.outputs)]


# Core ML compute units by their edgekit names (coremltools.ComputeUnit members in capitals).
COREML_COMPUTE_UNITS = ("cpu_only", "cpu_and_gpu", "cpu_and_ne", "all")


def coreml_device_name(device) -> str:
    """'cpu' / 'gpu' / 'neural_engine' for a coremltools MLComputeDevice (by its class)."""
    kind = type(device).__name__
    for marker, name in (("NeuralEngine", "neural_engine"), ("GPU", "gpu"), ("CPU", "cpu")):
        if marker in kind:
            return name
    return kind


def _program_operations(block):
    """Every operation of an ML Program block, nested blocks (loops, conditions) included, in program order."""
    for op in block.operations:
        yield op
        for inner in op.blocks:
            yield from _program_operations(inner)


def coreml_op_placement(plan) -> list:
    """Per compute operation of an MLComputePlan: {op, name, preferred, supported, cost}; device None when Core ML
    could not tell; cost is Core ML's estimated share of the whole model's work (ML Programs only). Constants are left out."""
    ops = []
    structure = plan.model_structure
    if structure.program is not None:
        for function_name, function in structure.program.functions.items():
            for op in _program_operations(function.block):
                if op.operator_name == "const":
                    continue
                usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
                cost = plan.get_estimated_cost_for_mlprogram_operation(op)
                name = op.outputs[0].name if op.outputs else ""
                ops.append({"op": op.operator_name, "name": name, "function": function_name,
                            "preferred": coreml_device_name(usage.preferred_compute_device) if usage else None,
                            "supported": sorted(coreml_device_name(d) for d in usage.supported_compute_devices) if usage else [],
                            "cost": float(cost.weight) if cost is not None else None})
    elif structure.neuralnetwork is not None:
        for layer in structure.neuralnetwork.layers:
            usage = plan.get_compute_device_usage_for_neuralnetwork_layer(layer)
            ops.append({"op": layer.type, "name": layer.name, "function": None,
                        "preferred": coreml_device_name(usage.preferred_compute_device) if usage else None,
                        "supported": sorted(coreml_device_name(d) for d in usage.supported_compute_devices) if usage else [],
                        "cost": None})
    else:
        raise RunnerFailure("placement", "the model is a pipeline; Core ML gives no per-op placement for pipelines")
    return ops


def coreml_compiled_path(model):
    """The .mlmodelc folder Core ML compiled a loaded MLModel into (None when this coremltools does not say)."""
    getter = getattr(model, "get_compiled_model_path", None)
    try:
        return getter() if getter else None
    except Exception:  # a model not loaded by the Core ML framework
        return None


def coreml_placement(compiled_path, compute_units: str) -> dict:
    """{"available": True, "ops": [...]} from coremltools' MLComputePlan (macOS 14.4+ / coremltools 8+), or
    {"available": False, "reason": ...} when this macOS or coremltools cannot give it."""
    import coremltools as ct

    if not compiled_path:
        return {"available": False, "reason": f"coremltools {ct.__version__} gives no compiled model path"}
    try:
        from coremltools.models.compute_plan import MLComputePlan
    except ImportError:
        return {"available": False, "reason": f"coremltools {ct.__version__} has no MLComputePlan (needs 8.0 or newer)"}
    try:
        plan = MLComputePlan.load_from_path(compiled_path, compute_units=ct.ComputeUnit[compute_units.upper()])
        return {"available": True, "ops": coreml_op_placement(plan)}
    except RunnerFailure as exc:
        return {"available": False, "reason": str(exc)}
    except Exception as exc:  # Core ML reports an unsupported OS or model through several exception types
        return {"available": False, "reason": f"MLComputePlan failed: {type(exc).__name__}: {exc}"}


def _natural_key(key):
    text = str(key)
    return (0, int(text), "") if text.lstrip("-").isdigit() else (1, 0, text)


def coreml_output_array(value):
    """A Core ML prediction value as an array: a classifier's {label: probability} dict becomes the probabilities
    in label order (numeric labels numerically), a class label a 0-d string array."""
    import numpy as np

    if isinstance(value, dict):
        return np.asarray([value[k] for k in sorted(value, key=_natural_key)], dtype=np.float64)
    return np.asarray(value)


class CoreMLSession:
    """coremltools' MLModel on one compute unit setting (macOS only); image inputs are fed as PIL images."""

    def __init__(self, path: str, compute_units: str = "all") -> None:
        if sys.platform != "darwin":  # checked before the (slow) import: coremltools cannot predict here anyway
            raise RunnerFailure("runtime_missing", f"Core ML models run only on macOS, not {sys.platform} "
                                "(coremltools: Model prediction is only supported on macOS)")
        try:
            import coremltools as ct
        except ImportError:
            raise RunnerFailure("runtime_missing", f"coremltools cannot be imported by {sys.executable}") from None
        try:
            self.model = ct.models.MLModel(path, compute_units=ct.ComputeUnit[compute_units.upper()])
        except Exception as exc:  # coremltools raises several exception types
            raise RunnerFailure("model_load", f"Core ML cannot load {os.path.basename(path)}: {exc}") from None
        spec = self.model.get_spec()
        self.names = [i.name for i in spec.description.input]
        self.images = {i.name: i.type.imageType.colorSpace for i in spec.description.input
                       if i.type.WhichOneof("Type") == "imageType"}
        self.output_names = [o.name for o in spec.description.output]
        self.compute_units = compute_units
        self.feeds = {}
        self.last = {}
        self.info = {"name": "coremltools", "version": ct.__version__, "compute_units": compute_units}

    def after_load(self) -> None:
        """Placement of every op on this compute unit setting (measured outside the load time)."""
        self.info["placement"] = coreml_placement(coreml_compiled_path(self.model), self.compute_units)

    def _feed(self, name, array):
        if name not in self.images:
            return array
        from PIL import Image

        mode = {40: "F"}.get(self.images[name], "L" if array.ndim == 2 else "RGB")
        return Image.fromarray(array.astype("float32") if mode == "F" else array, mode=mode)

    def set_inputs(self, arrays) -> None:
        self.feeds = {name: self._feed(name, array) for name, array in zip(self.names, arrays)}

    def invoke(self) -> None:
        self.last = self.model.predict(self.feeds)

    def read_outputs(self):
        names = [n for n in self.output_names if n in self.last] + sorted(k for k in self.last if k not in self.output_names)
        return [(k, coreml_output_array(self.last[k])) for k in names]


def _module_version(module: str, distribution: str = ""):
    try:
        from importlib import metadata
        return metadata.version(distribution or module.replace("_", "-"))
    except Exception:  # metadata missing on some board images
        mod = sys.modules.get(module)
        return getattr(mod, "__version__", None)


RUNTIME_MODULES = {"litert": ("ai_edge_litert.interpreter", "tflite_runtime.interpreter"), "onnxruntime": ("onnxruntime",),
                   "tflm": ("tflite_micro",), "coreml": ("coremltools",)}


def import_runtime(runtime: str) -> float:
    """Import the runtime's module (the first one that exists) and return the time it took in ms; a missing
    module is reported later by the session with its own message."""
    import importlib

    if runtime == "coreml" and sys.platform != "darwin":
        return 0.0  # nothing to time: the session refuses Core ML off macOS without importing it
    start = time.perf_counter()
    for name in RUNTIME_MODULES.get(runtime, ()):
        try:
            importlib.import_module(name)
            break
        except ImportError:
            continue
    return (time.perf_counter() - start) * 1e3


def open_session(args):
    if args.runtime == "onnxruntime":
        return OnnxSession(args.model, args.threads)
    if args.runtime == "tflm":
        return TflmSession(args.model, args.arena_bytes, args.num_outputs)
    if args.runtime == "coreml":
        return CoreMLSession(args.model, args.compute_units)
    return LiteRTSession(args.model, args.threads, args.resolver)


# --- inputs / outputs -----------------------------------------------------------------------------
def load_samples(path: str):
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        keys = sorted(data.files, key=lambda k: tuple(int(p) for p in k[1:].split("_in")))
        samples = {}
        for key in keys:
            sample, index = (int(p) for p in key[1:].split("_in"))
            samples.setdefault(sample, []).append((index, np.ascontiguousarray(data[key])))
    return [[a for _, a in sorted(samples[s])] for s in sorted(samples)]


def pack_floats(values) -> str:
    """A list of floats as base64 of little-endian float64 (far cheaper to write and read than JSON numbers)."""
    import array

    packed = array.array("d", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def encode(name: str, array) -> dict:
    import numpy as np

    array = np.ascontiguousarray(np.asarray(array))
    return {"name": name, "dtype": str(array.dtype), "shape": list(array.shape),
            "b64": base64.b64encode(array.tobytes()).decode("ascii")}


# --- the measurement loop -------------------------------------------------------------------------
def measure(session, samples, args, sensors) -> None:
    clock = time.perf_counter
    session.set_inputs(samples[0])
    start = clock()
    session.invoke()
    emit("first", first_inference_ms=(clock() - start) * 1e3)
    emit("outputs", sample=0, tensors=[encode(n, v) for n, v in session.read_outputs()])
    for index in range(1, len(samples)):  # one pass over the other samples: their outputs, untimed
        session.set_inputs(samples[index])
        session.invoke()
        emit("outputs", sample=index, tensors=[encode(n, v) for n, v in session.read_outputs()])
    for k in range(args.warmup):
        session.set_inputs(samples[k % len(samples)])
        session.invoke()

    sustain = args.sustain_s > 0
    sensor_every = args.sensor_interval_s if sensors.available else 0.0
    emit("warm_start", sensors=sensors.read() if sensors.available else {})
    t0 = clock()
    next_flush = t0 + FLUSH_S
    next_sensor = t0 + sensor_every if sensor_every else float("inf")
    starts, latencies = [], []
    count = 0
    n_samples = len(samples)
    while True:
        if sustain:
            if clock() - t0 >= args.sustain_s:
                break
        elif count >= args.iterations:
            break
        session.set_inputs(samples[count % n_samples])
        a = clock()
        session.invoke()
        b = clock()
        starts.append(a - t0)
        latencies.append((b - a) * 1e3)
        count += 1
        if b >= next_flush:
            emit("batch", t_s=pack_floats(starts), ms=pack_floats(latencies))
            starts, latencies = [], []
            next_flush = clock() + FLUSH_S
            if b >= next_sensor:
                emit("sensors", t_s=clock() - t0, **sensors.read())
                next_sensor = clock() + sensor_every
    if latencies:
        emit("batch", t_s=pack_floats(starts), ms=pack_floats(latencies))
    wall = clock() - t0
    emit("warm_end", wall_s=wall, iterations=count, sensors=sensors.read() if sensors.available else {})


def parse_args(argv):
    p = argparse.ArgumentParser(description="edgekit device-side runner (streams EKR1 JSON lines)")
    p.add_argument("--model", required=True)
    p.add_argument("--inputs", required=True, help=".npz with arrays s<sample>_in<input>")
    p.add_argument("--runtime", default="litert", choices=("litert", "onnxruntime", "tflm", "coreml"))
    p.add_argument("--resolver", default="default", choices=("default", "builtin", "reference"))
    p.add_argument("--threads", type=int)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--sustain-s", type=float, default=0.0)
    p.add_argument("--sensor-interval-s", type=float, default=1.0)
    p.add_argument("--arena-bytes", type=int)
    p.add_argument("--num-outputs", type=int, default=1)
    p.add_argument("--compute-units", default="all", choices=COREML_COMPUTE_UNITS, help="Core ML compute units")
    p.add_argument("--dumpsys", action="store_true", help="also read `dumpsys thermalservice` (Android)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    emit("hello", python=platform.python_version(), executable=sys.executable, platform=platform.platform(),
         machine=platform.machine(), pid=os.getpid())
    try:
        import numpy  # noqa: F401  (fail early with a clear message)
    except ImportError:
        emit("error", kind="runtime_missing", message=f"numpy cannot be imported by {sys.executable}")
        return 3
    try:
        samples = load_samples(args.inputs)
        import_ms = import_runtime(args.runtime)
        baseline = current_rss_bytes()
        start = time.perf_counter()
        session = open_session(args)
        load_ms = (time.perf_counter() - start) * 1e3
        if hasattr(session, "after_load"):  # facts gathered outside the load time (Core ML placement)
            session.after_load()
        sensors = SensorReader(args.dumpsys)
        emit("loaded", load_ms=load_ms, runtime_import_ms=import_ms, runtime=session.info, rss_before_load_bytes=baseline,
             rss_after_load_bytes=current_rss_bytes(), sensors_available=sensors.available)
        measure(session, samples, args, sensors)
    except RunnerFailure as exc:
        emit("error", kind=exc.kind, message=str(exc))
        return 3
    except Exception as exc:  # any runtime failure during inference is reported, never a silent exit
        emit("error", kind="invoke", message=f"{type(exc).__name__}: {exc}")
        return 3
    emit("done", peak_rss_bytes=peak_rss_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
