"""The kubelet as a second source of pods, as Koordinator's states informer polls it.

NRI tells koordlet about pods as the runtime creates them, but containerd 1.7 does not
synchronize pre-installed plugins: pods that existed before koordlet started stay unknown
until one of their containers changes. In cluster mode koordlet therefore lists the kubelet's
``/pods/`` every ``--kubelet-sync-interval`` (Koordinator's default 10 s) and reconciles:

* a pod the kubelet lists and NRI never reported is added under ``kubelet/<uid>`` with its
  labels, annotations, its cgroup directory (the kubelet's layout for the pod's Kubernetes QoS
  and the node's cgroup driver, below ``--cgroup-kube-dir`` under the cgroupfs driver) and its
  running containers (``containerID`` → cgroup dir, resources from the spec);
* a pod NRI knows gets the running containers NRI has not reported (enriched); NRI stays the
  source of truth for everything it reported;
* every listed pod's spec facts (``spec.priority``, memory requests), which the runtime is not
  told, go to the store by uid (``PodStore.put_specs``): eviction orders victims by priority
  and memory QoS protects LS pods by their real requests;
* a pod that leaves the kubelet's list is removed only when the kubelet alone knew it; a
  ``kubelet/<uid>`` pod that NRI reports later is dropped in favour of NRI's.

Endpoint, as in Koordinator (``newKubeletStubFromConfig``): the Node's address of
``--kubelet-preferred-address-type`` (default InternalIP); with ``--kubelet-insecure-tls`` plain
HTTP on ``--kubelet-read-only-port`` (10255; 0 here means "use the authenticated port"),
otherwise HTTPS on the Node's ``status.daemonEndpoints.kubeletEndpoint.Port`` (10250) with the
credentials the API client has (Koordinator passes its REST config: the service account's
bearer token in a pod; with ``--kubeconfig``, that file's user: its client certificate, token
or token file). Koordinator does not verify the kubelet's serving certificate (often
self-signed); neither do we unless ``--kubelet-ca-file`` names a CA.

The request is blocking I/O and runs in a worker thread; the reconcile is a quick in-memory
pass on the event loop, where NRI changes the same store. A failed request (HTTP error,
timeout, unreadable JSON, an empty list while the kubelet restarts) keeps the last good state
and is logged once per kind of failure.

With ``observe`` each request is reported as Koordinator's ``RecordKubeletRequestDuration``
does, (verb, path, code, seconds): ``get``, ``/pods/``, the HTTP status, and the time until the
body was read; ``error`` is the code when no response came (Koordinator records nothing then).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from koordapi import pod as pod_model
from koordapi.errors import QuantityError
from koordapi.gang.spec import parse_time
from koordapi.qos import KubeQoS
from koordapi.quantity import milli_value, value
from koordkube.client import SERVICE_ACCOUNT_DIR
from koordlet.states.pods import (
    CGROUPFS,
    DEFAULT_KUBE_DIR,
    SYSTEMD,
    KnownPod,
    PodStore,
    kube_qos_dirs,
)
from koordlet.threads import in_thread
from runtimehooks.request import ContainerRequest, ContainerResources, PodRequest, PodSpecFacts

log = logging.getLogger(__name__)

# Koordinator's defaults (pkg/koordlet/statesinformer/impl/config.go).
DEFAULT_SYNC_INTERVAL = 10.0
DEFAULT_SYNC_TIMEOUT = 3.0
DEFAULT_READ_ONLY_PORT = 10255
DEFAULT_ADDRESS_TYPE = "InternalIP"
DEFAULT_KUBELET_PORT = 10250  # when the Node does not report its kubelet endpoint
ADDRESS_TYPES = ("Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS")
KEY_PREFIX = "kubelet/"  # PodStore key of a pod only the kubelet reported

CFS_PERIOD = 100_000
MIN_SHARES, MAX_SHARES, MIN_QUOTA = 2, 262_144, 1000
_SCOPE_PREFIX = {"containerd": "cri-containerd", "docker": "docker", "cri-o": "crio"}

Object = dict[str, Any]
_UNREADABLE = (ValueError, TypeError, AttributeError)  # a pod the API server would refuse


KubeletObserver = Callable[[str, str, str, float], None]
"""Told (verb, path, code, seconds) after each request to the kubelet."""
PODS_PATH = "/pods/"


# The kind of a KubeletError raised while the Node has not come from the API yet: at every
# start in a cluster the first list runs before the Node informer's first answer (seen on a real
# kube-apiserver), so it is a wait, logged at INFO, not a failure.
WAITING_FOR_NODE = "waiting"


class KubeletError(Exception):
    """A failed pod list; ``kind`` groups failures for logging once."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class KubeletEndpoint:
    scheme: str
    host: str
    port: int

    @property
    def pods_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{PODS_PATH}"


def resolve_endpoint(
    node: Mapping[str, Any],
    *,
    preferred_address_type: str = DEFAULT_ADDRESS_TYPE,
    insecure_tls: bool = False,
    read_only_port: int = DEFAULT_READ_ONLY_PORT,
) -> KubeletEndpoint:
    """Where the kubelet of ``node`` serves, as Koordinator picks it (see the module doc); an
    empty ``node`` is one not known yet (KubeletError of kind WAITING_FOR_NODE)."""
    if not node:
        raise KubeletError(WAITING_FOR_NODE, "the Node is not known yet (waiting for the API)")
    status = node.get("status") or {}
    wanted = preferred_address_type
    if wanted not in ADDRESS_TYPES:
        log.warning("unknown kubelet address type %r: using InternalIP", wanted)
        wanted = DEFAULT_ADDRESS_TYPE
    host = next(
        (
            str(a.get("address"))
            for a in status.get("addresses") or []
            if isinstance(a, dict) and a.get("type") == wanted and a.get("address")
        ),
        None,
    )
    if host is None:
        raise KubeletError("address", f"the Node has no {wanted} address")
    if insecure_tls and read_only_port > 0:
        return KubeletEndpoint("http", host, read_only_port)
    endpoint = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}
    port = endpoint.get("Port") or endpoint.get("port") or DEFAULT_KUBELET_PORT
    return KubeletEndpoint("https", host, int(port))


class KubeletClient:
    """GET ``/pods/`` from the kubelet (blocking; call it from a worker thread)."""

    def __init__(
        self,
        endpoint: Callable[[], KubeletEndpoint],
        *,
        timeout: float = DEFAULT_SYNC_TIMEOUT,
        token_file: Path | None = Path(SERVICE_ACCOUNT_DIR) / "token",
        token: str | None = None,
        client_cert: tuple[str, str] | None = None,
        ca_file: Path | None = None,
        observe: KubeletObserver | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.token_file = token_file
        self.token = token
        self.observe = observe
        self.clock = clock
        if ca_file is not None:
            self._tls = ssl.create_default_context(cafile=str(ca_file))
        else:  # Koordinator's choice: the kubelet's serving certificate is not verified
            self._tls = ssl.create_default_context()
            self._tls.check_hostname = False
            self._tls.verify_mode = ssl.CERT_NONE
        if client_cert is not None:
            self._tls.load_cert_chain(*client_cert)

    def _token(self) -> str | None:
        if self.token_file is None:
            return self.token
        try:  # read every time: projected tokens are rotated
            return self.token_file.read_text().strip() or None
        except OSError:
            return None

    @classmethod
    def for_kubeconfig(
        cls, endpoint: Callable[[], KubeletEndpoint], kubeconfig: Path | None, **kwargs: Any
    ) -> KubeletClient:
        """A client with the credentials of ``kubeconfig``'s current user (without one, the
        service account's token file); lightkube's errors for an unusable file, as the API
        client, built from the same file first, has already met them."""
        if kubeconfig is None:
            return cls(endpoint, **kwargs)
        from lightkube.config.client_adapter import user_cert  # noqa: PLC0415 - cluster mode
        from lightkube.config.kubeconfig import KubeConfig  # noqa: PLC0415
        from lightkube.config.models import User  # noqa: PLC0415

        config = KubeConfig.from_file(kubeconfig).get()
        if config is None:  # no context: the API client has failed on it already
            return cls(endpoint, **kwargs)
        user = config.user or User()
        if user.exec or (user.username and user.password):
            log.warning(
                "kubelet: %s's user authenticates by exec or password, which only the API "
                "client does; the kubelet is asked without them", kubeconfig
            )  # fmt: skip
        cert = user_cert(user, config.abs_file)  # inline data: temporary files while cert lives
        return cls(
            endpoint,
            token_file=Path(config.abs_file(user.token_file)) if user.token_file else None,
            token=user.token,
            client_cert=None if cert is None else (str(cert[0]), str(cert[1])),
            **kwargs,
        )

    def get_pods(self) -> list[Object]:
        """The kubelet's pods; KubeletError on any failure, or an empty list."""
        endpoint = self.endpoint()
        url = endpoint.pods_url
        request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 - the kubelet's URL
        context = None
        if endpoint.scheme == "https":
            context = self._tls
            token = self._token()
            if token:
                request.add_header("Authorization", f"Bearer {token}")
        start, code = self.clock(), "error"  # no response (yet)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=context) as reply:  # noqa: S310
                code = str(reply.status)
                raw = reply.read()
        except urllib.error.HTTPError as err:
            err.close()  # its unread body holds the connection's socket open
            code = str(err.code)
            raise KubeletError(f"http {err.code}", f"GET {url}: HTTP {err.code}") from None
        except TimeoutError as err:
            raise KubeletError("timeout", f"GET {url}: timed out ({err})") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, TimeoutError):
                raise KubeletError("timeout", f"GET {url}: timed out") from None
            raise KubeletError("unreachable", f"GET {url}: {reason}") from None
        finally:
            if self.observe is not None:
                self.observe("get", PODS_PATH, code, self.clock() - start)
        try:
            body = json.loads(raw)
        except ValueError as err:
            raise KubeletError("json", f"GET {url}: not JSON ({err})") from None
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise KubeletError("json", f"GET {url}: not a PodList")
        if not items:  # the kubelet lists nothing for a moment after it restarts
            raise KubeletError("empty", f"GET {url}: no pods listed")
        return [p for p in items if isinstance(p, dict)]


# ----- the kubelet's pods as PodStore entries


def _milli(quantity: Any) -> int | None:
    try:
        return milli_value(quantity)
    except QuantityError:
        return None


def _bytes(quantity: Any) -> int | None:
    try:
        return value(quantity)
    except QuantityError:
        return None


def pod_cgroup_dir(
    uid: str, qos: KubeQoS, *, systemd: bool, kube_dir: str = DEFAULT_KUBE_DIR
) -> str:
    """The kubelet's pod cgroup, relative to a hierarchy root; under the cgroupfs driver below
    ``kube_dir`` (koordlet's --cgroup-kube-dir)."""
    qos_dir = kube_qos_dirs(SYSTEMD if systemd else CGROUPFS, kube_dir)[qos]
    if not systemd:
        return f"{qos_dir}/pod{uid}"
    escaped = uid.replace("-", "_")
    level = "" if qos is KubeQoS.GUARANTEED else f"-{qos.value.lower()}"
    return f"{qos_dir}/kubepods{level}-pod{escaped}.slice"


def container_cgroup_dir(pod_dir: str, container_id: str, *, systemd: bool) -> tuple[str, str]:
    """(bare id, cgroup dir) of a ``runtime://id`` container ID."""
    runtime, sep, bare = container_id.partition("://")
    if not sep:
        runtime, bare = "containerd", container_id
    if not systemd:
        return bare, f"{pod_dir}/{bare}"
    prefix = _SCOPE_PREFIX.get(runtime, runtime)
    return bare, f"{pod_dir}/{prefix}-{bare}.scope"


def spec_resources(container: Mapping[str, Any]) -> ContainerResources:
    """What the kubelet asks the runtime for: shares from the CPU request, quota from the CPU
    limit, the memory limit (Koordinator's MilliCPUToShares/MilliCPUToQuota)."""
    res = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    cpu_limit = _milli(limits["cpu"]) if "cpu" in limits else None
    cpu_request = _milli(requests["cpu"]) if "cpu" in requests else cpu_limit
    shares = MIN_SHARES
    if cpu_request is not None and cpu_request > 0:
        shares = max(MIN_SHARES, min(MAX_SHARES, cpu_request * 1024 // 1000))
    quota = None
    if cpu_limit is not None and cpu_limit > 0:
        quota = max(MIN_QUOTA, cpu_limit * CFS_PERIOD // 1000)
    return ContainerResources(
        cpu_shares=shares,
        cpu_quota=quota if quota is not None else -1,
        cpu_period=CFS_PERIOD,
        memory_limit=_bytes(limits["memory"]) if "memory" in limits else None,
    )


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def kubelet_containers(
    pod: Mapping[str, Any], owner: PodRequest, *, systemd: bool
) -> dict[str, ContainerRequest]:
    """The pod's running containers (by bare id) under ``owner``'s cgroup dir."""
    specs = {
        c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name")
    }
    found: dict[str, ContainerRequest] = {}
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        cid, name = status.get("containerID"), status.get("name")
        if not cid or not name or "running" not in (status.get("state") or {}):
            continue
        bare, cgroup = container_cgroup_dir(owner.cgroup_dir, str(cid), systemd=systemd)
        found[bare] = ContainerRequest(
            pod=owner,
            name=str(name),
            id=bare,
            cgroup_dir=cgroup,
            resources=spec_resources(specs.get(name) or {}),
        )
    return found


def spec_facts(pod: Mapping[str, Any]) -> PodSpecFacts:
    """spec.priority and memory requests by Kubernetes' rule (koordapi.pod: a request the API
    server would have defaulted from the limit is the limit; the pod's with init containers
    and pod-level resources); a request that does not parse counts 0."""
    spec = pod.get("spec") or {}
    containers: dict[str, int] = {}
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        if not isinstance(c, dict) or not c.get("name"):
            continue
        try:
            containers[str(c["name"])] = pod_model.container_request(c, "memory")
        except _UNREADABLE:
            containers[str(c["name"])] = 0
    try:
        cpu, memory = pod_model.pod_requests(spec)
    except _UNREADABLE:
        cpu = memory = 0
    meta = pod.get("metadata") or {}
    return PodSpecFacts(
        priority=pod_model.spec_priority(pod),
        memory_request=memory,
        container_memory_requests=containers,
        cpu_request=cpu,
        created=parse_time(meta.get("creationTimestamp")),
        terminating=bool(meta.get("deletionTimestamp")) or not _running(pod),
    )


def kubelet_pod(
    pod: Mapping[str, Any], *, systemd: bool, kube_dir: str = DEFAULT_KUBE_DIR
) -> KnownPod | None:
    """The pod as a PodStore entry; None without a uid, or when its resources do not parse
    and it has no ``status.qosClass`` (its cgroup directory is then unknown). ``kube_dir``:
    see ``pod_cgroup_dir``."""
    meta = pod.get("metadata") or {}
    uid = meta.get("uid")
    if not uid:
        return None
    try:
        kube_qos = pod_model.kube_qos(pod)
    except _UNREADABLE as err:
        log.debug("kubelet pod %s: no QoS class (%s)", uid, err)
        return None
    request = PodRequest(
        uid=str(uid),
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        cgroup_dir=pod_cgroup_dir(str(uid), kube_qos, systemd=systemd, kube_dir=kube_dir),
        runtime_handler=str((pod.get("spec") or {}).get("runtimeClassName") or ""),
        spec=spec_facts(pod),
    )
    return KnownPod(request, kubelet_containers(pod, request, systemd=systemd))


@dataclass
class SyncResult:
    added: int = 0
    enriched: int = 0
    removed: int = 0


class KubeletPodSync:
    """Reconciles the PodStore with the kubelet's pod list (see the module docstring)."""

    def __init__(
        self,
        pods: PodStore,
        fetch: Callable[[], list[Object]],
        *,
        interval: float = DEFAULT_SYNC_INTERVAL,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.pods = pods
        self.fetch = fetch
        self.interval = interval
        self.on_change = on_change
        self.last_pods: list[Object] | None = None  # the last good list
        self.last_error: str | None = None  # the kind last logged
        self.syncs = 0
        self.failures = 0
        self.totals = SyncResult()
        # What this source put in the store, to tell it from what NRI reported since.
        self._added_containers: dict[tuple[str, str], ContainerRequest] = {}

    async def run(self) -> None:
        while True:
            await self.sync_once()
            await asyncio.sleep(self.interval)

    async def sync_once(self) -> SyncResult | None:
        """One list (worker thread) and reconcile (here); None when the list failed."""
        try:
            listed = await in_thread(self.fetch)
        except KubeletError as err:
            self._failed(err.kind, str(err))
            return None
        except Exception as err:  # never let one bad reply end the loop
            self._failed(type(err).__name__, f"kubelet pod list: {err}")
            return None
        if self.last_error is not None:
            log.info("kubelet pod list works again (%d pods)", len(listed))
        self.last_error = None
        self.last_pods = listed
        result = self.reconcile(listed)
        self.syncs += 1
        return result

    def _failed(self, kind: str, message: str) -> None:
        self.failures += 1
        if kind != self.last_error:
            level = logging.INFO if kind == WAITING_FOR_NODE else logging.WARNING
            log.log(level, "%s; keeping the last pod list", message)
        self.last_error = kind

    def reconcile(self, listed: list[Object]) -> SyncResult:
        store, result = self.pods, SyncResult()
        systemd = store.cgroup_driver() == SYSTEMD
        live = {
            str((p.get("metadata") or {}).get("uid")): p
            for p in listed
            if (p.get("metadata") or {}).get("uid") and _running(p)
        }
        respecified = store.put_specs({uid: spec_facts(pod) for uid, pod in live.items()})
        entries = store.entries()
        nri = {k.request.uid: pid for pid, k in entries if not pid.startswith(KEY_PREFIX)}
        ours = {pid: k for pid, k in entries if pid.startswith(KEY_PREFIX)}
        for pid, known in ours.items():
            uid = known.request.uid
            if uid in nri:  # NRI reported it since: its entry wins
                store.remove_pod(pid)
            elif uid not in live:
                store.remove_pod(pid)
                result.removed += 1
        # containers this source added to NRI's pods and the kubelet no longer runs
        for (pid, cid), added in list(self._added_containers.items()):
            owner = store.pod(pid)
            current = None if owner is None else owner.containers.get(cid)
            if owner is None or current is not added:  # gone, or NRI reported it since
                del self._added_containers[(pid, cid)]
                continue
            if owner.request.uid in live:
                pod = live[owner.request.uid]
                if cid in kubelet_containers(pod, owner.request, systemd=systemd):
                    continue
            store.remove_container(pid, cid)
            del self._added_containers[(pid, cid)]
        for uid, pod in live.items():
            if uid in nri:
                if self._enrich(nri[uid], pod, systemd=systemd):
                    result.enriched += 1
                continue
            fresh = kubelet_pod(pod, systemd=systemd, kube_dir=store.kube_dir)
            if fresh is None:
                continue
            key = KEY_PREFIX + uid
            before = store.pod(key)
            if before is None:
                store.put_known(key, fresh)
                result.added += 1
            elif (before.request, before.containers) != (fresh.request, fresh.containers):
                store.put_known(key, fresh)
        self.totals.added += result.added
        self.totals.enriched += result.enriched
        self.totals.removed += result.removed
        changed = result.added or result.enriched or result.removed or respecified
        if changed and self.on_change is not None:
            self.on_change()
        if result.added or result.removed:
            log.info(
                "kubelet pods: %d added, %d enriched, %d removed",
                result.added,
                result.enriched,
                result.removed,
            )
        return result

    def _enrich(self, pod_id: str, pod: Mapping[str, Any], *, systemd: bool) -> bool:
        """Add the running containers NRI has not reported to NRI's pod."""
        known = self.pods.pod(pod_id)
        if known is None:
            return False
        changed = False
        for cid, container in kubelet_containers(pod, known.request, systemd=systemd).items():
            if cid in known.containers:
                continue
            # NRI's pod dir is authoritative: the container sits under it
            leaf = container.cgroup_dir.rsplit("/", 1)[-1]
            placed = replace(container, cgroup_dir=f"{known.request.cgroup_dir}/{leaf}")
            self.pods.put_container_request(pod_id, placed)
            self._added_containers[(pod_id, cid)] = placed
            changed = True
        return changed
