"""edgekit: take a trained model to an edge device and prove it still works there."""

__version__ = "0.1.0"
