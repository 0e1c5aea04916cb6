"""NodeFit: whether a pod could be scheduled onto a node (taints, nodeSelector and required
node affinity, requests against what the node's pods leave, unschedulable).

The first cases re-express Koordinator v1.8.0's pkg/descheduler/node/node_test.go
(TestPodFitsAnyOtherNode, TestPodFitsAnyNode) with its numbers; cases marked "own" add
corners from Kubernetes' Toleration.ToleratesTaint and nodeaffinity's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from descheduler import nodefit
from descheduler.cluster import node_info, pod_info
from descheduler.utilization import node_fit_problems, pod_fits_node
from tests.unit.descheduler.fakes import build_node, build_pod

DESIRED = "kubernetes.io/desiredNode"
GPU_TAINT = [{"key": "hardware", "value": "gpu", "effect": "NoSchedule"}]
G = 1000 * 1000 * 1000
EPHEMERAL = "ephemeral-storage"
CUSTOM = "example.com/custom-resource"


def upstream_node(
    name: str,
    label: str,
    *,
    millicpu: int = 64000,
    memory: int = 128 * G,
    pods: int = 200,
    ephemeral: int = 1000 * G,
    **kw: Any,
) -> dict[str, Any]:
    """BuildTestNode with the ephemeral storage the upstream cases add."""
    node = build_node(name, millicpu, memory, pods, labels={DESIRED: label}, **kw)
    node["status"]["allocatable"][EPHEMERAL] = str(ephemeral)
    return node


def upstream_pod(
    name: str, millicpu: int, memory: int, node: str, ephemeral: int = 0, **kw: Any
) -> dict[str, Any]:
    pod = build_pod(name, millicpu, memory, node, **kw)
    if ephemeral:
        pod["spec"]["containers"][0]["resources"]["requests"][EPHEMERAL] = str(ephemeral)
    return pod


def fits_any(
    pod: dict[str, Any], nodes: list[dict[str, Any]], on_nodes: Sequence[dict[str, Any]] = ()
) -> bool:
    """PodFitsAnyNode over ``nodes``, with ``on_nodes`` the pods already on them."""
    info = pod_info(pod)
    return any(
        pod_fits_node(
            info,
            node_info(
                node,
                None,
                [p for p in on_nodes if p["spec"]["nodeName"] == node["metadata"]["name"]],
            ),
        )
        for node in nodes
    )


def selecting(name: str, millicpu: int = 0, memory: int = 0, ephemeral: int = 0) -> dict[str, Any]:
    return upstream_pod(
        name, millicpu, memory, "stagingNode", ephemeral, node_selector={DESIRED: "yes"}
    )


def test_pod_fits_another_node_matching_node_affinity() -> None:
    nodes = [upstream_node("node1", "yes"), upstream_node("node2", "no")]
    assert fits_any(selecting("p1"), nodes)


def test_pod_expected_to_fit_one_of_the_nodes() -> None:
    nodes = [upstream_node("node1", "no"), upstream_node("node2", "yes")]
    assert fits_any(selecting("p1"), nodes)


def test_pod_expected_to_fit_none_of_the_nodes() -> None:
    nodes = [upstream_node("node1", "unfit1"), upstream_node("node2", "unfit2")]
    assert not fits_any(selecting("p1"), nodes)


def test_nodes_are_unschedulable_but_labels_match() -> None:
    nodes = [upstream_node("node1", "yes", unschedulable=True), upstream_node("node2", "no")]
    assert not fits_any(selecting("p1"), nodes)


def test_both_nodes_are_tainted() -> None:
    nodes = [
        upstream_node("node1", "yes", taints=GPU_TAINT),
        upstream_node("node2", "yes", taints=GPU_TAINT),
    ]
    assert not fits_any(selecting("p1", 2000, 2 * G, 10 * G), nodes)


TAINTED = upstream_node("node1", "yes", taints=GPU_TAINT)


def test_one_tainted_and_a_pod_on_the_other_with_low_requests_fits() -> None:
    nodes = [TAINTED, upstream_node("node2", "yes")]
    on_nodes = [upstream_pod("test-pod", 12 * 1000, 20 * G, "node2", 40 * G)]
    assert fits_any(selecting("p1", 2000, 2 * G, 10 * G), nodes, on_nodes)


@pytest.mark.parametrize(
    ("pod", "node", "on_node"),
    [
        pytest.param(
            selecting("p1", 2000, 2 * G, 10 * G),
            # 4 cores: the pod on it asks 3, this one 2
            upstream_node("node2", "yes", millicpu=4000, memory=8 * G, pods=12, ephemeral=200 * G),
            upstream_pod("3-core-pod", 3000, 4 * G, "node2", 10 * G),
            id="cpu-too-big",
        ),
        pytest.param(
            selecting("p1", 2000, 5 * G, 10 * G),
            # 8 GB: the pod on it asks 4 GB, this one 5 GB
            upstream_node("node2", "yes", millicpu=10000, memory=8 * G, pods=12, ephemeral=200 * G),
            upstream_pod("4GB-mem-pod", 2000, 4 * G, "node2", 10 * G),
            id="memory-too-big",
        ),
        pytest.param(
            selecting("p1", 2000, 4 * G, 10 * G),
            # 20 GB of storage: the pod on it asks 11 GB, this one 10 GB
            upstream_node("node2", "yes", millicpu=10000, memory=8 * G, pods=12, ephemeral=20 * G),
            upstream_pod("11GB-storage-pod", 2000, 4 * G, "node2", 11 * G),
            id="ephemeral-storage-too-big",
        ),
    ],
)
def test_one_tainted_and_the_other_short_of_a_request(
    pod: dict[str, Any], node: dict[str, Any], on_node: dict[str, Any]
) -> None:
    assert not fits_any(pod, [TAINTED, node], [on_node])


def test_one_tainted_and_the_other_short_of_a_custom_resource() -> None:
    pod = selecting("p1", 2000, 2 * G, 10 * G)
    pod["spec"]["containers"][0]["resources"]["requests"][CUSTOM] = "10"
    tainted = upstream_node("node1", "yes", taints=GPU_TAINT, extended={CUSTOM: 15})
    # 15 of the custom resource: the pod on it asks 10, this one 10
    node = upstream_node(
        "node2", "yes", millicpu=10000, memory=8 * G, pods=12, ephemeral=200 * G,
        extended={CUSTOM: 15},
    )  # fmt: skip
    on_node = build_pod("10-custom-resource-pod", 0, 0, "node2", extended={CUSTOM: 10})
    assert not fits_any(pod, [tainted, node], [on_node])
    problems = node_fit_problems(pod_info(pod), node_info(node, None, [on_node]))
    assert problems == [f"insufficient {CUSTOM}"]


@pytest.mark.parametrize(
    ("overhead_cpu", "pod_cpu", "fits"),
    [
        # 5 cores: the pod on it asks 2 with 1 of overhead, this one 1
        pytest.param("1000m", 1000, True, id="overhead-low-enough"),
        # the pod on it asks 2 with 2 of overhead, this one 2
        pytest.param("2000m", 2000, False, id="overhead-too-high"),
    ],
)
def test_the_overhead_of_the_pods_on_the_node_counts(
    overhead_cpu: str, pod_cpu: int, fits: bool
) -> None:
    node = upstream_node("node2", "yes", millicpu=5000, memory=8 * G, pods=12, ephemeral=200 * G)
    on_node = upstream_pod(
        "3-core-pod", 2000, 4 * G, "node2", 10 * G,
        overhead={"cpu": overhead_cpu, "memory": str(G), EPHEMERAL: str(G)},
    )  # fmt: skip
    assert fits_any(selecting("p1", pod_cpu, 2 * G, 10 * G), [TAINTED, node], [on_node]) is fits


TYPE_A_OR_B = [
    {
        "matchExpressions": [
            {
                "key": "test-node-type",
                "operator": "In",
                "values": ["test-node-type-A", "test-node-type-B"],
            }
        ]
    }
]


@pytest.mark.parametrize(
    ("types", "fits"),
    [
        pytest.param(("C", "A"), True, id="either-matches"),
        pytest.param(("C", "D"), False, id="neither-matches"),
    ],
)
def test_pod_fits_any_node_via_affinity_and_tolerations(types: tuple[str, str], fits: bool) -> None:
    pod = {
        "metadata": {"namespace": "default", "name": "tet-pod-1"},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": TYPE_A_OR_B
                    }
                }
            },
            "tolerations": [{"operator": "Exists"}],
        },
    }
    # nodes without any allocatable: a pod that requests nothing still fits
    nodes = [
        {
            "metadata": {
                "name": f"test-node-{t}",
                "labels": {"test-node-type": f"test-node-type-{t}"},
            }
        }
        for t in types
    ]
    assert fits_any(pod, nodes) is fits


# -- own: tolerations -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        pytest.param({}, {"key": "a", "effect": "NoSchedule"}, False, id="none-given"),
        pytest.param({"operator": "Exists"}, {"key": "a", "effect": "NoExecute"}, True, id="all"),
        pytest.param(
            {"key": "a", "value": "x"}, {"key": "a", "value": "x", "effect": "NoSchedule"}, True,
            id="equal-by-default",
        ),
        pytest.param(
            {"key": "a", "value": "x"}, {"key": "a", "value": "y", "effect": "NoSchedule"}, False,
            id="other-value",
        ),
        pytest.param(
            {"key": "a", "operator": "Exists", "effect": "NoExecute"},
            {"key": "a", "value": "y", "effect": "NoSchedule"},
            False,
            id="other-effect",
        ),
        pytest.param(
            {"key": "b", "operator": "Exists"}, {"key": "a", "effect": "NoSchedule"}, False,
            id="other-key",
        ),
        pytest.param(
            {"key": "a", "operator": "Gt", "value": "3"},
            {"key": "a", "value": "7", "effect": "NoSchedule"},
            False,
            id="comparison-operators-off",
        ),
        pytest.param({}, {"key": "a", "effect": "PreferNoSchedule"}, True, id="only-a-preference"),
    ],
)  # fmt: skip
def test_tolerations_of_hard_taints(
    toleration: dict[str, str], taint: dict[str, str], tolerated: bool
) -> None:
    spec = {"tolerations": [toleration]} if toleration else {}
    tolerations = nodefit.pod_tolerations(spec)
    taints = nodefit.node_taints({"spec": {"taints": [taint]}})
    assert nodefit.tolerates_taints(tolerations, taints) is tolerated


# -- own: node affinity -----------------------------------------------------------------------


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def term(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(expressions)}


NODE_LABELS = {"cores": "48", "zone": "z-7", "gen": "v2"}


@pytest.mark.parametrize(
    ("terms", "fits"),
    [
        pytest.param([{"matchExpressions": [expression("cores", "Gt", "47")]}], True, id="gt"),
        pytest.param([{"matchExpressions": [expression("cores", "Gt", "48")]}], False, id="not-gt"),
        pytest.param([{"matchExpressions": [expression("cores", "Lt", "49")]}], True, id="lt"),
        pytest.param([{"matchExpressions": [expression("zone", "Gt", "3")]}], False, id="gt-text"),
        pytest.param([term(expression("gpu", "NotIn", "a"))], True, id="notin-absent"),
        pytest.param(
            [term(expression("zone", "In", "z-7"), expression("gen", "DoesNotExist"))],
            False, id="and-within-a-term",
        ),
        pytest.param(
            [
                {"matchExpressions": [expression("zone", "In", "z-1")]},
                {"matchExpressions": [expression("gen", "Exists")]},
            ],
            True, id="or-across-terms",
        ),
        pytest.param(
            [{"matchFields": [expression("metadata.name", "In", "big-7")]}], True, id="field-name"
        ),
        pytest.param(
            [{"matchFields": [expression("metadata.name", "NotIn", "big-7")]}], False,
            id="field-not-name",
        ),
        pytest.param(
            [
                {"matchExpressions": [expression("zone", "In")]},  # In without values: dropped
                {"matchExpressions": [expression("cores", "Exists")]},
            ],
            True, id="a-bad-term-is-dropped",
        ),
        pytest.param(
            [{"matchExpressions": [expression("cores", "Gt", "4", "5")]}], False,
            id="only-bad-terms",
        ),
        pytest.param([{}], False, id="an-empty-term-matches-nothing"),
        pytest.param([], False, id="no-terms-match-nothing"),
    ],
)  # fmt: skip
def test_required_node_affinity(terms: list[dict[str, Any]], fits: bool) -> None:
    pod = build_pod("p", 100, 0, "elsewhere", affinity_terms=terms)
    node = build_node("big-7", 48000, 256 * G, 110, labels=NODE_LABELS)
    assert pod_fits_node(pod_info(pod), node_info(node, None, [])) is fits


def test_node_selector_and_affinity_must_both_match() -> None:
    terms = [{"matchExpressions": [expression("cores", "Exists")]}]
    pod = build_pod("p", 100, 0, "x", node_selector={"zone": "z-8"}, affinity_terms=terms)
    node = node_info(build_node("big-7", 48000, 256 * G, 110, labels=NODE_LABELS), None, [])
    assert node_fit_problems(pod_info(pod), node) == [
        "pod node selector does not match the node label"
    ]


# -- own: requests ----------------------------------------------------------------------------


def test_requests_count_init_containers_and_only_pods_that_hold_resources() -> None:
    # a 3-core node; an init container of 2500m makes the pod ask 2500m, not its 700m; the
    # Succeeded pod on the node holds nothing, the Running one 400m: 2600m are left
    pod = build_pod("p", 700, 0, "x")
    pod["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "2500m"}}}]
    assert pod_info(pod).requests == {"cpu": 2500, "memory": 0}
    done = build_pod("done", 2900, 0, "n")
    done["status"] = {"phase": "Succeeded"}
    running = build_pod("running", 400, 0, "n")
    node = node_info(build_node("n", 3000, G, 110), None, [done, running])
    assert node.requested == {"cpu": 400, "memory": 0, "pods": 1}
    assert pod_fits_node(pod_info(pod), node)
    running["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "501m"
    node = node_info(build_node("n", 3000, G, 110), None, [done, running])
    assert node_fit_problems(pod_info(pod), node) == ["insufficient cpu"]


def test_requests_are_held_against_status_allocatable_not_the_raw_one() -> None:
    # the raw-allocatable annotation (what usage percentages are of) says 8 cores; the node
    # schedules against its status allocatable, 2 cores: a 2001m pod does not fit
    node = build_node("n", 2000, G, 110)
    node["metadata"]["annotations"] = {"node.koordinator.sh/raw-allocatable": '{"cpu": "8"}'}
    info = node_info(node, None, [])
    assert (info.allocatable["cpu"], info.status_allocatable) == (
        8000,
        {"cpu": 2000, "memory": G, "pods": 110},
    )
    assert not pod_fits_node(pod_info(build_pod("p", 2001, 0, "x")), info)
    assert pod_fits_node(pod_info(build_pod("p", 2000, 0, "x")), info)
