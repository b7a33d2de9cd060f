"""MLPerf Tiny: the dataset folders (`edgekit mlperf-dataset`) and `edgekit run --harness mlperf-tiny`."""
