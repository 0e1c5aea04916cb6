"""The whole chain on this machine: koordlet measures real pods on the private containerd,
its NodeMetric report goes to koord-manager (on the in-process fake API server), which
publishes kubernetes.io/batch-cpu on a Node built from this machine; the scheduler extender
answers for a BE pod from that Node and NodeMetric; ``koordctl status`` renders every stage.

``-s`` prints the ``koordctl status`` text.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from koordapi import keys
from koordapi.quantity import parse_quantity
from koordctl import status as chain
from koordctl.client import fetch
from manager.app import Manager, ManagerOptions
from scheduler import extender
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import scaled
from tests.fakekube import FakeKubeAPI

NS = "koordinator-system"
RESERVED_MILLI = 100  # capacity - allocatable on the Node built here
# A part-time burner (busy bursts, then a short sleep): real LS usage that leaves batch > 0
# on a 2-CPU machine.
BURNER = 'BEGIN { while (1) { for (i = 0; i < 300000; i++) ; system("sleep 0.05") } }'


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def milli(quantity: Any) -> int:
    return round(float(parse_quantity(str(quantity))) * 1000)


def pod_object(reported: dict[str, Any], node_name: str) -> dict[str, Any]:
    """A Pod as the API server would hold it for a pod koordlet reports."""
    be = reported["qos"] == "BE"
    requests = {keys.BATCH_CPU: "200", keys.BATCH_MEMORY: "64Mi"} if be else {"cpu": "200m"}
    labels = {keys.LABEL_QOS_CLASS: reported["qos"]}
    if be:
        labels[keys.LABEL_PRIORITY_CLASS] = "koord-batch"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": reported["name"],
            "namespace": reported["namespace"],
            "uid": reported["uid"],
            "labels": labels,
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}],
        },
        "status": {"phase": "Running"},
    }


def publish(name: str, *objects: dict[str, Any]) -> FakeKubeAPI:
    """koord-manager's run on a fake API server holding ``objects``, until it has published
    the Node's batch resources and its NodeSLO."""
    fake = FakeKubeAPI()
    fake.seed(*copy.deepcopy(objects))
    asyncio.run(run_manager(fake, name))
    return fake


def batch_cpu_of(fake: FakeKubeAPI, name: str) -> int:
    node = fake.get("Node", name)
    assert node is not None
    return int(node["status"]["allocatable"][keys.BATCH_CPU])


async def run_manager(fake: FakeKubeAPI, name: str, timeout: float = 10) -> None:
    options = ManagerOptions(webhook_port=None, metrics_addr="", leader_elect=False)
    manager = Manager(fake.kube_api(), options)
    task = asyncio.create_task(manager.run())
    deadline = time.monotonic() + timeout
    try:
        while True:
            node = fake.get("Node", name) or {}
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            if keys.BATCH_CPU in allocatable and fake.get("NodeSLO", name) is not None:
                return
            assert time.monotonic() < deadline, "no batch-cpu (or NodeSLO) from the manager"
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def koordctl_status(addr: str) -> subprocess.CompletedProcess[str]:
    """``koordctl status`` as a user runs it, without any cluster credentials."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["KUBECONFIG"] = "/nonexistent/kubeconfig"
    binary = Path(sys.executable).parent / "koordctl"
    return subprocess.run(
        [str(binary), "status", "--addr", addr],
        capture_output=True,
        text=True,
        timeout=scaled(20),
        env=env,
        check=False,
    )


def test_usage_to_nodemetric_to_batch_resources_to_scheduler_and_status(node: Node) -> None:
    slo = "resourceUsedThresholdWithBE:\n  enable: true\n  cpuSuppressThresholdPercent: 100\n"
    args = ("--feature-gates", "SchedLatencyCollector=false")
    with KoordletProcess(node, node_slo=slo, args=args) as koordlet:
        addr = f"127.0.0.1:{koordlet.port}"
        ls = PodSpec.new(qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"})
        ls_id = node.run_pod(ls)
        node.run_container(ls_id, ContainerSpec("burner", command=["/bin/awk", BURNER]))
        be = PodSpec.new(qos="besteffort", labels={keys.LABEL_QOS_CLASS: "BE"})
        be_id = node.run_pod(be)
        node.run_container(be_id, ContainerSpec("batch"))

        def reported() -> dict[str, Any]:
            return dict(fetch(addr, "/api/v1/nodemetric"))

        def ls_measured() -> bool:
            status = reported()
            usage = {p["name"]: p["podUsage"]["resources"] for p in status["podsMetric"]}
            return (
                "systemUsage" in status["nodeMetric"]
                and milli(usage.get(ls.name, {}).get("cpu", "0")) > 50
            )

        koordlet.wait_until(ls_measured, 20, "the LS burner in koordlet's NodeMetric")
        local_node = fetch(addr, "/api/v1/node")
        local_pods = fetch(addr, "/api/v1/pods")
        status = reported()
        # What koordlet reports is what it would write: the report file holds the same shape.
        report_file = koordlet.node.containerd.layout.base / "nodemetric.json"
        assert set(json.loads(report_file.read_text())["status"]) >= {"updateTime", "nodeMetric"}

        name = local_node["name"]
        cpus, memory = int(local_node["cpus"]), int(local_node["memory_bytes"])
        node_obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": "uid-" + name, "labels": {}, "annotations": {}},
            "status": {
                "capacity": {"cpu": str(cpus), "memory": str(memory)},
                "allocatable": {
                    "cpu": f"{cpus * 1000 - RESERVED_MILLI}m",
                    "memory": str(memory - (256 << 20)),
                },
            },
        }
        metric_obj: dict[str, Any] = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "status": {**status, "updateTime": now_stamp()},
        }
        pods = [pod_object(p, name) for p in local_pods if p["uid"] in (ls.uid, be.uid)]
        assert len(pods) == 2
        config = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": NS},
            "data": {"colocation-config": json.dumps({"enable": True})},
        }
        fake = publish(name, node_obj, metric_obj, *pods, config)
        published = fake.get("Node", name)
        assert published is not None
        batch_cpu = batch_cpu_of(fake, name)
        capacity = cpus * 1000
        assert 0 <= batch_cpu < capacity * 60 // 100
        # The reported usage is what the batch resources follow: the same report with the LS
        # pod (high priority) using 37m more publishes 37m less. Both are made with no system
        # usage (the node's reserved CPU counts instead), so the difference shows on a machine
        # whose other work leaves no batch CPU at all (the single-threaded burner uses less
        # than a core of the two: 60 % - reserved - burner stays above 37m).
        quiet = copy.deepcopy(metric_obj)
        quiet["status"]["nodeMetric"]["systemUsage"]["resources"]["cpu"] = "0"
        busier = copy.deepcopy(quiet)
        for reported_pod in busier["status"]["podsMetric"]:
            if reported_pod["name"] == ls.name:
                usage = reported_pod["podUsage"]["resources"]
                usage["cpu"] = f"{milli(usage['cpu']) + 37}m"
        quiet_cpu = batch_cpu_of(publish(name, node_obj, quiet, *pods, config), name)
        busier_cpu = batch_cpu_of(publish(name, node_obj, busier, *pods, config), name)
        assert quiet_cpu >= 37 and busier_cpu == quiet_cpu - 37, (quiet_cpu, busier_cpu)
        why = json.loads(published["metadata"]["annotations"][chain.EXPLANATION_ANNOTATION])
        assert why["resources"][keys.BATCH_CPU].startswith(f"{keys.BATCH_CPU} {batch_cpu} = ")
        stored_metric = fake.get("NodeMetric", name)
        node_slo = fake.get("NodeSLO", name)
        assert stored_metric is not None and node_slo is not None

        # The scheduler extender on that Node and NodeMetric, for a BE pod.
        view = extender.StaticClusterView(nodes=[published], node_metrics=[stored_metric])
        be_pod = pod_object({**next(p for p in local_pods if p["uid"] == be.uid)}, "")
        be_pod["metadata"] = {"name": "next-batch", "namespace": "default", "uid": "u-next"}
        del be_pod["spec"]["nodeName"]
        args_ = {"Pod": be_pod, "NodeNames": [name, "no-such-node"]}
        answer = extender.filter(args_, view, time.time())
        assert answer["Error"] == ""
        assert answer["FailedNodes"]["no-such-node"] == extender.REASON_NODE_NOT_FOUND
        assert (name in (answer["NodeNames"] or [])) != (name in answer["FailedNodes"])
        scores = extender.prioritize(args_, view, time.time())
        assert [s["Host"] for s in scores] == [name, "no-such-node"]
        assert 0 <= scores[0]["Score"] <= 10 and scores[1]["Score"] == 0

        # koordctl status from these objects and koordlet's API.
        report = chain.assemble(
            node_name=name,
            local_node=fetch(addr, "/api/v1/node"),
            local_pods=fetch(addr, "/api/v1/pods"),
            local_metric=fetch(addr, "/api/v1/nodemetric"),
            cluster={"node": published, "nodeMetric": stored_metric, "nodeSLO": node_slo},
        )
        text = chain.render(report)
        print("\n" + text)
        lines = text.splitlines()
        assert lines[0] == f"node {name}"
        for stage in (
            "1. measured usage (koordlet):",
            "2. NodeMetric:",
            "3. batch resources (Node allocatable, koord-manager):",
            "4. NodeSLO:",
            "5. applied values (BE pods, koordlet):",
        ):
            assert stage in lines
        assert f"  {keys.BATCH_CPU}: {batch_cpu}" in lines
        assert any(line.startswith(f"  how: {keys.BATCH_CPU} {batch_cpu} = ") for line in lines)
        assert any(line.startswith("  API server: updateTime ") for line in lines)
        assert any(line.startswith(f"  default/{be.name}: cpu.shares=") for line in lines)
        assert any(line.startswith("  resourceUsedThresholdWithBE: ") for line in lines)

        # The command itself, with no cluster credentials: koordlet's part and a clear note.
        done = koordctl_status(addr)
        print(done.stdout)
        assert done.returncode == 0, done.stderr
        assert chain.NO_CLUSTER in done.stdout
        assert f"  default/{be.name}: cpu.shares=" in done.stdout
