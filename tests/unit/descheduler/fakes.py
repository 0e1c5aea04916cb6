"""Building blocks for the LowNodeLoad tests: nodes and pods as Kubernetes JSON in the
shape of Koordinator's pkg/descheduler/test helpers, and the one-pool arguments of its
TestLowNodeLoad."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from descheduler.args import AnomalyCondition, LowNodeLoadArgs, NodePool

NOW = 1_700_000_000.0
GI = 1 << 30

# -- builders in the shape of Koordinator's pkg/descheduler/test helpers ----------------------


def build_node(
    name: str,
    millicpu: int,
    memory: int,
    pods: int,
    *,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    extended: dict[str, int] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """BuildTestNode: allocatable = capacity."""
    allocatable = {"cpu": f"{millicpu}m", "memory": str(memory), "pods": str(pods)}
    allocatable.update({k: str(v) for k, v in (extended or {}).items()})
    spec: dict[str, Any] = {"unschedulable": unschedulable}
    if taints:
        spec["taints"] = taints
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def build_pod(
    name: str,
    millicpu: int,
    memory: int,
    node: str,
    *,
    owner: str | None = "ReplicaSet",
    namespace: str = "default",
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    extended: dict[str, int] | None = None,
    best_effort: bool = False,
    tolerations: list[dict[str, str]] | None = None,
    affinity_terms: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
) -> dict[str, Any]:
    """BuildTestPod: cpu and memory requests (none for a best-effort pod); tolerations,
    required node affinity terms and overhead when given."""
    requests: dict[str, str] = {}
    if not best_effort:
        requests = {"cpu": f"{millicpu}m", "memory": str(memory)}
    requests.update({k: str(v) for k, v in (extended or {}).items()})
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity_terms is not None:
        required = {"nodeSelectorTerms": affinity_terms}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    if overhead:
        spec["overhead"] = overhead
    if priority is not None:
        spec["priority"] = priority
    if volumes:
        spec["volumes"] = volumes
    if node_selector:
        spec["nodeSelector"] = node_selector
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": f"{owner.lower()}-1"}]
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def pool_args(
    low: Mapping[str, float],
    high: Mapping[str, float],
    *,
    prod_low: Mapping[str, float] | None = None,
    prod_high: Mapping[str, float] | None = None,
    deviation: bool = False,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    node_fit: bool = True,
    condition: AnomalyCondition | None = None,
    number_of_nodes: int = 0,
) -> LowNodeLoadArgs:
    """The internal args of upstream's TestLowNodeLoad: one pool, nodeFit, anomaly 1/1."""
    pool = NodePool(
        name="test",
        use_deviation_thresholds=deviation,
        low_thresholds=low,
        high_thresholds=high,
        prod_low_thresholds=prod_low or {},
        prod_high_thresholds=prod_high or {},
        anomaly_condition=condition or AnomalyCondition(1, 1),
    )
    return LowNodeLoadArgs(
        node_pools=(pool,),
        evictable_namespaces_include=include,
        evictable_namespaces_exclude=exclude,
        node_fit=node_fit,
        number_of_nodes=number_of_nodes,
    )
