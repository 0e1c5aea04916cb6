"""What the formulas need from each pod: its key, Koordinator priority class (with its
defaults), whether it is LSE, and its effective request (milli-cores, bytes), each read by
koordapi.pod's one rule.

Only Running and Pending pods are read (a pod without a phase yet counts, to stay on the safe
side). A pod whose resources do not parse is left out with a note; its usage still counts
through NodeMetric as a "dangling" pod metric, by its reported priority. The API server
validates pod quantities, so that only happens with hand-made objects.

Pods are plain tuples, not named ones: a reconcile reads a hundred per node, and building a
NamedTuple costs more than reading the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordapi import keys, qos
from koordapi.errors import ModelError
from koordapi.pod import pod_requests, priority_class_with_default

PRIORITY_PROD = qos.PROD.name
PRIORITY_MID = qos.MID.name
PRIORITY_BATCH = qos.BATCH.name
PRIORITY_FREE = qos.FREE.name

PodView = tuple[str, str, bool, int, int]
"""(namespace/name, priority class name or "", is LSE, cpu request milli-cores, memory
request bytes): one Running or Pending pod. LSE pods' CPU counts at the request; batch and
free pods' requests are not read (0)."""

_ACTIVE_PHASES = ("Running", "Pending", None)
_EMPTY: Mapping[str, Any] = {}


class PodMemo:
    """Pod facts already read, by (uid, resourceVersion): the API server gives a changed pod a
    new resourceVersion, so an entry never goes stale. The caller owns it (one per controller)
    and passes it to every reconcile; pods without both fields are never memoized. Bounded:
    emptied when full, which drops the entries of deleted pods too."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.limit = limit
        self.views: dict[tuple[str, str], PodView] = {}

    def put(self, key: tuple[str, str], view: PodView) -> None:
        if len(self.views) >= self.limit:
            self.views.clear()
        self.views[key] = view


_LOW_PRIORITIES = (PRIORITY_BATCH, PRIORITY_FREE)


def read_pod(pod: Mapping[str, Any]) -> PodView:
    """One pod's facts; raises ModelError, TypeError, AttributeError or KeyError. Batch and
    free pods get a zero request: no formula reads it (they run on what the others leave)."""
    metadata = pod.get("metadata") or _EMPTY
    key = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    priority = priority_class_with_default(pod).name
    if priority in _LOW_PRIORITIES:
        return key, priority, False, 0, 0
    cpu, memory = pod_requests(pod.get("spec") or _EMPTY)
    lse = (metadata.get("labels") or _EMPTY).get(keys.LABEL_QOS_CLASS) == "LSE"
    return key, priority, lse, cpu, memory


def read_pods(
    pods: Iterable[Mapping[str, Any]], notes: list[str], memo: PodMemo | None = None
) -> list[PodView]:
    """The Running and Pending pods; unreadable ones are left out, with a note each."""
    views = []
    remembered = memo.views.get if memo is not None else None
    for pod in pods:
        if (pod.get("status") or _EMPTY).get("phase") not in _ACTIVE_PHASES:
            continue
        memo_key = None
        if remembered is not None:
            metadata = pod.get("metadata") or _EMPTY
            uid, version = metadata.get("uid"), metadata.get("resourceVersion")
            if uid and version:
                memo_key = (uid, version)
                view = remembered(memo_key)
                if view is not None:
                    views.append(view)
                    continue
        try:
            view = read_pod(pod)
        except (ModelError, TypeError, AttributeError, KeyError) as err:
            metadata = pod.get("metadata") or _EMPTY
            key = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            notes.append(f"skipped pod {key}: unreadable resources ({err}); its metric counts")
            continue
        if memo is not None and memo_key is not None:
            memo.put(memo_key, view)
        views.append(view)
    return views
