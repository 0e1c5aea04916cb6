"""Koordinator's cgroup arithmetic and its QoS classes (priority classes: test_pod_priority)."""

from __future__ import annotations

import pytest

from koordapi import keys
from koordapi.cgroup import milli_cpu_to_quota, milli_cpu_to_shares, shares_to_weight
from koordapi.qos import (
    KubeQoS,
    QoSClass,
    default_qos_for_kube,
    is_known_qos_label,
    kube_qos_from_cgroup_parent,
    qos_from_label,
)

# -- cgroup arithmetic -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("milli", "shares"),
    [
        pytest.param(500, 512, id="half-core"),
        pytest.param(1000, 1024, id="one-core"),
        pytest.param(0, 2, id="zero-gives-minimum"),
        pytest.param(-5, 2, id="negative-gives-minimum"),
        pytest.param(1, 2, id="tiny-raised-to-minimum"),
        pytest.param(256_000, 262_144, id="maximum"),
        pytest.param(10_000_000, 262_144, id="clamped-to-maximum"),
    ],
)
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"),
    [
        pytest.param(500, 50_000, id="half-core"),
        pytest.param(1500, 150_000, id="one-and-a-half"),
        pytest.param(0, -1, id="zero-is-unlimited"),
        pytest.param(-1, -1, id="negative-is-unlimited"),
        pytest.param(5, 1000, id="below-10m-raised-to-1000us"),
        pytest.param(10, 1000, id="10m-is-exactly-1000us"),
        pytest.param(11, 1100, id="above-minimum"),
    ],
)
def test_milli_cpu_to_quota(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(
    ("shares", "weight"),
    [
        pytest.param(512, 20, id="512"),
        pytest.param(1024, 39, id="1024"),
        pytest.param(2, 1, id="minimum"),
        pytest.param(262_144, 10_000, id="maximum"),
        pytest.param(1, 1, id="below-minimum-clamped"),
        pytest.param(1_000_000, 10_000, id="above-maximum-clamped"),
    ],
)
def test_shares_to_weight_for_cgroup_v2(shares: int, weight: int) -> None:
    assert shares_to_weight(shares) == weight


# -- QoS classes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "qos"),
    [
        pytest.param("LSE", QoSClass.LSE, id="lse"),
        pytest.param("LSR", QoSClass.LSR, id="lsr"),
        pytest.param("LS", QoSClass.LS, id="ls"),
        pytest.param("BE", QoSClass.BE, id="be"),
        pytest.param("SYSTEM", QoSClass.SYSTEM, id="system"),
        pytest.param("ls", QoSClass.NONE, id="lowercase-is-unknown"),
        pytest.param("", QoSClass.NONE, id="empty"),
        pytest.param(None, QoSClass.NONE, id="no-label"),
    ],
)
def test_qos_class_comes_from_the_label(label: str | None, qos: QoSClass) -> None:
    assert qos_from_label(label) is qos


def test_only_the_five_classes_are_known_labels() -> None:
    assert [
        v for v in ("LSE", "LSR", "LS", "BE", "SYSTEM", "", "NONE") if is_known_qos_label(v)
    ] == [
        "LSE",
        "LSR",
        "LS",
        "BE",
        "SYSTEM",
    ]
    assert keys.LABEL_QOS_CLASS == "koordinator.sh/qosClass"


@pytest.mark.parametrize(
    ("parent", "kube"),
    [
        pytest.param("kubepods/besteffort/pod1", KubeQoS.BESTEFFORT, id="cgroupfs-besteffort"),
        pytest.param("kubepods/burstable/pod1", KubeQoS.BURSTABLE, id="cgroupfs-burstable"),
        pytest.param("kubepods/pod1", KubeQoS.GUARANTEED, id="cgroupfs-guaranteed"),
        pytest.param(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice",
            KubeQoS.BESTEFFORT,
            id="systemd-besteffort",
        ),
        pytest.param(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice",
            KubeQoS.BURSTABLE,
            id="systemd-burstable",
        ),
        pytest.param("kubepods.slice/kubepods-pod1.slice", KubeQoS.GUARANTEED, id="systemd-guar"),
        pytest.param("", KubeQoS.GUARANTEED, id="empty-is-guaranteed"),
    ],
)
def test_kube_qos_is_derived_from_the_cgroup_parent(parent: str, kube: KubeQoS) -> None:
    assert kube_qos_from_cgroup_parent(parent) is kube


@pytest.mark.parametrize(
    ("kube", "qos"),
    [
        pytest.param(KubeQoS.GUARANTEED, QoSClass.LSR, id="guaranteed-lsr"),
        pytest.param(KubeQoS.BURSTABLE, QoSClass.LS, id="burstable-ls"),
        pytest.param(KubeQoS.BESTEFFORT, QoSClass.BE, id="besteffort-be"),
    ],
)
def test_default_qos_for_kube_qos(kube: KubeQoS, qos: QoSClass) -> None:
    assert default_qos_for_kube(kube) is qos
