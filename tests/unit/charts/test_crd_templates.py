"""The CRDs as templates of the release: switched by Koordinator's crds keys, updated by
``helm upgrade``, kept by ``helm uninstall`` and by an upgrade that drops them.

Helm installs a chart's crds/ folder once and never upgrades or deletes it; templates it does
both, so each CRD carries ``helm.sh/resource-policy: keep``. These run Helm's own install,
upgrade and uninstall on the fake cluster of helm.py, which deletes what Helm asks it to and
refuses PATCH (an upgrade that would change an object fails, naming it). The controls, a copy
of the chart without the annotation, show that the annotation is what keeps the CRDs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.unit.charts import helm
from tests.unit.charts.conftest import Outcome

CRDS = {
    "nodeslos.slo.koordinator.sh",
    "nodemetrics.slo.koordinator.sh",
    "clustercolocationprofiles.config.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "devices.scheduling.koordinator.sh",
    "elasticquotas.scheduling.sigs.k8s.io",
    "podgroups.scheduling.sigs.k8s.io",
    "reservations.scheduling.koordinator.sh",
}
KEEP = "helm.sh/resource-policy: keep"
# The manager's webhook certificate is new on every upgrade, which the fake cluster cannot
# patch: the upgrades here run without the manager.
NO_MANAGER = {"manager": {"enabled": False}}
NO_CRDS = {**NO_MANAGER, "crds": {"managed": False}}


def chart_copy(tmp: Path, name: str, old: str, new: str) -> Path:
    """A copy of the chart whose CRD templates have ``old`` replaced by ``new``."""
    chart = tmp / name / helm.CHART.name
    shutil.copytree(helm.CHART, chart)
    for template in (chart / "templates" / "crd").iterdir():
        text = template.read_text()
        assert old in text, template
        template.write_text(text.replace(old, new))
    return chart


@pytest.fixture(scope="module")
def releases(
    tmp_path_factory: pytest.TempPathFactory, outcomes: dict[str, Outcome]
) -> dict[str, helm.Release]:
    tmp = tmp_path_factory.mktemp("crd-charts")
    # Without the annotation (an annotation of no meaning in its place).
    unkept = chart_copy(tmp, "unkept", KEEP, 'example.com/kept: "no"')
    # An older chart whose CRDs differ from this one's (an annotation more).
    older = chart_copy(tmp, "older", KEEP, f"example.com/older: x\n    {KEEP}")
    # The CRDs as a crds/ folder leaves them (this chart's 0.1.0): no Helm metadata.
    unowned = tuple(
        {**crd, "metadata": {"name": crd["metadata"]["name"]}}
        for crd in outcomes["default"].release.all("CustomResourceDefinition")
    )
    runs = {
        "uninstalled": helm.Render(helm.CHART, uninstall=True),
        "uninstalled-unkept": helm.Render(unkept, uninstall=True),
        "dropped": helm.Render(helm.CHART, NO_MANAGER, upgrades=(NO_CRDS,)),
        "dropped-unkept": helm.Render(unkept, NO_MANAGER, upgrades=(NO_CRDS,)),
        "upgraded-from-older": helm.Render(
            older, NO_MANAGER, upgrades=(NO_MANAGER,), upgrade_chart=helm.CHART
        ),
        "unmanaged": helm.Render(helm.CHART, {"crds": {"managed": False}}),
        "one-off": helm.Render(helm.CHART, {"crds": {"nodemetrics": False}}),
        "no-quotas": helm.Render(helm.CHART, {"crds": {"elasticquotas": False}}),
        "no-gangs": helm.Render(helm.CHART, {"crds": {"podgroups": False}}),
        "no-reservations": helm.Render(helm.CHART, {"crds": {"reservations": False}}),
        "over-unowned": helm.Render(helm.CHART, existing=unowned),
        "over-unowned-unmanaged": helm.Render(
            helm.CHART, {"crds": {"managed": False}}, existing=unowned
        ),
    }
    results = helm.run(*runs.values())
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(runs, results, strict=True))  # type: ignore[arg-type]


def crd_names(objects: tuple[dict[str, Any], ...]) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}


def test_each_crd_is_a_template_marked_keep(default: helm.Release) -> None:
    crds = default.all("CustomResourceDefinition")
    assert {c["metadata"]["name"] for c in crds} == CRDS
    for crd in crds:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert not (helm.CHART / "crds").exists()  # Helm would install those once, never upgrade


def test_helm_uninstall_keeps_the_crds(releases: dict[str, helm.Release]) -> None:
    release = releases["uninstalled"]
    assert not release.error, release.error
    deleted = {(o["kind"], o["metadata"]["name"]) for o in release.deleted}
    assert ("DaemonSet", "koordlet") in deleted  # the rest of the release is gone
    assert not crd_names(release.deleted)
    assert {o["kind"] for o in release.cluster} == {"CustomResourceDefinition"}
    assert crd_names(release.cluster) == CRDS


def test_without_keep_helm_uninstall_would_delete_them(releases: dict[str, helm.Release]) -> None:
    release = releases["uninstalled-unkept"]
    assert not release.error, release.error
    assert crd_names(release.deleted) == CRDS
    assert not release.cluster


def test_an_upgrade_that_drops_the_crds_leaves_them(releases: dict[str, helm.Release]) -> None:
    """crds.managed turned off on an upgrade: the CRDs leave the release, not the cluster."""
    release = releases["dropped"]
    assert not release.error, release.error
    assert not crd_names(release.objects)
    assert not release.deleted
    assert crd_names(release.cluster) == CRDS
    unkept = releases["dropped-unkept"]
    assert not unkept.error, unkept.error
    assert crd_names(unkept.deleted) == CRDS


def test_helm_upgrade_updates_the_crds(releases: dict[str, helm.Release]) -> None:
    """From an older chart whose CRDs differ, the upgrade patches them (which the fake cluster
    refuses, naming the CRD); a crds/ folder's CRDs Helm would have left as they were."""
    release = releases["upgraded-from-older"]
    assert len(release.revisions) == 1  # the upgrade failed at the patch
    assert "PATCH is not served" in release.error
    assert "CustomResourceDefinition" in release.error
    assert any(f'"{name}"' in release.error for name in CRDS), release.error


def test_koordinators_crds_keys_choose_the_crds(releases: dict[str, helm.Release]) -> None:
    unmanaged = releases["unmanaged"]
    assert not unmanaged.error, unmanaged.error
    assert not crd_names(unmanaged.objects)
    assert unmanaged.find("DaemonSet", "koordlet")  # the rest is there
    assert "helm uninstall keeps them" not in unmanaged.notes
    one_off = releases["one-off"]
    assert not one_off.error, one_off.error
    assert crd_names(one_off.objects) == CRDS - {"nodemetrics.slo.koordinator.sh"}
    assert "helm uninstall keeps them" in one_off.notes


def test_the_quota_gang_and_reservation_crds_each_follow_their_key(
    releases: dict[str, helm.Release],
) -> None:
    """crds.elasticquotas, crds.podgroups and crds.reservations (Koordinator's keys) each leave
    out their CRD alone."""
    for run, name in (
        ("no-quotas", "elasticquotas.scheduling.sigs.k8s.io"),
        ("no-gangs", "podgroups.scheduling.sigs.k8s.io"),
        ("no-reservations", "reservations.scheduling.koordinator.sh"),
    ):
        release = releases[run]
        assert not release.error, release.error
        assert crd_names(release.objects) == CRDS - {name}


def test_crds_that_no_release_owns_stop_the_install(releases: dict[str, helm.Release]) -> None:
    """CRDs that a crds/ folder made (this chart's 0.1.0) carry no Helm metadata: the install
    stops naming the label to set (the chart's README has the commands), or takes
    crds.managed=false."""
    error = releases["over-unowned"].error
    assert "exists and cannot be imported into the current release" in error
    assert 'missing key "app.kubernetes.io/managed-by"' in error
    assert any(f'"{name}"' in error for name in CRDS), error
    assert not releases["over-unowned-unmanaged"].error
