"""Moved to ``edgekit.preprocessing.spec``. This alias only serves the three run/ modules that still import it
(edgekit/run/pipeline.py, pipeline_c.py, pipeline_mcu.py, another branch's area); delete it once they import
``edgekit.preprocessing.spec``."""
from edgekit.preprocessing.spec import PreprocessSpec

__all__ = ["PreprocessSpec"]
