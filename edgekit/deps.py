"""Heavy optional dependencies, imported on first use with an install hint when missing."""
from __future__ import annotations

import os

from edgekit.errors import ToolMissingError
from edgekit.quiet import captured_output


def tensorflow():
    """Import TensorFlow quietly (absl/oneDNN banners go to fd 2 at import)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        with captured_output((2,)):
            import tensorflow as tf
    except ImportError:
        raise ToolMissingError("tensorflow-cpu", "pip install tensorflow-cpu==2.21.0 (or run `make install`)") from None
    return tf
