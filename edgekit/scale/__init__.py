"""Past one machine: dataset-scale parity on Ray Data."""
