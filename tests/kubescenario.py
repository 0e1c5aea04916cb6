"""One scenario of API calls, run through the product's ``KubeApi`` on ``FakeKubeAPI`` and on a
real API server, so that the two can be compared (issue 33: the fake behaves as the real
server showed, for the kinds and verbs the product uses).

``scenario(api)`` drives what koordlet, koord-manager, koord-scheduler, koord-descheduler and
koordkube send (see the list below), and returns what it observed, normalised to JSON values:
the fields it cares about and the error class, code, reason and message of each refusal; never
a resourceVersion, uid, timestamp of the server's or managedFields. It cleans up what it made.

What the product sends, and so what the scenario covers:

- create, get, list (label and field selectors), delete, NotFound, AlreadyExists;
- merge patches only (``KubeApi.patch``'s default; no strategic merge patch, JSON patch or
  server-side apply is ever sent): Node labels and annotations (koordlet's topology), Node
  ``/status`` with extended resources set and removed by null and annotations riding along
  (koord-manager's noderesource and deviceresource), NodeMetric and PodMigrationJob
  ``/status`` (koordlet, koord-descheduler), PodMigrationJob annotations;
- PUT with the read resourceVersion: ``update_with_retry`` (Device, Pod annotations as the
  scheduler extender writes them; the webhook configurations' caBundle and the certificate
  Secret are written the same way, not driven here), ``create_or_update`` (NodeSLO,
  NodeMetric), Lease renewals (leader.py); a stale one is answered 409 and retried on a fresh
  read that keeps the other writer's change;
- Pod binding (``bind_pod``) and eviction (``EvictionAPI``), core/v1 Events (``EventRecorder``),
  a watch from a resourceVersion through a label selector, and (``too_old_watch``) one from a
  version the server no longer keeps.

The fake's own extras get a probe each: a JSON patch on ``/status`` (and two that fail), a
strategic merge patch where it equals a merge patch (maps only; the fake's lists replace, a
documented simplification) and one on a custom resource. Quantities, MicroTimes and field
selectors are also written in forms the server rewrites or refuses, to see that it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace, Node, Pod
from lightkube.types import PatchType

from koordkube.client import Backoff, KubeApi, create_or_update, update_with_retry
from koordkube.errors import Forbidden, KubeError, NotFound
from koordkube.events import NORMAL, EventRecorder
from koordkube.eviction import EvictionAPI, EvictionResult
from koordkube.resources import Device, NodeMetric, NodeSLO, Object, PodMigrationJob
from tests.fakekube import FakeKubeAPI

REAL_OBSERVATIONS = Path(__file__).with_name("kubescenario.json")
"""What the scenario observed on the cluster tier's real API server (Kubernetes v1.37.2), kept
so that the unit tests hold the fake to it without a cluster."""

P = "parity.example.com"
NAMESPACE = "parity-q7z"
NODE = "parity-node-q7z"
METRIC = "parity-metric-q7z"
SLO = "parity-slo-q7z"
JOB = "parity-pmj-q7z"
DEVICE = "parity-device-q7z"
LEASE = "parity-lease-q7z"
POD = "parity-pod-q7z"
BOUND = "parity-bound-q7z"
WIDGETS = f"{P}/widgets"  # extended resources
GADGETS = f"{P}/gadgets"
NOBODY = "parity-nobody-scheduler"  # no scheduler places the scenario's pods

T = TypeVar("T")
Observation = list[Any]
"""[step, value]: one thing seen, as JSON values."""


def fake_server() -> FakeKubeAPI:
    """A fake as a server that has run a while: the history before now is compacted, so a
    watch from resourceVersion 1 is too old (410), as on any real server."""
    fake = FakeKubeAPI()
    fake.resource_version = 1000
    fake.compact()
    fake.eviction_retry_seconds = 0.1  # as refused, only sooner
    return fake


def observe_fake() -> list[Observation]:
    """The scenario's and ``too_old_watch``'s observations on a fresh ``fake_server()``."""

    async def run() -> list[Observation]:
        api = fake_server().kube_api()
        return await scenario(api) + await too_old_watch(api)

    return asyncio.run(run())


def real_observations() -> list[Observation]:
    observations: list[Observation] = json.loads(REAL_OBSERVATIONS.read_text())
    return observations


def dump(observations: list[Observation]) -> str:
    """The observations as JSON, one to a line (the form of ``REAL_OBSERVATIONS``)."""
    return "[\n" + ",\n".join(json.dumps(o) for o in observations) + "\n]\n"


def differences(real: list[Observation], fake: list[Observation]) -> list[str]:
    """Each step whose observation differs, as one readable line."""
    lines = []
    for i in range(max(len(real), len(fake))):
        mine = real[i] if i < len(real) else None
        theirs = fake[i] if i < len(fake) else None
        if mine != theirs:
            lines.append(f"#{i}: real {json.dumps(mine)}\n     fake {json.dumps(theirs)}")
    return lines


# -- observing -----------------------------------------------------------------------------


def failure(exc: KubeError) -> dict[str, Any]:
    """A refusal as the product sees it (its class), with the server's code, reason and
    message."""
    message = normalised(str(exc))
    return {"error": type(exc).__name__, "code": exc.code, "reason": exc.reason, "message": message}


def normalised(message: str) -> str:
    """A server's message with uids (UID) and a resourceVersion in parentheses ((N)) out."""
    message = re.sub(
        r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "UID", message
    )
    return re.sub(r"\(\d+\)", "(N)", message)


def pick(obj: Object | None, *paths: str) -> dict[str, Any]:
    """The values at dotted ``paths`` (a missing one: None)."""
    found: dict[str, Any] = {}
    for path in paths:
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        found[path] = copy.deepcopy(value)
    return found


def ours(mapping: Any) -> dict[str, Any]:
    """Only the scenario's own keys of a label, annotation or resource map (a real cluster's
    controllers add theirs)."""
    if not isinstance(mapping, dict):
        return {}
    return {k: v for k, v in sorted(mapping.items()) if k.startswith(P) or k in ("cpu", "memory")}


class Log:
    def __init__(self) -> None:
        self.items: list[Observation] = []

    def note(self, step: str, value: Any) -> None:
        self.items.append([step, json.loads(json.dumps(value))])

    async def call(
        self, step: str, call: Awaitable[T], show: Callable[[T], Any] | None = None
    ) -> T | None:
        """Await ``call`` and note ``show(result)`` (default: "ok"), or its failure."""
        try:
            result = await call
        except KubeError as exc:
            self.note(step, failure(exc))
            return None
        self.note(step, show(result) if show is not None else "ok")
        return result


def node_view(node: Object) -> dict[str, Any]:
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    return {
        "labels": ours(meta.get("labels")),
        "annotations": ours(meta.get("annotations")),
        "unschedulable": (node.get("spec") or {}).get("unschedulable"),
        "capacity": ours(status.get("capacity")),
        "allocatable": ours(status.get("allocatable")),
    }


def custom_view(obj: Object) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "labels": ours(meta.get("labels")),
        "annotations": ours(meta.get("annotations")),
        "generation": meta.get("generation"),
        "spec": obj.get("spec"),
        "status": obj.get("status"),
    }


def pod_view(pod: Object) -> dict[str, Any]:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    conditions = (pod.get("status") or {}).get("conditions") or []
    return {
        "labels": ours(meta.get("labels")),
        "annotations": ours(meta.get("annotations")),
        "phase": (pod.get("status") or {}).get("phase"),
        "nodeName": spec.get("nodeName"),
        "resources": [c.get("resources") for c in spec.get("containers") or []],
        "scheduled": [c.get("status") for c in conditions if c.get("type") == "PodScheduled"],
    }


def names(listing: Any) -> list[str]:
    return sorted(str(item["metadata"]["name"]) for item in listing.items)


# -- the scenario ----------------------------------------------------------------------------


async def scenario(api: KubeApi) -> list[Observation]:
    """Run every step on ``api``, clean up, and return the observations."""
    log = Log()
    try:
        await namespace_steps(api, log)
        await node_steps(api, log)
        await node_metric_steps(api, log)
        await node_slo_steps(api, log)
        await migration_job_steps(api, log)
        await device_steps(api, log)
        await pod_steps(api, log)
        await lease_steps(api, log)
        await event_steps(api, log)
        await watch_steps(api, log)
    finally:
        await clean_up(api)
    return log.items


async def namespace_steps(api: KubeApi, log: Log) -> None:
    body = {"metadata": {"name": NAMESPACE, "labels": {f"{P}/suite": "parity"}}}

    def view(ns: Object) -> dict[str, Any]:
        labels = ns["metadata"].get("labels") or {}
        return {
            "labels": dict(sorted(labels.items())),
            "phase": (ns.get("status") or {}).get("phase"),
        }

    await log.call("namespace: create", api.create(Namespace, body), view)
    await log.call(
        "namespace: the name label removed by a patch",
        api.patch(
            Namespace, NAMESPACE, {"metadata": {"labels": {"kubernetes.io/metadata.name": None}}}
        ),
        view,
    )


async def node_steps(api: KubeApi, log: Log) -> None:
    node = {
        "metadata": {
            "name": NODE,
            "labels": {f"{P}/tier": "gold", f"{P}/zone": "z-313"},
            "annotations": {f"{P}/note": "first"},
        },
        # unschedulable and tainted: no other test's pod lands on it while it exists
        "spec": {"unschedulable": True, "taints": [{"key": P, "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "3000m", "memory": "1048576Ki", WIDGETS: "1000"},
            "allocatable": {"cpu": "2500m", "memory": "0.5Gi", WIDGETS: "999"},
        },
    }
    await log.call("node: create (status kept)", api.create(Node, node), node_view)
    await log.call("node: create again", api.create(Node, node))
    created = await api.get(Node, NODE)
    await log.call(
        "node: merge patch of labels and annotations (status ignored)",
        api.patch(
            Node,
            NODE,
            {
                "metadata": {
                    "labels": {f"{P}/zone": None, f"{P}/extra": "x-41"},
                    "annotations": {f"{P}/note": "second"},
                },
                "status": {"allocatable": {WIDGETS: "1"}},
            },
        ),
        node_view,
    )
    await log.call(
        "node: merge patch of /status (null removes, annotations kept, spec ignored)",
        api.patch(
            Node,
            NODE,
            {
                "metadata": {"annotations": {f"{P}/by-status": "kept"}},
                "spec": {"unschedulable": False},
                "status": {
                    "allocatable": {WIDGETS: None, GADGETS: "7"},
                    "capacity": {WIDGETS: None, GADGETS: "7000"},
                },
            },
            subresource="status",
        ),
        node_view,
    )
    await log.call(
        "node: /status with a fractional extended resource",
        api.patch(Node, NODE, {"status": {"capacity": {GADGETS: "1500m"}}}, subresource="status"),
        node_view,
    )
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    stale["metadata"]["labels"] = {f"{P}/late": "yes"}
    await log.call("node: merge patch with a stale resourceVersion", api.patch(Node, NODE, stale))
    selectors = {
        "set-based": f"{P}/tier in (gold,silver),!{P}/absent",
        "equality, none": f"{P}/tier=bronze",
        "removed label": f"{P}/zone",
    }
    for what, selector in selectors.items():
        log.note(f"node: list by labels, {what}", names(await api.list(Node, labels=selector)))
    for field in (f"metadata.name={NODE}", "spec.unschedulable=true", "status.phase=Running"):
        await log.call(f"node: list by {field}", api.list(Node, fields=field), names)


async def node_metric_steps(api: KubeApi, log: Log) -> None:
    policy = {"aggregateDurationSeconds": 37, "reportIntervalSeconds": 73}
    metric = {
        "metadata": {"name": METRIC, "labels": {f"{P}/tier": "gold"}},
        "spec": {"metricCollectPolicy": policy},
        "status": {"updateTime": "2031-05-06T07:08:09Z"},
    }
    await log.call(
        "nodemetric: create (status dropped)", api.create(NodeMetric, metric), custom_view
    )
    await log.call("nodemetric: create again", api.create(NodeMetric, metric))
    stale = await api.get(NodeMetric, METRIC)
    usage = {"nodeUsage": {"resources": {"cpu": "1500m", "memory": "3Gi"}}}
    await log.call(
        "nodemetric: merge patch of /status (spec and labels ignored)",
        api.patch(
            NodeMetric,
            METRIC,
            {
                "metadata": {"labels": {f"{P}/tier": "lead"}},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 1}},
                "status": {"updateTime": "2031-05-06T07:08:09Z", "nodeMetric": usage},
            },
            subresource="status",
        ),
        custom_view,
    )
    await log.call(
        "nodemetric: merge patch of spec (status ignored, generation counts)",
        api.patch(
            NodeMetric,
            METRIC,
            {
                "metadata": {"annotations": {f"{P}/note": "n"}},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 61}},
                "status": {"updateTime": None},
            },
        ),
        custom_view,
    )
    await log.call(
        "nodemetric: annotations only (generation kept)",
        api.patch(NodeMetric, METRIC, {"metadata": {"annotations": {f"{P}/note": "m"}}}),
        custom_view,
    )
    stale["spec"] = {"metricCollectPolicy": {"reportIntervalSeconds": 2}}
    await log.call(
        "nodemetric: replace with a stale resourceVersion", api.replace(NodeMetric, stale)
    )
    ops = [
        {"op": "test", "path": "/status/nodeMetric/nodeUsage/resources/cpu", "value": "1500m"},
        {"op": "replace", "path": "/status/nodeMetric/nodeUsage/resources/cpu", "value": "2"},
        {"op": "add", "path": "/status/nodeMetric/nodeUsage/resources/pods", "value": "9"},
    ]
    json_patch = PatchType.JSON
    await log.call(
        "nodemetric: JSON patch of /status",
        api.patch(NodeMetric, METRIC, ops, patch_type=json_patch, subresource="status"),
        custom_view,
    )
    failing = [{"op": "test", "path": "/status/nodeMetric/nodeUsage/resources/cpu", "value": "3"}]
    await log.call(
        "nodemetric: JSON patch whose test fails",
        api.patch(NodeMetric, METRIC, failing, patch_type=json_patch, subresource="status"),
    )
    missing = [{"op": "remove", "path": "/status/nodeMetric/nodeUsage/resources/gpu"}]
    await log.call(
        "nodemetric: JSON patch removing what is not there",
        api.patch(NodeMetric, METRIC, missing, patch_type=json_patch, subresource="status"),
    )
    await log.call(
        "nodemetric: strategic merge patch",
        api.patch(
            NodeMetric,
            METRIC,
            {"metadata": {"annotations": {f"{P}/note": "s"}}},
            patch_type=PatchType.STRATEGIC,
        ),
        custom_view,
    )
    for field in (f"metadata.name={METRIC}", "spec.metricCollectPolicy.reportIntervalSeconds=61"):
        await log.call(f"nodemetric: list by {field}", api.list(NodeMetric, fields=field), names)
    log.note(
        "nodemetric: list by label",
        names(await api.list(NodeMetric, labels=f"{P}/tier=gold")),
    )
    await log.call("nodemetric: get a missing one", api.get(NodeMetric, f"{METRIC}-missing"))
    await log.call("nodemetric: delete", _deleted(api.delete(NodeMetric, METRIC)))
    await log.call("nodemetric: get after delete", api.get(NodeMetric, METRIC))
    await log.call("nodemetric: delete again", _deleted(api.delete(NodeMetric, METRIC)))


async def _deleted(call: Awaitable[None]) -> Object:
    await call
    return {}


async def node_slo_steps(api: KubeApi, log: Log) -> None:
    """koord-manager's create_or_update: created, updated (a fresh read, a PUT), unchanged."""
    threshold: dict[str, Any] = {"enable": True}
    spec = {"resourceUsedThresholdWithBE": threshold}
    desired = {"metadata": {"name": SLO, "labels": {f"{P}/tier": "gold"}}, "spec": spec}
    for step, percent in (("created", 63), ("updated", 59), ("unchanged", 59)):
        threshold["cpuSuppressThresholdPercent"] = percent
        stored, outcome = await create_or_update(api, NodeSLO, copy.deepcopy(desired))
        log.note(f"nodeslo: create_or_update, {step}", [outcome, custom_view(stored)])
    await api.delete(NodeSLO, SLO)


async def migration_job_steps(api: KubeApi, log: Log) -> None:
    job = {
        "metadata": {"name": JOB, "annotations": {f"{P}/trigger": "parity"}},
        "spec": {
            "mode": "EvictDirectly",
            "ttl": "5m0s",
            "podRef": {"kind": "Pod", "namespace": NAMESPACE, "name": POD},
        },
        "status": {"phase": "Running"},
    }
    await log.call(
        "podmigrationjob: create (status dropped)", api.create(PodMigrationJob, job), custom_view
    )
    await log.call(
        "podmigrationjob: annotation passed arbitration",
        api.patch(PodMigrationJob, JOB, {"metadata": {"annotations": {f"{P}/passed": "true"}}}),
        custom_view,
    )
    status = {"phase": "Failed", "reason": "ParityReason", "message": "gone at 17:43"}
    await log.call(
        "podmigrationjob: merge patch of /status",
        api.patch(PodMigrationJob, JOB, {"status": status}, subresource="status"),
        custom_view,
    )
    await log.call("podmigrationjob: delete", _deleted(api.delete(PodMigrationJob, JOB)))
    await log.call("podmigrationjob: get after delete", api.get(PodMigrationJob, JOB))


async def device_steps(api: KubeApi, log: Log) -> None:
    """koordlet's Device report: no status subresource, so status is part of the object."""
    gpu = {
        "type": "gpu",
        "id": "GPU-parity-0",
        "minor": 3,
        "health": True,
        "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi"},
    }
    device = {
        "metadata": {"name": DEVICE},
        "spec": {"devices": [gpu]},
        "status": {"allocations": [{"type": "gpu", "entries": [{"name": "a", "minors": [3]}]}]},
    }
    await log.call("device: create (status kept)", api.create(Device, device), custom_view)

    def add_gpu(current: Object) -> Object:
        second = {**gpu, "id": "GPU-parity-1", "minor": 4}
        current["spec"]["devices"] = [gpu, second]
        current["status"] = {"allocations": []}
        return current

    async def other_writer() -> None:
        await api.patch(Device, DEVICE, {"metadata": {"labels": {f"{P}/other": "writer"}}})

    stored, reads = await race(
        lambda: api.get(Device, DEVICE),
        other_writer,
        add_gpu,
        lambda obj: api.replace(Device, obj),
    )
    log.note("device: update_with_retry against another writer", [reads, custom_view(stored)])
    await log.call(
        "device: merge patch of status alone (generation counts it)",
        api.patch(Device, DEVICE, {"status": {"allocations": [{"type": "gpu"}]}}),
        custom_view,
    )
    await api.delete(Device, DEVICE)


async def race(
    get: Callable[[], Awaitable[Object]],
    interfere: Callable[[], Awaitable[None]],
    mutate: Callable[[Object], Object | None],
    write: Callable[[Object], Awaitable[Object]],
) -> tuple[Object, int]:
    """``update_with_retry`` where another writer changes the object between the first read
    and its write; returns what was stored and how many reads it took."""
    reads = 0

    async def read() -> Object:
        nonlocal reads
        reads += 1
        obj = await get()
        if reads == 1:
            await interfere()
        return obj

    stored = await update_with_retry(read, mutate, write, backoff=Backoff(initial=0.01))
    return stored, reads


async def create_pod(api: KubeApi, body: Object) -> Object:
    """Create a pod in the scenario's namespace; a new namespace's default ServiceAccount may
    not be there yet (admission answers 403), so that is waited for."""
    for _ in range(100):
        try:
            return await api.create(Pod, body)
        except Forbidden as exc:
            if "serviceaccount" not in str(exc).lower():
                raise
            await asyncio.sleep(0.1)
    return await api.create(Pod, body)


def pod_body(name: str, labels: dict[str, str]) -> Object:
    resources = {
        "requests": {"cpu": "1000m", "memory": "2048Ki"},
        "limits": {"cpu": "1500m", "memory": "0.5Gi"},
    }
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            "annotations": {f"{P}/a": "1", f"{P}/b": "2"},
        },
        "spec": {
            "schedulerName": NOBODY,
            "containers": [
                {"name": "main", "image": "registry.invalid/parity:1", "resources": resources}
            ],
        },
    }


async def pod_steps(api: KubeApi, log: Log) -> None:
    created = await create_pod(api, pod_body(POD, {f"{P}/app": "parity"}))
    log.note("pod: create (status Pending)", pod_view(created))
    await log.call(
        "pod: merge patch of annotations",
        api.patch(
            Pod,
            POD,
            {"metadata": {"annotations": {f"{P}/a": None, f"{P}/c": "3"}}},
            namespace=NAMESPACE,
        ),
        pod_view,
    )
    await log.call(
        "pod: strategic merge patch of annotations",
        api.patch(
            Pod,
            POD,
            {"metadata": {"annotations": {f"{P}/d": "4"}}},
            namespace=NAMESPACE,
            patch_type=PatchType.STRATEGIC,
        ),
        pod_view,
    )
    created["metadata"]["annotations"][f"{P}/late"] = "yes"
    await log.call("pod: replace with a stale resourceVersion", api.replace(Pod, created))

    def annotate(current: Object) -> Object | None:
        annotations = current["metadata"].setdefault("annotations", {})
        if annotations.get(f"{P}/mine") == "m":
            return None
        annotations[f"{P}/mine"] = "m"
        return current

    async def other_writer() -> None:
        patch = {"metadata": {"annotations": {f"{P}/other": "o"}}}
        await api.patch(Pod, POD, patch, namespace=NAMESPACE)

    stored, reads = await race(
        lambda: api.get(Pod, POD, namespace=NAMESPACE),
        other_writer,
        annotate,
        lambda obj: api.replace(Pod, obj),
    )
    log.note("pod: update_with_retry against another writer", [reads, pod_view(stored)])
    log.note(
        "pod: list by label in the namespace",
        names(await api.list(Pod, namespace=NAMESPACE, labels=f"{P}/app=parity")),
    )
    for field in (f"spec.schedulerName={NOBODY}", "spec.nodeName=", "spec.priority=0"):
        await log.call(
            f"pod: list by {field}", api.list(Pod, namespace=NAMESPACE, fields=field), names
        )

    # binding (koord-scheduler's extender): uid checked, once only
    bound = await create_pod(api, pod_body(BOUND, {f"{P}/app": "bound"}))
    uid = bound["metadata"]["uid"]
    await log.call(
        "pod: bind with another uid", api.bind_pod(NAMESPACE, BOUND, NODE, uid=f"{uid[:-4]}0000")
    )
    await log.call(
        "pod: bind", api.bind_pod(NAMESPACE, BOUND, NODE, uid=uid), lambda s: s["status"]
    )
    await log.call("pod: bound", api.get(Pod, BOUND, namespace=NAMESPACE), pod_view)
    await log.call("pod: bind again", api.bind_pod(NAMESPACE, BOUND, "parity-elsewhere"))

    # eviction (koordlet, koord-descheduler) of the unscheduled pod, through their EvictionAPI:
    # a replaced pod (another uid) is gone, the pod itself is deleted at once (never scheduled)
    evictions, pod_uid = EvictionAPI(api), created["metadata"]["uid"]

    def shown(outcome: tuple[EvictionResult, str]) -> list[str]:
        return [str(outcome[0]), normalised(outcome[1])]

    outcome = await evictions.evict_async(NAMESPACE, POD, f"{pod_uid[:-4]}0000")
    log.note("pod: evict with another uid", shown(outcome))
    log.note("pod: evict", shown(await evictions.evict_async(NAMESPACE, POD, pod_uid)))
    await log.call("pod: get after eviction", api.get(Pod, POD, namespace=NAMESPACE))
    log.note("pod: evict again", shown(await evictions.evict_async(NAMESPACE, POD, pod_uid)))


async def lease_steps(api: KubeApi, log: Log) -> None:
    spec = {
        "holderIdentity": "parity-holder-1",
        "leaseDurationSeconds": 17,
        "acquireTime": "2031-05-06T07:08:09.123456Z",
        "renewTime": "2031-05-06T07:08:09.000000Z",
        "leaseTransitions": 3,
    }
    lease = {"metadata": {"name": LEASE, "namespace": NAMESPACE}, "spec": spec}
    created = await log.call("lease: create", api.create(Lease, lease), lambda o: o["spec"])
    assert created is not None
    renewed = {**created, "spec": {**spec, "renewTime": "2031-05-06T07:08:26.000001Z"}}
    await log.call(
        "lease: renew with its resourceVersion", api.replace(Lease, renewed), lambda o: o["spec"]
    )
    taken = {**created, "spec": {**spec, "holderIdentity": "parity-holder-2"}}
    await log.call("lease: take over with a stale resourceVersion", api.replace(Lease, taken))
    await log.call("lease: get", api.get(Lease, LEASE, namespace=NAMESPACE), lambda o: o["spec"])
    coarse = {"metadata": {"name": f"{LEASE}-coarse", "namespace": NAMESPACE}, "spec": spec}
    coarse["spec"] = {**spec, "renewTime": "2031-05-06T07:08:09Z"}  # no microseconds
    await log.call(
        "lease: a renewTime without microseconds", api.create(Lease, coarse), lambda o: o["spec"]
    )


def event_view(event: Object) -> dict[str, Any]:
    return pick(
        event,
        "type",
        "reason",
        "message",
        "action",
        "count",
        "source.component",
        "reportingComponent",
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "metadata.namespace",
    )


async def event_steps(api: KubeApi, log: Log) -> None:
    """events.py's core/v1 Events: a pod's in its namespace, a Node's in default."""
    recorder = EventRecorder(api, "parity-component")
    pod = await api.get(Pod, BOUND, namespace=NAMESPACE)
    node = await api.get(Node, NODE)
    await recorder.post(pod, NORMAL, "ParityReason", "pod message 271", "Parity")
    await recorder.warn(node, "ParityWarning", "node message 828")
    for what, namespace, name in (("pod", NAMESPACE, BOUND), ("node", "default", NODE)):
        found = await api.list(Event, namespace=namespace, fields=f"involvedObject.name={name}")
        # a real cluster's controllers post theirs too (the node controller's RegisteredNode)
        mine = [e for e in found.items if e.get("reportingComponent") == "parity-component"]
        log.note(f"event: the {what}'s", [event_view(e) for e in mine])
    await log.call(
        "event: list by source",
        api.list(Event, namespace=NAMESPACE, fields="source=parity-component"),
        lambda found: [e["reason"] for e in found.items],
    )


async def watch_steps(api: KubeApi, log: Log) -> None:
    selector = f"{P}/watched=yes"
    since = (await api.list(ConfigMap, namespace=NAMESPACE, labels=selector)).resource_version
    first, second = "parity-cm-a", "parity-cm-b"

    def cm(name: str, labels: dict[str, str], value: str) -> Object:
        meta = {"name": name, "namespace": NAMESPACE, "labels": labels}
        return {"metadata": meta, "data": {"v": value}}

    await api.create(ConfigMap, cm(first, {f"{P}/watched": "yes"}, "1"))
    await api.create(ConfigMap, cm(second, {}, "1"))
    await api.patch(ConfigMap, first, {"data": {"v": "2"}}, namespace=NAMESPACE)
    patch = {"metadata": {"labels": {f"{P}/watched": "yes"}}, "data": {"v": "3"}}
    await api.patch(ConfigMap, second, patch, namespace=NAMESPACE)
    patch = {"metadata": {"labels": {f"{P}/watched": None}}, "data": {"v": "4"}}
    await api.patch(ConfigMap, first, patch, namespace=NAMESPACE)
    await api.delete(ConfigMap, second, namespace=NAMESPACE)
    seen: list[Any] = []
    stream = api.watch(ConfigMap, namespace=NAMESPACE, labels=selector, resource_version=since)
    async with contextlib.aclosing(stream):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                async for kind, obj in stream:
                    if kind == "BOOKMARK":
                        continue
                    seen.append([kind, obj["metadata"]["name"], (obj.get("data") or {}).get("v")])
                    if len(seen) == 5:
                        break
    log.note("watch: from a resourceVersion, through a label selector", seen)


async def too_old_watch(api: KubeApi) -> list[Observation]:
    """A watch from resourceVersion 1, on a server that no longer keeps it: on a real one,
    once its watch cache started after that version (an API server restarted on an etcd
    compacted past it; etcd's compaction alone is not enough, the cache still serves it); on
    the fake, past its compaction point."""
    log = Log()
    try:
        stream = api.watch(ConfigMap, namespace="default", resource_version="1")
        async with contextlib.aclosing(stream):
            async with asyncio.timeout(10):
                first = await anext(stream)
        log.note("watch: from resourceVersion 1", first[0])
    except KubeError as exc:
        log.note("watch: from resourceVersion 1", failure(exc))
    return log.items


async def clean_up(api: KubeApi) -> None:
    """Delete whatever the scenario made and is still there (the pod bound to the scenario's
    node at once: no kubelet would ever confirm its graceful deletion)."""
    with contextlib.suppress(KubeError):
        found = await api.list(Event, namespace="default", fields=f"involvedObject.name={NODE}")
        for event in found.items:
            with contextlib.suppress(NotFound):
                await api.delete(Event, event["metadata"]["name"], namespace="default")
    with contextlib.suppress(NotFound):
        await force_delete_pod(api, BOUND)
    for res, name in (
        (PodMigrationJob, JOB),
        (Device, DEVICE),
        (NodeMetric, METRIC),
        (NodeSLO, SLO),
        (Node, NODE),
        (Namespace, NAMESPACE),
    ):
        with contextlib.suppress(NotFound):
            await api.delete(res, name)


async def force_delete_pod(api: KubeApi, name: str) -> None:
    """DELETE with gracePeriodSeconds 0 (KubeApi.delete sends no options: the product never
    force-deletes)."""
    path = f"api/v1/namespaces/{NAMESPACE}/pods/{name}"
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    await api._call("DELETE", path, body=body, verb="delete", resource="pods")
