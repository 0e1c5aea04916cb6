"""Helm's own engine for the chart tests: lint and render through helm-sdkpy (test-only).

helm-sdkpy (PyPI) is Helm v4 built as a shared library with a cffi binding. What it offers
and what it does not, and how this module gets what the tests need:

- Its lint needs no cluster, but takes no values (the library lints with an empty map) and
  reports each message's severity and path without the text (Go errors marshal to ``{}``).
  ``Lint`` therefore lints a copy of the chart whose values.yaml holds the test's values
  merged over the chart's, the way Helm merges them (maps by key, null deletes). Like
  ``helm lint``, it lets ``fail`` and ``required`` pass; ``Render`` does not.
- It has no client-only rendering (no ``helm template``, no dry run): the library exports
  install, upgrade, lint, package and friends, and its install options have no dry-run
  switch. ``Render`` runs Helm's real install action against ``FakeAPIServer``, a small
  in-process Kubernetes API (discovery, create, get, delete; CRDs become served types once
  created) with Helm's memory storage driver. The release it returns carries the manifest
  exactly as ``helm install`` renders it, and the server keeps every object Helm created (a
  chart's crds/ folder too; this chart's CRDs are templates). ``Render(upgrades=...)`` then
  runs ``helm upgrade`` with each set of values in turn on the same cluster (with
  ``upgrade_chart``, another chart: a new version of it). The server refuses PATCH, so an
  upgrade that would change an object fails naming it: upgrades show what a re-render leaves
  as it was (and ``lookup`` sees what the install created), or that Helm would update an
  object. ``Render(uninstall=True)`` ends with ``helm uninstall``: what Helm deleted, and
  what the cluster still holds, come back.

Go's runtime sees the environment the process started with (``os.environ`` changes made
later never reach it), so HELM_DRIVER and Helm's home folders must be set when the process
starts; and the library can never be unloaded. Every batch therefore runs in a child Python
process (``python -m tests.unit.charts.helm``, a JSON request on stdin and a JSON answer on
stdout), which also keeps Go's runtime out of pytest's process.

Usage::

    lint, release = run(Lint(CHART, {"koordlet": {"hostNetwork": False}}), Render(CHART))
    assert not lint.errors
    daemonset = release.find("DaemonSet")
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "koordinator-py"
HELM_SDKPY = "helm-sdkpy==0.1.32"
INSTALL_HINT = (
    "helm-sdkpy is not installed: the chart tests lint and render with Helm's own engine "
    "from it. Run scripts/setup.sh, or: .venv/bin/pip install --ignore-requires-python "
    f"{HELM_SDKPY} cffi pycparser"
)
CHILD_TIMEOUT = 300.0

# Helm's lint severities (pkg/chart/v2/lint/support).
INFO, WARNING, ERROR = 1, 2, 3
SEVERITY_NAMES = {0: "UNKNOWN", INFO: "INFO", WARNING: "WARNING", ERROR: "ERROR"}


class HelmUnavailable(RuntimeError):
    """helm-sdkpy is missing from this environment (scripts/setup.sh installs it)."""


class HelmFailed(RuntimeError):
    """The child process running Helm failed; the message carries its error and stderr."""


def available() -> bool:
    return importlib.util.find_spec("helm_sdkpy") is not None


def require() -> None:
    """Raise HelmUnavailable, saying how to install it, when helm-sdkpy is missing."""
    if not available():
        raise HelmUnavailable(INSTALL_HINT)


# -- requests and results ----------------------------------------------------------------------


@dataclass(frozen=True)
class Lint:
    """Lint ``chart`` with ``values`` merged over its values.yaml."""

    chart: Path
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Render:
    """Install ``chart`` with ``values`` into a fresh fake cluster; see ``Release``."""

    chart: Path
    values: Mapping[str, Any] = field(default_factory=dict)
    release: str = "koordinator"
    namespace: str = "koordinator-system"
    kube_version: str = "1.31.0"
    # Values of ``helm upgrade``s run in turn after the install (each merged over values.yaml,
    # not over the install's values); the Release is then the last revision's.
    upgrades: tuple[Mapping[str, Any], ...] = ()
    # Objects the cluster has before the install (what ``lookup`` finds), e.g. PriorityClasses
    # of another release.
    existing: tuple[Mapping[str, Any], ...] = ()
    # The chart the upgrades run (None: ``chart``), e.g. a new version of it.
    upgrade_chart: Path | None = None
    # Run ``helm uninstall`` after the install and the upgrades.
    uninstall: bool = False


@dataclass(frozen=True)
class LintMessage:
    severity: int
    path: str

    def __str__(self) -> str:
        return f"[{SEVERITY_NAMES.get(self.severity, self.severity)}] {self.path}"


@dataclass(frozen=True)
class LintResult:
    messages: tuple[LintMessage, ...]
    charts_linted: int

    @property
    def errors(self) -> list[LintMessage]:
        return [m for m in self.messages if m.severity >= ERROR]

    @property
    def warnings(self) -> list[LintMessage]:
        return [m for m in self.messages if m.severity == WARNING]


@dataclass(frozen=True)
class Release:
    """What ``helm install`` rendered and created.

    ``objects``: the release manifest, document by document, as the templates rendered it;
    ``manifest``: the same as Helm's text, with its ``# Source: CHART/templates/FILE`` line
    before each document. ``created``: what the API server received, in order (a crds/
    folder's CRDs first, then the manifest's objects in Helm's install order, with the
    metadata Helm adds). ``error``: why Helm failed (then all three are empty, unless an
    upgrade or the uninstall failed: then they are the last good revision's). ``revisions``:
    the manifest of each revision, the install's first (with ``Render(upgrades=...)``).
    ``deleted``: what Helm deleted, in order (upgrades drop objects; ``uninstall``);
    ``cluster``: every object the fake cluster holds at the end, those of ``existing`` too.
    """

    objects: tuple[dict[str, Any], ...] = ()
    created: tuple[dict[str, Any], ...] = ()
    notes: str = ""
    error: str = ""
    revisions: tuple[tuple[dict[str, Any], ...], ...] = ()
    manifest: str = ""
    deleted: tuple[dict[str, Any], ...] = ()
    cluster: tuple[dict[str, Any], ...] = ()

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    def find(self, kind: str, name: str | None = None) -> dict[str, Any]:
        """The one object of ``kind`` (and ``name``); AssertionError if not exactly one."""
        found = [o for o in self.all(kind) if name is None or o["metadata"]["name"] == name]
        names = [o["metadata"]["name"] for o in self.all(kind)]
        assert len(found) == 1, f"expected one {kind} {name or ''}, the release has {names}"
        return found[0]

    @property
    def crds(self) -> list[dict[str, Any]]:
        return [o for o in self.created if o.get("kind") == "CustomResourceDefinition"]


Request = Lint | Render
Result = LintResult | Release


def run(*requests: Request) -> list[Result]:
    """Run the requests in one child process, in order; one result each."""
    require()
    payload = [_encode(r) for r in requests]
    with tempfile.TemporaryDirectory(prefix="helm-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))}
        env |= {
            "HELM_DRIVER": "memory",
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
            "KUBECONFIG": f"{home}/no-kubeconfig",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        }
        done = subprocess.run(
            [sys.executable, "-m", "tests.unit.charts.helm"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            cwd=home,
            timeout=CHILD_TIMEOUT,
            check=False,
        )
    if done.returncode != 0:
        raise HelmFailed(f"the Helm child process exited {done.returncode}:\n{done.stderr}")
    answers = json.loads(done.stdout)
    return [_decode(a) for a in answers]


def lint(chart: Path, values: Mapping[str, Any] | None = None) -> LintResult:
    (result,) = run(Lint(chart, values or {}))
    assert isinstance(result, LintResult)
    return result


def render(chart: Path, values: Mapping[str, Any] | None = None) -> Release:
    (result,) = run(Render(chart, values or {}))
    assert isinstance(result, Release)
    return result


def merge_values(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base`` as Helm merges values: maps by key, null deletes the key."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _encode(request: Request) -> dict[str, Any]:
    if isinstance(request, Lint):
        return {"action": "lint", "chart": str(request.chart), "values": dict(request.values)}
    return {
        "action": "render",
        "chart": str(request.chart),
        "values": dict(request.values),
        "release": request.release,
        "namespace": request.namespace,
        "kube_version": request.kube_version,
        "upgrades": [dict(v) for v in request.upgrades],
        "existing": [dict(o) for o in request.existing],
        "upgrade_chart": str(request.upgrade_chart or request.chart),
        "uninstall": request.uninstall,
    }


def _decode(answer: Mapping[str, Any]) -> Result:
    if answer["action"] == "lint":
        messages = tuple(LintMessage(m["severity"], m["path"]) for m in answer["messages"])
        return LintResult(messages, answer["charts_linted"])
    return Release(
        objects=tuple(answer["objects"]),
        created=tuple(answer["created"]),
        notes=answer["notes"],
        error=answer["error"],
        revisions=tuple(tuple(r) for r in answer["revisions"]),
        manifest=answer["manifest"],
        deleted=tuple(answer["deleted"]),
        cluster=tuple(answer["cluster"]),
    )


# -- the fake API server -----------------------------------------------------------------------


@dataclass(frozen=True)
class APIResource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# The built-in types a chart of this project may create; CRDs add theirs when created.
BUILTIN = tuple(
    APIResource(*spec)
    for spec in [
        ("", "v1", "configmaps", "ConfigMap", True),
        ("", "v1", "secrets", "Secret", True),
        ("", "v1", "services", "Service", True),
        ("", "v1", "serviceaccounts", "ServiceAccount", True),
        ("", "v1", "pods", "Pod", True),
        ("", "v1", "events", "Event", True),
        ("", "v1", "namespaces", "Namespace", False),
        ("", "v1", "nodes", "Node", False),
        ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
        ("apps", "v1", "daemonsets", "DaemonSet", True),
        ("apps", "v1", "deployments", "Deployment", True),
        ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
        ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        ("coordination.k8s.io", "v1", "leases", "Lease", True),
        (
            "admissionregistration.k8s.io",
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            False,
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            False,
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
        ),
        # The Prometheus Operator's, as a cluster with it installed serves them.
        ("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True),
        ("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", True),
        ("monitoring.coreos.com", "v1", "prometheusrules", "PrometheusRule", True),
    ]
)
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


class FakeAPIServer:
    """Just enough of a Kubernetes API server for ``helm install``: discovery, create, get,
    and delete (``helm uninstall``, and what an upgrade drops).

    Objects are kept by path; creating an existing one is a 409, deleting a missing one a 404,
    updating one (PUT, PATCH) a 405, so a Helm that tried would fail loudly. A created CRD is
    Established at once and its versions join discovery (and stay served once it is deleted:
    nothing here needs them gone).
    """

    def __init__(self, kube_version: str = "1.31.0") -> None:
        self.kube_version = kube_version
        self.resources: list[APIResource] = list(BUILTIN)
        self.objects: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.deleted: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig(self, namespace: str) -> str:
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [
                    {
                        "name": "fake",
                        "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                    }
                ],
                "current-context": "fake",
            }
        )

    def __enter__(self) -> FakeAPIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # -- the API ---------------------------------------------------------------------------

    def get(self, path: str) -> tuple[int, Any]:
        major, minor, *_ = self.kube_version.split(".")
        if path == "/version":
            return 200, {
                "major": major,
                "minor": minor,
                "gitVersion": f"v{self.kube_version}",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"]}
        if path == "/apis":
            return 200, self._group_list()
        if path == "/api/v1" or (path.startswith("/apis/") and path.count("/") == 3):
            group_version = path.removeprefix("/api/").removeprefix("/apis/")
            listed = self._resource_list(group_version)
            return (200, listed) if listed["resources"] else _status(404, "NotFound", path)
        with self._lock:
            if path in self.objects:
                return 200, self.objects[path]
            target = self._resolve(path)
            if target is not None and target[1] is None:
                resource, _, prefix = target
                items = [o for p, o in self.objects.items() if p.startswith(prefix + "/")]
                return 200, {
                    "kind": f"{resource.kind}List",
                    "apiVersion": resource.group_version,
                    "metadata": {"resourceVersion": "1"},
                    "items": items,
                }
        return _status(404, "NotFound", f"{path} not found")

    def create(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            target = self._resolve(path)
            if target is None or target[1] is not None:
                return _status(404, "NotFound", f"no collection at {path}")
            resource, _, prefix = target
            name = body.get("metadata", {}).get("name", "")
            key = f"{prefix}/{name}"
            if key in self.objects:
                return _status(409, "AlreadyExists", f"{resource.plural} {name!r} already exists")
            stored = copy.deepcopy(body)
            meta = stored.setdefault("metadata", {})
            meta.update(
                uid=f"uid-{len(self.objects)}",
                resourceVersion=str(len(self.objects) + 1),
                creationTimestamp="2026-01-01T00:00:00Z",
                generation=1,
            )
            if resource.namespaced:
                meta.setdefault("namespace", path.split("/")[-2])
            if resource.kind == "CustomResourceDefinition":
                self._serve_crd(stored)
            self.objects[key] = stored
            self.created.append(copy.deepcopy(body))
            return 201, stored

    def delete(self, path: str) -> tuple[int, Any]:
        with self._lock:
            if path not in self.objects:
                return _status(404, "NotFound", f"{path} not found")
            gone = self.objects.pop(path)
            self.deleted.append(copy.deepcopy(gone))
            return 200, gone

    def seed(self, obj: Mapping[str, Any]) -> None:
        """Store ``obj`` as if created before the install (not counted in ``created``)."""
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        (resource,) = [
            r
            for r in self.resources
            if (r.group, r.version, r.kind) == (group, version, obj["kind"])
        ]
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        if resource.namespaced:
            base += f"/namespaces/{obj['metadata']['namespace']}"
        with self._lock:
            self.objects[f"{base}/{resource.plural}/{obj['metadata']['name']}"] = copy.deepcopy(
                dict(obj)
            )

    def _serve_crd(self, crd: dict[str, Any]) -> None:
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            if version.get("served"):
                self.resources.append(
                    APIResource(
                        spec["group"],
                        version["name"],
                        names["plural"],
                        names["kind"],
                        spec.get("scope") == "Namespaced",
                    )
                )
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
            ],
        }

    def _resolve(self, path: str) -> tuple[APIResource, str | None, str] | None:
        """(resource, object name or None for the collection, collection path) of a path."""
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        base = "/" + "/".join(parts[: len(parts) - len(rest)])
        if len(rest) >= 3 and rest[0] == "namespaces":
            base += f"/namespaces/{rest[1]}"
            rest = rest[2:]
            namespaced = True
        else:
            namespaced = False
        for resource in self.resources:
            if (resource.group, resource.version, resource.plural) == (group, version, rest[0]):
                if resource.namespaced != namespaced:
                    return None
                prefix = f"{base}/{rest[0]}"
                if len(rest) == 1:
                    return resource, None, prefix
                if len(rest) == 2:
                    return resource, rest[1], prefix
        return None

    def _group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for resource in self.resources:
            if resource.group and resource.version not in groups.setdefault(resource.group, []):
                groups[resource.group].append(resource.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": group,
                    "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                    "preferredVersion": {
                        "groupVersion": f"{group}/{versions[0]}",
                        "version": versions[0],
                    },
                }
                for group, versions in groups.items()
            ],
        }

    def _resource_list(self, group_version: str) -> dict[str, Any]:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": VERBS,
                }
                for r in self.resources
                if r.group_version == group_version
            ],
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, answer: tuple[int, Any]) -> None:
                code, body = answer
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self) -> None:
                self._reply(api.get(urlsplit(self.path).path))

            def do_POST(self) -> None:
                raw = self._body()
                try:
                    body = json.loads(raw)
                except ValueError:
                    kind = self.headers.get("Content-Type")
                    self._reply(_status(415, "UnsupportedMediaType", f"not JSON: {kind}"))
                    return
                self._reply(api.create(urlsplit(self.path).path, body))

            def do_DELETE(self) -> None:
                self._body()  # DeleteOptions: the propagation policy does not matter here
                self._reply(api.delete(urlsplit(self.path).path))

            def _refuse(self) -> None:
                self._body()
                self._reply(_status(405, "MethodNotAllowed", f"{self.command} is not served"))

            do_PUT = do_PATCH = _refuse

        return Handler


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }


# -- the child process -------------------------------------------------------------------------


def _child_lint(helm: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    chart = Path(request["chart"])
    with tempfile.TemporaryDirectory(prefix="lint-") as tmp:
        copy_ = Path(tmp) / chart.name
        shutil.copytree(chart, copy_)
        values_file = copy_ / "values.yaml"
        base = yaml.safe_load(values_file.read_text()) or {}
        values_file.write_text(yaml.safe_dump(merge_values(base, request["values"])))
        config = helm.Configuration(namespace="default")
        result = asyncio.run(helm.Lint(config).run(str(copy_)))
    return {
        "action": "lint",
        "charts_linted": result.get("TotalChartsLinted", 0),
        "messages": [
            {"severity": m["Severity"], "path": m["Path"]} for m in result.get("Messages") or []
        ],
    }


def _child_render(helm: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "action": "render",
        "objects": [],
        "created": [],
        "notes": "",
        "error": "",
        "revisions": [],
        "manifest": "",
        "deleted": [],
        "cluster": [],
    }
    with FakeAPIServer(request["kube_version"]) as api:
        for obj in request.get("existing", []):
            api.seed(obj)
        config = helm.Configuration(
            namespace=request["namespace"], kubeconfig=api.kubeconfig(request["namespace"])
        )
        name = request["release"]
        upgrade_chart = request.get("upgrade_chart", request["chart"])
        actions = [(helm.Install(config), request["chart"], request["values"])]
        actions += [
            (helm.Upgrade(config), upgrade_chart, values) for values in request.get("upgrades", [])
        ]
        for action, chart, values in actions:
            try:
                release = asyncio.run(
                    action.run(name, chart, values=values, wait=False, timeout=60)
                )
            except helm.HelmError as err:
                answer["error"] = str(err)
                break
            objects = [d for d in yaml.safe_load_all(release.get("manifest", "")) if d]
            answer["revisions"].append(objects)
            answer["objects"] = objects
            answer["manifest"] = release.get("manifest", "")
            answer["notes"] = release.get("info", {}).get("notes", "")
        if request.get("uninstall") and not answer["error"]:
            try:
                asyncio.run(helm.Uninstall(config).run(name, wait=False, timeout=60))
            except helm.HelmError as err:
                answer["error"] = str(err)
        answer["created"] = list(api.created) if answer["revisions"] else []
        answer["deleted"] = list(api.deleted)
        answer["cluster"] = list(api.objects.values())
    return answer


def _child(requests: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    import helm_sdkpy  # noqa: PLC0415 - loads Go; only ever in the child process

    for request in requests:
        if request["action"] == "lint":
            yield _child_lint(helm_sdkpy, request)
        else:
            yield _child_render(helm_sdkpy, request)


if __name__ == "__main__":
    json.dump(list(_child(json.load(sys.stdin))), sys.stdout)
