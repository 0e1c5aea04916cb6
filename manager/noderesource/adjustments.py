"""Node-level adjustments to batch amounts after the formulas, and the annotations they read
and write: CPU normalization (``node.koordinator.sh/cpu-normalization-ratio``), third-party
batch allocations (``node.koordinator.sh/thirdPartyAllocations``, e.g. a YARN NodeManager
sharing batch capacity) and the record of the amount before that subtraction
(``node.koordinator.sh/originExtendedAllocatable``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from koordapi import keys
from koordapi.annotation import load_json, parse_cpu_normalization_ratio
from koordapi.errors import ModelError
from koordapi.quantity import format_binary, value
from manager.noderesource.pods import PRIORITY_BATCH

ANNOTATION_THIRD_PARTY_ALLOCATIONS = "node.koordinator.sh/thirdPartyAllocations"
ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE = "node.koordinator.sh/originExtendedAllocatable"


def normalization_ratio(annotations: Mapping[str, str], notes: list[str]) -> Decimal | None:
    """The CPU normalization ratio when it amplifies (> 1), exactly as written; else None.
    An unreadable ratio is ignored: amplifying is the risky direction."""
    text = annotations.get(keys.ANNOTATION_CPU_NORMALIZATION_RATIO)
    if not text:
        return None
    try:
        ratio = parse_cpu_normalization_ratio(text)
    except ModelError as err:
        notes.append(f"ignored {err}")
        return None
    return Decimal(str(ratio)) if ratio > 1 else None


def normalize(milli_cores: int, ratio: Decimal) -> int:
    """milli_cores * ratio, rounded up to a whole number as Kubernetes' Quantity.Value does."""
    return math.ceil(milli_cores * ratio)


def third_party_batch(annotations: Mapping[str, str]) -> tuple[int, int] | None:
    """(batch-cpu, batch-memory) that other schedulers hold at batch priority, in the
    resources' own units (batch-cpu counts milli-cores); None without the annotation.
    Raises ModelError when the annotation is unreadable."""
    key = ANNOTATION_THIRD_PARTY_ALLOCATIONS
    text = annotations.get(key)
    if text is None:
        return None
    data = load_json(key, text)
    allocations = data.get("allocations") or []
    if not isinstance(allocations, list):
        raise ModelError(f"{key}: allocations must be a list")
    cpu = memory = 0
    for i, allocation in enumerate(allocations):
        if not isinstance(allocation, Mapping):
            raise ModelError(f"{key}: allocations[{i}] must be an object")
        if allocation.get("priority") != PRIORITY_BATCH:
            continue
        resources = allocation.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise ModelError(f"{key}: allocations[{i}].resources must be an object")
        try:
            c = value(resources.get(keys.BATCH_CPU, 0))
            m = value(resources.get(keys.BATCH_MEMORY, 0))
        except ModelError as err:
            raise ModelError(f"{key}: allocations[{i}]: {err}") from None
        if c < 0 or m < 0:
            raise ModelError(f"{key}: allocations[{i}] has a negative amount")
        cpu, memory = cpu + c, memory + m
    return cpu, memory


def origin_annotation(annotations: Mapping[str, str], batch_cpu: int, batch_memory: int) -> str:
    """The originExtendedAllocatable value recording the batch amounts before third-party
    allocations are subtracted; other resources already recorded there are kept."""
    resources: dict[str, Any] = {}
    text = annotations.get(ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE)
    if text:
        try:
            old = json.loads(text)
        except ValueError:
            old = None
        if isinstance(old, Mapping) and isinstance(old.get("resources"), Mapping):
            resources.update(old["resources"])
    resources[keys.BATCH_CPU] = str(batch_cpu)
    resources[keys.BATCH_MEMORY] = format_binary(batch_memory)
    return json.dumps({"resources": resources}, sort_keys=True, separators=(",", ":"))
