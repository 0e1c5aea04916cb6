"""The extender verbs on decoded JSON, in kube-scheduler's PascalCase and in the older
lowercase and camelCase spellings, with and without nodeCacheCapable."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from koordapi import keys
from scheduler import cpubind, loadaware
from scheduler.extender import (
    BindPlan,
    DecisionCache,
    ExtenderArgsError,
    ExtenderConfig,
    StaticClusterView,
    bind_decision,
    ci_get,
    filter,
    prioritize,
)
from tests.unit.scheduler.objects import (
    NOW,
    lsr_pod,
    make_metric,
    make_node,
    make_pod,
    stamp,
    topology_node,
)

# -- a small cluster -------------------------------------------------------------------------
# idle: 4 of 32 cores used; busy: 20 (62 %, over 65 % with a 2-core pod); stale: NodeMetric
# 200 s old; bare: no NodeMetric (no koordlet); broken: a NodeMetric that does not parse.


def cluster() -> StaticClusterView:
    names = ["idle", "busy", "stale", "bare", "broken"]
    nodes = [topology_node(n) if n == "idle" else make_node(n) for n in names]
    broken = make_metric("broken", cpu="lots")
    metrics = [
        make_metric("idle", cpu="4", memory="16Gi"),
        make_metric("busy", cpu="20", memory="64Gi"),
        make_metric("stale", cpu="1", age=200),
        broken,
    ]
    return StaticClusterView(nodes, metrics)


NAMES = ["idle", "busy", "stale", "bare", "broken"]
TWO_CORES = make_pod(requests={"cpu": "2", "memory": "2Gi"})


def pascal(
    pod: dict[str, Any], view: StaticClusterView, names: list[str], cache: bool
) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends them: the other node form is an explicit null."""
    if cache:
        return {"Pod": pod, "Nodes": None, "NodeNames": names}
    items = [view.node(n) or make_node(n) for n in names]
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}


def lowercase(args: dict[str, Any]) -> dict[str, Any]:
    """The spelling of the pre-2020 in-tree tags (pod, nodes, nodenames)."""
    return {k.lower(): v for k, v in args.items()}


def camel(args: dict[str, Any]) -> dict[str, Any]:
    return {k[0].lower() + k[1:]: v for k, v in args.items()}


CASINGS = [
    pytest.param(lambda a: a, id="PascalCase"),
    pytest.param(lowercase, id="lowercase"),
    pytest.param(camel, id="camelCase"),
]
CACHE_MODES = [pytest.param(True, id="nodeCacheCapable"), pytest.param(False, id="full-nodes")]


def passed_names(result: dict[str, Any], cache: bool) -> list[str]:
    if cache:
        assert result["Nodes"] is None
        return list(result["NodeNames"])
    assert result["NodeNames"] is None
    return [n["metadata"]["name"] for n in result["Nodes"]["items"]]


@pytest.mark.parametrize("casing", CASINGS)
@pytest.mark.parametrize("cache", CACHE_MODES)
def test_filter_passes_fits_and_says_why_others_fail(
    casing: Callable[[dict[str, Any]], dict[str, Any]], cache: bool
) -> None:
    view = cluster()
    result = filter(casing(pascal(TWO_CORES, view, NAMES, cache)), view, NOW)
    assert result["Error"] == ""
    # bare (no koordlet) and broken (unreadable NodeMetric) pass, as in Koordinator
    assert passed_names(result, cache) == ["idle", "bare", "broken"]
    assert result["FailedNodes"] == {
        "busy": loadaware.REASON_CPU_USAGE,
        "stale": loadaware.REASON_NODE_METRIC_EXPIRED,
    }
    assert result["FailedAndUnresolvableNodes"] == {}
    json.dumps(result)  # the reply encodes as it is


@pytest.mark.parametrize("casing", CASINGS)
@pytest.mark.parametrize("cache", CACHE_MODES)
def test_prioritize_scores_every_candidate(
    casing: Callable[[dict[str, Any]], dict[str, Any]], cache: bool
) -> None:
    view = cluster()
    names = [*NAMES, "ghost"] if cache else NAMES
    scores = prioritize(casing(pascal(TWO_CORES, view, names, cache)), view, NOW)
    by_host = {s["Host"]: s["Score"] for s in scores}
    assert [s["Host"] for s in scores] == names
    # idle: cpu (32 - 4 - 1.7) / 32 = 82, memory (128 - 16 - 1.4) / 128 = 86: 84 → 8
    assert by_host["idle"] == 8
    # busy: cpu (32 - 20 - 1.7) / 32 = 32, memory (128 - 64 - 1.4) / 128 = 48: 40 → 4
    assert by_host["busy"] == 4
    assert by_host["stale"] == by_host["bare"] == by_host["broken"] == 0
    if cache:
        assert by_host["ghost"] == 0
    assert all(isinstance(s["Score"], int) and 0 <= s["Score"] <= 10 for s in scores)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"Pod": TWO_CORES, "Nodes": {"items": []}, "NodeNames": ["idle"]},
            "both Nodes and NodeNames",
            id="both",
        ),
        pytest.param(
            {"Pod": TWO_CORES, "Nodes": None, "NodeNames": None},
            "neither Nodes nor NodeNames",
            id="neither-null",
        ),
        pytest.param({"Pod": TWO_CORES}, "neither Nodes nor NodeNames", id="neither-absent"),
        pytest.param({"Nodes": None, "NodeNames": ["idle"]}, "Pod is missing", id="no-pod"),
        pytest.param(
            {"Pod": TWO_CORES, "NodeNames": "idle"}, "list of strings", id="names-not-list"
        ),
        pytest.param(
            {"Pod": TWO_CORES, "Nodes": {"items": [{"metadata": {}}]}},
            "items[0] has no metadata.name",
            id="nameless-node",
        ),
        pytest.param(
            {"Pod": make_pod(requests={"cpu": "x"}), "NodeNames": ["idle"]},
            "pod default/incoming",
            id="unreadable-pod",
        ),
        pytest.param([], "must be a JSON object", id="not-an-object"),
    ],
)
def test_unanswerable_args(args: Any, message: str) -> None:
    view = cluster()
    result = filter(args, view, NOW)
    assert message in result["Error"]
    assert result["NodeNames"] is None
    assert result["Nodes"] is None
    with pytest.raises(ExtenderArgsError, match=re.escape(message)):
        prioritize(args, view, NOW)


def test_lowercase_both_forms_is_refused_too() -> None:
    args = lowercase({"Pod": TWO_CORES, "Nodes": {"items": []}, "NodeNames": ["idle"]})
    assert "both" in filter(args, cluster(), NOW)["Error"]


def test_unknown_nodes_fail_with_node_not_found() -> None:
    result = filter({"Pod": TWO_CORES, "NodeNames": ["idle", "ghost"]}, cluster(), NOW)
    assert result["NodeNames"] == ["idle"]
    assert result["FailedNodes"] == {"ghost": "node not found"}


def test_full_nodes_mode_echoes_the_received_node_objects() -> None:
    view = cluster()
    args = pascal(TWO_CORES, view, ["idle", "busy"], cache=False)
    args["Nodes"]["kind"] = "NodeList"
    result = filter(args, view, NOW)
    assert result["Nodes"]["kind"] == "NodeList"
    assert result["Nodes"]["items"] == [args["Nodes"]["items"][0]]
    assert result["Nodes"]["items"][0] is args["Nodes"]["items"][0]


def test_full_nodes_mode_reads_the_sent_node_not_the_view() -> None:
    view = cluster()
    sent = make_node("busy", cpu="64")  # the scheduler's copy says twice the cores
    result = filter({"Pod": TWO_CORES, "Nodes": {"items": [sent]}}, view, NOW)
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["busy"]


def test_empty_candidate_list() -> None:
    result = filter({"Pod": TWO_CORES, "NodeNames": []}, cluster(), NOW)
    assert (result["NodeNames"], result["Error"]) == ([], "")


def test_pod_without_requests_is_estimated_250m_200mi() -> None:
    # busy has 20 of 32 cores used: 20.25 / 32 = 63 % passes where a 2-core pod fails
    result = filter({"Pod": make_pod(), "NodeNames": ["busy"]}, cluster(), NOW)
    assert result["NodeNames"] == ["busy"]


def test_daemonset_pod_passes_every_known_node() -> None:
    pod = make_pod(requests={"cpu": "2"}, owner_kind="DaemonSet")
    result = filter({"Pod": pod, "NodeNames": NAMES}, cluster(), NOW)
    assert result["NodeNames"] == NAMES


def test_recently_bound_pods_count_until_reported() -> None:
    view = cluster()
    cache = DecisionCache()
    args = {"Pod": TWO_CORES, "NodeNames": ["idle"]}
    for i in range(9):  # 4 cores used + 9 x 1.7 = 19.3 cores: 60 %
        assert filter(args, view, NOW, cache=cache)["NodeNames"] == ["idle"]
        view.bind(make_pod(f"p{i}", requests={"cpu": "2"}), "idle", at=NOW)
    # the 10th would make 21 / 32 = 66 %
    assert filter(args, view, NOW, cache=cache)["FailedNodes"] == {
        "idle": loadaware.REASON_CPU_USAGE
    }
    # a fresh report that includes their usage (1 core each) lets it in again
    view.put_node_metric(
        make_metric(
            "idle", cpu="13", age=-90, pods=[(f"default/p{i}", "1", "1Gi") for i in range(9)]
        )
    )
    # reported 90 s after the bindings, beyond the 60 s report interval: their usage is in it
    assert filter(args, view, NOW + 120, cache=cache)["FailedNodes"] == {}


# -- CPU binding through the verbs ----------------------------------------------------------


def lsr_cluster() -> StaticClusterView:
    nodes = [topology_node("numa"), make_node("plain")]
    metrics = [make_metric("numa", cpu="2"), make_metric("plain", cpu="2")]
    return StaticClusterView(nodes, metrics)


def test_lsr_pod_needs_a_node_with_a_topology() -> None:
    result = filter({"Pod": lsr_pod(cpus=4), "NodeNames": ["numa", "plain"]}, lsr_cluster(), NOW)
    assert result["NodeNames"] == ["numa"]
    assert result["FailedAndUnresolvableNodes"] == {"plain": cpubind.REASON_INVALID_CPU_TOPOLOGY}


def test_fractional_lsr_pod_is_unresolvable_everywhere() -> None:
    pod = lsr_pod(cpus="1500m")
    result = filter({"Pod": pod, "NodeNames": ["numa", "plain", "ghost"]}, lsr_cluster(), NOW)
    assert result["NodeNames"] == []
    assert result["FailedAndUnresolvableNodes"] == {
        "numa": cpubind.REASON_INVALID_REQUESTED_CPUS,
        "plain": cpubind.REASON_INVALID_REQUESTED_CPUS,
    }
    assert result["FailedNodes"] == {"ghost": "node not found"}


def test_lsr_pods_fill_the_cpus_then_stop_fitting() -> None:
    view = lsr_cluster()
    cache = DecisionCache()
    config = ExtenderConfig(loadaware=loadaware.LoadAwareArgs(cpu_threshold=0))
    cpusets = []
    for i in range(4):
        pod = lsr_pod(f"lsr{i}", cpus=8)
        result = filter({"Pod": pod, "NodeNames": ["numa"]}, view, NOW, config=config, cache=cache)
        assert result["NodeNames"] == ["numa"], i
        plan = bind_decision(pod, "numa", view, config=config, cache=cache)
        assert plan.error == ""
        cpusets.append(plan.cpuset)
        view.bind(pod, "numa", at=NOW, annotations=plan.annotations)
    # each takes 4 whole cores, NUMA node 0 first, then node 1
    assert cpusets == ["0-3,16-19", "8-11,24-27", "4-7,20-23", "12-15,28-31"]
    more = {"Pod": lsr_pod("more", cpus=2), "NodeNames": ["numa"]}
    result = filter(more, view, NOW, config=config, cache=cache)
    assert result["FailedNodes"] == {"numa": cpubind.REASON_NOT_ENOUGH_CPUS}


def test_bind_decision_plans() -> None:
    view = lsr_cluster()
    plan = bind_decision(lsr_pod(cpus=4), "numa", view)
    assert plan == BindPlan(
        {
            keys.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1,16-17"}',
            keys.ANNOTATION_RESOURCE_SPEC: '{"preferredCPUBindPolicy":"FullPCPUs"}',
        },
        "0-1,16-17",
    )
    assert bind_decision(TWO_CORES, "numa", view) == BindPlan()
    assert bind_decision(TWO_CORES, "ghost", view) == BindPlan()  # nothing to pin: bind anyway
    assert bind_decision(lsr_pod(), "ghost", view).error == "node not found"
    assert bind_decision(lsr_pod(cpus="1500m"), "numa", view).error == (
        cpubind.REASON_INVALID_REQUESTED_CPUS
    )
    assert bind_decision(lsr_pod(), "plain", view).error.startswith(
        cpubind.REASON_INVALID_CPU_TOPOLOGY + ": "
    )
    broken = lsr_pod()
    broken["metadata"]["annotations"][keys.ANNOTATION_RESOURCE_SPEC] = "{"
    assert "not valid JSON" in bind_decision(broken, "numa", view).error


def test_bind_decision_for_a_pod_the_view_already_pinned_reuses_its_cpus() -> None:
    view = lsr_cluster()
    pod = lsr_pod("again", cpus=32)
    first = bind_decision(pod, "numa", view)
    view.bind(pod, "numa", at=NOW, annotations=first.annotations)  # assumed, then retried
    assert bind_decision(pod, "numa", view).cpuset == first.cpuset == "0-31"


# -- helpers ---------------------------------------------------------------------------------


def test_ci_get_prefers_the_exact_key() -> None:
    assert ci_get({"nodes": 1, "Nodes": 2}, "Nodes") == 2
    assert ci_get({"NODENAMES": ["a"]}, "NodeNames") == ["a"]
    assert ci_get({}, "Pod") is None


def test_static_view_reads_scheduled_time_and_skips_finished_pods() -> None:
    running = make_pod("r", requests={"cpu": "1"}, node="idle")
    running["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(10)}
    ]
    finished = make_pod("f", node="idle")
    finished["status"]["phase"] = "Failed"
    view = StaticClusterView([make_node("idle")], pods=[running, finished])
    assert view.pods_on("idle") == [running, finished]
    assert view.assigned_since_report("idle") == [(running, NOW - 10)]
    with pytest.raises(ValueError, match=r"no spec\.nodeName"):
        view.add_pod(make_pod("nowhere"))


# -- caching across calls --------------------------------------------------------------------


class PlainView:
    """The four ClusterView methods and nothing else: no ChangeFeed, so every call re-checks
    every node."""

    def __init__(self, inner: StaticClusterView) -> None:
        self.inner = inner

    def node(self, name: str) -> Any:
        return self.inner.node(name)

    def node_metric(self, name: str) -> Any:
        return self.inner.node_metric(name)

    def pods_on(self, name: str) -> Any:
        return self.inner.pods_on(name)

    def assigned_since_report(self, name: str) -> Any:
        return self.inner.assigned_since_report(name)


@pytest.mark.parametrize("feed", [True, False], ids=["change-feed", "no-change-feed"])
def test_a_shared_cache_sees_every_change(feed: bool) -> None:
    inner = cluster()
    view: Any = inner if feed else PlainView(inner)
    cache = DecisionCache()
    args = {"Pod": TWO_CORES, "NodeNames": ["idle", "bare"]}
    assert filter(args, view, NOW, cache=cache)["NodeNames"] == ["idle", "bare"]
    inner.put_node_metric(make_metric("idle", cpu="30"))  # a new report: busy now
    inner.put_node_metric(make_metric("bare", cpu="1"))  # koordlet arrives
    assert filter(args, view, NOW, cache=cache)["FailedNodes"] == {
        "idle": loadaware.REASON_CPU_USAGE
    }
    # idle: cpu 0 (31.7 of 32 cores), memory 73 (33.4 of 128 GiB) → 36; bare: 91 and 73 → 82
    assert {s["Host"]: s["Score"] for s in prioritize(args, view, NOW, cache=cache)} == {
        "idle": 4,
        "bare": 8,
    }
    inner.remove_node("bare")
    assert filter(args, view, NOW, cache=cache)["FailedNodes"]["bare"] == "node not found"
    # expiry is judged at call time, never cached
    later = NOW + 200
    assert filter(args, view, later, cache=cache)["FailedNodes"] == {
        "idle": loadaware.REASON_NODE_METRIC_EXPIRED,
        "bare": "node not found",
    }


def test_cached_results_match_cold_ones() -> None:
    view = cluster()
    cache = DecisionCache()
    for i in range(5):
        view.bind(make_pod(f"p{i}", requests={"cpu": "1"}), "idle", at=NOW)
        args = pascal(TWO_CORES, view, NAMES, True)
        assert filter(args, view, NOW, cache=cache) == filter(args, view, NOW)
        assert prioritize(args, view, NOW, cache=cache) == prioritize(args, view, NOW)


def test_full_nodes_mode_reuses_work_for_a_redecoded_node() -> None:
    view = cluster()
    cache = DecisionCache()
    node = json.loads(json.dumps(view.node("busy")))
    node["metadata"].update(uid="u", resourceVersion="5")
    first = filter({"Pod": make_pod(), "Nodes": {"items": [node]}}, view, NOW, cache=cache)
    again = json.loads(json.dumps(node))
    second = filter({"Pod": make_pod(), "Nodes": {"items": [again]}}, view, NOW, cache=cache)
    assert first["FailedNodes"] == second["FailedNodes"] == {}
    assert second["Nodes"]["items"][0] is again  # the reply echoes what this request sent


def test_a_node_label_change_changes_the_cpu_policy() -> None:
    view = lsr_cluster()
    cache = DecisionCache()
    pod = lsr_pod(cpus=3)  # fine as preferred FullPCPUs, not with whole cores required
    args = {"Pod": pod, "NodeNames": ["numa"]}
    assert filter(args, view, NOW, cache=cache)["NodeNames"] == ["numa"]
    node = view.node("numa")
    assert node is not None
    labels = {keys.LABEL_NODE_CPU_BIND_POLICY: "FullPCPUsOnly"}
    view.put_node({**node, "metadata": {**node["metadata"], "labels": labels}})
    assert filter(args, view, NOW, cache=cache)["FailedAndUnresolvableNodes"] == {
        "numa": cpubind.REASON_SMT_ALIGNMENT
    }


def test_change_feed_of_the_static_view() -> None:
    view = cluster()
    token, changed = view.changes_since(-1)
    assert changed is None  # an unknown token: re-check everything
    view.bind(make_pod("p"), "idle", at=NOW)
    token2, changed = view.changes_since(token)
    assert (token2, changed) == (token + 1, {"idle"})
    assert view.changes_since(token2) == (token2, set())
