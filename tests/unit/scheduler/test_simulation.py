"""The benchmark's simulator on a small cluster: it runs, places pods through the verbs,
and never gives one CPU to two pods."""

from __future__ import annotations

from collections import defaultdict

from benchmarks import scheduler_sim
from koordapi import keys
from koordapi.cpuset import parse_cpuset


def test_small_simulation_places_pods_without_sharing_pinned_cpus() -> None:
    cluster = scheduler_sim.generate_cluster(20, seed=7)
    pods = scheduler_sim.generate_pods(400, seed=7)
    shares = {p["metadata"]["name"]: 0.8 for p in pods}
    out = scheduler_sim.simulate(
        cluster, pods, seed=7, rate=50, report_interval=5, usage_share=shares
    )
    assert len(out.placements) + out.unschedulable + out.bind_errors == len(pods)
    assert out.placements and out.pinned
    assert out.bind_errors == 0
    # every LSR pod's cpuset is disjoint from the others' on its node
    pinned: dict[str, set[int]] = defaultdict(set)
    by_name = {p["metadata"]["name"]: p for p in pods}
    for name, node in out.placements.items():
        labels = by_name[name]["metadata"]["labels"]
        if labels.get(keys.LABEL_QOS_CLASS) != "LSR":
            continue
        assert name in out.cpusets
        cpus = parse_cpuset(out.cpusets[name])
        assert not pinned[node] & cpus
        pinned[node] |= cpus


def test_extender_args_are_kube_scheduler_shaped() -> None:
    pod = scheduler_sim.generate_pods(1, seed=1)[0]
    assert scheduler_sim.extender_args(pod, ["a"]) == {
        "Pod": pod,
        "Nodes": None,
        "NodeNames": ["a"],
    }
    node = {"metadata": {"name": "a"}}
    args = scheduler_sim.extender_args(pod, ["a"], [node])
    assert args["NodeNames"] is None
    assert args["Nodes"]["items"] == [node]
