"""``helm lint --strict`` for the chart, and what it would catch that helm-sdkpy cannot say.

The library's lint (helm.py's ``Lint``) gives each message's severity and path but no text,
and renders nothing back. Strict lint fails on warnings as on errors; that is checked here with
the default values and with Koordinator's (a Koordinator user's values file). What strict lint
and the API server would refuse in the rendered objects is checked on Helm's own render of
every scenario (conftest.py) and of those values: every document an object with apiVersion,
kind and metadata.name; names the API server takes for their kind; valid label and annotation
keys and values; no two objects of one kind, namespace and name; no ``<no value>`` (a missing
value strict lint refuses, which a plain render prints).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from tests.unit.charts import helm
from tests.unit.charts.conftest import KOORDINATOR_VALUES, SCENARIOS, Outcome

# More values than conftest's scenarios: Koordinator's, and a prefix longer than the chart
# keeps (fullnameOverride is cut to 30 characters so that Service names stay DNS labels).
EXTRA: Mapping[str, Mapping[str, Any]] = {
    "koordinator-values": KOORDINATOR_VALUES,
    "long-prefix": {"fullnameOverride": "koordinator-py-for-the-staging-cluster-in-eu-west"},
}

# Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation).
DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = re.compile(rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
SOURCE = re.compile(r"^# Source: (\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def extra() -> dict[str, Outcome]:
    requests: list[helm.Request] = []
    for values in EXTRA.values():
        requests += [helm.Lint(helm.CHART, values), helm.Render(helm.CHART, values)]
    results = helm.run(*requests)
    found = {}
    for i, (name, values) in enumerate(EXTRA.items()):
        lint, release = results[2 * i], results[2 * i + 1]
        assert isinstance(lint, helm.LintResult) and isinstance(release, helm.Release)
        found[name] = Outcome(values, lint, release)
    return found


@pytest.fixture(params=[*SCENARIOS, *EXTRA])
def rendered(
    request: pytest.FixtureRequest, outcomes: dict[str, Outcome], extra: dict[str, Outcome]
) -> helm.Release:
    """Each scenario's and each extra values' release; tests using it run once per each."""
    release = {**outcomes, **extra}[request.param].release
    assert not release.error, f"helm install failed: {release.error}"
    return release


# -- the checks --------------------------------------------------------------------------------


def documents(manifest: str) -> list[tuple[str, Any]]:
    """(the template it came from, the parsed document) for each document of a manifest."""
    found = []
    for text in manifest.split("\n---\n"):
        source = SOURCE.search(text)
        assert source, f"a document without its # Source line: {text[:200]!r}"
        found.append((source.group(1), yaml.safe_load(text)))
    return found


def object_problems(doc: Any) -> list[str]:
    """What an API server would refuse outright: no object, or no apiVersion, kind or name."""
    if not isinstance(doc, Mapping):
        return [f"not an object: {doc!r}"[:120]]
    problems = [f"no {key}" for key in ("apiVersion", "kind") if not doc.get(key)]
    metadata = doc.get("metadata")
    if not isinstance(metadata, Mapping) or not metadata.get("name"):
        problems.append("no metadata.name")
    return problems


def name_problems(kind: str, name: str) -> list[str]:
    """The name against its kind's rule: a Service's is a DNS-1035 label (it becomes a DNS
    name), every other a DNS-1123 subdomain (stricter than the API server asks of RBAC
    objects, which this chart's names meet)."""
    if kind == "Service":
        if len(name) > 63 or not DNS1035_LABEL.fullmatch(name):
            return [f"Service {name!r} is not a DNS-1035 label (a-z0-9 and -, 63 at most)"]
    elif len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
        return [f"{kind} {name!r} is not a DNS-1123 subdomain"]
    return []


def key_problems(key: Any) -> list[str]:
    """A label or annotation key: an optional DNS subdomain prefix and a qualified name."""
    if not isinstance(key, str):
        return [f"key {key!r} is not a string"]
    prefix, _, name = key.rpartition("/")
    problems = []
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        problems.append(f"key {key!r}: prefix is not a DNS subdomain")
    if len(name) > 63 or not QUALIFIED_NAME.fullmatch(name):
        problems.append(f"key {key!r}: name is not a qualified name (63 at most)")
    return problems


def label_problems(labels: Mapping[Any, Any]) -> list[str]:
    problems = []
    for key, value in labels.items():
        problems += key_problems(key)
        if not isinstance(value, str):
            problems.append(f"label {key}: {value!r} is not a string")
        elif len(value) > 63 or not LABEL_VALUE.fullmatch(value):
            problems.append(f"label {key}: {value!r} is not a label value (63 at most)")
    return problems


def annotation_problems(annotations: Mapping[Any, Any]) -> list[str]:
    problems = []
    for key, value in annotations.items():
        problems += key_problems(key)
        if not isinstance(value, str):
            problems.append(f"annotation {key}: {value!r} is not a string")
    return problems


def maps_under(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Iterator[Mapping[Any, Any]]:
    """Every map under one of ``keys`` in ``obj``; of a CRD, only its metadata (its schema has
    fields named labels that are no labels)."""
    root: Any = {"metadata": obj["metadata"]} if obj["kind"] == "CustomResourceDefinition" else obj

    def walk(node: Any) -> Iterator[Mapping[Any, Any]]:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in keys and isinstance(value, Mapping):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    return walk(root)


def label_maps(obj: Mapping[str, Any]) -> Iterator[Mapping[Any, Any]]:
    """Its labels, its pod template's, and its selectors (matchLabels, a Service's selector)."""
    yield from maps_under(obj, ("labels", "matchLabels"))
    if obj["kind"] == "Service":
        yield obj["spec"].get("selector") or {}


def test_the_checks_find_what_the_api_server_refuses() -> None:
    """Each check, on something broken the way a template could break it."""
    assert object_problems({"apiVersion": "v1", "metadata": {}}) == ["no kind", "no metadata.name"]
    assert object_problems("kind: <no value>") == ["not an object: 'kind: <no value>'"]
    assert name_problems("Service", "9-starts-with-a-digit")
    assert name_problems("Service", "s" * 64)
    assert not name_problems("ConfigMap", "9-starts-with-a-digit")
    assert name_problems("ConfigMap", "Upper_case")
    assert label_problems({"app.kubernetes.io/name": "x" * 64})
    assert label_problems({"-bad-key": "v"})
    assert label_problems({"enabled": True})  # YAML made it a bool: the API server refuses it
    assert not label_problems({"example.com/tier": "node", "empty": ""})
    assert annotation_problems({"example.com/x": True})
    service = {
        "kind": "Service",
        "metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}},
        "spec": {"selector": {"e": "f"}},
    }
    assert list(label_maps(service)) == [{"a": "b"}, {"e": "f"}]
    assert list(maps_under(service, ("annotations",))) == [{"c": "d"}]


# -- strict lint -------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["default", "koordinator-values"])
def test_strict_lint_passes(
    outcomes: dict[str, Outcome], extra: dict[str, Outcome], scenario: str
) -> None:
    """--strict: a warning fails the lint as an error does."""
    outcome = {**outcomes, **extra}[scenario]
    assert outcome.lint.charts_linted == 1
    problems = [str(m) for m in outcome.lint.messages if m.severity >= helm.WARNING]
    assert problems == [], f"(no text from the library; helm install said: {outcome.release.error})"
    assert not outcome.release.error


def test_koordinators_values_install_what_koordinators_chart_would(
    extra: dict[str, Outcome],
) -> None:
    release = extra["koordinator-values"].release
    assert {c["metadata"]["name"] for c in release.all("CustomResourceDefinition")} == {
        "nodeslos.slo.koordinator.sh",
        "nodemetrics.slo.koordinator.sh",
        "clustercolocationprofiles.config.koordinator.sh",
        "podmigrationjobs.scheduling.koordinator.sh",
        "devices.scheduling.koordinator.sh",
        "elasticquotas.scheduling.sigs.k8s.io",
        "podgroups.scheduling.sigs.k8s.io",
        "reservations.scheduling.koordinator.sh",
    }
    (container,) = release.find("DaemonSet", "koordlet")["spec"]["template"]["spec"]["containers"]
    # the repository given, behind imageRepositoryHost, as Koordinator's chart renders it
    assert container["image"] == "registry.cn-beijing.aliyuncs.com/koordinator-sh/koordlet:v1.8.0"
    assert "--log-level=debug" in container["args"]  # klog's 4
    assert release.find("Deployment", "koord-manager")["spec"]["replicas"] == 2


# -- what strict lint and the API server would refuse in the render ---------------------------


def test_every_document_is_an_object_with_api_version_kind_and_name(
    rendered: helm.Release,
) -> None:
    docs = documents(rendered.manifest)
    assert len(docs) == len(rendered.objects) > 0
    problems = {f"{source}: {p}" for source, doc in docs for p in object_problems(doc)}
    assert problems == set()


def test_every_template_renders_objects_in_some_scenario(
    outcomes: dict[str, Outcome], extra: dict[str, Outcome]
) -> None:
    """A template that renders nothing with every set of values is dead, or broken by an
    ``if`` that is never true; koordinator-keys.yaml only ever fails or renders nothing."""
    rendered_from = {
        source.removeprefix(f"{helm.CHART.name}/")
        for outcome in [*outcomes.values(), *extra.values()]
        for source, _ in documents(outcome.release.manifest)
    }
    templates = {
        str(path.relative_to(helm.CHART))
        for path in (helm.CHART / "templates").rglob("*.yaml")
        if path.name != "koordinator-keys.yaml"
    }
    assert rendered_from == templates


def test_names_are_valid_for_their_kind(rendered: helm.Release) -> None:
    problems = []
    for obj in rendered.objects:
        problems += name_problems(obj["kind"], obj["metadata"]["name"])
        namespace = obj["metadata"].get("namespace", "")
        if namespace and (len(namespace) > 63 or not re.fullmatch(DNS1123_LABEL, namespace)):
            problems.append(f"namespace {namespace!r}")
    assert problems == []


def test_labels_and_annotations_are_valid(rendered: helm.Release) -> None:
    """Object and pod template labels, selectors (matchLabels, a Service's selector) and
    annotations: keys, and values as the API server takes them."""
    problems = []
    maps = 0
    for obj in rendered.objects:
        where = f"{obj['kind']} {obj['metadata']['name']}"
        for labels in label_maps(obj):
            maps += 1
            problems += [f"{where}: {p}" for p in label_problems(labels)]
        for notes in maps_under(obj, ("annotations",)):
            problems += [f"{where}: {p}" for p in annotation_problems(notes)]
    assert maps > len(rendered.objects)  # every object's own, and the selectors
    assert problems == []


def test_no_two_objects_share_kind_namespace_and_name(rendered: helm.Release) -> None:
    keys = Counter(
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in rendered.objects
    )
    assert [key for key, count in keys.items() if count > 1] == []


def test_nothing_renders_no_value(rendered: helm.Release) -> None:
    """A missing value prints <no value> where strict lint (missingkey=error) fails."""
    assert rendered.manifest and rendered.notes
    assert "<no value>" not in rendered.manifest
    assert "<no value>" not in rendered.notes


def test_a_long_prefix_is_cut_and_names_stay_valid(extra: dict[str, Outcome]) -> None:
    release = extra["long-prefix"].release
    prefix = "koordinator-py-for-the-staging"  # the first 30 characters
    names = [o["metadata"]["name"] for o in release.objects]
    assert f"{prefix}-koordinator-webhook-service" in names
    assert max(len(s["metadata"]["name"]) for s in release.all("Service")) <= 63
