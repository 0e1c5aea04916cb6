"""Kubernetes label selectors (metav1.LabelSelector) as the API server evaluates them.

``matchLabels`` and ``matchExpressions`` are ANDed; an empty or missing selector matches
everything, as the ClusterColocationProfile and NodeSLO ``nodeSelector`` fields and a
Reservation owner's ``labelSelector`` expect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordapi.errors import ModelError

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_label_selector(selector: Any, where: str = "selector") -> None:
    """Raise ModelError when ``selector`` is not a well-formed LabelSelector."""
    if selector is None:
        return
    if not isinstance(selector, Mapping):
        raise ModelError(f"{where}: a label selector must be an object")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ModelError(f"{where}.matchLabels: must map strings to strings")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise ModelError(f"{where}.matchExpressions: must be a list")
    for i, expr in enumerate(expressions):
        at = f"{where}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            raise ModelError(f"{at}: needs a string key")
        op, values = expr.get("operator"), expr.get("values") or []
        if op not in OPERATORS:
            raise ModelError(f"{at}.operator: {op!r} is not one of {', '.join(OPERATORS)}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ModelError(f"{at}.values: must be a list of strings")
        if op in ("In", "NotIn") and not values:
            raise ModelError(f"{at}: {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise ModelError(f"{at}: {op} takes no values")


def label_selector_matches(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None
) -> bool:
    """Whether ``labels`` satisfy ``selector`` (validate it first; malformed parts never match)."""
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in OPERATORS:
            return False
    return True
