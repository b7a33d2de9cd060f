"""`edgekit compile MODEL.tflite --target gpu`: per-op GPU delegate verdicts, partitions, MACs left on the CPU."""
import json

import pytest

from edgekit.mobile.gpu_delegate import parse_analyzer


def _model_with_cpu_ops(path):
    """FULLY_CONNECTED -> ARG_MAX/CAST (no GPU parser) -> ADD: splits the graph; converted by TF here."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([1, 16], tf.float32)])
    def f(x):
        y = tf.nn.relu(tf.matmul(x, tf.ones([16, 16])))
        z = tf.cast(tf.argmax(y, axis=1), tf.float32)
        return tf.nn.relu(tf.matmul(y + z, tf.ones([16, 8])))

    path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f).convert())
    return path


def test_mlperf_kws_runs_whole_on_the_gpu(cli, capsys, tmp_path, mlperf):
    out = tmp_path / "gpu"
    assert cli("compile", mlperf / "kws_ref_model_int8.tflite", "--target", "gpu", "-o", out) == 0
    report = json.loads((out / "gpu.json").read_text())
    assert report["ops_total"] == report["ops_accepted"] == report["ops_on_gpu"] == 13
    assert report["partitions"] == 1 and report["macs_on_cpu"] == 0
    # conv, depthwise and FC MACs; the README's 2,664,792 also counts the 8,000 of AVERAGE_POOL_2D (+24 more)
    assert report["macs_total"] == 2_656_768
    assert {r["op"] for r in report["ops"]} >= {"CONV_2D", "DEPTHWISE_CONV_2D", "SOFTMAX"}
    assert "| 0 | CONV_2D |" in (out / "report.md").read_text()
    assert "1 partition(s), 13 ops on the GPU; MACs on the CPU 0.0 %" in capsys.readouterr().out


def test_unsupported_ops_split_the_graph(cli, capsys, tmp_path):
    model = _model_with_cpu_ops(tmp_path / "m.tflite")
    out = tmp_path / "gpu"
    assert cli("compile", model, "--target", "gpu", "-o", out) == 0
    report = json.loads((out / "gpu.json").read_text())
    by_op = {r["op"]: r for r in report["ops"]}
    assert by_op["ARG_MAX"]["delegate_rule"] == "no GPU delegate parser for ARG_MAX" and not by_op["ARG_MAX"]["on_gpu"]
    assert "int64" in by_op["CAST"]["delegate_rule"] or "no GPU delegate parser" in by_op["CAST"]["delegate_rule"]
    assert report["partitions"] == 2
    fc = [r for r in report["ops"] if r["op"] == "FULLY_CONNECTED"]
    assert [r["macs"] for r in fc] == [256, 128]
    # one of the two FULLY_CONNECTED partitions stays on the CPU (the delegate takes the largest partition only)
    assert report["macs_on_cpu"] in (256, 128) and 0 < report["macs_on_cpu_share"] < 1
    assert "on the CPU: #1 ARG_MAX" in capsys.readouterr().out


def test_analyzer_warning_lines_are_parsed():
    """The analyzer's format (tensorflow/lite/tools/model_analyzer.cc): a warning line after the op it concerns."""
    text = ("Subgraph#0 main(T#0) -> [T#3]\n  Op#0 CONV_2D(T#0, T#1, T#2) -> [T#3]\n  Op#1 FOO(T#3) -> [T#4]\n"
            "GPU COMPATIBILITY WARNING: Not supported custom op FOO\n\n"
            "GPU COMPATIBILITY WARNING: Subgraph#0 has GPU delegate compatibility issues at nodes 1 with TFLite runtime "
            "version 2.21.0\n")
    parsed = parse_analyzer(text)
    assert [(o.name, o.warning) for o in parsed.ops] == [("CONV_2D", None), ("FOO", "Not supported custom op FOO")]
    assert parsed.model_compatible is False


def test_gpu_target_needs_a_tflite(cli, capsys, tmp_path):
    bad = tmp_path / "m.onnx"
    bad.write_bytes(b"x")
    assert cli("compile", bad, "--target", "gpu", "-o", tmp_path / "o") == 2
    assert "--target gpu reads a .tflite file" in capsys.readouterr().err and not (tmp_path / "o").exists()
