"""`edgekit lab MATRIX.yaml -o OUT`: a models x boards matrix (quantize once, build per board, run every cell
in parallel across free boards, resumable, one table)."""
