"""The cluster as LowNodeLoad sees it: raw allocatable, NodeMetric usage and the pod facts
read from Kubernetes JSON.

The raw allocatable cases re-express Koordinator v1.8.0's
Test_GetNodeRawAllocatableForDescheduler; the others are our own.
"""

from __future__ import annotations

import pytest

from descheduler.cluster import (
    NodeMetricData,
    node_info,
    node_metric_data,
    pod_info,
    raw_allocatable,
)
from koordapi import keys, qos
from tests.unit.descheduler.fakes import GI, NOW, build_node, build_pod

# -- raw allocatable and the JSON adapters (Test_GetNodeRawAllocatableForDescheduler) -------


def test_raw_allocatable_without_annotation() -> None:
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "16", "memory": "32Gi"}}}
    assert raw_allocatable(node) == {"cpu": 16000, "memory": 32 * GI}


def test_raw_allocatable_from_a_valid_annotation_replaces_all() -> None:
    node = {
        "metadata": {
            "annotations": {keys.ANNOTATION_NODE_RAW_ALLOCATABLE: '{"cpu":"8","memory":"16Gi"}'}
        },
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}},
    }
    assert raw_allocatable(node) == {"cpu": 8000, "memory": 16 * GI}


@pytest.mark.parametrize("annotation", ["invalid", '{"cpu": "lots"}', "[1]", "null"])
def test_raw_allocatable_falls_back_on_a_bad_annotation(annotation: str) -> None:
    node = {
        "metadata": {"annotations": {keys.ANNOTATION_NODE_RAW_ALLOCATABLE: annotation}},
        "status": {"allocatable": {"cpu": "16", "memory": "32Gi"}},
    }
    assert raw_allocatable(node) == {"cpu": 16000, "memory": 32 * GI}


def test_node_metric_data_reads_through_koordapi() -> None:
    metric = {
        "status": {
            "updateTime": "2023-11-14T22:13:20Z",
            "nodeMetric": {"systemUsage": {"resources": {"cpu": "250m", "memory": "1Gi"}}},
            "podsMetric": [
                {"namespace": "a", "name": "x", "podUsage": {"resources": {"cpu": "1500m"}}},
                {"namespace": "a", "name": "y", "podUsage": {}},
            ],
        }
    }
    data = node_metric_data(metric)
    assert data == NodeMetricData(
        NOW, {"cpu": 250, "memory": GI}, {"a/x": {"cpu": 1500}, "a/y": {}}
    )
    assert node_metric_data({"status": {"updateTime": "2023-11-14T22:13:20Z"}}) is None


def test_an_unreadable_node_metric_counts_as_none() -> None:
    bad = {"status": {"nodeMetric": {}, "podsMetric": [{"podUsage": {"resources": {"cpu": "x"}}}]}}
    info = node_info(build_node("n", 1000, 1000, 10), bad, [])
    assert info.metric is None
    assert info.note == "NodeMetric ignored: status.podsMetric[0]: malformed quantity 'x'"


def test_pod_info_reads_the_pod() -> None:
    pod = build_pod(
        "p",
        500,
        GI,
        "n",
        labels={keys.LABEL_PRIORITY_CLASS: "koord-batch", keys.LABEL_QOS_CLASS: "BE"},
        annotations={
            "kubernetes.io/config.source": "file",
            "controller.kubernetes.io/pod-deletion-cost": "-5",
            "scheduling.koordinator.sh/eviction-cost": "007",
        },
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}],
        node_selector={"zone": "a"},
        priority=5500,
    )
    pod["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"
    pod["metadata"]["deletionTimestamp"] = "2023-11-14T22:14:20Z"
    info = pod_info(pod)
    assert info.key == "default/p"
    assert info.priority_class == qos.BATCH and not info.prod
    assert (info.qos_class, info.kube_qos, info.priority) == (
        qos.QoSClass.BE,
        qos.KubeQoS.BURSTABLE,
        5500,
    )
    assert info.static and not info.mirror and info.terminating
    assert info.pvc and not info.local_storage
    assert (info.deletion_cost, info.eviction_cost) == (-5, 0)  # "007" is malformed: 0
    assert info.created == NOW and info.node_selector == {"zone": "a"}
    assert info.owner_kinds == ("ReplicaSet",)


@pytest.mark.parametrize(
    ("text", "cost"),
    [
        ("0", 0),
        ("12", 12),
        ("-0", 0),
        ("+1", 0),
        ("1e3", 0),
        ("2147483647", 2147483647),
        ("2147483648", 0),
    ],
)
def test_cost_annotations(text: str, cost: int) -> None:
    pod = build_pod("p", 1, 1, "n", annotations={"scheduling.koordinator.sh/eviction-cost": text})
    assert pod_info(pod).eviction_cost == cost


def test_a_best_effort_pod_without_labels_is_batch() -> None:
    info = pod_info(build_pod("p", 0, 0, "n", best_effort=True))
    assert (info.kube_qos, info.qos_class, info.priority_class) == (
        qos.KubeQoS.BESTEFFORT,
        qos.QoSClass.BE,
        qos.BATCH,
    )
