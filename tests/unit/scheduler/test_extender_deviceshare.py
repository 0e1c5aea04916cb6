"""DeviceShare through the extender's verbs on a StaticClusterView: filter, prioritize and
bind_decision for pods asking for GPUs, and nothing changed for pods that do not."""

from __future__ import annotations

import json
from typing import Any

from koordapi import annotation, keys
from scheduler import deviceshare
from scheduler.extender import (
    BindPlan,
    DecisionCache,
    ExtenderConfig,
    StaticClusterView,
    bind_decision,
    filter,
    prioritize,
)
from tests.unit.scheduler.objects import (
    NOW,
    device,
    gpu_entry,
    gpu_pod,
    holder,
    make_node,
    make_pod,
)

NAMES = ["two", "busy", "nodev", "empty"]
MOST = ExtenderConfig(
    deviceshare=deviceshare.DeviceShareArgs(strategy=deviceshare.ScoringStrategy.MOST_ALLOCATED)
)


def cluster() -> StaticClusterView:
    """two: 2 free 16Gi cards; busy: 2 cards, one held whole and one half; nodev: no Device;
    empty: a Device without GPUs."""
    cards = [gpu_entry(0, memory="16Gi"), gpu_entry(1, memory="16Gi")]
    whole = {keys.GPU_CORE: "100", keys.GPU_MEMORY_RATIO: "100", keys.GPU_MEMORY: "16Gi"}
    half = {keys.GPU_CORE: "50", keys.GPU_MEMORY_RATIO: "50", keys.GPU_MEMORY: "8Gi"}
    return StaticClusterView(
        nodes=[make_node(name) for name in NAMES],
        pods=[holder("held", {0: whole, 1: half}, node="busy")],
        devices=[device("two", cards), device("busy", cards), device("empty", [])],
    )


def args(pod: dict[str, Any], names: list[str] = NAMES) -> dict[str, Any]:
    return {"Pod": pod, "NodeNames": names}


def test_filter_judges_gpus_only_for_pods_asking_for_them() -> None:
    view = cluster()
    result = filter(args(gpu_pod({keys.NVIDIA_GPU: "1"})), view, NOW)
    assert result["NodeNames"] == ["two", "nodev"]  # no Device: DeviceShare does not judge
    assert result["FailedNodes"] == {"busy": deviceshare.REASON_INSUFFICIENT_GPU}
    assert result["FailedAndUnresolvableNodes"] == {"empty": deviceshare.REASON_INSUFFICIENT_GPU}
    half = filter(args(gpu_pod({keys.GPU: "50"})), view, NOW)
    assert half["NodeNames"] == ["two", "busy", "nodev"]  # busy's card 1 has half left
    plain = filter(args(make_pod(requests={"cpu": "1"})), view, NOW)
    assert plain == {
        "Nodes": None,
        "NodeNames": NAMES,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_invalid_gpu_request_is_unresolvable_on_every_known_node() -> None:
    pod = gpu_pod({keys.GPU_CORE: "50"})
    result = filter(args(pod, ["two", "ghost"]), cluster(), NOW)
    assert result["NodeNames"] == []
    assert result["FailedNodes"] == {"ghost": "node not found"}
    assert result["FailedAndUnresolvableNodes"] == {
        "two": "invalid resource device requests: [koordinator.sh/gpu-core]"
    }
    assert bind_decision(pod, "two", cluster()).error.startswith("invalid resource")


def test_filter_echoes_a_node_list() -> None:
    nodes = [make_node("two"), make_node("busy")]
    request = {"Pod": gpu_pod({keys.NVIDIA_GPU: "1"}), "Nodes": {"items": nodes}}
    result = filter(request, cluster(), NOW)
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["two"]
    assert result["FailedNodes"] == {"busy": deviceshare.REASON_INSUFFICIENT_GPU}


def test_prioritize_spreads_by_default_and_packs_when_configured() -> None:
    view = cluster()
    pod = gpu_pod({keys.GPU: "50"})
    names = ["two", "busy", "nodev"]
    spread = {s["Host"]: s["Score"] for s in prioritize(args(pod, names), view, NOW)}
    packed = {s["Host"]: s["Score"] for s in prioritize(args(pod, names), view, NOW, config=MOST)}
    assert spread["two"] > spread["busy"]
    assert packed["busy"] > packed["two"]
    assert spread["nodev"] == packed["nodev"] == 0  # no Device, no NodeMetric: nothing
    # a pod without GPU requests keeps LoadAware's scores (0 without NodeMetrics)
    plain = prioritize(args(make_pod(requests={"cpu": "1"}), names), view, NOW)
    assert [s["Score"] for s in plain] == [0, 0, 0]


def allocated(plan: BindPlan) -> list[tuple[int | None, dict[str, Any]]]:
    parsed = annotation.parse_device_allocated(plan.annotations[keys.ANNOTATION_DEVICE_ALLOCATED])
    return [(a.minor, dict(a.resources)) for a in parsed["gpu"]]


def test_binds_count_at_once_so_no_card_is_given_twice() -> None:
    view = cluster()
    cache = DecisionCache()
    given = []
    for i in range(2):
        pod = gpu_pod({keys.NVIDIA_GPU: "1"}, name=f"whole{i}")
        assert filter(args(pod, ["two"]), view, NOW, cache=cache)["NodeNames"] == ["two"]
        plan = bind_decision(pod, "two", view, cache=cache)
        assert plan.error == ""
        given.append(plan.gpus)
        view.bind(pod, "two", at=NOW, annotations=plan.annotations)
    assert given == ["0", "1"]
    third = gpu_pod({keys.NVIDIA_GPU: "1"}, name="third")
    assert filter(args(third, ["two"]), view, NOW, cache=cache)["FailedNodes"] == {
        "two": deviceshare.REASON_INSUFFICIENT_GPU
    }
    assert bind_decision(third, "two", view, cache=cache).error == (
        deviceshare.REASON_INSUFFICIENT_GPU
    )


def test_half_cards_share_one_gpu_then_the_next() -> None:
    view = StaticClusterView([make_node("one")], devices=[device("one", [gpu_entry(0)])])
    cache = DecisionCache()
    for i in range(2):
        pod = gpu_pod({keys.GPU_CORE: "50", keys.GPU_MEMORY_RATIO: "50"}, name=f"half{i}")
        plan = bind_decision(pod, "one", view, cache=cache)
        memory = deviceshare.memory_ratio_to_bytes(50, 83201216 * 1024)
        assert allocated(plan) == [
            (0, {keys.GPU_CORE: 50, keys.GPU_MEMORY: memory, keys.GPU_MEMORY_RATIO: 50})
        ]
        view.bind(pod, "one", at=NOW, annotations=plan.annotations)
    late = gpu_pod({keys.GPU_CORE: "50", keys.GPU_MEMORY_RATIO: "50"}, name="late")
    assert filter(args(late, ["one"]), view, NOW, cache=cache)["FailedNodes"] == {
        "one": deviceshare.REASON_INSUFFICIENT_GPU
    }


def test_bind_decision_gpu_plans() -> None:
    view = cluster()
    pod = gpu_pod({keys.NVIDIA_GPU: "2"})
    plan = bind_decision(pod, "two", view)
    text = plan.annotations[keys.ANNOTATION_DEVICE_ALLOCATED]
    assert [e["id"] for e in json.loads(text)["gpu"]] == ["GPU-0", "GPU-1"]
    assert plan.gpus == "0,1" and plan.cpuset == ""
    # retried after it was assumed: its own cards count as free
    view.bind(pod, "two", at=NOW, annotations=plan.annotations)
    assert bind_decision(pod, "two", view) == plan
    assert bind_decision(gpu_pod({keys.NVIDIA_GPU: "1"}), "nodev", view) == BindPlan()
    assert bind_decision(gpu_pod({keys.NVIDIA_GPU: "1"}), "ghost", view).error == ("node not found")
