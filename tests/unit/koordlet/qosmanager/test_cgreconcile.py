"""CgroupReconcile on fake cgroup trees: a BE pod with the auto policy, QoS sums, None
values, unsupported files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from koordapi import keys
from koordapi.features import FeatureGates
from koordlet.executor import Executor, WriteResult
from koordlet.qosmanager.audit import AuditTrail
from koordlet.qosmanager.cgreconcile import CgroupReconcile
from koordlet.qosmanager.framework import Context
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerResources
from tests.unit.koordlet.qosmanager.fakes import context, known_pod, rules

GI = 1 << 30
QOS_DIRS = ("kubepods", "kubepods/burstable", "kubepods/besteffort")
ANOLIS_V1_FILES = {
    "memory.min": "0",
    "memory.low": "0",
    "memory.high": "9223372036854771712",
    "memory.wmark_ratio": "0",
    "memory.wmark_scale_factor": "50",
    "memory.wmark_min_adj": "0",
    "memory.priority": "0",
    "memory.use_priority_oom": "0",
    "memory.oom.group": "0",
}
MAINLINE_V2_FILES = {
    "memory.min": "0",
    "memory.low": "0",
    "memory.high": "max",
    "memory.oom.group": "0",
}
CASE_26_QOS = {
    "policy": "auto",
    "minLimitPercent": 50,
    "lowLimitPercent": 0,
    "throttlingPercent": 40,
    "wmarkRatio": 95,
    "wmarkScalePermill": 20,
    "wmarkMinAdj": 50,
}


def cgroups(pods: Iterable[KnownPod]) -> list[str]:
    dirs = list(QOS_DIRS)
    for known in pods:
        dirs.append(known.request.cgroup_dir)
        dirs += [c.cgroup_dir for c in known.containers.values()]
    return dirs


def tree(root: Path, pods: Iterable[KnownPod], files: Mapping[str, str], v2: bool) -> Path:
    """A v2 hierarchy at ``root`` or a v1 memory hierarchy under ``root/memory``."""
    if v2:
        root.mkdir(parents=True, exist_ok=True)
        (root / "cgroup.controllers").write_text("cpu memory\n")
    for cg in cgroups(pods):
        folder = root / cg if v2 else root / "memory" / cg
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in files.items():
            (folder / name).write_text(value + "\n")
    return root


def memory_qos(value: Mapping[str, Any]) -> dict[str, str]:
    return {keys.ANNOTATION_MEMORY_QOS: json.dumps(value)}


def be_pod_with_auto_policy() -> KnownPod:
    batch = {keys.BATCH_MEMORY: "1Gi"}
    return known_pod(
        "be",
        qos="BE",
        kube="BestEffort",
        containers={"test": ContainerResources(), "main": ContainerResources()},
        annotations=memory_qos(CASE_26_QOS),
        batch={"main": {"requests": batch, "limits": batch}},
    )


def be_pod(name: str, request: str, qos: Mapping[str, Any] | None = None) -> KnownPod:
    return known_pod(
        name,
        qos="BE",
        kube="BestEffort",
        annotations=memory_qos(qos or {"policy": "auto", "minLimitPercent": 50}),
        batch={"main": {"requests": {keys.BATCH_MEMORY: request}}},
    )


def run(
    root: Path,
    pods: list[KnownPod],
    spec: Mapping[str, Any] | None = None,
    seen: list[WriteResult] | None = None,
    strategy: CgroupReconcile | None = None,
) -> tuple[CgroupReconcile, Context]:
    executor = Executor(root, on_result=None if seen is None else seen.append)
    strategy = strategy or CgroupReconcile(executor)
    strategy.executor = executor
    ctx = context(pods=pods, rules_=rules(spec), allocatable={"memory": GI}, audit=AuditTrail())
    strategy.run(ctx)
    return strategy, ctx


def value(root: Path, cg: str, name: str) -> str:
    v1 = root / "memory" / cg / name
    return (v1 if v1.exists() else root / cg / name).read_text().strip()


def test_be_pod_on_an_anolis_v1_tree(tmp_path: Path) -> None:
    pod = be_pod_with_auto_policy()
    root = tree(tmp_path, [pod], ANOLIS_V1_FILES, v2=False)
    run(root, [pod])
    pod_dir = pod.request.cgroup_dir
    test, main = (c.cgroup_dir for c in pod.containers.values())
    assert {n: value(root, pod_dir, n) for n in ANOLIS_V1_FILES} == {
        "memory.min": "536870912",
        "memory.low": "0",
        "memory.high": "9223372036854771712",  # pods get no memory.high
        "memory.wmark_ratio": "95",
        "memory.wmark_scale_factor": "20",
        "memory.wmark_min_adj": "50",
        "memory.priority": "0",
        "memory.use_priority_oom": "0",
        "memory.oom.group": "0",
    }
    assert [value(root, test, n) for n in ("memory.min", "memory.low", "memory.high")] == [
        "0",
        "0",
        "429494272",  # floor(1Gi x 40% / 4096) x 4096 of the node's allocatable
    ]
    assert [value(root, main, n) for n in ("memory.min", "memory.high")] == [
        "536870912",
        "1073741824",
    ]
    assert value(root, main, "memory.wmark_min_adj") == "50"
    for qos_dir in ("kubepods/besteffort", "kubepods"):
        assert value(root, qos_dir, "memory.min") == "536870912"
        assert value(root, qos_dir, "memory.low") == "0"
    assert value(root, "kubepods/burstable", "memory.min") == "0"


def test_be_pod_on_mainline_v2_writes_what_exists_and_names_the_rest(tmp_path: Path) -> None:
    pod = be_pod_with_auto_policy()
    root = tree(tmp_path, [pod], MAINLINE_V2_FILES, v2=True)
    strategy, ctx = run(root, [pod])
    _, main = (c.cgroup_dir for c in pod.containers.values())
    assert value(root, pod.request.cgroup_dir, "memory.min") == "536870912"
    assert value(root, main, "memory.high") == "1073741824"
    assert value(root, "kubepods", "memory.min") == "536870912"
    assert not (root / pod.request.cgroup_dir / "memory.wmark_ratio").exists()
    status = ctx.audit.statuses()["CgroupReconcile"].text
    assert "not on this kernel: memory.priority, memory.use_priority_oom, memory.wmark_min_adj" in (
        status
    )
    assert "memory.oom.group" not in status  # mainline v2 has it
    assert "memory.wmark_ratio" in strategy.unsupported


def test_unsupported_files_are_not_tried_again(tmp_path: Path) -> None:
    pod = be_pod_with_auto_policy()
    root = tree(tmp_path, [pod], MAINLINE_V2_FILES, v2=True)
    strategy, _ = run(root, [pod])
    seen: list[WriteResult] = []
    run(root, [pod], seen=seen, strategy=strategy)
    tried = {r.write.resource for r in seen}
    assert "memory.min" in tried
    assert "memory.wmark_ratio" not in tried


def test_actions_are_recorded_once_with_checkable_reasons(tmp_path: Path) -> None:
    pod = be_pod_with_auto_policy()
    root = tree(tmp_path, [pod], ANOLIS_V1_FILES, v2=False)
    strategy, ctx = run(root, [pod])
    actions = {(a.target, a.kind): a for a in ctx.audit.recent(1000)}
    pod_min = actions[(pod.request.cgroup_dir, "memory.min")]
    assert pod_min.value == "536870912"
    assert pod_min.pod_uid == pod.request.uid
    assert "request 1073741824 x minLimitPercent 50% = 536870912" in pod_min.reason
    high = actions[(next(iter(pod.containers.values())).cgroup_dir, "memory.high")]
    assert "limit 1073741824" in high.reason and "throttlingPercent 40%" in high.reason
    besteffort = actions[("kubepods/besteffort", "memory.min")]
    assert besteffort.scope == "BE"
    assert (pod.request.cgroup_dir, "memory.low") not in actions  # 0 was already there
    _, again = run(root, [pod], strategy=strategy)
    assert again.audit.recent() == []


def test_qos_dirs_sum_their_pods_and_kubepods_sums_all(tmp_path: Path) -> None:
    pods = [
        be_pod("a", "1Gi"),
        be_pod("b", "512Mi", {"policy": "auto", "minLimitPercent": 100, "lowLimitPercent": 100}),
    ]
    root = tree(tmp_path, pods, MAINLINE_V2_FILES, v2=True)
    run(root, pods)
    assert value(root, "kubepods/besteffort", "memory.min") == str(GI // 2 + GI // 2)
    assert value(root, "kubepods/besteffort", "memory.low") == str(GI // 2)
    assert value(root, "kubepods", "memory.min") == str(GI)
    assert value(root, "kubepods/burstable", "memory.min") == "0"


def test_disabled_class_resets_to_none_values(tmp_path: Path) -> None:
    pod = known_pod("ls", qos="LS", containers={"main": ContainerResources(memory_limit=GI)})
    files = {**MAINLINE_V2_FILES, "memory.wmark_ratio": "0"}  # an Anolis v2 kernel
    root = tree(tmp_path, [pod], files, v2=True)
    ctr = next(iter(pod.containers.values())).cgroup_dir
    for name, stale in (("memory.high", "536870912"), ("memory.wmark_ratio", "80")):
        (root / ctr / name).write_text(stale + "\n")
    _, ctx = run(root, [pod])
    assert value(root, ctr, "memory.high") == "max"
    assert value(root, ctr, "memory.wmark_ratio") == "0"
    reasons = [a.reason for a in ctx.audit.recent() if a.target == ctr]
    assert reasons and all("off: None values" in r for r in reasons)


def test_enabled_node_class_applies_without_annotation(tmp_path: Path) -> None:
    pod = known_pod("ls", qos="LS", containers={"main": ContainerResources(memory_limit=GI)})
    root = tree(tmp_path, [pod], ANOLIS_V1_FILES, v2=False)
    spec = {
        "resourceQOSStrategy": {
            "lsClass": {"memoryQOS": {"enable": True, "throttlingPercent": 80, "priority": 5}}
        }
    }
    run(root, [pod], spec)
    ctr = next(iter(pod.containers.values())).cgroup_dir
    assert value(root, ctr, "memory.high") == "858992640"  # floor(1Gi x 80% / 4096) x 4096
    assert value(root, ctr, "memory.wmark_min_adj") == "-25"  # the LS default
    assert value(root, "kubepods/burstable", "memory.priority") == "5"  # LS for Burstable
    assert value(root, "kubepods/besteffort", "memory.priority") == "0"


def test_bad_annotation_skips_that_pod_only(tmp_path: Path) -> None:
    bad = be_pod("bad", "1Gi", {"policy": "auto", "wmarkMinAdj": 99})
    good = be_pod("good", "1Gi")
    root = tree(tmp_path, [bad, good], MAINLINE_V2_FILES, v2=True)
    _, ctx = run(root, [bad, good])
    assert value(root, bad.request.cgroup_dir, "memory.min") == "0"
    assert value(root, good.request.cgroup_dir, "memory.min") == str(GI // 2)
    assert value(root, "kubepods/besteffort", "memory.min") == str(GI // 2)
    status = ctx.audit.statuses()["CgroupReconcile"].text
    assert "skipped default/bad" in status and "wmarkMinAdj" in status


def test_a_vanished_pod_cgroup_is_not_an_error(tmp_path: Path) -> None:
    pod = be_pod_with_auto_policy()
    root = tree(tmp_path, [], MAINLINE_V2_FILES, v2=True)  # only the QoS directories
    _, ctx = run(root, [pod])
    assert value(root, "kubepods/besteffort", "memory.min") == "536870912"
    assert ctx.audit.statuses()["CgroupReconcile"].text == (
        "reconciled 1 pods; not on this kernel: memory.priority, memory.use_priority_oom"
    )


def test_gate_is_off_by_default(tmp_path: Path) -> None:
    strategy = CgroupReconcile(Executor(tmp_path))
    assert strategy.name == "CgroupReconcile" and strategy.interval == 1.0
    assert not strategy.enabled(FeatureGates())
    assert strategy.enabled(FeatureGates.parse("CgroupReconcile=true"))
