"""What a run measures besides outputs: energy (power monitors, estimates), thermal behaviour, latency statistics."""
