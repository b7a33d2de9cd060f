"""Keras (.h5/.keras) and TF SavedModel -> float .tflite with TFLiteConverter."""
from __future__ import annotations

import logging
import re
from pathlib import Path

from edgekit.deps import tensorflow
from edgekit.errors import InvalidModelError, UnsupportedOpError, first_line
from edgekit.export.detect import ModelKind
from edgekit.quiet import captured_output
from edgekit.support import OpSupport, SupportReport

log = logging.getLogger(__name__)


def float_tflite_from_tf(path: Path, kind: ModelKind) -> bytes:
    tf = tensorflow()
    with captured_output():
        if kind is ModelKind.KERAS:
            import keras

            try:
                model = keras.models.load_model(str(path), compile=False, safe_mode=True)
            except Exception as exc:  # keras raises many kinds for damaged files
                raise InvalidModelError(
                    f"cannot load Keras model {path}: {first_line(exc)}",
                    fix="the file may be truncated, corrupt, or need custom layers; re-save it with model.save()",
                ) from exc
            converter = _batch_one_converter(tf, model)
        else:
            try:
                converter = tf.lite.TFLiteConverter.from_saved_model(str(path))
            except Exception as exc:
                raise InvalidModelError(
                    f"cannot load SavedModel {path}: {first_line(exc)}",
                    fix="check the folder holds a complete SavedModel (saved_model.pb and variables/)",
                ) from exc
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        with captured_output() as output:
            return bytes(converter.convert())
    except Exception as exc:
        text = str(exc) + "\n" + "\n".join(output)
        report = unsupported_tf_ops(text)
        if report.rejected:
            raise UnsupportedOpError(report, target="TFLite builtins (needed for int8)") from exc
        raise InvalidModelError(
            f"TFLiteConverter failed on {path}: {first_line(exc)}"
        ) from exc


def _batch_one_converter(tf, model):
    """Converter for the model with batch size pinned to 1.

    from_keras_model keeps a flexible batch, which makes the converter emit SHAPE/STRIDED_SLICE/PACK
    ops around every reshape; those are not int8 ops and do not belong in an edge model.
    """
    import keras

    shapes = [tuple(i.shape) for i in model.inputs]
    if any(d is None for s in shapes for d in s[1:]):
        log.info("inputs %s have unknown non-batch dims; keeping the Keras signature", shapes)
        return tf.lite.TFLiteConverter.from_keras_model(model)
    inputs = [keras.Input(batch_shape=(1,) + s[1:], dtype=i.dtype, name=i.name.split(":")[0]) for s, i in zip(shapes, model.inputs)]
    outputs = model(inputs[0] if len(inputs) == 1 else inputs, training=False)
    return tf.lite.TFLiteConverter.from_keras_model(keras.Model(inputs, outputs))


def unsupported_tf_ops(text: str) -> SupportReport:
    """Every TF op the converter says TFLite builtins lack, with the layer it comes from."""
    locations: dict[str, list[str]] = {}
    for line in text.splitlines():
        ops = re.findall(r"'(tf\.[A-Z][A-Za-z0-9_]*)' op is neither", line)
        for op in ops:
            where = re.search(r'fused\["[^"]*", "([^"@]+)', line)
            locations.setdefault(op, [])
            if where and where.group(1) not in locations[op]:
                locations[op].append(where.group(1))
    for group in re.findall(r"TF Select ops: ([A-Za-z0-9_, ]+)", text):
        for name in group.split(","):
            locations.setdefault(f"tf.{name.strip()}", [])
    for name in re.findall(r"\bFlex([A-Z][A-Za-z0-9_]*)", text):
        locations.setdefault(f"tf.{name}", [])
    report = SupportReport("TFLite builtins")
    for op, places in sorted(locations.items()):
        for place in places or ["(location not reported)"]:
            report.ops.append(OpSupport(op, place, False, "no TFLite builtin for this TensorFlow op"))
    return report
