"""koord-descheduler in the chart: its Deployment, RBAC and DeschedulerConfiguration.

Rendered by Helm's engine; the configuration is read back with koord-descheduler's own parser
(descheduler.config), as the pod reads it at start, so what the chart writes is what runs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from descheduler.config import DeschedulerConfig, parse_config
from tests.unit.charts import helm
from tests.unit.charts.test_chart import permission
from tests.unit.descheduler.test_app import (
    config_text,
    hot_and_cold,
    job_object,
    make_app,
    phase,
    running,
)
from tests.unit.koordkube.fakes import eventually

NAMESPACE = "koordinator-system"  # helm.Render's default
CONFIG_MAP = "koord-descheduler-config"
BALANCING = {
    "descheduler": {
        "lowNodeLoad": {
            "enabled": True,
            "args": {
                "highThresholds": {"cpu": 70},
                "evictableNamespaces": {"include": ["batch", "analytics"]},
            },
        },
        "migrationController": {"args": {"maxMigratingPerNode": 3}},
        "dryRun": True,
        "deschedulingInterval": "45s",
        "port": 10351,
    }
}
# Koordinator v1.8.0's chart values (koordinator-sh/charts versions/v1.8.0/values.yaml), its
# descheduler section with the switches this test turns: a user's values carried over.
KOORDINATOR: dict[str, dict[str, Any]] = {
    "descheduler": {
        "log": {"level": "4"},
        "replicas": 3,
        "image": {"repository": "koordinator-sh/koord-descheduler", "tag": "v1.8.0"},
        "port": 10263,
        "featureGates": "",
        "resources": {
            "limits": {"cpu": "1000m", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "256Mi"},
        },
        "hostNetwork": True,
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ctl"]}]}
                ]
            }
        },
        "nodeSelector": {"zone": "z7"},
        "tolerations": [{"key": "ctl", "operator": "Exists", "effect": "NoSchedule"}],
        "monitorEnabled": True,
    }
}
RULES = [
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {
        "apiGroups": ["apps"],
        "resources": ["replicasets", "statefulsets"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["slo.koordinator.sh"],
        "resources": ["nodemetrics"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["podmigrationjobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["podmigrationjobs/status"],
        "verbs": ["get", "update", "patch"],
    },
    # ReservationFirst: a Reservation on the target before the eviction, deleted when unused;
    # a user's own Reservation (reservationRef) labelled with its order (a patch).
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["reservations"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]


@pytest.fixture(scope="module")
def releases() -> dict[str, helm.Release]:
    if not helm.available():
        pytest.fail(helm.INSTALL_HINT, pytrace=False)
    names = ["default", "balancing", "disabled", "koordinator"]
    results = helm.run(
        helm.Render(helm.CHART),
        helm.Render(helm.CHART, BALANCING),
        helm.Render(helm.CHART, {"descheduler": {"enabled": False}}),
        helm.Render(helm.CHART, KOORDINATOR),
    )
    for name, result in zip(names, results, strict=True):
        assert isinstance(result, helm.Release) and not result.error, (name, result)
    return dict(zip(names, results, strict=True))  # type: ignore[arg-type]


def config(release: helm.Release) -> DeschedulerConfig:
    data = release.find("ConfigMap", CONFIG_MAP)["data"]
    return parse_config(data["koord-descheduler-config"], CONFIG_MAP)


def container(release: helm.Release) -> dict[str, Any]:
    deployment = release.find("Deployment", "koord-descheduler")
    (found,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(found)


def test_by_default_only_the_migration_controller_runs(releases: dict[str, helm.Release]) -> None:
    parsed = config(releases["default"])
    assert parsed.low_node_load is None  # LowNodeLoad off, as in Koordinator's chart
    assert not parsed.effective_dry_run
    assert parsed.descheduling_interval == 10
    election = parsed.leader_election
    assert election.leader_elect
    assert (election.resource_name, election.resource_namespace) == ("koord-descheduler", NAMESPACE)
    migration = parsed.migration
    assert migration.namespaces_exclude == ("kube-system", NAMESPACE)
    assert (migration.evict_qps, migration.evict_burst) == (10, 1)
    assert migration.eviction_policy == "Eviction"


def test_lownodeload_runs_with_the_values_arguments(releases: dict[str, helm.Release]) -> None:
    parsed = config(releases["balancing"])
    assert parsed.low_node_load is not None
    (pool,) = parsed.low_node_load.node_pools
    # Helm merges the values over the chart's: the memory threshold stays
    assert dict(pool.high_thresholds) == {"cpu": 70, "memory": 80}
    assert dict(pool.low_thresholds) == {"cpu": 45, "memory": 55}
    # the namespaces given replace the chart's exclusions
    assert parsed.low_node_load.evictable_namespaces_include == ("batch", "analytics")
    assert parsed.low_node_load.evictable_namespaces_exclude == ()
    assert parsed.migration.max_migrating_per_node == 3
    assert parsed.effective_dry_run and parsed.descheduling_interval == 45


def test_probes_and_metrics_are_where_the_configuration_binds(
    releases: dict[str, helm.Release],
) -> None:
    for name, port in (("default", 10251), ("balancing", 10351)):
        parsed = config(releases[name])
        assert parsed.healthz_bind_address == parsed.metrics_bind_address == f"0.0.0.0:{port}"
        found = container(releases[name])
        assert found["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        assert found["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert found["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}


def test_the_pod_reads_the_configuration_from_the_config_map(
    releases: dict[str, helm.Release],
) -> None:
    release = releases["default"]
    found = container(release)
    assert found["command"] == ["koord-descheduler"]
    (flag,) = [a for a in found["args"] if a.startswith("--config=")]
    path = flag.removeprefix("--config=")
    mounts = {m["name"]: m for m in found["volumeMounts"]}
    assert path.startswith(mounts["config"]["mountPath"] + "/") and mounts["config"]["readOnly"]
    spec = release.find("Deployment", "koord-descheduler")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["config"]["configMap"]["name"] == CONFIG_MAP
    key = path.rsplit("/", 1)[1]
    assert key in release.find("ConfigMap", CONFIG_MAP)["data"]
    # a changed configuration rolls the pods (they read it only at start)
    checksums = {
        name: releases[name].find("Deployment", "koord-descheduler")["spec"]["template"][
            "metadata"
        ]["annotations"]["checksum/config"]
        for name in ("default", "balancing")
    }
    assert checksums["default"] != checksums["balancing"]


def test_non_root_read_only_and_no_capabilities(releases: dict[str, helm.Release]) -> None:
    release = releases["default"]
    spec = release.find("Deployment", "koord-descheduler")["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"]
    context = container(release)["securityContext"]
    assert context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
    assert context["allowPrivilegeEscalation"] is False
    assert spec["serviceAccountName"] == "koord-descheduler"


def test_rbac_is_exactly_what_the_descheduler_reads_and_writes(
    releases: dict[str, helm.Release],
) -> None:
    release = releases["default"]
    rules = release.find("ClusterRole", "koord-descheduler-role")["rules"]
    assert rules == RULES
    binding = release.find("ClusterRoleBinding", "koord-descheduler-rolebinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "koord-descheduler", "namespace": NAMESPACE}
    ]
    lease = release.find("Role", "koord-descheduler-leader-election")
    assert lease["metadata"]["namespace"] == NAMESPACE
    assert lease["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    # pods leave only through the Eviction API: never a delete
    for rule in rules:
        if "pods" in rule["resources"]:
            assert "delete" not in rule["verbs"]


def test_disabled_renders_no_descheduler_object(releases: dict[str, helm.Release]) -> None:
    names = [o["metadata"]["name"] for o in releases["disabled"].objects]
    assert not [n for n in names if "descheduler" in n]
    assert [
        n
        for n in (o["metadata"]["name"] for o in releases["default"].objects)
        if "descheduler" in n
    ]


def descheduler_calls() -> list[tuple[str, str]]:
    """(verb, path) of every request koord-descheduler makes: its informers, the Lease, a round
    that creates a job, arbitration, an eviction refused by a PDB (429) then done, the job's
    status, Events, a dry run's job, and the scavenger's delete; on the in-process fake API
    server (the app as tests/unit/descheduler/test_app.py runs it)."""
    requests: list[Any] = []

    def record(api: Any) -> None:
        requests.extend(api.requests)

    api = hot_and_cold()
    api.blocked_evictions.add("default/web-0")
    app = make_app(api, parse_config(config_text()))

    async def migrate() -> None:
        await eventually(lambda: len(api.calls("create", r"/pods/web-0/eviction$")) >= 1, 5)
        api.blocked_evictions.clear()
        await eventually(
            lambda: (
                phase(api, api.objects("PodMigrationJob")[0]["metadata"]["name"]) == "Succeeded"
            ),
            5,
        )

    asyncio.run(asyncio.wait_for(running(app, migrate), 20))
    record(api)
    dry = hot_and_cold()
    # created 700 s ago: past its 5m TTL and the scavenger's 5 minutes of grace
    dry.seed(
        {**job_object("done", "web-1", created=time.time() - 700), "status": {"phase": "Succeeded"}}
    )
    dry_app = make_app(dry, parse_config(config_text(dry_run=True)))

    async def dry_run() -> None:
        await eventually(lambda: dry.get("PodMigrationJob", "done") is None, 5)
        await eventually(lambda: len(dry.objects("PodMigrationJob")) == 1, 5)

    asyncio.run(asyncio.wait_for(running(dry_app, dry_run), 20))
    record(dry)
    # A route the fake does not serve (pods/eviction) is recorded without a verb.
    writes = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    return [(r.verb or writes.get(r.method, "get"), r.path) for r in requests]


def test_rbac_allows_every_call_the_descheduler_makes(
    releases: dict[str, helm.Release],
) -> None:
    release = releases["default"]
    rules = [
        *release.find("ClusterRole", "koord-descheduler-role")["rules"],
        *release.find("Role", "koord-descheduler-leader-election")["rules"],
    ]
    allowed = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    calls = descheduler_calls()
    made = {permission(verb, path) for verb, path in calls}
    # the scenario reached every kind of write (not a vacuous pass)
    for needed in (
        ("", "pods/eviction", "create"),
        ("scheduling.koordinator.sh", "podmigrationjobs", "create"),
        ("scheduling.koordinator.sh", "podmigrationjobs", "delete"),
        ("scheduling.koordinator.sh", "podmigrationjobs/status", "patch"),
        ("", "events", "create"),
        ("coordination.k8s.io", "leases", "create"),
    ):
        assert needed in made, needed
    for verb, path in calls:
        assert permission(verb, path) in allowed, f"{verb} {path} is not allowed"


def test_koordinators_descheduler_keys_are_honoured(releases: dict[str, helm.Release]) -> None:
    release = releases["koordinator"]
    deployment = release.find("Deployment", "koord-descheduler")
    spec = deployment["spec"]["template"]["spec"]
    given = KOORDINATOR["descheduler"]
    assert deployment["spec"]["replicas"] == given["replicas"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["affinity"]["nodeAffinity"] == given["nodeAffinity"]
    assert "podAntiAffinity" in spec["affinity"]  # the spreading one stays beside it
    # Helm merges the map over ours (kubernetes.io/os: linux stays)
    assert given["nodeSelector"].items() <= spec["nodeSelector"].items()
    assert spec["tolerations"] == given["tolerations"]
    found = container(release)
    assert found["resources"] == given["resources"]
    assert found["image"] == "koordinator-sh/koord-descheduler:v1.8.0"
    assert "--log-level=debug" in found["args"]  # log.level 4: klog's V(4) is debug
    assert found["ports"][0]["containerPort"] == given["port"]
    assert config(release).healthz_bind_address == f"0.0.0.0:{given['port']}"
    # monitorEnabled: Koordinator's PodMonitor, on the pods' metrics port
    monitor = release.find("PodMonitor", "koord-descheduler-metrics-podmonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] == found["ports"][0]["name"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    # none of them is named as without effect
    assert "descheduler." not in release.notes
    assert not [o for o in releases["default"].objects if o["kind"] == "PodMonitor"]
    plain = releases["default"].find("Deployment", "koord-descheduler")["spec"]["template"]
    assert "hostNetwork" not in plain["spec"]
