"""Benchmarks: measurements printed as figures, never asserted (see README, Measured performance)."""
