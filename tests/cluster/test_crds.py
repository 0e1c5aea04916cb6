"""The chart's CustomResourceDefinitions on the real API server: each accepted as a structural
schema, and the objects the components keep written through the right subresource. (That
every write reads back as it was sent, nothing pruned, is asked of the API server's audit log
at the end of the session: test_audit.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster import NODE_NAME, Cluster
from tests.cluster.product import REPORT_INTERVAL
from tests.unit.charts import helm

CRD_DIR = helm.CHART / "templates" / "crd"
CRDS = sorted(CRD_DIR.glob("*.yaml"))
# The kinds whose status a component writes, through /status (koordlet the NodeMetric's, the
# migration controller the PodMigrationJob's, koord-scheduler's extender and koord-manager the
# Reservation's). Koordinator's Device has no status subresource.
STATUS_WRITTEN = {
    "nodemetrics.slo.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
}


def conditions(crd: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}


@pytest.mark.parametrize("path", CRDS, ids=lambda p: Path(p).stem)
def test_the_api_server_accepts_each_crd_as_a_structural_schema(
    cluster: Cluster, path: Path
) -> None:
    (name,) = re.findall(r"^  name: (\S+)$", path.read_text(), re.MULTILINE)  # a template
    crd = cluster.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    found = conditions(crd)
    assert found.get("Established") == "True", found
    assert found.get("NamesAccepted") == "True", found
    # A non-structural schema is served, but marked, and its objects are not pruned as ours
    # expect; so is a schema that keeps unknown fields at the root.
    assert "NonStructuralSchema" not in found, crd["status"]["conditions"]
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert not schema.get("x-kubernetes-preserve-unknown-fields"), version["name"]
        if name in STATUS_WRITTEN:
            assert version.get("subresources", {}).get("status") == {}, version["name"]


def managers(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(manager, operation, subresource) of each managedFields entry."""
    return {
        (m["manager"], m["operation"], m.get("subresource", ""))
        for m in obj["metadata"].get("managedFields", [])
    }


def test_koordlet_writes_the_nodemetric_status_and_koord_manager_its_spec(
    cluster: Cluster,
) -> None:
    path = f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE_NAME}"
    metric = cluster.wait_for(
        "koordlet's NodeMetric status",
        lambda: (m := cluster.get(path)).get("status", {}).get("nodeMetric") and m,
        timeout=180,
    )
    found = managers(metric)
    assert ("koordlet", "Update", "status") in found, found
    # koord-manager keeps the spec: the collect policy of the chart's slo-controller-config.
    assert metric["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == REPORT_INTERVAL
    assert ("koord-manager", "Update", "") in found, found


def test_koord_manager_writes_the_nodeslo_spec_and_the_node_status_through_status(
    cluster: Cluster,
) -> None:
    slo = cluster.get(f"/apis/slo.koordinator.sh/v1alpha1/nodeslos/{NODE_NAME}")
    assert {m for m, _, sub in managers(slo) if sub == ""} == {"koord-manager"}
    node = cluster.wait_for(
        "batch resources on the Node",
        lambda: (
            "kubernetes.io/batch-cpu"
            in (n := cluster.get(f"/api/v1/nodes/{NODE_NAME}"))["status"].get("allocatable", {})
            and n
        ),
        timeout=180,
    )
    batch = [
        m
        for m in node["metadata"]["managedFields"]
        if m["manager"] == "koord-manager"
        and "f:kubernetes.io/batch-cpu"
        in m.get("fieldsV1", {}).get("f:status", {}).get("f:allocatable", {})
    ]
    assert [m.get("subresource") for m in batch] == ["status"], node["metadata"]["managedFields"]
