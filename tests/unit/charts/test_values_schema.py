"""values.schema.json: unknown keys are refused, Koordinator's chart keys taken.

The schema comes from values.yaml (scripts/chart_schema.py); Helm checks the values against it
at install. Koordinator's own keys are declared there; each is honoured by the templates or
named in NOTES (templates/_unsupported.tpl): test_koordinator_values.py goes through them all.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from tests.unit.charts import helm

spec = importlib.util.spec_from_file_location(
    "chart_schema", helm.ROOT / "scripts" / "chart_schema.py"
)
assert spec is not None and spec.loader is not None
chart_schema = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chart_schema)

# Koordinator v1.8.0's values for the keys this chart maps (written out here).
KOORDINATOR_STYLE = {
    # Its CRD switches: the chart's own CRDs follow theirs, those of CRDs the chart does not
    # have change nothing.
    "crds": {
        "managed": True,
        "nodemetrics": False,
        "devices": True,
        "reservations": False,
        "recommendations": False,
    },
    "imagePullSecrets": {},  # Koordinator's default: an empty map, not a list
    "imageRepositoryHost": "registry.example.com",
    "featureGates": "PodMutatingWebhook=true",
    "koordlet": {
        "features": "BECPUEvict=true,CPUBurst=false",
        "log": {"level": "4"},
        "runtimeClassName": "runc",
    },
    "manager": {"log": {"level": "2"}, "resyncPeriod": "0", "healthProbe": {"port": 8000}},
    "scheduler": {"log": {"level": "5"}},
    "descheduler": {"log": {"level": "4"}, "replicas": 2, "port": 10251, "featureGates": ""},
}
# Koordinator's keys that have no effect here, each named in NOTES with why.
IGNORED = {
    "installation": {"namespace": "koord-colocation"},
    "deviceDaemon": {"log": {"level": "2"}},
}


@pytest.fixture(scope="module")
def releases() -> dict[str, helm.Release]:
    names = ["typo", "koordinator-style", "ignored"]
    results = helm.run(
        helm.Render(helm.CHART, {"koordlet": {"hostNetwrok": False}}),
        helm.Render(helm.CHART, KOORDINATOR_STYLE),
        helm.Render(helm.CHART, IGNORED),
    )
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(names, results, strict=True))  # type: ignore[arg-type]


def test_the_schema_is_what_values_yaml_gives() -> None:
    assert chart_schema.SCHEMA.read_text() == chart_schema.render()


def test_every_object_of_the_schema_refuses_unknown_keys_but_free_form_ones() -> None:
    def walk(node: dict[str, Any], path: str) -> None:
        if "properties" in node:
            assert node["additionalProperties"] is False, path
            for key, child in node["properties"].items():
                walk(child, f"{path}.{key}")

    walk(chart_schema.build(), "")


def test_a_misspelt_value_fails_the_install(releases: dict[str, helm.Release]) -> None:
    error = releases["typo"].error
    assert "hostNetwrok" in error and "not allowed" in error


def test_koordinators_values_are_mapped(releases: dict[str, helm.Release]) -> None:
    release = releases["koordinator-style"]
    assert not release.error
    koordlet = release.find("DaemonSet")["spec"]["template"]["spec"]
    (container,) = koordlet["containers"]
    # imageRepositoryHost goes in front of a repository given, never of the chart's own image
    assert container["image"] == "koordinator-py/koordlet:0.1.0"
    assert "--feature-gates=BECPUEvict=true,CPUBurst=false" in container["args"]
    assert container["args"][-1] == "--log-level=debug"  # after the flags: it wins
    assert koordlet["runtimeClassName"] == "runc"
    assert "imagePullSecrets" not in koordlet
    deployments = {d["metadata"]["name"]: d for d in release.all("Deployment")}
    manager = deployments["koord-manager"]["spec"]["template"]["spec"]
    (m,) = manager["containers"]
    assert m["image"] == "koordinator-py/koordlet:0.1.0"
    for arg in (
        "--log-level=info",
        "--feature-gates=PodMutatingWebhook=true",
        "--sync-period=0",
        "--health-probe-addr=:8000",
    ):
        assert arg in m["args"]
    scheduler = deployments["koord-scheduler"]["spec"]["template"]["spec"]
    assert "--log-level=debug" in scheduler["containers"][0]["args"]
    descheduler = deployments["koord-descheduler"]["spec"]
    assert descheduler["replicas"] == 2
    assert "--log-level=debug" in descheduler["template"]["spec"]["containers"][0]["args"]
    crds = {c["metadata"]["name"] for c in release.all("CustomResourceDefinition")}
    assert crds == {
        "nodeslos.slo.koordinator.sh",
        "clustercolocationprofiles.config.koordinator.sh",
        "podmigrationjobs.scheduling.koordinator.sh",
        "devices.scheduling.koordinator.sh",
        "elasticquotas.scheduling.sigs.k8s.io",
        "podgroups.scheduling.sigs.k8s.io",
    }


def test_koordinators_keys_without_effect_are_named_in_notes(
    releases: dict[str, helm.Release],
) -> None:
    release = releases["ignored"]
    assert not release.error
    notes = release.notes
    assert "Values of Koordinator's chart that have no effect here:" in notes
    assert "- installation.namespace: everything is installed in the release namespace" in notes
    assert "koordinator-system, not in koord-colocation" in notes
    assert "- deviceDaemon: this chart has no koord-device-daemon" in notes
