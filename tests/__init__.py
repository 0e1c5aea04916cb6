"""Tests: unit tests under ``unit/`` (no root needed) and the end-to-end suite under ``e2e/``."""
