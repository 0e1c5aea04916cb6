"""The texts Koordinator v1.8's coscheduling plugin gives a member pod that cannot go on, with
Go's formatting of their arguments (``%v`` of a list: ``[a b]``, ``%q``: a quoted string,
``time.Duration.String``), so events and ``koordctl`` read as Koordinator's do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

PLUGIN = "Coscheduling"


def go_list(items: Iterable[str]) -> str:
    """fmt's ``%v``/``%+v`` of a []string: ``[a b c]``."""
    return "[" + " ".join(items) + "]"


def go_quote(text: str) -> str:
    """fmt's ``%q`` of a string (printable characters kept, quotes and controls escaped)."""
    return json.dumps(text, ensure_ascii=False)


def go_duration(seconds: float) -> str:
    """time.Duration.String: "5m17s", "1h0m0s", "1.5s", "750ms", "0s"."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 1_000_000_000:  # below a second Go picks the largest unit that is >= 1
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _decimal(nanos, size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _decimal(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _decimal(amount: int, unit: int) -> str:
    whole, fraction = divmod(amount, unit)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


# -- PreEnqueue / BeforePreFilter (core.go) ---------------------------------------------------


def _pod(pod: str) -> str:
    return f", podName: {pod}" if pod else ""


def gang_not_found(gang: str, pod: str = "") -> str:
    return f"can't find gang, gangName: {gang}{_pod(pod)}"


def gang_not_init(gang: str, pod: str = "") -> str:
    return f"gang has not init, gangName: {gang}{_pod(pod)}"


def basic_check_failed(
    group: Iterable[str],
    missing: Iterable[str],
    not_init: Iterable[str],
    not_collected: bool,
    *,
    gang: str,
    pod: str,
) -> str:
    """basicGangRequirementsCheck's error. Koordinator names the whole group, not only the
    gangs short of members, in its "child pod not collect enough" part."""
    group = list(group)
    missing, not_init = list(missing), list(not_init)
    failed = []
    if missing:
        failed.append(f"memberGangs {go_list(missing)} doesn't exists")
    if not_init:
        failed.append(f"memberGangs {go_list(not_init)} has not init")
    if not_collected:
        failed.append(f"memberGangs {go_list(group)} child pod not collect enough")
    return (
        f"gangGroup {go_list(group)} basic check: {', '.join(failed)}, "
        f"current gang: {gang}, podName: {pod}"
    )


# -- Permit, PostFilter, Unreserve ------------------------------------------------------------


def gang_missing_at_permit() -> str:
    return "Gang not found"


def permit_timeout(wait_time: float) -> str:
    """kube-scheduler's waiting pod message when its Permit wait ends (waiting_pods_map.go)."""
    return f"rejected due to timeout after waiting {go_duration(wait_time)} at plugin {PLUGIN}"


def rejected_in_unreserve(gang: str, pod_name: str) -> str:
    """What the other held members of a Strict gang are told when one of them times out or
    fails to bind (PodGroupManager.Unreserve; the pod's name without its namespace)."""
    return f"Gang {go_quote(gang)} gets rejected due to Pod {go_quote(pod_name)} in Unreserve"


def rejected_unschedulable(gang: str) -> str:
    """AfterPostFilter's status for a Strict gang whose member found no node."""
    return f"Gang {go_quote(gang)} gets rejected due to pod is unschedulable"


def group_rejected(group_id: str, pod: str, fit_error: str, already_waiting: int) -> str:
    """summaryAndRecordFailedMessage: the message the held members of the group get."""
    return (
        f"GangGroup {go_quote(group_id)} gets rejected due to member Pod {go_quote(pod)} is "
        f"unschedulable with reason {go_quote(fit_error)}, alreadyWaitForBound: {already_waiting}"
    )


def waiting_for_group(group: Iterable[str], short: Iterable[str], gang: str, pod: str = "") -> str:
    """Ours (Koordinator's waiting pod shows no text until it is allowed or rejected): a held
    or pending member of a group whose gangs have not all reached minMember assumed, in the
    shape of the basic check's message."""
    return (
        f"gangGroup {go_list(group)} waiting at Permit: memberGangs {go_list(short)} "
        f"have not enough assumed pods, current gang: {gang}{_pod(pod)}"
    )
