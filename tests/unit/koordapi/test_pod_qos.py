"""A pod's Kubernetes QoS class (status.qosClass, else ComputePodQOS on parsed quantities, init
containers and pod-level resources included) and Koordinator's QoS class with its default."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi import keys
from koordapi.errors import QuantityError
from koordapi.pod import compute_kube_qos, kube_qos, qos_class_raw, qos_class_with_default
from koordapi.qos import KubeQoS, QoSClass

G, BU, BE = KubeQoS.GUARANTEED, KubeQoS.BURSTABLE, KubeQoS.BESTEFFORT


def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> Any:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources}


FULL = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [c(limits=FULL)]}, G, id="limits-only-default-requests"),
        pytest.param({"containers": [c(FULL, FULL)]}, G, id="equal"),
        pytest.param(
            {"containers": [c({"cpu": "1000m", "memory": "1024Mi"}, FULL)]},
            G,
            id="1-equals-1000m",
        ),
        pytest.param(
            {"containers": [c({"cpu": "0.5", "memory": "1Gi"}, {"cpu": "500m", "memory": "1Gi"})]},
            G,
            id="0.5-equals-500m",
        ),
        pytest.param({"containers": [c({"cpu": "1"})]}, BU, id="request-only"),
        pytest.param(
            {"containers": [c({"cpu": "500m", "memory": "1Gi"}, FULL)]},
            BU,
            id="request-below-limit",
        ),
        pytest.param({"containers": [c(limits={"cpu": "1"})]}, BU, id="memory-unlimited"),
        pytest.param({"containers": [c(limits=FULL), c()]}, BU, id="one-container-unlimited"),
        pytest.param({"containers": [{}]}, BE, id="nothing"),
        pytest.param({"containers": []}, BE, id="no-containers"),
        pytest.param({}, BE, id="empty-spec"),
        pytest.param(
            {"containers": [c({"cpu": "0", "memory": "0"})]}, BE, id="zero-requests-do-not-count"
        ),
        pytest.param(
            {"containers": [c({"ephemeral-storage": "1Gi"}, {"nvidia.com/gpu": "1"})]},
            BE,
            id="only-cpu-and-memory-count",
        ),
        pytest.param(
            {"containers": [c(limits={"cpu": "1", "memory": "0"})]},
            BU,
            id="zero-limit-is-no-limit",
        ),
        pytest.param(
            {"containers": [c(limits=FULL)], "initContainers": [c({"cpu": "100m"})]},
            BU,
            id="init-container-unlimited",
        ),
        pytest.param(
            {"containers": [c(limits=FULL)], "initContainers": [c(limits=FULL)]},
            G,
            id="init-container-guaranteed",
        ),
        pytest.param(
            {"containers": [{}], "initContainers": [c({"memory": "64Mi"})]},
            BU,
            id="init-container-alone-makes-burstable",
        ),
        pytest.param(
            {"containers": [c({"cpu": "1"})], "resources": {"limits": FULL}},
            G,
            id="pod-level-limits-stand-for-containers",
        ),
        pytest.param(
            {"containers": [c(limits=FULL)], "resources": {"requests": {"cpu": "1"}}},
            BU,
            id="pod-level-requests-without-limits",
        ),
        pytest.param(
            {"containers": [c(limits=FULL)], "resources": {"requests": {"hugepages-2Mi": "2Mi"}}},
            G,
            id="pod-level-without-cpu-or-memory-is-ignored",
        ),
    ],
)
def test_compute_kube_qos(spec: dict[str, Any], expected: KubeQoS) -> None:
    assert compute_kube_qos(spec) is expected


def test_compute_kube_qos_compares_sums_across_containers() -> None:
    spec = {
        "containers": [
            c({"cpu": "300m", "memory": "512Mi"}, {"cpu": "300m", "memory": "512Mi"}),
            c({"cpu": "0.7", "memory": "0.5Gi"}, {"cpu": "700m", "memory": "512Mi"}),
        ]
    }
    assert compute_kube_qos(spec) is G


def test_compute_kube_qos_refuses_a_malformed_quantity() -> None:
    with pytest.raises(QuantityError):
        compute_kube_qos({"containers": [c({"cpu": "lots"})]})


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param({"qosClass": "BestEffort"}, BE, id="status-wins"),
        pytest.param({"qosClass": "Guaranteed"}, G, id="status-guaranteed"),
        pytest.param({"qosClass": "bogus"}, BU, id="unknown-status-computed"),
        pytest.param({"qosClass": ""}, BU, id="empty-status-computed"),
        pytest.param(None, BU, id="no-status-computed"),
    ],
)
def test_kube_qos_reads_the_status_first(status: dict[str, str] | None, expected: KubeQoS) -> None:
    pod: dict[str, Any] = {"spec": {"containers": [c({"cpu": "1"})]}}
    if status is not None:
        pod["status"] = status
    assert kube_qos(pod) is expected


@pytest.mark.parametrize(
    ("labels", "status", "raw", "with_default"),
    [
        pytest.param({keys.LABEL_QOS_CLASS: "LSE"}, "Burstable", QoSClass.LSE, QoSClass.LSE),
        pytest.param({keys.LABEL_QOS_CLASS: "BE"}, "Guaranteed", QoSClass.BE, QoSClass.BE),
        pytest.param({}, "Guaranteed", QoSClass.NONE, QoSClass.LSR, id="guaranteed-is-lsr"),
        pytest.param({}, "Burstable", QoSClass.NONE, QoSClass.LS, id="burstable-is-ls"),
        pytest.param({}, "BestEffort", QoSClass.NONE, QoSClass.BE, id="besteffort-is-be"),
        pytest.param(
            {keys.LABEL_QOS_CLASS: "ls"}, "BestEffort", QoSClass.NONE, QoSClass.BE, id="unknown"
        ),
    ],
)
def test_koordinator_qos_class(
    labels: dict[str, str], status: str, raw: QoSClass, with_default: QoSClass
) -> None:
    pod = {"metadata": {"labels": labels}, "status": {"qosClass": status}}
    assert qos_class_raw(pod) is raw
    assert qos_class_with_default(pod) is with_default
