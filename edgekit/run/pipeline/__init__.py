"""`edgekit run --pipeline`: the per-phase (decode, preprocess, inference, post-process) latency/energy budget."""
