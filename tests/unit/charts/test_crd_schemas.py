"""The chart's CRD schemas (charts/koordinator-py/templates/crd), checked with an independent
JSON Schema validator (the ``jsonschema`` package, Draft 2020-12) rather than with this
project's own readers: what koordlet, koord-manager and koord-descheduler write validates,
Koordinator's documented forms validate, a misspelt or mistyped field is refused, and each
schema is structural as apiextensions.k8s.io/v1 requires.

Kubernetes is not JSON Schema, so ``json_schema`` adapts each openAPIV3Schema first:

- ``x-kubernetes-*`` keys are annotations to JSON Schema; ``x-kubernetes-int-or-string`` means
  "integer or string", so it becomes that ``anyOf``;
- an object without ``x-kubernetes-preserve-unknown-fields`` gets ``additionalProperties:
  false``: the API server drops unknown fields, and with strict field validation (kubectl's
  default) refuses them, so an unknown field here is a typo whose value would be lost.
  ``metadata`` stays open: the API server checks ObjectMeta itself.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from descheduler.config import parse_config
from descheduler.migration.reservation import reservation_object, reservation_options
from koordapi import nodeslo as koordapi_nodeslo
from koordapi.device import GPUInfo, RDMAInfo, build_device, carry_transition_times
from koordapi.quota import model as quota
from koordapi.quota.runtime import resource_list
from koordapi.quota.usage import pod_request
from koordapi.reservation.model import (
    Reservation,
    available_status,
    expired_status,
    succeeded_conditions,
    unschedulable_conditions,
)
from koordlet.metriccache import MetricCache
from koordlet.metriccache.store import Sample
from koordlet.nodemetric import build_status
from manager.colocation import ColocationStrategy, parse_colocation_config, strategy_for_node
from manager.controllers.nodeslo import collect_policy
from manager.nodeslo import node_slo_object
from manager.sloconfig import render_node_slo
from tests.unit.charts import helm
from tests.unit.descheduler.test_app import config_text, hot_and_cold, make_app, running
from tests.unit.koordkube.fakes import eventually
from tests.unit.koordlet.qosmanager.fakes import known_pod
from tests.unit.manager.test_noderesource import make_metric, pod_metric
from tests.unit.manager.test_sloconfig import HOST_APPS, chart_slo_data, configmap
from tests.unit.manager.test_sloconfig import node as make_node
from tests.unit.manager.webhooks.builders import profile
from tests.unit.manager.webhooks.test_pod_mutating import (
    BATCH_PROFILE,
    KOORD_SCHEDULER_PROFILE,
    MID_PROFILE,
)

# The CRDs' templates, named <group>_<plural>.yaml.
CRDS = helm.CHART / "templates" / "crd"
NODE_SLO = "slo.koordinator.sh_nodeslos.yaml"
NODE_METRIC = "slo.koordinator.sh_nodemetrics.yaml"
PROFILE = "config.koordinator.sh_clustercolocationprofiles.yaml"
MIGRATION_JOB = "scheduling.koordinator.sh_podmigrationjobs.yaml"
DEVICES = "scheduling.koordinator.sh_devices.yaml"
ELASTIC_QUOTAS = "scheduling.sigs.k8s.io_elasticquotas.yaml"
POD_GROUPS = "scheduling.sigs.k8s.io_podgroups.yaml"
RESERVATIONS = "scheduling.koordinator.sh_reservations.yaml"
SLO_API = "slo.koordinator.sh/v1alpha1"
SIGS_API = "scheduling.sigs.k8s.io/v1alpha1"
SCHEDULING_API = "scheduling.koordinator.sh/v1alpha1"

SchemaPath = tuple[str, ...]


def crd_name(file: str) -> str:
    group, plural = file.removesuffix(".yaml").split("_")
    return f"{plural}.{group}"


@functools.cache
def rendered_crds() -> dict[str, dict[str, Any]]:
    """The chart's CRDs by name, as its templates render with the default values (once per
    test run: one Helm install in a child process)."""
    release = helm.render(helm.CHART)
    assert not release.error, release.error
    return {o["metadata"]["name"]: o for o in release.all("CustomResourceDefinition")}


def open_api_schema(file: str) -> dict[str, Any]:
    crd = rendered_crds()[crd_name(file)]
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def json_schema(node: Mapping[str, Any], path: SchemaPath = ()) -> dict[str, Any]:
    """``node`` (an OpenAPI v3 schema as Kubernetes reads it) as JSON Schema; see the module
    docstring. ``path`` is where ``node`` is, "*" for a map's values and "[]" for items."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {name: json_schema(sub, (*path, name)) for name, sub in value.items()}
        elif key == "additionalProperties" and isinstance(value, Mapping):
            out[key] = json_schema(value, (*path, "*"))
        elif key == "items":
            out[key] = json_schema(value, (*path, "[]"))
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    open_object = node.get("x-kubernetes-preserve-unknown-fields") or path == ("metadata",)
    if node.get("type") == "object" and "additionalProperties" not in node and not open_object:
        out["additionalProperties"] = False
    return out


def validator(file: str) -> Any:
    schema = json_schema(open_api_schema(file))
    jsonschema.Draft202012Validator.check_schema(schema)  # the adapter wrote valid JSON Schema
    return jsonschema.Draft202012Validator(schema)


def errors(file: str, obj: Mapping[str, Any]) -> list[str]:
    """Every place ``obj`` breaks the schema, as "path: message" (empty: it validates)."""
    found = validator(file).iter_errors(obj)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in found]


def slo_object(kind: str, name: str, **parts: Any) -> dict[str, Any]:
    return {"apiVersion": SLO_API, "kind": kind, "metadata": {"name": name}, **parts}


def from_yaml(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(textwrap.dedent(text))
    return loaded


# -- what this project writes ------------------------------------------------------------------

NOW = 1_800_000_000.0


def koordlet_report() -> dict[str, Any]:
    """A NodeMetric status as koordlet's reporter builds it: node, system and pod usage, and
    aggregates for every window (one sample a second over the last ten minutes)."""
    cache = MetricCache(None)
    pods = [known_pod("web", qos="LS", uid="uid-web"), known_pod("job", qos="BE", uid="uid-job")]
    samples = []
    for i in range(600):
        ts = NOW - 600 + i
        samples += [
            Sample("node_cpu_usage", {}, ts, 2.0 + (i % 10) / 10),
            Sample("node_memory_usage", {}, ts, 8 * 2**30),
            Sample("sys_cpu_usage", {}, ts, 0.4),
            Sample("sys_memory_usage", {}, ts, 2**30),
        ]
        for known in pods:
            labels = {"pod_uid": known.request.uid}
            samples += [
                Sample("pod_cpu_usage", labels, ts, 0.5),
                Sample("pod_memory_usage", labels, ts, 2**29),
            ]
    cache.append(samples)
    # the peak predictor's answer as koordlet reports it (koordlet.prediction)
    status = build_status(
        cache, pods, NOW, durations=(300, 600), reclaimable=lambda pods, now: (1375, 3 << 29)
    )
    # Guard against a vacuous check: every part the schema describes is really there.
    assert len(status["podsMetric"]) == 2
    assert status["prodReclaimableMetric"]["resource"]["resources"]["cpu"] == "1375m"
    assert len(status["nodeMetric"]["aggregatedSystemUsages"]) == 2
    return status


def manager_collect_policy() -> dict[str, Any]:
    """NodeMetric spec.metricCollectPolicy as the manager writes it from the chart's
    colocation-config."""
    data = chart_slo_data()
    config = parse_colocation_config(data["colocation-config"])
    return collect_policy(strategy_for_node(config, make_node()))


def rendered_slo(data: Mapping[str, str]) -> dict[str, Any]:
    n = make_node({"kubernetes.io/hostname": "node-1"})
    rendered = render_node_slo(data, n)
    assert rendered.warnings == []
    return node_slo_object(n, rendered)


PROJECT_OBJECTS = [
    pytest.param(
        NODE_METRIC,
        lambda: slo_object("NodeMetric", "n1", status=koordlet_report()),
        id="nodemetric-koordlet-status",
    ),
    pytest.param(
        NODE_METRIC,
        lambda: slo_object("NodeMetric", "n1", spec={}),  # koordlet creates one if none exists
        id="nodemetric-koordlet-created",
    ),
    pytest.param(
        NODE_METRIC,
        lambda: slo_object(
            "NodeMetric", "n1", spec={"metricCollectPolicy": manager_collect_policy()}
        ),
        id="nodemetric-manager-spec",
    ),
    pytest.param(
        NODE_METRIC,
        lambda: slo_object(
            "NodeMetric",
            "n1",
            spec={"metricCollectPolicy": collect_policy(ColocationStrategy())},
        ),
        id="nodemetric-manager-spec-defaults",
    ),
    pytest.param(
        NODE_METRIC,
        lambda: {
            "apiVersion": SLO_API,
            "kind": "NodeMetric",
            **make_metric(
                pods=[pod_metric("be-0", "2", "8Gi", priority="koord-batch")],
                hostApplicationMetric=[
                    {"name": "agent", "priority": "koord-prod", "qos": "LS", "usage": {}}
                ],
            ),
        },
        id="nodemetric-manager-test-fixture",
    ),
    pytest.param(NODE_SLO, lambda: rendered_slo(chart_slo_data()), id="nodeslo-chart-config"),
    pytest.param(NODE_SLO, lambda: rendered_slo({}), id="nodeslo-no-config"),
    pytest.param(
        NODE_SLO,
        lambda: rendered_slo(configmap(host_application_config=HOST_APPS)),
        id="nodeslo-host-applications",
    ),
    pytest.param(
        NODE_SLO,
        # koordlet's built-in defaults written out as a spec: nearly every field it reads.
        lambda: slo_object("NodeSLO", "n1", spec=koordapi_nodeslo.default_spec(), status={}),
        id="nodeslo-koordlet-defaults",
    ),
    pytest.param(PROFILE, lambda: BATCH_PROFILE, id="profile-batch"),
    pytest.param(PROFILE, lambda: MID_PROFILE, id="profile-mid"),
    pytest.param(PROFILE, lambda: KOORD_SCHEDULER_PROFILE, id="profile-koord-scheduler"),
    pytest.param(
        PROFILE,
        lambda: profile(
            "colocation",
            labels={"team": "data"},
            annotations={"note": "batch"},
            schedulerName="koord-scheduler",
            qosClass="BE",
            priorityClassName="koord-batch",
            koordinatorPriority=1111,
        ),
        id="profile-every-injection",
    ),
    pytest.param(
        PROFILE,
        # What Koordinator's Go client writes for an unset class (no omitempty).
        lambda: profile("unset", qosClass="", priorityClassName="", probability=0),
        id="profile-empty-class",
    ),
]


def migrated_job() -> dict[str, Any]:
    """A PodMigrationJob as koord-descheduler leaves it: created by its LowNodeLoad round,
    arbitrated, the pod evicted, Succeeded (its own app on the fake API server)."""
    api = hot_and_cold()
    app = make_app(api, parse_config(config_text()))

    async def body() -> None:
        def done() -> bool:
            jobs = api.objects("PodMigrationJob")
            return bool(jobs) and jobs[0].get("status", {}).get("phase") == "Succeeded"

        await eventually(done, 10)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    (job,) = api.objects("PodMigrationJob")
    return job


def reported_device() -> dict[str, Any]:
    """A Device as koordlet's reporter writes it (condition times stamped): two GPUs, one
    unhealthy, and an RDMA NIC with VFs."""
    gpus = [
        GPUInfo("GPU-1d2e", 0, 85899345920, "0000:3b:00.0", 0, "pci0000:3a", "NVIDIA H100"),
        GPUInfo(
            "GPU-77aa",
            1,
            85899345920,
            "0000:86:00.0",
            1,
            "pci0000:85",
            "NVIDIA H100",
            healthy=False,
            reason="Xid79",
            message="Xid error detected on device",
        ),
    ]
    nic = RDMAInfo("0000:5e:00.0", 0, True, 0, "pci0000:5d", ("0000:5e:00.2", "0000:5e:00.3"))
    labels = {"node.koordinator.sh/gpu-vendor": "nvidia"}
    device = build_device("gpu-node", "uid-gpu-node", gpus, [nic], labels)
    return carry_transition_times({}, device, "2026-12-02T10:00:00Z")


# A Deployment's pod on kubelet-a that a ReservationFirst job moves, and an owner pod.
MIGRATED_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-5d9c7-x2kq8",
        "namespace": "shop",
        "uid": "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d",
        "labels": {"app": "web", "pod-template-hash": "5d9c7"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-5d9c7",
                "uid": "0c6f3a1e-7b2d-4e59-9a13-5f2b8c7d4e61",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "spec": {
        "nodeName": "kubelet-a",
        "containers": [
            {"name": "web", "resources": {"requests": {"cpu": "750m", "memory": "1536Mi"}}}
        ],
    },
    "status": {"phase": "Running"},
}


def descheduler_reservation() -> dict[str, Any]:
    """The Reservation koord-descheduler creates for a ReservationFirst job (its template the
    pod, owned by the pod's ReplicaSet, allocateOnce, the job's ttl, off the pod's node)."""
    options = reservation_options(
        None, MIGRATED_POD, job_uid="9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", job_ttl="7m", now=NOW
    )
    return reservation_object(options)


def placed(reservation: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """``reservation`` with ``status`` merged into its own, as a merge patch of /status."""
    return {**reservation, "status": {**reservation.get("status", {}), **status}}


def available_reservation() -> dict[str, Any]:
    """The extender's write once kube-scheduler placed the reserve pod on node-3."""
    allocatable = {"cpu": "1500m", "memory": "3Gi"}
    return placed(descheduler_reservation(), available_status("node-3", allocatable, NOW))


def succeeded_reservation() -> dict[str, Any]:
    """koord-manager's write once the owner went into it: currentOwners, allocated (the owner's
    requests as a ResourceList) and, allocateOnce, Succeeded."""
    available = available_reservation()
    meta = MIGRATED_POD["metadata"]
    owner = {"namespace": meta["namespace"], "name": "web-5d9c7-r7m2p", "uid": "f1e2d3c4"}
    return placed(
        available,
        {
            "allocated": resource_list(pod_request(MIGRATED_POD)),
            "currentOwners": [owner],
            "phase": "Succeeded",
            "conditions": succeeded_conditions(Reservation.from_dict(available), NOW + 41),
        },
    )


def expired_reservation() -> dict[str, Any]:
    """koord-manager's write past the ttl: Failed, Ready False for Expired."""
    available = available_reservation()
    return placed(available, expired_status(Reservation.from_dict(available), NOW + 7 * 60 + 1))


def unschedulable_reservation() -> dict[str, Any]:
    """koord-manager's write when kube-scheduler could not place the reserve pod."""
    created = descheduler_reservation()
    message = "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    conditions = unschedulable_conditions(Reservation.from_dict(created), message, NOW)
    return placed(created, {"phase": "Pending", "conditions": conditions})


PROJECT_OBJECTS += [
    pytest.param(MIGRATION_JOB, migrated_job, id="podmigrationjob-descheduler-succeeded"),
    pytest.param(DEVICES, reported_device, id="device-koordlet"),
    pytest.param(RESERVATIONS, descheduler_reservation, id="reservation-descheduler-created"),
    pytest.param(RESERVATIONS, available_reservation, id="reservation-extender-available"),
    pytest.param(RESERVATIONS, succeeded_reservation, id="reservation-manager-succeeded"),
    pytest.param(RESERVATIONS, expired_reservation, id="reservation-manager-expired"),
    pytest.param(RESERVATIONS, unschedulable_reservation, id="reservation-unschedulable"),
]


def test_the_reservations_this_project_writes_are_what_they_say() -> None:
    """The objects above are not vacuous: each reached the state it is named after."""
    created = descheduler_reservation()
    assert created["spec"]["owners"][0]["controller"]["name"] == "web-5d9c7"
    assert (created["spec"]["ttl"], created["spec"]["allocateOnce"]) == ("7m", True)
    available = available_reservation()["status"]
    assert (available["phase"], available["nodeName"]) == ("Available", "node-3")
    succeeded = succeeded_reservation()["status"]
    assert succeeded["allocated"] == {"cpu": "750m", "memory": "1536Mi"}
    assert expired_reservation()["status"]["phase"] == "Failed"
    (condition,) = unschedulable_reservation()["status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("Scheduled", "False")


@pytest.mark.parametrize(("file", "build"), PROJECT_OBJECTS)
def test_what_this_project_writes_validates(file: str, build: Callable[[], Any]) -> None:
    assert errors(file, build()) == []


def quota_tree_child() -> dict[str, Any]:
    """An ElasticQuota placed in a tree by Koordinator's labels and annotations (a child of
    org-research in tree-17, lending nothing, weighted, over two namespaces), checked to read
    as such with koordapi's model, so the schema is tried on an object the quota code takes."""
    obj = {
        "apiVersion": SIGS_API,
        "kind": quota.KIND,
        "metadata": {
            "name": "team-ml",
            "namespace": "team-ml",
            "labels": {
                quota.LABEL_PARENT: "org-research",
                quota.LABEL_IS_PARENT: "false",
                quota.LABEL_TREE_ID: "tree-17",
                quota.LABEL_ALLOW_LENT_RESOURCE: "false",
            },
            "annotations": {
                quota.ANNOTATION_SHARED_WEIGHT: json.dumps({"cpu": "13", "memory": "52Gi"}),
                quota.ANNOTATION_NAMESPACES: json.dumps(["ml-train", "ml-serve"]),
                quota.ANNOTATION_RUNTIME: json.dumps({"cpu": "8250m", "memory": "33Gi"}),
            },
        },
        # Integers and strings both: a ResourceList as kubectl sends what a user typed.
        "spec": {
            "min": {"cpu": "6500m", "memory": "26Gi", "nvidia.com/gpu": 3},
            "max": {"cpu": 13, "memory": "52Gi", "nvidia.com/gpu": "7"},
        },
        "status": {"used": {"cpu": "2250m", "memory": "9Gi", "nvidia.com/gpu": "1"}},
    }
    read = quota.ElasticQuota.from_object(obj)
    assert read.min == {"cpu": 6500, "memory": 26 * 2**30, "nvidia.com/gpu": 3}
    assert read.shared_weight == {"cpu": 13_000, "memory": 52 * 2**30}
    assert (read.parent, read.tree_id, read.allow_lent_resource, read.namespaces) == (
        "org-research",
        "tree-17",
        False,
        ("ml-train", "ml-serve"),
    )
    return obj


def test_a_quota_in_koordinators_tree_validates() -> None:
    assert errors(ELASTIC_QUOTAS, quota_tree_child()) == []


# -- Koordinator's documented forms ------------------------------------------------------------

# Written for these tests in the form Koordinator's documentation uses (the SLO and QoS pages,
# its ClusterColocationProfile example), touching every section a user is likely to set.
DOCUMENTED_NODE_SLO = """
    apiVersion: slo.koordinator.sh/v1alpha1
    kind: NodeSLO
    metadata:
      name: node-1
    spec:
      resourceUsedThresholdWithBE:
        enable: true
        cpuSuppressThresholdPercent: 65
        cpuSuppressMinPercent: 20
        cpuSuppressPolicy: cfsQuota
        memoryEvictThresholdPercent: 70
        memoryEvictLowerPercent: 65
        cpuEvictBESatisfactionUpperPercent: 80
        cpuEvictBESatisfactionLowerPercent: 60
        cpuEvictBEUsageThresholdPercent: 90
        cpuEvictTimeWindowSeconds: 300
        cpuEvictPolicy: evictByRealLimit
        allocatableEvictPriorityThreshold: 5999
      resourceQOSStrategy:
        policies:
          cpuPolicy: coreSched
          netQOSPolicy: tc
        lsrClass:
          cpuQOS: {enable: true, groupIdentity: 2, schedIdle: 0, coreExpeller: true}
          memoryQOS:
            enable: true
            minLimitPercent: 100
            lowLimitPercent: 0
            throttlingPercent: 80
            wmarkRatio: 95
            wmarkScalePermill: 20
            wmarkMinAdj: -25
            priorityEnable: 1
            priority: 12
            oomKillGroup: 0
          resctrlQOS: {enable: true, catRangeStartPercent: 0, catRangeEndPercent: 100}
        lsClass:
          cpuQOS: {enable: true, groupIdentity: 2}
          memoryQOS: {enable: true, wmarkRatio: 95, wmarkScalePermill: 20, wmarkMinAdj: -25}
          resctrlQOS: {enable: true, catRangeEndPercent: 100, mbaPercent: 100}
          networkQOS:
            {enable: true, ingressRequest: 50M, ingressLimit: 100, egressRequest: 0, egressLimit: 8}
        beClass:
          cpuQOS: {enable: true, groupIdentity: -1, schedIdle: 1}
          memoryQOS: {enable: true, wmarkRatio: 95, wmarkScalePermill: 20, wmarkMinAdj: 50}
          resctrlQOS: {enable: true, catRangeStartPercent: 0, catRangeEndPercent: 30}
          blkioQOS:
            enable: true
            blocks:
              - name: /dev/vda
                type: device
                ioCfg: {readIOPS: 1024, writeBPS: 10485760, ioWeightPercent: 60}
        cgroupRoot:
          blkioQOS:
            blocks:
              - name: /dev/vda
                type: device
                ioCfg: {enableUserModel: true, modelReadBPS: 3324911720, readLatencyPercent: 95}
      cpuBurstStrategy:
        policy: auto
        cpuBurstPercent: 1000
        cfsQuotaBurstPercent: 300
        cfsQuotaBurstPeriodSeconds: -1
        sharePoolThresholdPercent: 50
      systemStrategy:
        minFreeKbytesFactor: 100
        watermarkScaleFactor: 150
        memcgReapBackGround: 0
        schedGroupIdentityEnabled: 1
        schedFeatures: {ID_ABSOLUTE_EXPEL: true}
        totalNetworkBandwidth: 10G
      extensions:
        anyPlugin: {free: [form, 1, true]}
      hostApplications:
        - name: nginx
          priority: koord-prod
          qos: LS
          cgroupPath: {base: CgroupRoot, parentDir: host-latency-sensitive/, relativePath: nginx/}
"""

DOCUMENTED_PROFILE = """
    apiVersion: config.koordinator.sh/v1alpha1
    kind: ClusterColocationProfile
    metadata:
      name: colocation-profile-example
    spec:
      namespaceSelector:
        matchLabels:
          koordinator.sh/enable-colocation: "true"
      selector:
        matchLabels:
          koordinator.sh/enable-colocation: "true"
        matchExpressions:
          - {key: app, operator: In, values: [spark, flink]}
      qosClass: BE
      priorityClassName: koord-batch
      koordinatorPriority: 1000
      schedulerName: koord-scheduler
      probability: "50%"
      labels:
        koordinator.sh/mutated: "true"
      annotations:
        koordinator.sh/intercepted: "true"
      patch:
        spec:
          terminationGracePeriodSeconds: 30
          tolerations: [{key: dedicated, operator: Equal, value: batch, effect: NoSchedule}]
"""

DOCUMENTED_NODE_METRIC = """
    apiVersion: slo.koordinator.sh/v1alpha1
    kind: NodeMetric
    metadata:
      name: node-1
    spec:
      metricCollectPolicy:
        aggregateDurationSeconds: 300
        reportIntervalSeconds: 60
        nodeAggregatePolicy: {durations: [5m0s, 10m0s, 30m0s]}
        nodeMemoryCollectPolicy: usageWithoutPageCache
    status:
      updateTime: "2026-01-01T00:00:00Z"
      nodeMetric:
        nodeUsage:
          resources: {cpu: 7800m, memory: 60Gi, nvidia.com/gpu: 1}
          devices:
            - type: gpu
              id: GPU-0d2c7b1e
              minor: 0
              health: true
              resources: {koordinator.sh/gpu-core: 40, koordinator.sh/gpu-memory: 12Gi}
              topology: {socketID: 0, nodeID: 0, pcieID: pci0000:3a, busID: "0000:3b:00.0"}
              vfGroups: [{labels: {type: general}, vfs: [{minor: 1, busID: "0000:3b:00.1"}]}]
              conditions:
                - type: Healthy
                  status: "True"
                  lastTransitionTime: "2026-01-01T00:00:00Z"
                  reason: DeviceReady
                  message: ""
        systemUsage: {resources: {cpu: 500m, memory: 3Gi}}
        aggregatedNodeUsages:
          - duration: 5m0s
            usage:
              avg: {resources: {cpu: 7, memory: 59Gi}}
              p99: {resources: {cpu: 9500m, memory: 61Gi}}
        numaUsages:
          - numaNodeID: 0
            nodeUsage: {resources: {cpu: "4", memory: 30Gi}}
      podsMetric:
        - namespace: default
          name: web
          priority: koord-prod
          qos: LS
          podUsage: {resources: {cpu: 1500m, memory: 2Gi}}
          extensions: {vendor: {anything: [1, 2]}}
      hostApplicationMetric:
        - {name: nginx, priority: koord-prod, qos: LS, usage: {resources: {cpu: 200m}}}
      prodReclaimableMetric: {resource: {resources: {cpu: "10", memory: 20Gi}}}
      prodPeakMetric: {resource: {resources: {cpu: "30", memory: 100Gi}}}
"""

# The example of Koordinator's multi-hierarchy elastic quota proposal (docs/proposals/scheduling/
# 20220722-...), other numbers, with the label Koordinator's code reads for the parent
# (quota.scheduling.koordinator.sh/parent, not the proposal's parent-quota-name), its values
# quoted (labels and annotations are strings) and a status as koord-scheduler writes it.
DOCUMENTED_ELASTIC_QUOTA = """
    apiVersion: scheduling.sigs.k8s.io/v1alpha1
    kind: ElasticQuota
    metadata:
      name: quota-vision
      namespace: vision
      annotations:
        quota.scheduling.koordinator.sh/runtime: '{"cpu": 7, "memory": "14Gi"}'
        quota.scheduling.koordinator.sh/shared-weight: '{"cpu": 7, "memory": "14Gi"}'
        quota.scheduling.koordinator.sh/namespaces: '["vision-train", "vision-eval"]'
      labels:
        quota.scheduling.koordinator.sh/is-parent: "false"
        quota.scheduling.koordinator.sh/parent: research
        quota.scheduling.koordinator.sh/allow-lent-resource: "true"
    spec:
      max: {cpu: 36, memory: 72Gi, nvidia.com/gpu: 6}
      min: {cpu: 18, memory: 36Gi, nvidia.com/gpu: 3}
    status:
      used: {cpu: 4500m, memory: 9Gi}
"""

# The GangGroup example of Koordinator's gang scheduling proposal (docs/proposals/scheduling/
# 20220901-gang-scheduling.md), other numbers, its annotations quoted, with a status as its
# PodGroup controller writes one.
DOCUMENTED_POD_GROUP = """
    apiVersion: scheduling.sigs.k8s.io/v1alpha1
    kind: PodGroup
    metadata:
      name: gang-train
      namespace: team-a
      annotations:
        gang.scheduling.koordinator.sh/total-number: "7"
        gang.scheduling.koordinator.sh/mode: NonStrict
        gang.scheduling.koordinator.sh/groups: '["team-a/gang-train", "team-b/gang-eval"]'
        gang.scheduling.koordinator.sh/match-policy: once-satisfied
    spec:
      minMember: 7
      minResources: {cpu: "7", memory: 3584Mi}
      scheduleTimeoutSeconds: 450
    status:
      phase: Scheduling
      occupiedBy: team-a/trainer
      scheduled: 4
      running: 3
      succeeded: 0
      failed: 0
      scheduleStartTime: "2026-06-01T08:30:00Z"
"""

# Koordinator's sample (config/samples/scheduling_v1alpha1_reservation.yaml), other names and
# numbers, its template's stray top-level namespace kept (the template is schemaless), with an
# owner of each kind and the spec's other fields set away from their defaults.
DOCUMENTED_RESERVATION = """
    apiVersion: scheduling.koordinator.sh/v1alpha1
    kind: Reservation
    metadata:
      name: reservation-web-7
    spec:
      template:
        namespace: shop
        spec:
          containers:
            - args: ['-c', '3']
              command: [stress]
              image: polinux/stress
              imagePullPolicy: IfNotPresent
              name: stress
              resources:
                limits: {cpu: '3', memory: 3Gi}
                requests: {cpu: 1500m, memory: 1536Mi}
          restartPolicy: Always
          schedulerName: default-scheduler
      owners:
        - object:
            name: web-7
            namespace: shop
        - controller:
            apiVersion: apps/v1
            kind: ReplicaSet
            name: web-5d9c7
            uid: 0c6f3a1e-7b2d-4e59-9a13-5f2b8c7d4e61
            controller: true
            namespace: shop
        - labelSelector:
            matchLabels: {app: web}
            matchExpressions:
              - {key: track, operator: In, values: [canary, stable]}
      ttl: 90m
      allocateOnce: false
      allocatePolicy: Restricted
      unschedulable: false
      taints:
        - {key: reserved-for, value: web, effect: NoSchedule}
"""

DOCUMENTED = {
    NODE_SLO: DOCUMENTED_NODE_SLO,
    NODE_METRIC: DOCUMENTED_NODE_METRIC,
    PROFILE: DOCUMENTED_PROFILE,
    ELASTIC_QUOTAS: DOCUMENTED_ELASTIC_QUOTA,
    POD_GROUPS: DOCUMENTED_POD_GROUP,
    RESERVATIONS: DOCUMENTED_RESERVATION,
}


@pytest.mark.parametrize(
    "file", [NODE_SLO, NODE_METRIC, PROFILE, ELASTIC_QUOTAS, POD_GROUPS, RESERVATIONS]
)
def test_koordinators_documented_form_validates(file: str) -> None:
    assert errors(file, from_yaml(DOCUMENTED[file])) == []


# -- what is refused ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """One mistake in the file's documented example: the field at ``path`` (keys and list
    indexes) renamed to ``rename_to``, or removed (``value`` REMOVE), or set to ``value``. The
    validator must report exactly one error, from JSON Schema keyword ``keyword``, at the object
    holding the field (rename, removal) or at the field itself (a wrong value)."""

    file: str
    path: tuple[str | int, ...]
    keyword: str
    value: Any = None
    rename_to: str | None = None


REMOVE = object()
RUT = ("spec", "resourceUsedThresholdWithBE")
QOS = ("spec", "resourceQOSStrategy")
BE = (*QOS, "beClass")
SYSTEM = ("spec", "systemStrategy")
POLICY = ("spec", "metricCollectPolicy")
DEVICE = ("status", "nodeMetric", "nodeUsage", "devices", 0)


def typo(file: str, path: tuple[str | int, ...], wrong: str) -> Mistake:
    return Mistake(file, path, "additionalProperties", rename_to=wrong)


MISTAKES = [
    pytest.param(typo(NODE_SLO, RUT, "resourceUsedThresholdWithBe"), id="slo-section-case"),
    pytest.param(
        typo(NODE_SLO, (*RUT, "cpuSuppressThresholdPercent"), "cpuSuppressThresholdPercnt"),
        id="slo-threshold-typo",
    ),
    pytest.param(typo(NODE_SLO, (*BE, "cpuQOS"), "cpuQoS"), id="slo-cpuqos-case"),
    pytest.param(
        typo(NODE_SLO, (*BE, "memoryQOS", "wmarkRatio"), "wmarkRatioPercent"),
        id="slo-memoryqos-typo",
    ),
    pytest.param(
        typo(NODE_SLO, ("spec", "hostApplications", 0, "cgroupPath"), "cgroup"),
        id="slo-host-application-typo",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*RUT, "cpuSuppressThresholdPercent"), "type", "65"),
        id="slo-string-for-integer",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*RUT, "memoryEvictThresholdPercent"), "maximum", 101),
        id="slo-percent-above-100",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*BE, "memoryQOS", "wmarkMinAdj"), "minimum", -26),
        id="slo-wmark-min-adj-below-range",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*BE, "resctrlQOS", "enable"), "type", "true"),
        id="slo-string-for-boolean",
    ),
    pytest.param(
        Mistake(NODE_SLO, ("spec", "cpuBurstStrategy", "cpuBurstPercent"), "maximum", 10001),
        id="slo-burst-above-range",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*SYSTEM, "totalNetworkBandwidth"), "pattern", "10 Gbps"),
        id="slo-bad-quantity",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*SYSTEM, "schedFeatures", "ID_ABSOLUTE_EXPEL"), "type", "on"),
        id="slo-sched-feature-not-boolean",
    ),
    pytest.param(
        Mistake(NODE_SLO, (*QOS, "lsClass", "networkQOS", "ingressLimit"), "anyOf", 1.5),
        id="slo-bandwidth-neither-integer-nor-string",
    ),
    pytest.param(
        Mistake(NODE_SLO, ("status",), "additionalProperties", {"ready": True}),
        id="slo-status-has-no-fields",
    ),
    pytest.param(
        typo(NODE_METRIC, ("status", "nodeMetric", "nodeUsage"), "nodeusage"),
        id="metric-node-usage-case",
    ),
    pytest.param(
        typo(NODE_METRIC, ("status", "podsMetric", 0, "podUsage"), "usage"),
        id="metric-pod-usage-typo",
    ),
    pytest.param(
        Mistake(NODE_METRIC, (*POLICY, "nodeMemoryCollectPolicy"), "enum", "usageWithCache"),
        id="metric-memory-policy-not-in-enum",
    ),
    pytest.param(
        Mistake(NODE_METRIC, (*POLICY, "reportIntervalSeconds"), "type", "60"),
        id="metric-string-for-integer",
    ),
    pytest.param(
        Mistake(
            NODE_METRIC,
            ("status", "nodeMetric", "systemUsage", "resources", "cpu"),
            "pattern",
            "2 cores",
        ),
        id="metric-bad-quantity",
    ),
    pytest.param(
        Mistake(NODE_METRIC, (*DEVICE, "topology", "pcieID"), "required", REMOVE),
        id="metric-device-topology-without-pcie",
    ),
    pytest.param(
        Mistake(NODE_METRIC, (*DEVICE, "conditions", 0, "status"), "enum", "Yes"),
        id="metric-condition-status-not-in-enum",
    ),
    pytest.param(
        Mistake(
            NODE_METRIC, ("status", "nodeMetric", "numaUsages", 0, "numaNodeID"), "required", REMOVE
        ),
        id="metric-numa-usage-without-id",
    ),
    pytest.param(
        Mistake(PROFILE, ("spec", "qosClass"), "enum", "Guaranteed"),
        id="profile-qos-class-not-in-enum",
    ),
    pytest.param(
        Mistake(PROFILE, ("spec", "koordinatorPriority"), "type", "1000"),
        id="profile-string-for-integer",
    ),
    pytest.param(
        Mistake(PROFILE, ("spec", "probability"), "anyOf", 0.5),
        id="profile-probability-neither-integer-nor-string",
    ),
    pytest.param(typo(PROFILE, ("spec", "schedulerName"), "schedulername"), id="profile-case"),
    pytest.param(
        typo(PROFILE, ("spec", "selector", "matchLabels"), "matchLabel"),
        id="profile-selector-typo",
    ),
    pytest.param(
        Mistake(
            PROFILE, ("spec", "selector", "matchExpressions", 0, "operator"), "required", REMOVE
        ),
        id="profile-expression-without-operator",
    ),
    pytest.param(
        Mistake(PROFILE, ("spec", "labels", "koordinator.sh/mutated"), "type", 1),
        id="profile-label-value-not-string",
    ),
    pytest.param(
        Mistake(ELASTIC_QUOTAS, ("spec", "max", "cpu"), "pattern", "36 cores"),
        id="quota-bad-quantity",
    ),
    pytest.param(
        Mistake(ELASTIC_QUOTAS, ("spec", "min", "nvidia.com/gpu"), "anyOf", 1.5),
        id="quota-amount-neither-integer-nor-string",
    ),
    pytest.param(typo(ELASTIC_QUOTAS, ("spec", "min"), "minimum"), id="quota-spec-typo"),
    pytest.param(typo(ELASTIC_QUOTAS, ("status", "used"), "usage"), id="quota-status-typo"),
    pytest.param(
        Mistake(POD_GROUPS, ("spec", "minMember"), "type", "7"), id="gang-string-min-member"
    ),
    pytest.param(
        Mistake(POD_GROUPS, ("spec", "scheduleTimeoutSeconds"), "type", "450s"),
        id="gang-timeout-as-duration",
    ),
    pytest.param(
        typo(POD_GROUPS, ("spec", "minMember"), "minMembers"), id="gang-unknown-spec-field"
    ),
    pytest.param(
        Mistake(POD_GROUPS, ("spec", "minResources", "memory"), "pattern", "3.5 GiB"),
        id="gang-bad-quantity",
    ),
    pytest.param(
        Mistake(POD_GROUPS, ("status", "phase"), "enum", "Waiting"),
        id="gang-phase-not-in-enum",
    ),
    pytest.param(Mistake(POD_GROUPS, ("status", "running"), "type", "3"), id="gang-string-count"),
    pytest.param(
        typo(RESERVATIONS, ("spec", "allocateOnce"), "allocateonce"), id="reservation-spec-case"
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "allocatePolicy"), "enum", "Strict"),
        id="reservation-policy-not-in-enum",
    ),
    pytest.param(
        # Koordinator's deprecated default: taken when the field is left out, refused when
        # written (Koordinator's enum has no "").
        Mistake(RESERVATIONS, ("spec", "allocatePolicy"), "enum", ""),
        id="reservation-policy-empty-written",
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "owners"), "minItems", []), id="reservation-no-owners"
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "owners", 0), "minProperties", {}),
        id="reservation-empty-owner",
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "owners", 1, "controller", "uid"), "required", REMOVE),
        id="reservation-controller-without-uid",
    ),
    pytest.param(
        typo(RESERVATIONS, ("spec", "owners", 0, "object"), "pod"),
        id="reservation-unknown-owner-kind",
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "template"), "required", REMOVE),
        id="reservation-without-template",
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "ttl"), "type", 5400), id="reservation-ttl-as-seconds"
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "allocateOnce"), "type", "false"),
        id="reservation-string-for-boolean",
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "taints", 0, "effect"), "enum", "NoExecution"),
        id="reservation-taint-effect-not-in-enum",
    ),
    pytest.param(
        Mistake(RESERVATIONS, ("spec", "taints", 0, "key"), "required", REMOVE),
        id="reservation-taint-without-key",
    ),
]


def mistaken(mistake: Mistake) -> tuple[dict[str, Any], tuple[str | int, ...]]:
    """The documented example with ``mistake`` made, and where its error must be."""
    obj = from_yaml(DOCUMENTED[mistake.file])
    *parents, last = mistake.path
    holder: Any = obj
    for key in parents:
        holder = holder[key]
    if mistake.rename_to is not None:
        holder[mistake.rename_to] = holder.pop(last)  # the value kept, under the wrong name
        return obj, tuple(parents)
    if mistake.value is REMOVE:
        del holder[last]
        return obj, tuple(parents)
    holder[last] = mistake.value
    return obj, mistake.path


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_mistake_is_refused_where_it_is(mistake: Mistake) -> None:
    obj, at = mistaken(mistake)
    found = list(validator(mistake.file).iter_errors(obj))
    assert [(tuple(e.absolute_path), e.validator) for e in found] == [(at, mistake.keyword)]


# -- the schemas themselves --------------------------------------------------------------------

# Koordinator leaves these objects without fields (empty Go structs, or ObjectMeta, which the
# API server checks itself); any other object must say what it holds.
EMPTY_OBJECTS: dict[str, set[SchemaPath]] = {
    NODE_SLO: {("metadata",), ("status",), ("spec", "hostApplications", "[]", "strategy")},
    NODE_METRIC: {("metadata",)},
    PROFILE: {("metadata",), ("status",)},
    MIGRATION_JOB: {("metadata",)},
    DEVICES: {("metadata",)},
    ELASTIC_QUOTAS: {("metadata",)},
    POD_GROUPS: {("metadata",)},
    RESERVATIONS: {("metadata",)},
}
# The schemaless parts, exactly where Koordinator has them (+kubebuilder:validation:Schemaless).
PRESERVE_UNKNOWN: dict[str, set[SchemaPath]] = {
    NODE_SLO: {("spec", "extensions")},
    NODE_METRIC: {("status", "podsMetric", "[]", "extensions")},
    PROFILE: {("spec", "patch")},
    MIGRATION_JOB: {("spec", "reservationOptions"), ("status", "preemptedPodsReservation", "[]")},
    DEVICES: set(),
    ELASTIC_QUOTAS: set(),
    POD_GROUPS: set(),
    RESERVATIONS: {("spec", "template")},
}
DEEPEST: dict[str, SchemaPath] = {
    NODE_SLO: (*QOS, "cgroupRoot", "blkioQOS", "blocks", "[]", "ioCfg", "modelWriteRandIOPS"),
    NODE_METRIC: (
        *("status", "podsMetric", "[]", "podUsage", "devices", "[]"),
        *("vfGroups", "[]", "vfs", "[]", "minor"),
    ),
    PROFILE: ("spec", "namespaceSelector", "matchExpressions", "[]", "values", "[]"),
    MIGRATION_JOB: ("status", "preemptedPodsRef", "[]", "uid"),
    DEVICES: ("spec", "devices", "[]", "vfGroups", "[]", "vfs", "[]", "busID"),
    ELASTIC_QUOTAS: ("status", "used", "*"),
    POD_GROUPS: ("spec", "minResources", "*"),
    RESERVATIONS: (
        "spec",
        "owners",
        "[]",
        "labelSelector",
        "matchExpressions",
        "[]",
        "values",
        "[]",
    ),
}
KEYWORDS = {
    "type",
    "format",
    "description",
    "properties",
    "additionalProperties",
    "items",
    "required",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "minProperties",
    "pattern",
    "default",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
}
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def walk(
    node: Mapping[str, Any], path: SchemaPath = ()
) -> Iterator[tuple[SchemaPath, Mapping[str, Any]]]:
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk(sub, (*path, name))
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from walk(node["additionalProperties"], (*path, "*"))
    if "items" in node:
        yield from walk(node["items"], (*path, "[]"))


def structural_problems(
    schema: Mapping[str, Any], empty: set[SchemaPath], schemaless: set[SchemaPath]
) -> list[str]:
    """What breaks apiextensions.k8s.io/v1's structural rules, or this chart's stricter ones,
    anywhere in ``schema``, as "path: problem". ``empty``: the objects allowed no fields;
    ``schemaless``: exactly where unknown fields must be kept."""
    problems: list[str] = []
    preserved: set[SchemaPath] = set()
    for path, node in walk(schema):
        where = ".".join(path) or "(root)"
        found: list[str] = []
        if unknown := set(node) - KEYWORDS:
            found.append(f"unknown keywords {sorted(unknown)}")  # e.g. a misspelt "maximum"
        if node.get("x-kubernetes-int-or-string"):
            if "type" in node or node.get("anyOf") != INT_OR_STRING:
                found.append("int-or-string must be exactly anyOf [integer, string], no type")
        else:
            if node.get("x-kubernetes-preserve-unknown-fields"):
                preserved.add(path)
            kept = bool(node.get("x-kubernetes-preserve-unknown-fields"))
            found += node_problems(node, allowed_empty=kept or path in empty)
        problems += [f"{where}: {text}" for text in found]
    if preserved != schemaless:
        problems.append(f"unknown fields kept at {sorted(preserved)}, not {sorted(schemaless)}")
    return problems


def node_problems(node: Mapping[str, Any], *, allowed_empty: bool) -> list[str]:
    """The problems of one schema node that is not int-or-string."""
    found = []
    kind = node.get("type")
    keys = set(node)
    if "anyOf" in node:
        found.append("anyOf is only for int-or-string")
    if kind not in ("object", "array", "string", "integer", "boolean", "number"):
        found.append(f"no valid type: {kind!r}")
    if kind == "object":
        if {"properties", "additionalProperties"} <= keys:
            found.append("both properties and additionalProperties")
        if not {"properties", "additionalProperties"} & keys and not allowed_empty:
            found.append("an object without properties")
        undeclared = set(node.get("required", ())) - set(node.get("properties", {}))
        if undeclared:
            found.append(f"requires {sorted(undeclared)}, which it does not declare")
    elif {"properties", "additionalProperties", "required"} & keys:
        found.append(f"object keywords on a {kind}")
    if (kind == "array") != ("items" in node):
        found.append("items belongs to arrays, and every array needs it")
    if {"minimum", "maximum"} & keys and kind != "integer":
        found.append("bounds on a non-integer")
    if node.get("minimum", 0) > node.get("maximum", float("inf")):
        found.append("minimum above maximum")
    if "minItems" in keys and kind != "array":
        found.append("minItems on a non-array")
    if "minProperties" in keys and kind != "object":
        found.append("minProperties on a non-object")
    if {"pattern", "minLength", "maxLength"} & keys and kind != "string":
        found.append("string keywords on a non-string")
    if "enum" in node and (kind != "string" or not all(isinstance(v, str) for v in node["enum"])):
        found.append("an enum of something other than strings")
    if "default" in node and errors_of(node, node["default"]):
        found.append(f"default {node['default']!r} does not validate")
    return found


def errors_of(node: Mapping[str, Any], value: Any) -> list[str]:
    schema = json_schema(node)
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(value)]


@pytest.mark.parametrize(
    "file",
    [
        NODE_SLO,
        NODE_METRIC,
        PROFILE,
        MIGRATION_JOB,
        DEVICES,
        ELASTIC_QUOTAS,
        POD_GROUPS,
        RESERVATIONS,
    ],
)
def test_every_level_of_the_schema_is_structural(file: str) -> None:
    schema = open_api_schema(file)
    assert structural_problems(schema, EMPTY_OBJECTS[file], PRESERVE_UNKNOWN[file]) == []
    # The walk reached the deepest part, through the YAML aliases: not a vacuous pass.
    assert DEEPEST[file] in {path for path, _ in walk(schema)}


def test_the_structural_check_finds_what_it_looks_for() -> None:
    """The checker is not vacuous: a schema with each kind of problem is reported, once each."""
    broken: dict[str, Any] = {
        "type": "object",
        "properties": {
            "loose": {"type": "object"},
            "typo": {"type": "integer", "maximun": 100},
            "mixed": {"anyOf": INT_OR_STRING},
            "list": {"type": "array"},
            "bounds": {"type": "string", "minimum": 1},
            "fewest": {"type": "string", "minItems": 1, "minProperties": 1},
            "kept": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "badDefault": {"type": "boolean", "default": "no"},
        },
    }
    assert structural_problems(broken, set(), set()) == [
        "loose: an object without properties",
        "typo: unknown keywords ['maximun']",
        "mixed: anyOf is only for int-or-string",
        "mixed: no valid type: None",
        "list: items belongs to arrays, and every array needs it",
        "bounds: bounds on a non-integer",
        "fewest: minItems on a non-array",
        "fewest: minProperties on a non-object",
        "badDefault: default 'no' does not validate",
        "unknown fields kept at [('kept',)], not []",
    ]
    assert structural_problems(broken["properties"]["kept"], set(), {()}) == []


def crd_paths(node: Mapping[str, Any], path: SchemaPath = ()) -> set[SchemaPath]:
    return {p for p, _ in walk(node, path)}


def koordapi_leaves(rules: Mapping[str, Any], path: SchemaPath = ()) -> Iterator[SchemaPath]:
    for key, rule in rules.items():
        if isinstance(rule, Mapping):
            yield from koordapi_leaves(rule, (*path, key))
        else:
            yield (*path, key)


def test_the_nodeslo_schema_keeps_every_field_koordlet_reads() -> None:
    """An API server prunes what the schema does not declare: every field koordlet's NodeSLO
    reader knows (koordapi.nodeslo.SCHEMA) must be declared, or its setting would vanish."""
    spec = open_api_schema(NODE_SLO)["properties"]["spec"]
    declared = crd_paths(spec)
    leaves = list(koordapi_leaves(koordapi_nodeslo.SCHEMA))
    assert len(leaves) > 50
    assert [leaf for leaf in leaves if leaf not in declared] == []


def test_helm_installs_the_schemas_as_read_here(default: helm.Release) -> None:
    """The templates use YAML anchors, which this module resolves with Python's YAML from the
    rendered manifest; Helm's Go YAML must resolve them to the same schemas in what it sends
    the API server, or these tests would check something the cluster never gets."""
    installed = {crd["metadata"]["name"]: crd for crd in default.crds}
    files = sorted(f.name for f in CRDS.iterdir())
    assert files == sorted(
        (
            *(NODE_SLO, NODE_METRIC, PROFILE, MIGRATION_JOB, DEVICES),
            *(ELASTIC_QUOTAS, POD_GROUPS, RESERVATIONS),
        )
    )
    assert any(": &" in (CRDS / file).read_text() for file in files)  # what this is about
    for file in files:
        assert installed[crd_name(file)]["spec"] == rendered_crds()[crd_name(file)]["spec"]


# -- ElasticQuota and PodGroup: Koordinator's CRDs ---------------------------------------------

# Kubernetes' pattern for a resource.Quantity, as controller-gen writes it for a ResourceList.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY = ("int-or-string", QUANTITY_PATTERN)
INT32 = ("integer", "int32")
# Every field of Koordinator v1.8.0's v1alpha1 types (the scheduler-plugins types it vendors,
# apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1/types.go), each with its
# OpenAPI type and format, or int-or-string and pattern.
SIGS_FIELDS: dict[str, dict[SchemaPath, tuple[str, str | None]]] = {
    ELASTIC_QUOTAS: {
        ("spec", "min", "*"): QUANTITY,
        ("spec", "max", "*"): QUANTITY,
        ("status", "used", "*"): QUANTITY,
    },
    POD_GROUPS: {
        ("spec", "minMember"): INT32,
        ("spec", "minResources", "*"): QUANTITY,
        ("spec", "scheduleTimeoutSeconds"): INT32,
        ("status", "phase"): ("string", None),
        ("status", "occupiedBy"): ("string", None),
        ("status", "scheduled"): INT32,
        ("status", "running"): INT32,
        ("status", "succeeded"): INT32,
        ("status", "failed"): INT32,
        ("status", "scheduleStartTime"): ("string", "date-time"),
    },
}
# PodGroupPhase's values.
POD_GROUP_PHASES = [
    "Pending",
    "Running",
    "PreScheduling",
    "Scheduling",
    "Scheduled",
    "Unknown",
    "Finished",
    "Failed",
]


def leaf_fields(file: str) -> dict[SchemaPath, tuple[str, str | None]]:
    """The schema's fields under spec and status that hold a value, not further fields."""
    schema = open_api_schema(file)
    found: dict[SchemaPath, tuple[str, str | None]] = {}
    for part in ("spec", "status"):
        for path, node in walk(schema["properties"][part], (part,)):
            if node.get("x-kubernetes-int-or-string"):
                found[path] = ("int-or-string", node.get("pattern"))
            elif node.get("type") != "object":
                found[path] = (node["type"], node.get("format"))
    return found


@pytest.mark.parametrize("file", [ELASTIC_QUOTAS, POD_GROUPS])
def test_every_field_of_koordinators_type_is_declared_as_there(file: str) -> None:
    assert leaf_fields(file) == SIGS_FIELDS[file]


@pytest.mark.parametrize(
    ("file", "kind", "short_names"),
    [(ELASTIC_QUOTAS, "ElasticQuota", ["eq", "eqs"]), (POD_GROUPS, "PodGroup", ["pg", "pgs"])],
)
def test_the_quota_and_gang_crds_are_koordinators(
    file: str, kind: str, short_names: list[str]
) -> None:
    crd = rendered_crds()[crd_name(file)]
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("scheduling.sigs.k8s.io", "Namespaced")
    assert spec["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": f"{kind.lower()}s",
        "singular": kind.lower(),
        "shortNames": short_names,  # scheduler-plugins'
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # Koordinator's koord-scheduler writes the status in a merge patch of the object itself,
    # which a status subresource would strip of the status: none, as in Koordinator's CRDs.
    assert "subresources" not in version


def test_every_phase_of_a_pod_group_validates() -> None:
    for phase in POD_GROUP_PHASES:
        group = {"apiVersion": SIGS_API, "kind": "PodGroup", "status": {"phase": phase}}
        assert errors(POD_GROUPS, group) == [], phase


def protected(group: str) -> bool:
    """A group apiextensions.k8s.io/v1 reserves for Kubernetes' own APIs."""
    return any(group == d or group.endswith(f".{d}") for d in ("k8s.io", "kubernetes.io"))


def test_crds_in_a_kubernetes_group_carry_its_api_approval() -> None:
    """The API server refuses a v1 CRD of a group under k8s.io or kubernetes.io without the
    api-approved.kubernetes.io annotation (a URL, or a reason starting "unapproved"); the
    approval Koordinator's CRDs carry, scheduler-plugins' pull request 52."""
    crds = rendered_crds().values()
    approved = {c["metadata"]["name"] for c in crds if protected(c["spec"]["group"])}
    assert approved == {crd_name(ELASTIC_QUOTAS), crd_name(POD_GROUPS)}
    for name in approved:
        annotations = rendered_crds()[name]["metadata"]["annotations"]
        assert annotations["api-approved.kubernetes.io"] == (
            "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"
        )
    assert not protected("scheduling.koordinator.sh") and protected("scheduling.sigs.k8s.io")


# -- Reservation: Koordinator's CRD ------------------------------------------------------------


def reservation(**parts: Any) -> dict[str, Any]:
    return {"apiVersion": SCHEDULING_API, "kind": "Reservation", "metadata": {"name": "r"}, **parts}


# A Reservation as the extender leaves it once kube-scheduler placed its reserve pod on node-3
# and an owner went into it (Koordinator's SetReservationAvailable: Scheduled and Ready True),
# with the owner koord-manager counted (currentOwners, allocated).
WRITTEN_STATUS: dict[str, Any] = {
    "phase": "Available",
    "nodeName": "node-3",
    "allocatable": {"cpu": "1500m", "memory": "3Gi"},
    "allocated": {"cpu": "750m", "memory": "1536Mi"},
    "currentOwners": [
        {"namespace": "shop", "name": "web-7", "uid": "5e1d2c3b-0a9f-4e8d-b7c6-1f2e3d4c5b6a"}
    ],
    "conditions": [
        {
            "type": "Scheduled",
            "status": "True",
            "reason": "Scheduled",
            "lastProbeTime": "2026-12-06T21:40:05Z",
            "lastTransitionTime": "2026-12-06T21:40:05Z",
        },
        {
            "type": "Ready",
            "status": "True",
            "reason": "Available",
            "lastProbeTime": "2026-12-06T21:40:05Z",
            "lastTransitionTime": "2026-12-06T21:40:05Z",
        },
    ],
}


def test_a_reservation_status_as_the_extender_writes_it_validates() -> None:
    documented = from_yaml(DOCUMENTED_RESERVATION)
    assert errors(RESERVATIONS, {**documented, "status": WRITTEN_STATUS}) == []
    expired = {
        "phase": "Failed",
        "conditions": [{**WRITTEN_STATUS["conditions"][1], "status": "False", "reason": "Expired"}],
    }
    assert errors(RESERVATIONS, {**documented, "status": expired}) == []


@pytest.mark.parametrize(
    ("path", "value", "keyword"),
    [
        (("phase",), "Running", "enum"),  # a PodGroup's phase, not a Reservation's
        (("conditions", 0, "status"), "Yes", "enum"),
        (("allocatable", "cpu"), "1.5 cores", "pattern"),
        (("currentOwners", 0, "podName"), "web-7", "additionalProperties"),
    ],
    ids=["phase", "condition-status", "quantity", "owner-field"],
)
def test_a_wrong_reservation_status_is_refused_where_it_is(
    path: tuple[str | int, ...], value: Any, keyword: str
) -> None:
    status = copy.deepcopy(WRITTEN_STATUS)
    *parents, last = path
    holder: Any = status
    for key in parents:
        holder = holder[key]
    holder[last] = value
    found = list(validator(RESERVATIONS).iter_errors(reservation(status=status)))
    at = ("status", *path) if keyword != "additionalProperties" else ("status", *parents)
    assert [(tuple(e.absolute_path), e.validator) for e in found] == [(at, keyword)]


def test_every_phase_of_a_reservation_validates() -> None:
    # Koordinator's ReservationPhase values.
    for phase in ("Pending", "Available", "Succeeded", "Waiting", "Failed"):
        assert errors(RESERVATIONS, reservation(status={"phase": phase})) == [], phase


def test_a_reservation_with_only_its_required_fields_validates_and_gets_koordinators_defaults() -> (
    None
):
    """Left out, allocatePolicy is Koordinator's deprecated "" (no default here, as there);
    ttl, allocateOnce, the pre-allocation mode and status.phase take Koordinator's defaults."""
    minimal = reservation(
        spec={"template": {"spec": {"containers": []}}, "owners": [{"object": {"name": "a"}}]}
    )
    assert errors(RESERVATIONS, minimal) == []
    props = open_api_schema(RESERVATIONS)["properties"]
    spec = props["spec"]["properties"]
    assert "default" not in spec["allocatePolicy"]
    assert spec["ttl"]["default"] == "24h"
    assert spec["allocateOnce"]["default"] is True
    policy = spec["preAllocationPolicy"]["properties"]
    assert (policy["mode"]["default"], policy["enableMultiple"]["default"]) == ("Default", False)
    assert props["status"]["properties"]["phase"]["default"] == "Pending"
    assert props["spec"]["required"] == ["template", "owners"]


def test_the_reservation_crd_is_koordinators() -> None:
    spec = rendered_crds()[crd_name(RESERVATIONS)]["spec"]
    assert (spec["group"], spec["scope"]) == ("scheduling.koordinator.sh", "Cluster")
    assert spec["names"] == {
        "kind": "Reservation",
        "listKind": "ReservationList",
        "plural": "reservations",
        "singular": "reservation",
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # The extender and koord-manager write the status through /status, as Koordinator's do.
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Phase", "string", ".status.phase"),
        ("Age", "date", ".metadata.creationTimestamp"),
        ("Node", "string", ".status.nodeName"),
        ("TTL", "string", ".spec.ttl"),
        ("Expires", "string", ".spec.expires"),
    ]


STRING = ("string", None)
BOOLEAN = ("boolean", None)
DATE_TIME = ("string", "date-time")
OBJECT_REFERENCE = (
    "apiVersion",
    "fieldPath",
    "kind",
    "name",
    "namespace",
    "resourceVersion",
    "uid",
)
OWNERS = ("spec", "owners", "[]")
SELECTOR = (*OWNERS, "labelSelector")
# Every field of Koordinator v1.8.0's ReservationSpec and ReservationStatus
# (apis/scheduling/v1alpha1/reservation_types.go), each with its OpenAPI type and format, or
# int-or-string and pattern; the template is schemaless there and here.
RESERVATION_FIELDS: dict[SchemaPath, tuple[str, str | None]] = {
    ("spec", "template"): ("object", None),
    **{(*OWNERS, "object", f): STRING for f in OBJECT_REFERENCE},
    **{(*OWNERS, "controller", f): STRING for f in ("apiVersion", "kind", "name", "uid")},
    (*OWNERS, "controller", "controller"): BOOLEAN,
    (*OWNERS, "controller", "blockOwnerDeletion"): BOOLEAN,
    (*OWNERS, "controller", "namespace"): STRING,
    (*SELECTOR, "matchLabels", "*"): STRING,
    (*SELECTOR, "matchExpressions"): ("array", None),
    (*SELECTOR, "matchExpressions", "[]", "key"): STRING,
    (*SELECTOR, "matchExpressions", "[]", "operator"): STRING,
    (*SELECTOR, "matchExpressions", "[]", "values"): ("array", None),
    (*SELECTOR, "matchExpressions", "[]", "values", "[]"): STRING,
    ("spec", "owners"): ("array", None),
    ("spec", "ttl"): STRING,
    ("spec", "expires"): DATE_TIME,
    ("spec", "preAllocation"): BOOLEAN,
    ("spec", "allocateOnce"): BOOLEAN,
    ("spec", "allocatePolicy"): STRING,
    ("spec", "unschedulable"): BOOLEAN,
    ("spec", "taints"): ("array", None),
    ("spec", "taints", "[]", "key"): STRING,
    ("spec", "taints", "[]", "value"): STRING,
    ("spec", "taints", "[]", "effect"): STRING,
    ("spec", "taints", "[]", "timeAdded"): DATE_TIME,
    ("spec", "preAllocationPolicy", "mode"): STRING,
    ("spec", "preAllocationPolicy", "enableMultiple"): BOOLEAN,
    ("status", "phase"): STRING,
    ("status", "conditions"): ("array", None),
    **{("status", "conditions", "[]", f): STRING for f in ("type", "status", "reason", "message")},
    ("status", "conditions", "[]", "lastProbeTime"): DATE_TIME,
    ("status", "conditions", "[]", "lastTransitionTime"): DATE_TIME,
    ("status", "currentOwners"): ("array", None),
    **{("status", "currentOwners", "[]", f): STRING for f in OBJECT_REFERENCE},
    ("status", "nodeName"): STRING,
    ("status", "allocatable", "*"): QUANTITY,
    ("status", "allocated", "*"): QUANTITY,
}


def test_every_field_of_koordinators_reservation_is_declared_as_there() -> None:
    schema = open_api_schema(RESERVATIONS)
    found: dict[SchemaPath, tuple[str, str | None]] = {}
    for part in ("spec", "status"):
        for path, node in walk(schema["properties"][part], (part,)):
            if node.get("x-kubernetes-int-or-string"):
                found[path] = ("int-or-string", node.get("pattern"))
            elif node.get("type") != "object" or node.get("x-kubernetes-preserve-unknown-fields"):
                found[path] = (node["type"], node.get("format"))
    assert found == RESERVATION_FIELDS
