"""Parity between a reference and a candidate model: metrics, tolerances, reports."""
