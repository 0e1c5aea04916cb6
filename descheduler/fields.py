"""ArgsError and the three JSON shape checks every LowNodeLoad config parser starts from
(an object, a list, no unknown keys), shared by descheduler.selectors and descheduler.args.

They follow the camelCase fields of Koordinator v1.8.0's
pkg/descheduler/apis/config/v1alpha2/types_loadaware.go: what does not fit them raises
ArgsError, named by its path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_EMPTY: Mapping[str, Any] = {}


class ArgsError(ValueError):
    """LowNodeLoadArgs or evictor arguments that Koordinator would refuse; the message names
    every offending field by its camelCase path."""


def json_object(value: Any, where: str) -> Mapping[str, Any]:
    """The JSON object at ``where``: empty when absent, ArgsError when not an object."""
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise ArgsError(f"{where or 'args'}: must be an object, got {value!r}")
    return value


def json_list(value: Any, where: str) -> list[Any]:
    """The JSON list at ``where``: empty when absent, ArgsError when not a list."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ArgsError(f"{where}: must be a list, got {value!r}")
    return value


def check_keys(obj: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    """ArgsError naming every key of ``obj`` that is not in ``allowed``."""
    unknown = sorted(str(k) for k in obj if k not in allowed)
    if unknown:
        raise ArgsError(f"{where or 'args'}: unknown field(s) {', '.join(unknown)}")
