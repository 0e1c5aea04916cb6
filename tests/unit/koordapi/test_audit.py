"""The shared audit record (koordapi.audit): one line format led by each component's words,
a bounded trail, lookups by pod; koordlet's trail keeps its "qos action" line exactly."""

from __future__ import annotations

import logging

import pytest

from koordapi.audit import Action, AuditTrail
from koordlet.qosmanager import audit as qos_audit

ACTION = Action(
    1700000000.0,
    "CPUSuppress",
    "cpuset",
    "kubepods/besteffort",
    "0-3",
    "suppress: 2.70 cores",
    scope="BE",
    inputs={"cores": 2.7, "user": "admin"},
)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(
    "prefix", ["qos action", "admission", "extender bind"], ids=["koordlet", "manager", "scheduler"]
)
def test_one_line_per_action_led_by_the_components_words(
    caplog: pytest.LogCaptureFixture, prefix: str
) -> None:
    caplog.set_level(logging.INFO)
    trail = AuditTrail(prefix=prefix, logger=logging.getLogger("test.audit"))

    trail.record(ACTION)

    assert lines(caplog) == [
        f"{prefix} strategy=CPUSuppress kind=cpuset target=kubepods/besteffort value=0-3 "
        "reason='suppress: 2.70 cores'"
    ]
    assert caplog.records[0].name == "test.audit"


def test_named_inputs_are_appended_quoted_and_absent_ones_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    trail = AuditTrail(
        prefix="admission", logger=logging.getLogger("t"), logged_inputs=("user", "missing")
    )

    trail.record(ACTION)
    hostile = Action(0, "s", "k", "t", "v", "r", inputs={"user": "eve\nadmission kind=forged"})
    trail.record(hostile)

    first, second = lines(caplog)
    assert first.endswith("reason='suppress: 2.70 cores' user='admin'")
    assert "missing" not in first
    # a name with a newline stays on one line: it is quoted, escapes and all
    assert second.endswith("user='eve\\nadmission kind=forged'") and "\n" not in second


def test_koordlets_trail_keeps_its_line_logger_and_status_words(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    counted: list[Action] = []
    trail = qos_audit.AuditTrail(on_action=counted.append)

    trail.record(ACTION)
    trail.status("CPUSuppress", "no action: stale", 1.0)

    assert lines(caplog) == [
        "qos action strategy=CPUSuppress kind=cpuset target=kubepods/besteffort value=0-3 "
        "reason='suppress: 2.70 cores'",
        "qos strategy CPUSuppress: no action: stale",
    ]
    assert {r.name for r in caplog.records} == {"koordlet.qosmanager.audit"}
    assert counted == [ACTION]
    assert qos_audit.Action is Action


def test_the_trail_keeps_only_the_newest_capacity_actions() -> None:
    trail = AuditTrail(3, prefix="p", logger=logging.getLogger("t"))
    for i in range(5):
        trail.record(Action(float(i), "s", "k", "t", str(i), "r"))

    assert [a.value for a in trail.recent()] == ["2", "3", "4"]
    assert [a.value for a in trail.recent(limit=2)] == ["3", "4"]


def test_for_pod_finds_the_pods_actions_and_its_class_newest_last() -> None:
    trail = AuditTrail(prefix="p", logger=logging.getLogger("t"))
    mine = Action(1.0, "s", "evict", "ns/a", "", "r", pod_uid="uid-a")
    other = Action(2.0, "s", "evict", "ns/b", "", "r", pod_uid="uid-b")
    be = Action(3.0, "s", "cpuset", "kubepods/besteffort", "0-3", "r", scope="BE")
    for action in (mine, other, be):
        trail.record(action)

    assert trail.for_pod("uid-a", "BE") == [mine, be]
    assert trail.for_pod("uid-a", "LS") == [mine]
    assert trail.for_pod("uid-a", "BE", limit=1) == [be]
    assert trail.matching(lambda a: a.target == "ns/b") == [other]


def test_as_dict_is_json_ready() -> None:
    assert ACTION.as_dict()["inputs"] == {"cores": 2.7, "user": "admin"}
    assert ACTION.as_dict()["scope"] == "BE"
