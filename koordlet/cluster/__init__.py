"""koordlet inside a Kubernetes cluster: which mode it runs in and the API client it uses.

Cluster mode is chosen when no ``--node-slo-file`` is given and either ``--kubeconfig`` names
a file or the in-cluster service account is present (``KUBERNETES_SERVICE_HOST`` and the
token file). In cluster mode the daemon builds one ``koordkube.client.KubeApi`` and uses it
for the NodeSLO and Node watch (``koordlet.cluster.nodeconfig``), the NodeMetric status
reporter (``koordlet.cluster.reporter``) and evictions through the Eviction API
(``koordlet.eviction.backends``). Otherwise koordlet is standalone: the NodeSLO file, the
NodeMetric JSON file and CRI container stops, or with ``--only-evict-by-api`` evictions through
the Eviction API on a client of their own from the in-cluster service account.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from koordapi.errors import ModelError

if TYPE_CHECKING:
    from koordkube.client import KubeApi, RequestObserver
    from koordkube.eviction import EvictionAPI

# Deciding the mode imports no Kubernetes client: standalone koordlet (the pre-installed
# plugin above all, which containerd gives 5 s to register) does not pay for koordkube and
# lightkube, so the well-known path is spelled here too (koordkube.client.SERVICE_ACCOUNT_DIR).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

FIELD_MANAGER = "koordlet"


def in_cluster(
    environ: Mapping[str, str] | None = None,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
) -> bool:
    """True when the pod's service account credentials are available."""
    env = os.environ if environ is None else environ
    return (
        bool(env.get("KUBERNETES_SERVICE_HOST")) and (Path(service_account_dir) / "token").is_file()
    )


def cluster_mode(
    kubeconfig: Path | None,
    node_slo_file: Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
) -> bool:
    """Cluster mode: no NodeSLO file, and a kubeconfig or in-cluster credentials."""
    if node_slo_file is not None:
        return False
    return kubeconfig is not None or in_cluster(environ, service_account_dir)


def build_api(
    kubeconfig: Path | None,
    *,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    observe: RequestObserver | None = None,
) -> KubeApi:
    """The one API client of a cluster-mode koordlet (writes as field manager koordlet);
    ``observe`` is told every request (``KoordletMetrics.observe_apiserver``)."""
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415 - cluster mode only

    try:
        client = build_client(kubeconfig, service_account_dir=service_account_dir)
    except Exception as err:  # lightkube's ConfigError, a missing or unreadable file, ...
        where = kubeconfig or "the in-cluster service account"
        raise ModelError(f"cannot build a Kubernetes client from {where}: {err}") from None
    return KubeApi(client, field_manager=FIELD_MANAGER, observe=observe)


def build_eviction_api(
    kube: KubeApi | None,
    *,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    observe: RequestObserver | None = None,
) -> EvictionAPI:
    """The Eviction API client: on cluster mode's ``kube``, or without one (standalone with
    ``--only-evict-by-api``) on a client of its own from the in-cluster service account.
    ``bind`` it to the daemon's event loop before the first eviction; ``observe`` is for the
    client of its own."""
    from koordkube.eviction import EvictionAPI  # noqa: PLC0415 - only when it is used

    if kube is None:
        if not in_cluster(service_account_dir=service_account_dir):
            raise ModelError(
                "--only-evict-by-api needs in-cluster Kubernetes credentials "
                "(KUBERNETES_SERVICE_HOST and a service account token)"
            )
        kube = build_api(None, service_account_dir=service_account_dir, observe=observe)
    return EvictionAPI(kube)


async def cancel_and_wait(*tasks: asyncio.Task[None]) -> None:
    """Cancel ``tasks`` and wait until they are done, cancelling again while one is not (a
    cancellation that lands as a watch read completes can be swallowed by ``wait_for``)."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)
