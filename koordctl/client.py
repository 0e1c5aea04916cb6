"""koordctl's I/O: koordlet's JSON API on the node and, for the commands that use it, the API
server (the Node, NodeMetric and NodeSLO through ``koordkube``, imported only when used) and
the read-only /explain of koord-descheduler, koord-manager and koord-scheduler (over plain
HTTP: koordctl never imports them)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

DEFAULT_ADDR = "127.0.0.1:9316"


class KoordletUnreachable(Exception):
    pass


class ComponentError(Exception):
    """A control-plane component could not be reached, or did not answer with a JSON object."""


DeschedulerError = ComponentError  # the name `explain node --descheduler` started with


def fetch(addr: str, path: str) -> Any:
    """GET koordlet's JSON API at ``addr`` (HOST:PORT)."""
    url = f"http://{addr}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace").strip()
        raise KoordletUnreachable(f"{url}: HTTP {err.code}: {detail}") from None
    except (OSError, ValueError) as err:
        raise KoordletUnreachable(
            f"cannot reach koordlet at {addr} ({err}); is it running with --addr {addr}?"
        ) from None


def fetch_descheduler(base: str, path: str) -> dict[str, Any]:
    """GET koord-descheduler's JSON at ``base`` + ``path`` (``fetch_component``)."""
    return fetch_component(base, path, "koord-descheduler")


def fetch_component(base: str, path: str, component: str) -> dict[str, Any]:
    """GET ``component``'s JSON at ``base`` (``http://HOST:PORT``; a bare HOST:PORT is taken as
    http) + ``path``: the answer's object, or ComponentError with one line."""
    if "://" not in base:
        base = f"http://{base}"
    scheme = urllib.parse.urlsplit(base).scheme
    if scheme not in ("http", "https"):
        raise ComponentError(f"{base}: not an http:// or https:// URL")
    url = base.rstrip("/") + path
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - scheme checked
            body = response.read()
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace").strip()
        with contextlib.suppress(ValueError, AttributeError):
            detail = str(json.loads(detail).get("message", detail))
        raise ComponentError(f"{url}: HTTP {err.code}: {detail}") from None
    except (OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise ComponentError(f"cannot reach {component} at {base} ({reason})") from None
    try:
        data = json.loads(body)
    except ValueError:
        raise ComponentError(f"{url}: a bad answer, not JSON: {body[:80]!r}") from None
    if not isinstance(data, dict):
        raise ComponentError(f"{url}: a bad answer, not a JSON object")
    return data


def read_node(name: str, kubeconfig: str | None) -> dict[str, Any]:
    """The Node ``name`` from the API server."""
    from lightkube.resources.core_v1 import Node  # noqa: PLC0415 - only `explain node` needs it

    from koordkube.client import KubeApi, build_client  # noqa: PLC0415

    async def read() -> dict[str, Any]:
        return await KubeApi(build_client(kubeconfig)).get(Node, name)

    return asyncio.run(read())


def read_cluster(node: str, kubeconfig: str | None) -> dict[str, Any]:
    """The Node, its NodeMetric and NodeSLO from the API server (None for one that is absent)."""
    from lightkube.resources.core_v1 import Node  # noqa: PLC0415 - only this command needs it

    from koordkube.client import KubeApi, build_client  # noqa: PLC0415
    from koordkube.errors import NotFound  # noqa: PLC0415
    from koordkube.resources import NodeMetric, NodeSLO  # noqa: PLC0415

    async def read() -> dict[str, Any]:
        api = KubeApi(build_client(kubeconfig))
        found: dict[str, Any] = {}
        for key, res in (("node", Node), ("nodeMetric", NodeMetric), ("nodeSLO", NodeSLO)):
            try:
                found[key] = await api.get(res, node)
            except NotFound:
                found[key] = None
        return found

    return asyncio.run(read())


def has_cluster_credentials(kubeconfig: str | None) -> bool:
    if kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    path = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    return Path(path).is_file()


def read_quotas(kubeconfig: str | None) -> list[dict[str, Any]]:
    """Every ElasticQuota of the cluster (all namespaces), as the API server lists them."""
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415 - only `quota` needs it
    from koordkube.resources import ElasticQuota  # noqa: PLC0415

    async def read() -> list[dict[str, Any]]:
        return (await KubeApi(build_client(kubeconfig)).list(ElasticQuota)).items

    return asyncio.run(read())


def read_pod_scene(namespace: str, name: str, kubeconfig: str | None) -> dict[str, Any]:
    """What `koordctl quota why` looks at for one pod: the pod, every ElasticQuota, the pod's
    PodGroup (None when there is none or the pod is in no gang), the pods of its namespace
    (only when it is in a gang: its fellow members are among them) and the pod's Events. The
    pod missing raises koordkube.errors.NotFound."""
    from lightkube.resources.core_v1 import Event, Pod  # noqa: PLC0415 - only `quota why`

    from koordapi.gang.spec import gang_name  # noqa: PLC0415
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415
    from koordkube.errors import NotFound  # noqa: PLC0415
    from koordkube.resources import ElasticQuota, PodGroup  # noqa: PLC0415

    async def read() -> dict[str, Any]:
        api = KubeApi(build_client(kubeconfig))
        pod = await api.get(Pod, name, namespace=namespace)
        scene: dict[str, Any] = {"pod": pod, "podGroup": None, "pods": []}
        scene["quotas"] = (await api.list(ElasticQuota)).items
        gang = gang_name(pod)
        if gang:
            with contextlib.suppress(NotFound):
                scene["podGroup"] = await api.get(PodGroup, gang, namespace=namespace)
            scene["pods"] = (await api.list(Pod, namespace=namespace)).items
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        fields = f"involvedObject.name={name},involvedObject.namespace={namespace}"
        if uid:
            fields += f",involvedObject.uid={uid}"
        scene["events"] = (await api.list(Event, namespace=namespace, fields=fields)).items
        return scene

    return asyncio.run(read())


def read_reservations(kubeconfig: str | None) -> dict[str, list[dict[str, Any]]]:
    """Every Reservation and every pod of the cluster (the pods say what owners took)."""
    from lightkube.resources.core_v1 import Pod  # noqa: PLC0415 - only `reservation` needs it

    from koordkube.client import KubeApi, build_client  # noqa: PLC0415
    from koordkube.resources import Reservation as ReservationResource  # noqa: PLC0415

    async def read() -> dict[str, list[dict[str, Any]]]:
        api = KubeApi(build_client(kubeconfig))
        return {
            "reservations": (await api.list(ReservationResource)).items,
            "pods": (await api.list(Pod)).items,
        }

    return asyncio.run(read())


def read_reservation_scene(namespace: str, name: str, kubeconfig: str | None) -> dict[str, Any]:
    """What ``koordctl reservation why`` looks at: the pod, every Reservation, Node and pod,
    and the pod's Events (by its uid too: not those of an earlier pod of that name). The pod
    missing raises koordkube.errors.NotFound."""
    from lightkube.resources.core_v1 import Event, Node, Pod  # noqa: PLC0415

    from koordkube.client import KubeApi, build_client  # noqa: PLC0415
    from koordkube.resources import Reservation as ReservationResource  # noqa: PLC0415

    async def read() -> dict[str, Any]:
        api = KubeApi(build_client(kubeconfig))
        pod = await api.get(Pod, name, namespace=namespace)
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        fields = f"involvedObject.name={name},involvedObject.namespace={namespace}"
        if uid:
            fields += f",involvedObject.uid={uid}"
        return {
            "pod": pod,
            "reservations": (await api.list(ReservationResource)).items,
            "nodes": (await api.list(Node)).items,
            "pods": (await api.list(Pod)).items,
            "events": (await api.list(Event, namespace=namespace, fields=fields)).items,
        }

    return asyncio.run(read())
