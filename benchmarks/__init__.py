"""Benchmarks: measurements printed as figures, never asserted (README: Measured performance)."""
