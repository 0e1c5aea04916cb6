"""TCNetworkQoS: egress bandwidth classes per QoS class (HTB), and each pod's class.

The NodeSLO's ``systemStrategy.totalNetworkBandwidth`` is shared among an HTB tree on the
node's uplink: root 1:1 (the total), system 1:2 (what LS and BE do not reserve), LS 1:3 and
BE 1:4 (their ``networkQOS`` request and limit: an int is a percent of the total, a string a
quantity). Pods are classified by their cgroup's ``net_cls.classid``: SYSTEM → 1:2,
LSE/LSR/LS → 1:3, BE → 1:4. This module only computes; koordlet applies it through netlink.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordapi import features
from koordapi.nodeslo import NET_POLICY_TC
from koordapi.qos import QoSClass
from koordapi.quantity import value as quantity_value
from runtimehooks.patch import PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import Rules

HTB_MAJOR = 1
ROOT_MINOR, SYSTEM_MINOR, LS_MINOR, BE_MINOR = 1, 2, 3, 4


def classid(minor: int, major: int = HTB_MAJOR) -> int:
    """net_cls.classid value for handle major:minor."""
    return (major << 16) | minor


@dataclass(frozen=True)
class HtbClass:
    minor: int
    rate_bps: int  # bytes per second
    ceil_bps: int
    prio: int


@dataclass(frozen=True)
class TcPlan:
    total_bps: int
    classes: tuple[HtbClass, ...]


def _amount(spec: object, total: int) -> int:
    """An int is a percent of the total; a string a bandwidth quantity (bits/s → bytes/s)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return total * spec // 100
    return quantity_value(str(spec)) // 8


def plan(rules: Rules) -> TcPlan | None:
    """The HTB classes, or None when tc QoS is off or the total bandwidth is unknown."""
    if rules.slo.net_qos_policy != NET_POLICY_TC:
        return None
    total = quantity_value(str(rules.slo.system.get("totalNetworkBandwidth", "0"))) // 8
    if total <= 0:
        return None
    ls, be = rules.slo.network_qos(QoSClass.LS), rules.slo.network_qos(QoSClass.BE)
    ls_min, ls_max = (
        _amount(ls.get("egressRequest", 0), total),
        _amount(ls.get("egressLimit", 100), total),
    )
    be_min, be_max = (
        _amount(be.get("egressRequest", 0), total),
        _amount(be.get("egressLimit", 100), total),
    )
    if not ls.get("enable"):
        ls_min, ls_max = 0, total
    if not be.get("enable"):
        be_min, be_max = 0, total
    system_rate = max(1, total - ls_min - be_min)
    return TcPlan(
        total,
        (
            HtbClass(ROOT_MINOR, total, total, 0),
            HtbClass(SYSTEM_MINOR, system_rate, total, 1),
            HtbClass(LS_MINOR, max(1, ls_min), max(1, ls_max), 2),
            HtbClass(BE_MINOR, max(1, be_min), max(1, be_max), 3),
        ),
    )


def pod_minor(pod: PodRequest) -> int:
    if pod.qos is QoSClass.SYSTEM:
        return SYSTEM_MINOR
    if pod.qos is QoSClass.BE:
        return BE_MINOR
    return LS_MINOR  # LSE, LSR, LS and unknown


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    if plan(rules) is None:
        return None
    return PodPatch(net_cls_classid=classid(pod_minor(req)))


HOOK = Hook(
    name="TCNetworkQoS",
    gate=features.TC_NETWORK_QOS,
    stages=frozenset({Stage.PRE_RUN_POD_SANDBOX, Stage.RECONCILE_POD}),
    pod=pod,
)
