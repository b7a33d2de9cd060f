"""Calibration data, activation statistics and range selection."""
