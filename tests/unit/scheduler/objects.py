"""Builders for the Kubernetes JSON the scheduler tests feed in: nodes, NodeMetrics, pods,
CPU topologies and Devices. Defaults are a LoadAware node: 32 cores / 128 GiB allocatable."""

from __future__ import annotations

import datetime
import json
from typing import Any

from koordapi import keys

NOW = datetime.datetime(2026, 7, 24, 10, 0, tzinfo=datetime.UTC).timestamp()
GI = 1 << 30
MI = 1 << 20


def stamp(seconds_ago: float) -> str:
    moment = datetime.datetime.fromtimestamp(NOW - seconds_ago, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(
    name: str = "node-1",
    *,
    cpu: str = "32",
    memory: str = "128Gi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def make_metric(
    name: str = "node-1",
    *,
    cpu: str | None = "18",
    memory: str | None = "32Gi",
    age: float | None = 30,
    pods: list[tuple[str, str, str]] | None = None,
    report_interval: int | None = None,
) -> dict[str, Any]:
    """A NodeMetric reporting ``age`` seconds before NOW (None: never reported); ``pods`` are
    (namespace/name, cpu, memory) usages."""
    usage = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    status: dict[str, Any] = {"nodeMetric": {"nodeUsage": {"resources": usage}}}
    if age is not None:
        status["updateTime"] = stamp(age)
    status["podsMetric"] = [
        {
            "namespace": key.split("/")[0],
            "name": key.split("/")[1],
            "podUsage": {"resources": {"cpu": c, "memory": m}},
        }
        for key, c, m in pods or []
    ]
    metric: dict[str, Any] = {"metadata": {"name": name}, "status": status}
    if report_interval is not None:
        metric["spec"] = {"metricCollectPolicy": {"reportIntervalSeconds": report_interval}}
    return metric


def make_pod(
    name: str = "incoming",
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
    priority: int | None = None,
    owner_kind: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner_kind:
        metadata["ownerReferences"] = [{"kind": owner_kind, "name": "owner", "uid": "o"}]
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


def lsr_pod(
    name: str = "lsr",
    *,
    cpus: int | str = 4,
    qos: str = "LSR",
    spec: dict[str, str] | None = None,
    node: str | None = None,
    cpuset: str | None = None,
) -> dict[str, Any]:
    """A koord-prod pod of class ``qos`` requesting ``cpus`` CPUs (request = limit)."""
    annotations = {}
    if spec is not None:
        annotations[keys.ANNOTATION_RESOURCE_SPEC] = json.dumps(spec)
    if cpuset is not None:
        annotations[keys.ANNOTATION_RESOURCE_STATUS] = json.dumps({"cpuset": cpuset})
    amount = {"cpu": str(cpus), "memory": "4Gi"}
    return make_pod(
        name,
        requests=amount,
        limits=amount,
        labels={keys.LABEL_QOS_CLASS: qos},
        annotations=annotations,
        node=node,
        priority=9500,
    )


def ht_topology(sockets: int = 2, cores_per_socket: int = 8, threads: int = 2) -> str:
    """A Linux-style SMT numbering: CPU c and c + all_cores are hyper-thread siblings, one
    NUMA node per socket. 2 x 8 x 2: socket 0 = cores 0-7 = CPUs 0-7,16-23."""
    all_cores = sockets * cores_per_socket
    detail = []
    for thread in range(threads):
        for core in range(all_cores):
            socket = core // cores_per_socket
            detail.append(
                {"id": thread * all_cores + core, "core": core, "socket": socket, "node": socket}
            )
    return json.dumps({"detail": detail})


def topology_node(name: str = "node-1", topology: str | None = None, **kw: Any) -> dict[str, Any]:
    annotations = dict(kw.pop("annotations", None) or {})
    annotations[keys.ANNOTATION_CPU_TOPOLOGY] = topology if topology is not None else ht_topology()
    return make_node(name, annotations=annotations, **kw)


# -- GPUs (DeviceShare) ----------------------------------------------------------------------


def gpu_entry(  # one GPU of a Device as koordlet reports it
    minor: int,
    *,
    memory: str = "83201216Ki",
    numa: int | None = None,
    pcie: str = "",
    healthy: bool = True,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "gpu",
        "id": f"GPU-{minor}",
        "minor": minor,
        "health": healthy,
        "resources": {keys.GPU_CORE: "100", keys.GPU_MEMORY: memory, keys.GPU_MEMORY_RATIO: "100"},
    }
    if numa is not None:
        entry["topology"] = {"socketID": numa, "nodeID": numa, "pcieID": pcie, "busID": ""}
    return entry


def device(name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The Device of node ``name``."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {"devices": entries},
    }


def holder(
    name: str, allocations: dict[int, dict[str, str]], node: str = "node-1"
) -> dict[str, Any]:
    """A pod on ``node`` holding GPUs: minor → resources, in its device-allocated annotation."""
    text = json.dumps(
        {"gpu": [{"minor": m, "resources": r} for m, r in allocations.items()]},
    )
    return make_pod(name, node=node, annotations={keys.ANNOTATION_DEVICE_ALLOCATED: text})


def gpu_pod(requests: dict[str, str], name: str = "gpu", **kw: Any) -> dict[str, Any]:
    """A pending pod with these requests (and the same limits, as extended resources need)."""
    return make_pod(name, requests=requests, limits=requests, **kw)
