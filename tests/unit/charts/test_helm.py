"""The chart tests' Helm harness (helm.py): lint catches errors, the fake API server behaves."""

from __future__ import annotations

import importlib.util
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.unit.charts import helm


def call(api: helm.FakeAPIServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - the local fake server
        api.url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def test_merge_values_merges_maps_replaces_lists_and_null_deletes() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 2, "c": {"z": 3}}
    merged = helm.merge_values(base, {"a": {"y": [3]}, "b": None, "c": {"w": 4}})
    assert merged == {"a": {"x": 1, "y": [3]}, "c": {"z": 3, "w": 4}}
    assert base["b"] == 2  # untouched


def test_a_missing_helm_sdkpy_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(helm.HelmUnavailable, match=r"scripts/setup\.sh.*helm-sdkpy==0\.1\.32"):
        helm.run(helm.Lint(helm.CHART))


def test_fake_api_server_creates_gets_deletes_and_refuses_duplicates() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    with helm.FakeAPIServer() as api:
        assert call(api, "GET", "/version")[1]["gitVersion"] == "v1.31.0"
        collection = "/api/v1/namespaces/ns/configmaps"
        assert call(api, "POST", collection, config_map)[0] == 201
        code, stored = call(api, "GET", f"{collection}/c")
        assert code == 200 and stored["metadata"]["namespace"] == "ns"
        assert call(api, "POST", collection, config_map)[0] == 409
        assert [o["metadata"]["name"] for o in call(api, "GET", collection)[1]["items"]] == ["c"]
        assert call(api, "GET", f"{collection}/missing")[0] == 404
        assert call(api, "PUT", f"{collection}/c", config_map)[0] == 405
        assert call(api, "PATCH", f"{collection}/c", {"data": {}})[0] == 405
        # A namespaced kind asked for without a namespace is no collection at all.
        assert call(api, "POST", "/api/v1/configmaps", config_map)[0] == 404
        assert call(api, "DELETE", f"{collection}/c", {})[0] == 200
        assert call(api, "GET", f"{collection}/c")[0] == 404
        assert call(api, "DELETE", f"{collection}/c", {})[0] == 404
    assert api.created == [config_map]
    assert api.deleted == [stored]


def test_fake_api_server_serves_a_crds_kind_once_created() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }
    with helm.FakeAPIServer() as api:
        assert call(api, "GET", "/apis/example.com/v1")[0] == 404
        code, stored = call(
            api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
        )
        assert code == 201
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions["Established"] == "True"
        groups = [g["name"] for g in call(api, "GET", "/apis")[1]["groups"]]
        assert "example.com" in groups
        (resource,) = call(api, "GET", "/apis/example.com/v1")[1]["resources"]
        assert (resource["kind"], resource["namespaced"]) == ("Widget", False)


def test_a_broken_template_fails_lint_and_install_with_its_name(tmp_path: Path) -> None:
    chart = tmp_path / "koordinator-py"
    shutil.copytree(helm.CHART, chart)
    (chart / "templates" / "broken.yaml").write_text("kind: {{ .Values.nothing.deeper }}\n")
    lint, release = helm.run(helm.Lint(chart), helm.Render(chart))
    assert isinstance(lint, helm.LintResult) and isinstance(release, helm.Release)
    assert [str(m) for m in lint.errors] == ["[ERROR] templates/"]
    assert "broken.yaml" in release.error
    assert not release.objects and not release.created


def test_lint_sees_the_values_it_is_given(tmp_path: Path) -> None:
    """The library lints with no values: Lint writes them into a copy of the chart."""
    chart = tmp_path / "koordinator-py"
    shutil.copytree(helm.CHART, chart)
    (chart / "values.schema.json").unlink()  # it would refuse the unknown key first
    (chart / "templates" / "strict.yaml").write_text(
        "{{- if .Values.broken }}{{ .Values.nothing.deeper }}{{- end }}\n"
    )
    good, bad, release = helm.run(
        helm.Lint(chart), helm.Lint(chart, {"broken": True}), helm.Render(chart, {"broken": True})
    )
    assert isinstance(good, helm.LintResult) and isinstance(bad, helm.LintResult)
    assert isinstance(release, helm.Release)
    assert not good.errors
    assert bad.errors
    assert "strict.yaml" in release.error and "nil pointer" in release.error


def test_upgrades_run_on_the_same_cluster_and_may_not_change_objects(tmp_path: Path) -> None:
    """Render(upgrades=...) runs `helm upgrade` after the install; ``lookup`` sees what the
    install created, and an upgrade that would change an object fails (no PATCH served)."""
    chart = tmp_path / "tiny"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("color: red\n")
    (chart / "templates" / "config.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tiny\n"
        "data:\n  color: {{ .Values.color }}\n"
    )
    (chart / "templates" / "NOTES.txt").write_text(
        '{{ (lookup "v1" "ConfigMap" .Release.Namespace "tiny").data | default dict'
        ' | dig "color" "nothing" }}'
    )
    same, changed = helm.run(
        helm.Render(chart, upgrades=({"color": "red"},)),
        helm.Render(chart, upgrades=({"color": "blue"},)),
    )
    assert isinstance(same, helm.Release) and isinstance(changed, helm.Release)
    assert not same.error
    assert [r[0]["data"] for r in same.revisions] == [{"color": "red"}, {"color": "red"}]
    assert same.objects == same.revisions[-1]
    assert same.notes == "red"  # the upgrade's: lookup found what the install created
    assert [o["metadata"]["name"] for o in same.created] == ["tiny"]
    assert "PATCH is not served" in changed.error
    assert len(changed.revisions) == 1 and changed.objects == changed.revisions[0]


def test_an_upgrade_to_another_chart_and_an_uninstall(tmp_path: Path) -> None:
    """Render(upgrade_chart=..., uninstall=True): the upgrade runs the other chart; the
    uninstall deletes the release's objects but those Helm is told to keep."""
    charts = []
    for version, extra in (("0.1.0", ""), ("0.2.0", "  color: blue\n")):
        chart = tmp_path / version / "tiny"
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: tiny\nversion: {version}\n")
        (chart / "templates" / "config.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\n---\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n"
            "  annotations:\n    helm.sh/resource-policy: keep\n"
            f"data:\n  shape: round\n{extra}"
        )
        charts.append(chart)
    same, other = helm.run(
        helm.Render(charts[0], upgrades=({},), upgrade_chart=charts[0], uninstall=True),
        helm.Render(charts[0], upgrades=({},), upgrade_chart=charts[1]),
    )
    assert isinstance(same, helm.Release) and isinstance(other, helm.Release)
    assert not same.error
    assert [o["metadata"]["name"] for o in same.deleted] == ["gone"]
    assert [o["metadata"]["name"] for o in same.cluster] == ["kept"]
    assert '"kept"' in other.error and "PATCH is not served" in other.error
    assert not other.deleted and len(other.cluster) == 2
