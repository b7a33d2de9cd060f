"""Host runs with real runtimes: structure and plausibility of run.json (never timing values)."""
import json
from pathlib import Path

import numpy as np
import pytest



def read_run(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def litert_outputs(model: Path, samples, **kwargs):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(model), num_threads=1, **kwargs)
    interp.allocate_tensors()
    results = []
    for sample in samples:
        for detail, value in zip(interp.get_input_details(), sample.values()):
            interp.set_tensor(detail["index"], value)
        interp.invoke()
        results.append([interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()])
    return results


def check_common(run: dict, model: Path, n: int) -> None:
    from edgekit.provenance import sha256_file

    assert run["complete"] is True and run["incomplete_reason"] is None
    assert run["artifact"]["sha256"] == sha256_file(model) == run["signature"]["artifact_sha256"]
    cold, lat = run["cold_start_ms"], run["latency_ms"]
    assert cold["load"] > 0 and cold["first_inference"] > 0
    assert lat["count"] == n
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["min"] <= lat["mean"] <= lat["max"] and lat["std"] >= 0
    # throughput counts the runner's own per-iteration work too, so it cannot beat the mean latency
    assert 0 < run["throughput_ips"] <= 1000.0 / lat["mean"]
    memory = run["memory"]
    assert 0 < memory["rss_before_load_bytes"] <= memory["peak_rss_bytes"]
    assert memory["rss_after_load_bytes"] <= memory["peak_rss_bytes"] < 8 << 30
    for key in ("tools", "host", "created"):
        assert run["signature"][key]


def test_host_run_mlperf_kws_int8(cli, tmp_path, kws_int8):
    """The real LiteRT run of the MLPerf Tiny KWS int8 model: every field present and plausible, outputs
    equal to LiteRT's own on the same inputs, energy 'unavailable' with the reason on this host."""
    out = tmp_path / "run"
    assert cli("run", kws_int8, "--device", "host", "-n", "50", "--warmup", "3", "-o", out) == 0
    run = read_run(out)
    check_common(run, kws_int8, 50)
    assert run["device"]["kind"] == "host" and run["device"]["profile"] == "host"
    assert run["runtime"]["name"] == "ai_edge_litert" and run["runtime"]["version"]
    assert run["config"]["inputs"]["kind"] == "random" and run["config"]["inputs"]["samples"] == 4

    from edgekit.run.inputs import model_inputs, random_inputs

    samples = random_inputs(model_inputs(kws_int8))
    expected = litert_outputs(kws_int8, samples)
    saved = np.load(out / "outputs.npz")
    assert len(run["outputs"]) == 4
    for i, outputs in enumerate(expected):
        (name,) = [t["name"] for t in run["outputs"][i]["tensors"]]
        np.testing.assert_array_equal(saved[f"s{i}__{name}"], outputs[0])
        assert saved[f"s{i}__{name}"].dtype == np.int8 and saved[f"s{i}__{name}"].shape == (1, 12)

    energy = run["energy_uj_per_inference"]
    assert energy["value"] is None and energy["method"] == "unavailable"
    if not Path("/sys/class/powercap").exists():
        assert "RAPL" in energy["reason"] and "/sys/class/powercap" in energy["reason"]
    assert run["thermal"]["sustained"] is False

    raw = np.load(out / "latencies.npz")
    assert raw["latency_ms"].shape == raw["t_s"].shape == (50,) and np.all(np.diff(raw["t_s"]) > 0)
    assert raw["latency_ms"].max() == pytest.approx(run["latency_ms"]["max"]) and run["latencies_file"] == "latencies.npz"

    report = (out / "report.md").read_text()
    assert "Cold start and latency" in report and run["artifact"]["sha256"] in report and "unavailable" in report
    for png in ("latency_hist.png", "latency_over_time.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_host_run_tflm_runtime_matches_reference_kernels(cli, tmp_path, kws_int8):
    """--runtime tflm uses the TFLM python interpreter; on KWS its int8 outputs equal LiteRT BUILTIN_REF."""
    from ai_edge_litert.interpreter import OpResolverType

    out = tmp_path / "run"
    assert cli("run", kws_int8, "--device", "host", "--runtime", "tflm", "-n", "10", "--warmup", "1", "-o", out) == 0
    run = read_run(out)
    check_common(run, kws_int8, 10)
    assert run["runtime"]["name"] == "tflite_micro" and run["runtime"]["arena_bytes"] > 0

    from edgekit.run.inputs import model_inputs, random_inputs

    expected = litert_outputs(kws_int8, random_inputs(model_inputs(kws_int8)), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    saved = np.load(out / "outputs.npz")
    for i, outputs in enumerate(expected):
        np.testing.assert_array_equal(saved[f"s{i}__output_0"], outputs[0])


def test_host_run_onnx_with_float_inputs_file(cli, tmp_path):
    """onnxruntime on a real (small) ONNX graph, inputs from a .npy file; outputs = x @ W + b, relu."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    weight = rng.standard_normal((8, 4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(weight, "W"), numpy_helper.from_array(bias, "b")])
    model = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    data = rng.standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "inputs.npy", data)

    out = tmp_path / "run"
    assert cli("run", model, "--device", "host", "--inputs", tmp_path / "inputs.npy", "-n", "20", "-o", out) == 0
    run = read_run(out)
    check_common(run, model, 20)
    assert run["runtime"]["name"] == "onnxruntime"
    assert run["config"]["inputs"]["kind"] == "array-file" and run["config"]["inputs"]["selected"] == 3
    saved = np.load(out / "outputs.npz")
    for i in range(3):
        np.testing.assert_allclose(saved[f"s{i}__y"][0], np.maximum(data[i] @ weight + bias, 0), rtol=1e-5, atol=1e-6)


def test_float_inputs_are_quantized_with_the_model_scale(tmp_path, kws_int8):
    from edgekit.run.inputs import model_inputs, prepare_inputs

    (spec,) = model_inputs(kws_int8)
    values = np.linspace(-20, 20, int(np.prod(spec.shape[1:])), dtype=np.float32).reshape((1, *spec.shape[1:]))
    np.save(tmp_path / "x.npy", values)
    samples, described = prepare_inputs(kws_int8, tmp_path / "x.npy")
    q = samples[0][spec.name]
    assert q.dtype == np.int8 and q.shape == spec.shape
    expected = np.clip(np.round(values / spec.scale) + spec.zero_point, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(q, expected)
    assert described["selected"] == 1


def test_rapl_reader_on_this_hosts_powercap():
    """Reads the real RAPL counters when the host has them; this build machine has none (TOOLCHAIN.md)."""
    from edgekit.run.measurement.energy import RaplReader

    reader = RaplReader()
    reason = reader.unavailable_reason()
    if reason:
        pytest.skip(f"RAPL not testable here: {reason}")
    before = reader.read()
    sum(i * i for i in range(2_000_000))  # some work so the package counter moves
    after = reader.read()
    assert before and set(before) == set(after)
    assert reader.delta_uj(before, after) > 0
