"""Koordinator's priority classes: the ranges, GetPodPriorityClassRaw (the priority-class
label first, then spec.priority), GetPodPriorityClassWithDefault (then the class the QoS class
implies) and GetPodPriorityValueWithDefault, on values and on pod dicts."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi import keys
from koordapi.pod import (
    priority_class_raw,
    priority_class_with_default,
    priority_value_with_default,
    spec_priority,
)
from koordapi.qos import (
    BATCH,
    FREE,
    MID,
    NONE_PRIORITY,
    PROD,
    PriorityClass,
    QoSClass,
    default_priority_class_for_qos,
    priority_class_by_name,
    priority_class_by_value,
    raw_priority_class,
)


def make_pod(
    labels: dict[str, str] | None = None,
    priority: Any = None,
    kube_qos: str | None = None,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or [{"name": "app"}]}
    if priority is not None:
        spec["priority"] = priority
    pod: dict[str, Any] = {"metadata": {"labels": labels or {}}, "spec": spec}
    if kube_qos is not None:
        pod["status"] = {"qosClass": kube_qos}
    return pod


def requesting(cpu: str) -> list[dict[str, Any]]:
    return [{"name": "app", "resources": {"requests": {"cpu": cpu}}}]


# -- the classes and their ranges ------------------------------------------------------------


def test_priority_class_ranges_and_defaults() -> None:
    assert [(pc.name, pc.low, pc.high, pc.default) for pc in (PROD, MID, BATCH, FREE)] == [
        ("koord-prod", 9000, 9999, 9500),
        ("koord-mid", 7000, 7999, 7500),
        ("koord-batch", 5000, 5999, 5500),
        ("koord-free", 3000, 3999, 3500),
    ]


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        pytest.param(9000, PROD, id="prod-low-edge"),
        pytest.param(9999, PROD, id="prod-high-edge"),
        pytest.param(7500, MID, id="mid"),
        pytest.param(5500, BATCH, id="batch"),
        pytest.param(3000, FREE, id="free"),
        pytest.param(8500, NONE_PRIORITY, id="gap-is-none"),
        pytest.param(10000, NONE_PRIORITY, id="above-prod"),
        pytest.param(0, NONE_PRIORITY, id="zero"),
        pytest.param(-1, NONE_PRIORITY, id="negative"),
        pytest.param(2_000_000_000, NONE_PRIORITY, id="system-critical"),
        pytest.param(None, NONE_PRIORITY, id="none"),
    ],
)
def test_priority_class_by_value(priority: int | None, expected: PriorityClass) -> None:
    assert priority_class_by_value(priority) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("koord-batch", BATCH, id="known"),
        pytest.param("koord-other", NONE_PRIORITY, id="unknown"),
        pytest.param("Koord-Prod", NONE_PRIORITY, id="case-matters"),
        pytest.param("", NONE_PRIORITY, id="empty"),
        pytest.param(None, NONE_PRIORITY, id="none"),
    ],
)
def test_priority_class_by_name(name: str | None, expected: PriorityClass) -> None:
    assert priority_class_by_name(name) == expected


@pytest.mark.parametrize(
    ("qos", "expected"),
    [
        pytest.param(QoSClass.SYSTEM, PROD, id="system"),
        pytest.param(QoSClass.LSE, PROD, id="lse"),
        pytest.param(QoSClass.LSR, PROD, id="lsr"),
        pytest.param(QoSClass.LS, PROD, id="ls"),
        pytest.param(QoSClass.BE, BATCH, id="be"),
        pytest.param(QoSClass.NONE, NONE_PRIORITY, id="none"),
    ],
)
def test_default_priority_class_for_qos(qos: QoSClass, expected: PriorityClass) -> None:
    assert default_priority_class_for_qos(qos) == expected


# -- raw: the label first, whatever spec.priority says ---------------------------------------


@pytest.mark.parametrize(
    ("label", "priority", "expected"),
    [
        pytest.param(None, 9500, PROD, id="priority-without-label"),
        pytest.param("koord-batch", None, BATCH, id="label-without-priority"),
        pytest.param("koord-mid", 8500, MID, id="label-when-priority-outside-classes"),
        pytest.param("koord-free", 9500, FREE, id="label-wins-over-priority"),
        pytest.param("koord-other", 9500, NONE_PRIORITY, id="unknown-label-no-fallback"),
        pytest.param("", 5500, NONE_PRIORITY, id="empty-label-no-fallback"),
        pytest.param(None, 0, NONE_PRIORITY, id="priority-zero"),
        pytest.param(None, None, NONE_PRIORITY, id="nothing"),
    ],
)
def test_raw_priority_class_reads_the_label_before_spec_priority(
    label: str | None, priority: int | None, expected: PriorityClass
) -> None:
    assert raw_priority_class(label, priority) == expected
    labels = {} if label is None else {keys.LABEL_PRIORITY_CLASS: label}
    assert priority_class_raw(make_pod(labels, priority)) == expected


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        pytest.param(7000, 7000, id="integer"),
        pytest.param(0, 0, id="zero"),
        pytest.param("9500", None, id="text"),
        pytest.param(True, None, id="bool"),
        pytest.param(9500.0, None, id="float"),
    ],
)
def test_spec_priority_is_an_integer_or_unknown(priority: Any, expected: int | None) -> None:
    assert spec_priority(make_pod(priority=priority)) == expected
    assert spec_priority({}) is None


# -- with defaults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod({keys.LABEL_PRIORITY_CLASS: "koord-mid"}), MID, id="label"),
        pytest.param(
            make_pod({keys.LABEL_PRIORITY_CLASS: "koord-batch"}, 9500),
            BATCH,
            id="label-beats-priority",
        ),
        pytest.param(make_pod(priority=5500), BATCH, id="priority-range"),
        pytest.param(make_pod({keys.LABEL_QOS_CLASS: "BE"}), BATCH, id="be-label"),
        pytest.param(make_pod({keys.LABEL_QOS_CLASS: "LSE"}), PROD, id="lse-label"),
        pytest.param(make_pod({keys.LABEL_QOS_CLASS: "SYSTEM"}), PROD, id="system-label"),
        pytest.param(make_pod(kube_qos="BestEffort"), BATCH, id="kube-besteffort"),
        pytest.param(make_pod(kube_qos="Burstable"), PROD, id="kube-burstable"),
        pytest.param(make_pod(kube_qos="Guaranteed"), PROD, id="kube-guaranteed"),
        pytest.param(make_pod(), BATCH, id="derived-besteffort"),
        pytest.param(make_pod(containers=requesting("1")), PROD, id="derived-burstable"),
        pytest.param(make_pod(containers=requesting("0")), BATCH, id="zero-request-is-besteffort"),
        pytest.param(
            make_pod({keys.LABEL_PRIORITY_CLASS: "bogus"}, containers=requesting("1")),
            PROD,
            id="unknown-label-falls-back-to-qos",
        ),
        pytest.param(
            make_pod({keys.LABEL_PRIORITY_CLASS: "bogus"}, 5500, "Burstable"),
            PROD,
            id="unknown-label-hides-spec-priority",
        ),
        pytest.param(
            make_pod(priority=8500, kube_qos="BestEffort"), BATCH, id="priority-between-classes"
        ),
        pytest.param(make_pod(priority=0, kube_qos="Burstable"), PROD, id="priority-zero"),
        pytest.param(
            make_pod({keys.LABEL_QOS_CLASS: "BE"}, kube_qos="Guaranteed"),
            BATCH,
            id="qos-label-beats-kube-qos",
        ),
        pytest.param(
            make_pod({keys.LABEL_QOS_CLASS: "bogus"}, kube_qos="BestEffort"),
            BATCH,
            id="unknown-qos-label-uses-kube-qos",
        ),
    ],
)
def test_priority_class_with_default(pod: dict[str, Any], expected: PriorityClass) -> None:
    assert priority_class_with_default(pod) == expected


def test_priority_class_with_default_reads_no_resources_when_the_raw_class_is_known() -> None:
    unreadable = [{"name": "app", "resources": {"requests": {"cpu": "lots"}}}]
    pod = make_pod({keys.LABEL_PRIORITY_CLASS: "koord-mid"}, containers=unreadable)
    assert priority_class_with_default(pod) == MID


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(priority=5999, kube_qos="Burstable"), 5999, id="spec-priority"),
        pytest.param(make_pod(priority=8500, kube_qos="Burstable"), 8500, id="between-classes"),
        pytest.param(
            make_pod({keys.LABEL_PRIORITY_CLASS: "koord-free"}, 9500), 9500, id="priority-first"
        ),
        pytest.param(
            make_pod({keys.LABEL_PRIORITY_CLASS: "koord-mid"}, 0), 7500, id="zero-is-unset"
        ),
        pytest.param(make_pod(kube_qos="BestEffort"), 5500, id="besteffort-batch-default"),
        pytest.param(make_pod(kube_qos="Guaranteed"), 9500, id="guaranteed-prod-default"),
        pytest.param(make_pod({keys.LABEL_PRIORITY_CLASS: "koord-free"}), 3500, id="free-default"),
    ],
)
def test_priority_value_with_default(pod: dict[str, Any], expected: int) -> None:
    assert priority_value_with_default(pod) == expected
