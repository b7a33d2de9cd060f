#!/usr/bin/env python3
"""edgekit device-side pipeline runner: decode -> preprocess -> inference -> post-process, each phase timed here.

Copied with remote_runner.py (its runtime sessions are reused) to SSH and ADB targets and run locally for
``--device host``. Needs the standard library, numpy, Pillow or OpenCV (whichever the pipeline names) and
one runtime; ``implementation: c`` loads the generated C library edgekit built for this device (ctypes).
Input: a JSON config written by edgekit.run.pipeline.budget (phases, spec, model input, frames).
Output: one line ``EKP1 {...}`` on stdout with, per iteration, the duration of every phase (perf_counter_ns)
and its start on CLOCK_MONOTONIC (so power samples can be attributed to phase windows), per-phase energy when
this machine's RAPL counters are readable (read at the phase boundaries), the battery samples taken here when
asked (Android), sha256 of the decoded pixels and preprocessed tensor of every input (the host compares them
with the spec's reference), and the post-processed result of the first pass over every input. With
``clock_sync`` it also prints ``EKPS <CLOCK_MONOTONIC>`` lines before and after the timed runs.
"""
from __future__ import annotations

import argparse
import glob
import importlib
import json
import os
import sys
import time

import numpy as np

PREFIX = "EKP1 "
PHASES = ("decode", "preprocess", "inference", "postprocess")
RAPL_GLOB = "/sys/class/powercap/intel-rapl:*/energy_uj"


class PipelineFailure(Exception):
    pass


# --- decode ---------------------------------------------------------------------------------------
def rgb565_to_rgb888(frame: np.ndarray) -> np.ndarray:
    """Little-endian RGB565 (H, W) uint16 -> (H, W, 3) uint8, bits replicated (r << 3 | r >> 2)."""
    r = ((frame >> 11) & 0x1F).astype(np.uint16)
    g = ((frame >> 5) & 0x3F).astype(np.uint16)
    b = (frame & 0x1F).astype(np.uint16)
    return np.stack([(r << 3) | (r >> 2), (g << 2) | (g >> 4), (b << 3) | (b >> 2)], axis=-1).astype(np.uint8)


def decode(data: bytes, cfg: dict):
    """Bytes as the app receives them -> pixels (a PIL image for Pillow, else an HxWxC uint8 array)."""
    fmt = cfg["format"]
    if fmt in ("rgb565", "rgb888", "gray8"):
        h, w = cfg["height"], cfg["width"]
        if fmt == "rgb565":
            return rgb565_to_rgb888(np.frombuffer(data, "<u2").reshape(h, w))
        return np.frombuffer(data, np.uint8).reshape(h, w, 3 if fmt == "rgb888" else 1)
    if cfg["library"] == "opencv":
        import cv2

        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise PipelineFailure("cv2.imdecode could not decode the file")
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(data))
    return image.convert("RGB")


# --- preprocess -----------------------------------------------------------------------------------
PIL_METHODS = {"nearest": "NEAREST", "bilinear": "BILINEAR", "bicubic": "BICUBIC", "box": "BOX", "hamming": "HAMMING",
               "lanczos": "LANCZOS"}


def geometry(spec: dict, hw):
    """(resize (h, w) or None, crop box (top, left, h, w) or None), as edgekit.preprocessing.geometry."""
    h, w = hw
    if spec.get("size"):
        rh, rw = spec["size"]
    elif spec.get("shorter_side"):
        s = spec["shorter_side"]
        rh, rw = (s, max(1, int(round(w * s / h)))) if h <= w else (max(1, int(round(h * s / w))), s)
    else:
        rh, rw = h, w
    box = None
    if spec.get("crop"):
        ch, cw = spec["crop"]
        box = (int(round((rh - ch) / 2)), int(round((rw - cw) / 2)), ch, cw)
    return ((rh, rw) if (rh, rw) != (h, w) else None), box


def resize_pillow(pixels, spec: dict) -> np.ndarray:
    from PIL import Image

    image = pixels if isinstance(pixels, Image.Image) else Image.fromarray(
        pixels[:, :, 0] if pixels.shape[2] == 1 else pixels)
    if spec["color"] == "grayscale" and image.mode != "L":
        image = image.convert("L")
    elif spec["color"] != "grayscale" and image.mode != "RGB":
        image = image.convert("RGB")  # a gray sensor frame into an RGB model: Pillow's L -> RGB
    size, box = geometry(spec, (image.height, image.width))
    if size is not None:
        image = image.resize((size[1], size[0]), getattr(Image.Resampling, PIL_METHODS[spec["resize"]]))
    out = np.asarray(image)
    out = out.reshape(out.shape[0], out.shape[1], -1)
    if box is not None:
        top, left, ch, cw = box
        out = out[top:top + ch, left:left + cw]
    return out


def resize_opencv(pixels, spec: dict) -> np.ndarray:
    import cv2

    array = np.asarray(pixels)
    if array.ndim == 2:
        array = array[:, :, None]
    if spec["color"] == "grayscale" and array.shape[2] == 3:
        array = cv2.cvtColor(array, cv2.COLOR_RGB2GRAY)[:, :, None]
    elif spec["color"] != "grayscale" and array.shape[2] == 1:
        array = cv2.cvtColor(array, cv2.COLOR_GRAY2RGB)
    size, box = geometry(spec, array.shape[:2])
    if size is not None:
        shrinking = size[0] <= array.shape[0] and size[1] <= array.shape[1]
        method = spec["resize"]
        if method == "nearest":
            flag = cv2.INTER_NEAREST_EXACT
        elif method == "box" or (spec.get("antialias", True) and shrinking):
            flag = cv2.INTER_AREA
        else:
            flag = {"bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC, "lanczos": cv2.INTER_LANCZOS4}[method]
        array = cv2.resize(array, (size[1], size[0]), interpolation=flag).reshape(size[0], size[1], -1)
    if box is not None:
        top, left, ch, cw = box
        array = array[top:top + ch, left:left + cw]
    return array


def to_model_input(pixels: np.ndarray, spec: dict, model_input: dict) -> np.ndarray:
    """The spec's value stage (float32 arithmetic), layout, and quantization to the model's input."""
    px = pixels.astype(np.float32)
    if spec["color"] == "bgr":
        px = px[:, :, ::-1]
    channels = px.shape[2]
    mean = np.broadcast_to(np.asarray(spec["mean"], np.float32), (channels,))
    std = np.broadcast_to(np.asarray(spec["std"], np.float32), (channels,))
    values = (px * np.float32(spec["scale"]) - mean) / std
    quant = model_input.get("quantization")
    if quant:
        info = np.iinfo(np.dtype(model_input["dtype"]))
        q = np.round(values.astype(np.float64) / quant["scale"]) + quant["zero_point"]
        values = np.clip(q, info.min, info.max).astype(model_input["dtype"])
    else:
        values = values.astype(model_input["dtype"])
    if spec["layout"] == "NCHW":
        values = values.transpose(2, 0, 1)
    return np.ascontiguousarray(values)[None]


class GeneratedC:
    """implementation c: the generated integer C (libekpp.so, edgekit.run.pipeline.generated_c) called through ctypes.

    The tables for a frame's size are found once; every call then runs ek_preprocess into a buffer of the
    model's input shape and dtype (the model's quantization is folded into the C's value tables)."""

    def __init__(self, path: str, model_input: dict) -> None:
        import ctypes

        self.ctypes = ctypes
        lib = self.lib = ctypes.CDLL(path)
        lib.ek_pp_library_find.restype = ctypes.c_int32
        lib.ek_pp_library_find.argtypes = [ctypes.c_uint32] * 3
        for name in ("ek_pp_library_output_bytes", "ek_pp_library_scratch_bytes"):
            getattr(lib, name).restype = ctypes.c_uint32
            getattr(lib, name).argtypes = [ctypes.c_int32]
        lib.ek_pp_library_run.restype = ctypes.c_int32
        lib.ek_pp_library_run.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                          ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        self.shape = tuple(model_input["shape"])
        self.dtype = np.dtype(model_input["dtype"])
        self.tables = {}

    def _find(self, h: int, w: int, c: int):
        index = self.lib.ek_pp_library_find(w, h, 1 if c == 1 else 3)
        if index < 0:
            raise PipelineFailure(f"the generated C has no tables for a {w}x{h} frame with {c} channel(s)")
        out_bytes = self.lib.ek_pp_library_output_bytes(index)
        expected = int(np.prod(self.shape)) * self.dtype.itemsize
        if out_bytes != expected:
            raise PipelineFailure(f"the generated C writes {out_bytes} bytes, the model input takes {expected}")
        scratch = np.zeros(max(1, self.lib.ek_pp_library_scratch_bytes(index)), np.uint8)
        return index, scratch

    def __call__(self, pixels) -> np.ndarray:
        array = np.ascontiguousarray(np.asarray(pixels), dtype=np.uint8)
        if array.ndim == 2:
            array = array[:, :, None]
        h, w, c = array.shape
        entry = self.tables.get((h, w, c))
        if entry is None:
            entry = self.tables[(h, w, c)] = self._find(h, w, c)
        index, scratch = entry
        out = np.empty(self.shape, self.dtype)
        status = self.lib.ek_pp_library_run(index, array.ctypes.data, array.nbytes, out.ctypes.data, out.nbytes,
                                            scratch.ctypes.data, scratch.nbytes)
        if status != 0:
            raise PipelineFailure(f"the generated C preprocessing failed with ek_pp_status {status}")
        return out


# --- post-process ---------------------------------------------------------------------------------
def postprocess(outputs, cfg: dict, output_quant):
    if cfg.get("function"):
        return cfg["_callable"](outputs)
    name, value = outputs[0]
    x = np.asarray(value)
    for step in cfg["steps"]:
        if step == "dequantize" and output_quant:
            x = (x.astype(np.float32) - output_quant["zero_point"]) * np.float32(output_quant["scale"])
        elif step == "softmax":
            z = x.astype(np.float32).reshape(-1)
            z = np.exp(z - z.max())
            x = z / z.sum()
        elif step == "topk":
            flat = np.asarray(x).reshape(-1)
            k = min(int(cfg.get("top_k", 5)), flat.size)
            order = np.argsort(-flat.astype(np.float64), kind="stable")[:k]
            x = [(int(i), float(flat[i])) for i in order]
    return x


def jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


# --- energy ---------------------------------------------------------------------------------------
def rapl_files():
    files = sorted(f for f in glob.glob(RAPL_GLOB) if f.count(":") == 1)
    try:
        for f in files:
            with open(f) as handle:
                int(handle.read())
    except (OSError, ValueError):
        return []
    return files


def rapl_uj(files) -> int:
    total = 0
    for f in files:
        with open(f) as handle:
            total += int(handle.read())
    return total


class BatterySampler:
    """Android battery power read on the device itself (same clock as the phase windows): CURRENT_NOW (uA,
    either sign) x VOLTAGE_NOW (uV) from the power_supply uevent file (the file and the arithmetic of
    edgekit.run.runners.adb.AndroidBatteryMonitor), every interval_s in a thread."""

    def __init__(self, uevent: str, interval_s: float) -> None:
        import threading

        self.uevent, self.interval_s = uevent, float(interval_s)
        self.samples = []
        self.status = ""
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="battery-sampler", daemon=True)

    def read_w(self):
        with open(self.uevent) as handle:
            values = {}
            for line in handle.read().splitlines():
                key, sep, value = line.strip().partition("=")
                if sep:
                    values[key.replace("POWER_SUPPLY_", "", 1) if key.startswith("POWER_SUPPLY_") else key] = value.strip()
        self.status = values.get("STATUS", self.status)
        try:
            current, voltage = abs(int(values["CURRENT_NOW"])), int(values["VOLTAGE_NOW"])
        except (KeyError, ValueError):
            return None
        return current * 1e-6 * voltage * 1e-6 if voltage > 0 else None

    def unavailable_reason(self):
        try:
            return None if self.read_w() is not None else f"{self.uevent} has no readable CURRENT_NOW and VOLTAGE_NOW"
        except OSError as exc:
            return f"{self.uevent} is not readable here ({exc.strerror or exc})"

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                value = self.read_w()
            except (OSError, ValueError):
                value = None
            self.reads += 1
            if value is not None:
                self.samples.append((time.monotonic(), value))
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


SYNC_PREFIX = "EKPS "


def clock_sync(lines: int = 8, gap_s: float = 0.005) -> None:
    """Print this device's CLOCK_MONOTONIC a few times; the host stamps each line's arrival on its own clock,
    so samples of a power monitor read by the host can be placed on the device's phase windows."""
    for _ in range(lines):
        print(f"{SYNC_PREFIX}{time.monotonic():.9f}", flush=True)
        time.sleep(gap_s)


def digest(array) -> str:
    import hashlib

    array = np.ascontiguousarray(np.asarray(array))
    return hashlib.sha256(str(array.shape).encode() + str(array.dtype).encode() + array.tobytes()).hexdigest()


# --- the loop -------------------------------------------------------------------------------------
class UserCodeFailure(Exception):
    """The pipeline file's post-processing function cannot be imported (a user error, not a device failure)."""


def run(cfg: dict, args) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import remote_runner as rr

    post = cfg["postprocess"]
    if post.get("function"):
        module, _, attr = post["function"].partition(":")
        for folder in post.get("python_path", []):
            sys.path.insert(0, folder)
        try:
            post["_callable"] = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:  # the user's code, not the device: reported as such
            raise UserCodeFailure(f"post-processing function {post['function']!r} cannot be loaded: "
                                  f"{type(exc).__name__}: {exc}") from None
    session_args = argparse.Namespace(model=args.model, runtime=cfg["inference"]["runtime"], threads=args.threads,
                                      resolver="default", arena_bytes=None, num_outputs=1, compute_units="all")
    try:
        session = rr.open_session(session_args)
    except rr.RunnerFailure as exc:
        raise PipelineFailure(f"{exc.kind}: {exc}") from None
    frames = []
    for path in cfg["frames"]:
        with open(path, "rb") as handle:
            frames.append(handle.read())
    spec, model_input = cfg["preprocess"]["spec"], cfg["model_input"]
    if cfg["preprocess"]["implementation"] == "c":
        generated = GeneratedC(cfg["preprocess"]["c_library"], model_input)

        def preprocess(pixels):
            return generated(pixels)
    else:
        resize = resize_opencv if cfg["preprocess"]["implementation"] == "opencv" else resize_pillow

        def preprocess(pixels):
            return to_model_input(resize(pixels, spec), spec, model_input)
    rapl = rapl_files()
    sampler, power_note = None, None
    if cfg.get("power_sampler"):
        sampler = BatterySampler(cfg["power_sampler"]["uevent"], cfg["power_sampler"].get("interval_s", 0.02))
        power_note = sampler.unavailable_reason()
        if power_note is None:
            sampler.start()
        else:
            sampler = None
    checks = []
    phases = {p: [] for p in PHASES}
    starts = {p: [] for p in PHASES}
    energy = {p: [] for p in PHASES} if rapl else None
    results = []
    if cfg.get("clock_sync"):
        clock_sync()
    total = args.warmup + args.iterations
    for it in range(total):
        data = frames[it % len(frames)]
        timed = it >= args.warmup
        marks = [(time.monotonic(), time.perf_counter_ns(), rapl_uj(rapl) if rapl else 0)]

        def mark():
            marks.append((time.monotonic(), time.perf_counter_ns(), rapl_uj(rapl) if rapl else 0))

        pixels = decode(data, cfg["decode"])
        if not hasattr(pixels, "mode"):
            pixels = np.asarray(pixels)
        mark()
        tensor = preprocess(pixels)
        mark()
        session.set_inputs([tensor])
        session.invoke()
        outputs = session.read_outputs()
        mark()
        result = postprocess(outputs, post, cfg.get("output_quantization"))
        mark()
        if it < len(frames):
            results.append(jsonable(result))
            checks.append({"pixels_sha256": digest(np.asarray(pixels)), "tensor_sha256": digest(tensor)})
        if timed:
            for k, phase in enumerate(PHASES):
                phases[phase].append((marks[k + 1][1] - marks[k][1]) / 1e6)
                starts[phase].append(marks[k][0])
                if energy is not None:
                    energy[phase].append(marks[k + 1][2] - marks[k][2])
    if sampler is not None:
        sampler.stop()
    if cfg.get("clock_sync"):
        clock_sync()
    if args.dump_tensors:
        os.makedirs(args.dump_tensors, exist_ok=True)
        for i, data in enumerate(frames):
            np.save(os.path.join(args.dump_tensors, f"{i}.npy"), preprocess(decode(data, cfg["decode"])))
    power = None
    if sampler is not None:
        power = {"samples": sampler.samples, "reads": sampler.reads, "interval_s": sampler.interval_s,
                 "battery_status": sampler.status,
                 "source": f"Android battery CURRENT_NOW x VOLTAGE_NOW ({sampler.uevent}) sampled on the device "
                           f"every {sampler.interval_s * 1e3:g} ms"}
    return {"phases_ms": phases, "phase_start_monotonic_s": starts, "power": power, "power_unavailable": power_note,
            "preprocess_checks": checks,
            "energy_uj": energy, "energy_source": f"RAPL {', '.join(rapl)} read at phase boundaries" if rapl else None,
            "results": results, "runtime": getattr(session, "info", {}),
            "python": sys.version.split()[0], "numpy": np.__version__, "pid": os.getpid()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--dump-tensors")
    args = parser.parse_args(argv)
    with open(args.config) as handle:
        cfg = json.load(handle)
    try:
        out = run(cfg, args)
    except UserCodeFailure as exc:
        print(PREFIX + json.dumps({"error": str(exc), "user_code": True}), flush=True)
        return 3
    except PipelineFailure as exc:
        print(PREFIX + json.dumps({"error": str(exc)}), flush=True)
        return 3
    except Exception as exc:  # the phase code or the user's function failed on the device
        print(PREFIX + json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 3
    print(PREFIX + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
