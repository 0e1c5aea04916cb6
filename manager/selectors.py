"""Kubernetes label selectors for koord-manager's configuration (ClusterColocationProfile and
NodeSLO ``nodeSelector`` fields): koordapi.selectors, with a malformed selector reported as
the manager's ConfigError."""

from __future__ import annotations

from typing import Any

from koordapi.errors import ModelError
from koordapi.selectors import OPERATORS, label_selector_matches, validate_label_selector
from manager.errors import ConfigError

__all__ = ["OPERATORS", "matches", "validate_selector"]

matches = label_selector_matches


def validate_selector(selector: Any, where: str = "selector") -> None:
    """Raise ConfigError when ``selector`` is not a well-formed LabelSelector."""
    try:
        validate_label_selector(selector, where)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
