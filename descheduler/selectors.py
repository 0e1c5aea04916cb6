"""LabelSelector: a metav1.LabelSelector as LowNodeLoad reads and matches one, for a node
pool's nodeSelector, the podSelectors and the evictor's labelSelector.

It follows the selector fields of Koordinator v1.8.0's
pkg/descheduler/apis/config/v1alpha2/types_loadaware.go, parsed as Kubernetes'
metav1.LabelSelectorAsSelector does (what it refuses raises ArgsError).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from descheduler.fields import ArgsError, check_keys, json_list, json_object

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def set_requirement_matches(
    labels: Mapping[str, str], key: str, operator: str, values: Collection[str]
) -> bool:
    """labels.Requirement.Matches for the set-based operators (``_OPERATORS``)."""
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    return not present  # DoesNotExist


@dataclass(frozen=True)
class LabelSelector:
    """A metav1.LabelSelector: ``matchLabels`` and ``matchExpressions`` ANDed; an empty
    selector matches every object."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (key, operator, values)

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, wanted in self.match_labels.items():
            if labels.get(key) != wanted:
                return False
        return all(
            set_requirement_matches(labels, key, operator, values)
            for key, operator, values in self.expressions
        )

    @classmethod
    def parse(cls, value: Any, where: str) -> LabelSelector:
        """Raises ArgsError for what metav1.LabelSelectorAsSelector refuses."""
        selector = json_object(value, where)
        check_keys(selector, ("matchLabels", "matchExpressions"), where)
        labels = json_object(selector.get("matchLabels"), f"{where}.matchLabels")
        for name, label in labels.items():
            if not isinstance(name, str) or not name or not isinstance(label, str):
                raise ArgsError(f"{where}.matchLabels: must map label names to strings")
        expressions = []
        for i, raw in enumerate(
            json_list(selector.get("matchExpressions"), f"{where}.matchExpressions")
        ):
            at = f"{where}.matchExpressions[{i}]"
            expression = json_object(raw, at)
            check_keys(expression, ("key", "operator", "values"), at)
            key, operator = expression.get("key"), expression.get("operator")
            values = json_list(expression.get("values"), f"{at}.values")
            if not isinstance(key, str) or not key:
                raise ArgsError(f"{at}.key: must be a label name")
            if operator not in _OPERATORS:
                raise ArgsError(
                    f"{at}.operator: {operator!r} is not a valid label selector operator "
                    f"({', '.join(_OPERATORS)})"
                )
            if not all(isinstance(v, str) for v in values):
                raise ArgsError(f"{at}.values: must be strings")
            if operator in ("In", "NotIn") and not values:
                raise ArgsError(f"{at}.values: must be non-empty for {operator}")
            if operator in ("Exists", "DoesNotExist") and values:
                raise ArgsError(f"{at}.values: must be empty for {operator}")
            expressions.append((key, str(operator), frozenset(values)))
        return cls(dict(labels), tuple(expressions))
