"""Errors of the manager's pure modules, turned into Warning events, denials or log lines."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value (ConfigMap key, profile, annotation) is invalid; says where."""
