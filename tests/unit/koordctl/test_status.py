"""``koordctl status``: the chain assembled and rendered from koordlet's API and the cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

import koordctl as ctl
from koordapi import keys
from koordapi.explanation import ANNOTATION_NODE_RESOURCE_EXPLANATION
from koordctl import client
from koordctl import status as chain

LOCAL_NODE: dict[str, Any] = {
    "name": "node-1",
    "cpus": 2,
    "memory_bytes": 4 << 30,
    "usage": {"cpu": 1.25, "memory": 1 << 30},
    "system_usage": {"cpu": 0.25, "memory": 256 << 20},
}
LOCAL_PODS: list[dict[str, Any]] = [
    {
        "name": "batch",
        "namespace": "default",
        "qos": "BE",
        "applied": {"cpu.shares": 2, "cpu.cfs_quota_us": -1, "cpuset.cpus": "0-1", "cpu.idle": 1},
        "usage": {"cpu": 0.1},
    },
    {"name": "svc", "namespace": "default", "qos": "LS", "applied": {"cpu.shares": 1024}},
]
METRIC_STATUS: dict[str, Any] = {
    "updateTime": "2026-01-01T00:00:00Z",
    "nodeMetric": {
        "nodeUsage": {"resources": {"cpu": "1250m", "memory": "1073741824"}},
        "systemUsage": {"resources": {"cpu": "250m", "memory": "268435456"}},
    },
    "podsMetric": [{"namespace": "default", "name": "svc"}],
}
EXPLANATION = {
    "updateTime": "2026-01-01T00:00:05Z",
    "writtenBecause": "batch-cpu changed",
    "resources": {keys.BATCH_CPU: f"{keys.BATCH_CPU} 350 = capacity 2 - margin 0.8 ..."},
}
CLUSTER: dict[str, Any] = {
    "node": {
        "metadata": {
            "name": "node-1",
            "annotations": {ANNOTATION_NODE_RESOURCE_EXPLANATION: json.dumps(EXPLANATION)},
        },
        "status": {
            "capacity": {"cpu": "2", "memory": "4Gi"},
            "allocatable": {"cpu": "1900m", keys.BATCH_CPU: "350", keys.BATCH_MEMORY: "1Gi"},
        },
    },
    "nodeMetric": {"metadata": {"name": "node-1"}, "status": METRIC_STATUS},
    "nodeSLO": {
        "spec": {
            "resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65},
            "resourceQOSStrategy": {
                "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
                "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
            },
        }
    },
}


def local_status(**more: Any) -> dict[str, Any]:
    return chain.assemble(
        node_name="node-1",
        local_node=LOCAL_NODE,
        local_pods=LOCAL_PODS,
        local_metric=METRIC_STATUS,
        **more,
    )


def test_the_annotation_is_koord_managers() -> None:
    assert chain.EXPLANATION_ANNOTATION == ANNOTATION_NODE_RESOURCE_EXPLANATION


def test_without_api_access_it_shows_koordlets_part_and_says_what_is_missing() -> None:
    status = local_status()
    assert status["cluster"] is None
    assert [p["pod"] for p in status["bePods"]] == ["default/batch"]  # BE pods only
    text = chain.render(status)
    lines = text.splitlines()
    assert lines[0] == "node node-1"
    assert lines[1] == chain.NO_CLUSTER
    assert "--kubeconfig" in lines[1] and "in-cluster" in lines[1]
    assert "  node cpu 1.25 cores of 2, memory 1024Mi of 4096Mi; system cpu 0.25 cores" in text
    assert "koordlet's report: updateTime 2026-01-01T00:00:00Z, node usage cpu 1250m" in text
    assert f"  API server: {chain.NEEDS_API}" in lines
    assert lines.count(f"  {chain.NEEDS_API}") == 2  # batch resources, NodeSLO
    assert "  default/batch: cpu.shares=2  cpu.cfs_quota_us=-1  cpuset.cpus=0-1" in text
    assert "default/svc" not in text


def test_with_the_cluster_every_stage_has_its_values() -> None:
    status = local_status(cluster=CLUSTER)
    text = chain.render(status)
    assert chain.NO_CLUSTER not in text and chain.NEEDS_API not in text
    sections = [line for line in text.splitlines() if line[:1].isdigit()]
    assert [s.split(" ", 1)[1].split(" (")[0].rstrip(":") for s in sections] == [
        "measured usage",
        "NodeMetric",
        "batch resources",
        "NodeSLO",
        "applied values",
    ]
    assert "  API server: updateTime 2026-01-01T00:00:00Z" in text
    assert f"  {keys.BATCH_CPU}: 350" in text
    assert f"  {keys.MID_CPU}: -" in text
    assert "  written 2026-01-01T00:00:05Z because batch-cpu changed" in text
    assert f"  how: {keys.BATCH_CPU} 350 = capacity 2" in text
    assert "  resourceUsedThresholdWithBE: on, cpu suppress 65% (-), memory evict -" in text
    assert "  cpuQOS: lsClass on (groupIdentity 2), beClass on (groupIdentity -1)" in text
    json.dumps(status)  # what --json prints


def test_absent_objects_and_unreachable_parts_are_said() -> None:
    status = chain.assemble(
        node_name="n",
        local_error="cannot reach koordlet",
        cluster={"node": None, "nodeMetric": None, "nodeSLO": None},
    )
    text = chain.render(status)
    assert "  koordlet not reachable: cannot reach koordlet" in text
    assert "  API server: none" in text
    assert "  Node not found" in text and "  NodeSLO not found" in text
    node = {
        "metadata": {"name": "n", "annotations": {ANNOTATION_NODE_RESOURCE_EXPLANATION: "{bad"}}
    }
    broken = chain.render(chain.assemble(node_name="n", cluster={"node": node}))
    assert "  unreadable explanation: {bad" in broken
    unwritten = chain.render(chain.assemble(node_name="n", cluster={"node": {"metadata": {}}}))
    assert "no explanation: koord-manager has not written this node" in unwritten
    failed = chain.render(chain.assemble(node_name="n", cluster_error="ConnectError: refused"))
    assert "API server not reachable: ConnectError: refused" in failed


def fake_koordlet(monkeypatch: pytest.MonkeyPatch, up: bool = True) -> None:
    answers = {"/api/v1/node": LOCAL_NODE, "/api/v1/pods": LOCAL_PODS}
    answers["/api/v1/nodemetric"] = METRIC_STATUS

    def fetch(addr: str, path: str) -> Any:
        if not up:
            raise client.KoordletUnreachable(f"cannot reach koordlet at {addr}")
        return answers[path]

    monkeypatch.setattr(client, "fetch", fetch)


def test_koordctl_status_without_credentials(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_koordlet(monkeypatch)
    monkeypatch.setattr(client, "has_cluster_credentials", lambda _kubeconfig: False)
    assert ctl.main(["status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("node node-1\n" + chain.NO_CLUSTER)
    assert ctl.main(["status", "--json", "--node", "other"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["node"] == "other" and data["cluster"] is None


def test_koordctl_status_reads_the_cluster_for_the_node(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_koordlet(monkeypatch, up=False)
    asked: list[tuple[str, str | None]] = []

    def read_cluster(node: str, kubeconfig: str | None) -> dict[str, Any]:
        asked.append((node, kubeconfig))
        return CLUSTER

    monkeypatch.setattr(client, "read_cluster", read_cluster)
    assert ctl.main(["status", "--node", "node-1", "--kubeconfig", "/k"]) == 0
    assert asked == [("node-1", "/k")]
    out = capsys.readouterr().out
    assert "koordlet not reachable" in out and f"  {keys.BATCH_CPU}: 350" in out

    def broken(node: str, kubeconfig: str | None) -> dict[str, Any]:
        raise OSError("no route")

    monkeypatch.setattr(client, "read_cluster", broken)
    assert ctl.main(["status", "--node", "node-1", "--kubeconfig", "/k"]) == 1
    assert "API server not reachable: OSError: no route" in capsys.readouterr().out
