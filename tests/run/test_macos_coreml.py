"""`edgekit run MODEL.mlpackage --device macos`: compute unit settings, Core ML placement, the per-setting table.

Core ML runs only on macOS. Here (Linux) we test everything around it with real parts: a real .mlpackage
converted from torch, the real runner script (which must refuse clearly), the real CLI (one error, no output
folder), and the report built from runner events as the runner writes them. Load / predict / compute plan on
the real runtime run only on a Mac and skip elsewhere with the reason.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import InvalidModelError, ToolMissingError, UserError

ON_MAC = sys.platform == "darwin"
mac_only = pytest.mark.skipif(not ON_MAC, reason="Core ML runs only on macOS")
linux_only = pytest.mark.skipif(ON_MAC, reason="checks the refusal off macOS; this host is a Mac")


def tiny_torch_model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3)).eval()


@pytest.fixture(scope="module")
def tiny_mlpackage(tmp_path_factory) -> Path:
    """A real ML Program (.mlpackage) converted by coremltools from a tiny torch net: input x float32 1x1x8x8."""
    import coremltools as ct
    import torch

    model = tiny_torch_model()
    example = torch.zeros(1, 1, 8, 8)
    ml = ct.convert(torch.jit.trace(model, example), inputs=[ct.TensorType(name="x", shape=example.shape, dtype=np.float32)],
                    convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16)
    path = tmp_path_factory.mktemp("coreml") / "tiny.mlpackage"
    ml.save(str(path))
    return path


# --- compute unit settings -------------------------------------------------------------------------
def test_compute_units_are_parsed_and_checked():
    from edgekit.coreml.macos import COMPUTE_UNITS, parse_compute_units

    assert parse_compute_units("all") == ["all"]
    assert parse_compute_units("cpu_only, CPU-AND-NE,cpu_only") == ["cpu_only", "cpu_and_ne"]
    assert parse_compute_units("each") == list(COMPUTE_UNITS) == ["cpu_only", "cpu_and_gpu", "cpu_and_ne", "all"]
    with pytest.raises(UserError) as info:
        parse_compute_units("cpu_only,gpu,ane")
    message = info.value.message
    assert "'gpu'" in message and "'ane'" in message and "cpu_and_gpu" in message and "cpu_and_ne" in message and "each" in message
    with pytest.raises(UserError, match="unknown Core ML compute units"):
        parse_compute_units(" , ")


def test_bad_compute_units_on_the_command_line(cli, capsys, tmp_path, tiny_mlpackage):
    out = tmp_path / "run"
    assert cli("run", tiny_mlpackage, "--device", "macos", "--compute-units", "npu", "-o", out) == 2
    err = capsys.readouterr().err
    assert "unknown Core ML compute units 'npu'" in err and "cpu_only, cpu_and_gpu, cpu_and_ne, all" in err
    assert "Traceback" not in err
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"")
    assert cli("run", onnx, "--device", "adb", "--compute-units", "gpu", "-o", out) == 2
    err = capsys.readouterr().err  # every problem with the option at once
    assert "'gpu'" in err and "applies to Core ML models (.mlpackage), not m.onnx" in err and "not a adb device" in err
    assert not out.exists()
    assert cli("run", tiny_mlpackage, "--device", "ssh://me@127.0.0.1:1", "--compute-units", "each", "-o", out) == 2
    assert "over ssh --compute-units takes one setting per run" in capsys.readouterr().err
    assert not out.exists()


def test_one_compute_unit_setting_reaches_the_remote_runner(tiny_mlpackage):
    from edgekit.run.base import RunRequest
    from edgekit.run.runners.session import runner_arguments

    one = RunRequest(tiny_mlpackage, [], runtime="coreml", options={"compute_units": ["cpu_and_ne"]})
    argv = runner_arguments(one, "m.mlpackage", "in.npz")
    assert argv[argv.index("--compute-units") + 1] == "cpu_and_ne"
    sweep = RunRequest(tiny_mlpackage, [], runtime="coreml", options={"compute_units": ["cpu_only", "all"]})
    assert "--compute-units" not in runner_arguments(sweep, "m.mlpackage", "in.npz")  # the local sweep adds its own


# --- model inputs from the spec (every OS) ----------------------------------------------------------
def test_inputs_are_read_from_the_package_spec(tiny_mlpackage, tmp_path):
    import coremltools as ct
    import torch

    from edgekit.coreml.macos import coreml_inputs
    from edgekit.run.runners.host import MacRunner

    (spec,) = MacRunner.model_inputs(tiny_mlpackage)
    assert (spec.name, spec.shape, spec.dtype) == ("x", (1, 1, 8, 8), np.dtype(np.float32))

    example = torch.zeros(1, 1, 8, 8)
    image_model = ct.convert(torch.jit.trace(tiny_torch_model(), example), convert_to="mlprogram",
                             inputs=[ct.ImageType(name="image", shape=example.shape, color_layout=ct.colorlayout.GRAYSCALE, scale=1 / 255)])
    image_path = tmp_path / "image.mlpackage"
    image_model.save(str(image_path))
    (image,) = coreml_inputs(image_path)
    assert (image.name, image.shape, image.dtype) == ("image", (8, 8), np.dtype(np.uint8))

    broken = tmp_path / "broken.mlpackage"
    broken.mkdir()
    with pytest.raises(InvalidModelError, match="broken.mlpackage is not a readable Core ML model"):
        coreml_inputs(broken)


# --- off macOS: one clear refusal ------------------------------------------------------------------
@linux_only
def test_runner_script_refuses_core_ml_off_macos(tiny_mlpackage, tmp_path):
    """The device-side script reports runtime_missing (exit 3); the host side turns it into one user error."""
    from edgekit.run.base import DeviceTarget, RunRequest
    from edgekit.run.runners.session import (
        RUNNER_SCRIPT,
        StreamingProcess,
        run_streaming,
        runner_arguments,
        write_inputs,
    )

    request = RunRequest(artifact=tiny_mlpackage, inputs=[{"x": np.zeros((1, 1, 8, 8), np.float32)}], iterations=3, warmup=0,
                         runtime="coreml")
    inputs = tmp_path / "inputs.npz"
    write_inputs(inputs, request.inputs)
    argv = [sys.executable, "-u", str(RUNNER_SCRIPT), *runner_arguments(request, str(tiny_mlpackage), str(inputs)),
            "--compute-units", "cpu_and_ne"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3
    events = [json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("EKR1 ")]
    assert [e["event"] for e in events] == ["hello", "error"]
    assert events[1]["kind"] == "runtime_missing"
    assert "Core ML models run only on macOS" in events[1]["message"]
    assert "Model prediction is only supported on macOS" in events[1]["message"]

    with pytest.raises(ToolMissingError) as info:
        run_streaming(lambda: StreamingProcess(argv, describe="the host runner process"), DeviceTarget("host"), request)
    assert info.value.exit_code == 2 and "Core ML models run only on macOS" in info.value.message
    assert info.value.partial.complete is False and not info.value.partial.latencies_ms


@linux_only
@pytest.mark.parametrize("device", ["macos", "host"])
def test_run_mlpackage_off_macos_is_one_clear_error(cli, capsys, tmp_path, tiny_mlpackage, device):
    out = tmp_path / "run"
    assert cli("run", tiny_mlpackage, "--device", device, "--compute-units", "each", "-n", "5", "-o", out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "macOS" in err and sys.platform in err
    assert "Fix:" in err and "ssh://" in err
    assert not out.exists()


@linux_only
def test_library_load_refuses_off_macos(tiny_mlpackage):
    from edgekit.coreml import macos

    for call in (lambda: macos.load(tiny_mlpackage, "cpu_only"), lambda: macos.compute_plan(tiny_mlpackage, "all")):
        with pytest.raises(UserError, match="runs only on macOS"):
            call()


@linux_only
def test_placement_is_reported_unavailable_when_core_ml_did_not_load_the_model(tiny_mlpackage):
    import coremltools as ct

    from edgekit.run.runners.remote_runner import coreml_compiled_path, coreml_placement

    spec_only = ct.models.MLModel(str(tiny_mlpackage), skip_model_load=True)
    assert coreml_compiled_path(spec_only) is None
    placement = coreml_placement(None, "cpu_and_ne")
    assert placement == {"available": False, "reason": f"coremltools {ct.__version__} gives no compiled model path"}


def test_prediction_values_become_arrays():
    """MLModel.predict gives arrays, and for classifiers a label and a {label: probability} dict."""
    from edgekit.run.runners.remote_runner import coreml_output_array, encode

    probs = coreml_output_array({10: 0.1, 2: 0.7, 1: 0.2})
    assert probs.dtype == np.float64 and probs.tolist() == [0.2, 0.7, 0.1]  # labels in numeric order
    assert coreml_output_array({"dog": 0.4, "cat": 0.6}).tolist() == [0.6, 0.4]
    label = coreml_output_array("dog")
    assert label.shape == () and encode("classLabel", label)["dtype"] == "<U3"
    values = np.arange(6, dtype=np.float16).reshape(2, 3)
    assert np.array_equal(coreml_output_array(values), values) and coreml_output_array(values).dtype == np.float16


# --- placement summary and the per-setting report --------------------------------------------------
PLACEMENT_ALL = [  # as coreml_op_placement writes it (one dict per non-const op)
    {"op": "conv", "name": "conv_0", "function": "main", "preferred": "neural_engine", "supported": ["cpu", "gpu", "neural_engine"], "cost": 0.62},
    {"op": "relu", "name": "relu_0", "function": "main", "preferred": "neural_engine", "supported": ["cpu", "gpu", "neural_engine"], "cost": 0.08},
    {"op": "reshape", "name": "flat", "function": "main", "preferred": "cpu", "supported": ["cpu", "gpu"], "cost": 0.05},
    {"op": "linear", "name": "fc", "function": "main", "preferred": "cpu", "supported": ["cpu", "gpu", "neural_engine"], "cost": 0.25},
    {"op": "cast", "name": "out", "function": "main", "preferred": None, "supported": [], "cost": None},
]


def test_placement_summary_counts_ops_and_estimated_cost_per_device():
    from edgekit.coreml.macos import (
        PLACEMENT_SOURCE,
        placement_line,
        summarise_placement,
    )

    summary = summarise_placement(PLACEMENT_ALL)
    assert summary["ops"] == 5 and summary["source"] == PLACEMENT_SOURCE and "estimated" in PLACEMENT_SOURCE
    assert list(summary["by_device"]) == ["neural_engine", "cpu", "undetermined"]
    ne, cpu, unknown = (summary["by_device"][d] for d in ("neural_engine", "cpu", "undetermined"))
    assert ne["ops"] == 2 and ne["estimated_cost"] == pytest.approx(0.70) and ne["op_types"] == {"conv": 1, "relu": 1}
    assert cpu["ops"] == 2 and cpu["estimated_cost"] == pytest.approx(0.30) and cpu["op_types"] == {"linear": 1, "reshape": 1}
    assert unknown == {"ops": 1, "estimated_cost": None, "op_types": {"cast": 1}}
    assert placement_line(summary) == "neural_engine 2 ops (est. 70%), cpu 2 ops (est. 30%), undetermined 1 op"
    neural_network = summarise_placement([{"op": "convolution", "name": "c", "preferred": "gpu", "supported": ["gpu"], "cost": None}])
    assert neural_network["by_device"] == {"gpu": {"ops": 1, "estimated_cost": None, "op_types": {"convolution": 1}}}
    assert placement_line(summarise_placement([])) == "–"


def runner_events(unit: str, latencies, outputs, placement):
    """The EKR1 events remote_runner.py emits for one Core ML run (encoded with its own functions)."""
    from edgekit.run.runners import remote_runner as rr

    runtime = {"name": "coremltools", "version": "9.0", "compute_units": unit, "placement": placement}
    starts = list(np.cumsum([0.0] + list(latencies[:-1])) / 1e3)
    events = [{"event": "hello", "python": "3.11.9", "executable": "/usr/bin/python3", "platform": "macOS-15.1-arm64",
               "machine": "arm64", "pid": 4242},
              {"event": "loaded", "load_ms": 180.0, "runtime_import_ms": 900.0, "runtime": runtime, "rss_before_load_bytes": 90 << 20,
               "rss_after_load_bytes": 120 << 20, "sensors_available": []},
              {"event": "first", "first_inference_ms": 9.5}]
    events += [{"event": "outputs", "sample": i, "tensors": [rr.encode("var_21", o)]} for i, o in enumerate(outputs)]
    events += [{"event": "warm_start", "sensors": {}},
               {"event": "batch", "t_s": rr.pack_floats(starts), "ms": rr.pack_floats(latencies)},
               {"event": "warm_end", "wall_s": sum(latencies) / 1e3 * 1.1, "iterations": len(latencies), "sensors": {}},
               {"event": "done", "peak_rss_bytes": 130 << 20}]
    return [json.loads(json.dumps(e)) for e in events]  # through JSON, as on the wire


def collected(unit, latencies, outputs, placement, request):
    from edgekit.run.base import DeviceTarget
    from edgekit.run.runners.session import Collector

    collector = Collector(DeviceTarget("macos", name="macos"), request)
    for event in runner_events(unit, latencies, outputs, placement):
        collector.handle(event)
    assert collector.done
    collector.result.complete = True
    return collector.result


def test_report_has_one_table_over_the_compute_unit_settings(tmp_path, tiny_mlpackage):
    from edgekit.run.base import RunRequest
    from edgekit.run.cli import write_results
    from edgekit.run.runners.host import coreml_section, primary_unit

    request = RunRequest(artifact=tiny_mlpackage, inputs=[{"x": np.zeros((1, 1, 8, 8), np.float32)}] * 2, iterations=4, warmup=1,
                         runtime="coreml", options={"threads": 1, "compute_units": ["cpu_only", "cpu_and_gpu", "cpu_and_ne", "all"]})
    reference = [np.array([[0.5, -1.0, 2.0]], np.float32), np.array([[0.25, 0.0, 1.0]], np.float32)]
    fp16 = [r + np.float32(0.004) for r in reference]
    cpu_plan = [dict(op, preferred="cpu", cost=op["cost"]) for op in PLACEMENT_ALL[:4]]
    results = {"cpu_only": collected("cpu_only", [2.0, 2.1, 2.2, 2.3], reference, {"available": True, "ops": cpu_plan}, request),
               "cpu_and_ne": collected("cpu_and_ne", [0.5, 0.6, 0.7, 0.9], fp16, {"available": True, "ops": PLACEMENT_ALL}, request),
               "all": collected("all", [0.4, 0.5, 0.6, 0.8], fp16,
                                {"available": False, "reason": "MLComputePlan failed: macOS 14.4 or newer is needed"}, request)}
    units = request.options.compute_units
    primary = primary_unit(units, results)
    assert primary == "all" and primary_unit(["cpu_and_ne", "cpu_only"], results) == "cpu_and_ne"
    result = results[primary]
    result.extra["coreml"] = coreml_section(units, results, {"cpu_and_gpu": "inference failed on the macOS runner process: GPU lost"},
                                            primary)
    assert "placement" not in result.runtime  # moved out of the runtime record into the per-setting rows

    out = tmp_path / "run"
    report = write_results(out, result, request, {"kind": "random", "samples": 2}, 0.25)
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["compute_units"] == units and "coreml" not in run["extra"]
    coreml = run["coreml"]
    assert coreml["primary"] == "all" and coreml["outputs_reference"] == "cpu_only" and "estimated" in coreml["placement_source"]
    rows = {r["compute_units"]: r for r in coreml["compute_units"]}
    assert [r["compute_units"] for r in coreml["compute_units"]] == units
    assert rows["cpu_and_gpu"] == {"compute_units": "cpu_and_gpu", "complete": False,
                                   "error": "inference failed on the macOS runner process: GPU lost"}
    ne = rows["cpu_and_ne"]
    assert ne["load_ms"] == 180.0 and ne["first_inference_ms"] == 9.5 and ne["peak_rss_bytes"] == 130 << 20
    assert ne["latency_ms"]["count"] == 4 and ne["latency_ms"]["max"] == pytest.approx(0.9)
    assert ne["latency_ms"]["p50"] == pytest.approx(0.65)
    assert ne["outputs_max_abs_diff"] == pytest.approx(0.004, rel=1e-3) and rows["cpu_only"]["outputs_max_abs_diff"] is None
    assert ne["placement"]["summary"]["by_device"]["neural_engine"]["ops"] == 2 and len(ne["placement"]["ops"]) == 5
    assert rows["cpu_only"]["placement"]["summary"]["by_device"] == {
        "cpu": {"ops": 4, "estimated_cost": pytest.approx(1.0), "op_types": {"conv": 1, "linear": 1, "relu": 1, "reshape": 1}}}
    assert rows["all"]["placement"] == {"available": False, "reason": "MLComputePlan failed: macOS 14.4 or newer is needed"}
    assert run["latency_ms"]["count"] == 4 and run["runtime"]["compute_units"] == "all"  # the main figures: the 'all' run

    md = (out / "report.md").read_text()
    assert md == report_md(report)
    table = [line for line in md.splitlines() if line.startswith(("| cpu_", "| all "))]
    assert len(table) == 4
    assert table[0].startswith("| cpu_only | 180 ms | 9.5 ms | 2.15 ms |") and "| reference |" in table[0] and "cpu 4 ops (est. 100%)" in table[0]
    assert table[1].startswith("| cpu_and_gpu | **failed**: inference failed") and table[1].count("|") == table[0].count("|")
    assert "| 0.004 |" in table[2] and "neural_engine 2 ops (est. 70%), cpu 2 ops (est. 30%), undetermined 1 op" in table[2]
    assert "unavailable: MLComputePlan failed: macOS 14.4 or newer is needed" in table[3]
    assert "The figures above are the `all` run; each setting ran in its own runner process" in md
    assert "- `cpu_and_ne`: neural_engine: conv x1, relu x1; cpu: linear x1, reshape x1; undetermined: cast x1" in md
    assert run["cold_start_note"].startswith("load = MLModel(path, compute_units): Core ML compiles the package")


def test_a_single_remote_core_ml_run_gets_its_placement_row(tmp_path, tiny_mlpackage):
    """A Core ML run from a runner without the sweep (e.g. over ssh to a Mac) still reports its placement as one row."""
    from edgekit.run.base import RunRequest
    from edgekit.run.report import build_run_report

    request = RunRequest(artifact=tiny_mlpackage, inputs=[{"x": np.zeros((1, 1, 8, 8), np.float32)}], iterations=4, warmup=0,
                         runtime="coreml")
    result = collected("cpu_and_ne", [0.5, 0.6, 0.7, 0.9], [np.ones((1, 3), np.float32)], {"available": True, "ops": PLACEMENT_ALL},
                       request)
    report = build_run_report(result, request, inputs_description={"kind": "random", "samples": 1})
    run = report.to_dict()
    assert run["runtime"] == {"name": "coremltools", "version": "9.0", "compute_units": "cpu_and_ne"}
    (row,) = run["coreml"]["compute_units"]
    assert row["compute_units"] == "cpu_and_ne" and row["latency_ms"]["count"] == 4 and row["outputs_max_abs_diff"] is None
    assert row["placement"]["summary"]["by_device"]["neural_engine"]["ops"] == 2
    assert "| cpu_and_ne | 180 ms | 9.5 ms | 0.65 ms |" in report_md(report)


def report_md(report):
    from edgekit.run.report import markdown

    return markdown(report)


# --- on a Mac: the real runtime ----------------------------------------------------------------------
@mac_only
def test_load_predict_and_compute_plan_on_this_mac(tiny_mlpackage):
    import torch

    from edgekit.coreml import macos

    x = np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)
    expected = tiny_torch_model()(torch.from_numpy(x)).detach().numpy()
    for unit in macos.COMPUTE_UNITS:
        loaded = macos.load(tiny_mlpackage, unit)
        assert loaded.load_ms > 0 and loaded.compute_units == unit
        (output,) = loaded.predict({"x": x}).values()
        np.testing.assert_allclose(output, expected, atol=2e-2)  # iOS16 ML Programs compute in float16
    plan = macos.compute_plan(tiny_mlpackage, "cpu_only")
    if not plan["available"]:
        pytest.skip(f"this macOS gives no compute plan: {plan['reason']}")
    assert {op["op"] for op in plan["ops"]} >= {"conv", "relu", "linear"}
    assert {op["preferred"] for op in plan["ops"]} <= {"cpu", None}
    assert plan["summary"]["by_device"]["cpu"]["ops"] >= 3


@mac_only
@pytest.mark.slow
def test_edgekit_run_sweeps_every_compute_unit_on_this_mac(cli, tmp_path, tiny_mlpackage):
    out = tmp_path / "run"
    assert cli("run", tiny_mlpackage, "--device", "macos", "--compute-units", "each", "-n", "20", "--warmup", "2", "-o", out) == 0
    run = json.loads((out / "run.json").read_text())
    rows = run["coreml"]["compute_units"]
    assert [r["compute_units"] for r in rows] == ["cpu_only", "cpu_and_gpu", "cpu_and_ne", "all"]
    for row in rows:
        assert row["complete"] and row["load_ms"] > 0 and row["first_inference_ms"] > 0 and row["latency_ms"]["count"] == 20
        assert row["placement"]["available"] in (True, False)
    assert run["runtime"]["compute_units"] == "all" and "## Core ML compute units" in (out / "report.md").read_text()
