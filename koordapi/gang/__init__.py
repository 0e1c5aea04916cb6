"""Koordinator's gang scheduling (coscheduling) as pure decisions: a gang's identity and spec
from a PodGroup or the ``gang.scheduling.koordinator.sh/*`` annotations (``spec``), where the
gang and its group stand and what to do with the members the caller holds (``state``), the
PodGroup status Koordinator's controller writes (``status``) and the texts a waiting member
shows (``reasons``). Mirrors Koordinator v1.8's pkg/scheduler/plugins/coscheduling.
"""

from koordapi.gang.spec import CoschedulingArgs, GangSpec, gang_id, resolve_spec
from koordapi.gang.state import (
    GangState,
    Verdict,
    admission_reason,
    bind_annotations,
    decide,
    gang_states,
    group_ready,
    reject_unschedulable,
    waiting_reason,
)
from koordapi.gang.status import podgroup_status

__all__ = [
    "CoschedulingArgs",
    "GangSpec",
    "GangState",
    "Verdict",
    "admission_reason",
    "bind_annotations",
    "decide",
    "gang_id",
    "gang_states",
    "group_ready",
    "podgroup_status",
    "reject_unschedulable",
    "resolve_spec",
    "waiting_reason",
]
