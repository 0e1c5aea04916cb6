"""Errors of the data model.

ModelError (ValueError)
├── QuantityError     a Kubernetes quantity or a cpu list that does not parse or is out of range
├── AnnotationError   a label or annotation value that does not parse (names the key)
└── NodeSLOError      a NodeSLO spec field of the wrong type or out of range (names the path)
"""

from __future__ import annotations


class ModelError(ValueError):
    """Base class of every data-model parsing error."""


class QuantityError(ModelError):
    """A quantity or a cpu list is malformed or out of range."""


class AnnotationError(ModelError):
    """A label or annotation value is malformed."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class NodeSLOError(ModelError):
    """A NodeSLO spec field is malformed."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
