"""Benchmarks: measurements printed as figures, never asserted (docs/performance.md)."""
