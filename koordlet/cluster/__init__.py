"""koordlet inside a Kubernetes cluster: which mode it runs in and the API client it uses.

Cluster mode is chosen when no ``--node-slo-file`` is given and either ``--kubeconfig`` names
a file or the in-cluster service account is present (``KUBERNETES_SERVICE_HOST`` and the
token file). In cluster mode the daemon builds one ``manager.kube.client.KubeApi`` and uses it
for the NodeSLO and Node watch (``koordlet.cluster.nodeconfig``), the NodeMetric status
reporter (``koordlet.cluster.reporter``) and evictions through the Eviction API
(``koordlet.cluster.eviction``). Otherwise koordlet is standalone: the NodeSLO file, the
NodeMetric JSON file and CRI container stops.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from koordapi.errors import ModelError
from koordlet.kubeclient import SERVICE_ACCOUNT

if TYPE_CHECKING:
    from manager.kube.client import KubeApi

# Deciding the mode imports no Kubernetes client: standalone koordlet (the pre-installed
# plugin above all, which containerd gives 5 s to register) does not pay for lightkube.
SERVICE_ACCOUNT_DIR = str(SERVICE_ACCOUNT)

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


def build_api(kubeconfig: Path | None) -> KubeApi:
    """The one API client of a cluster-mode koordlet (writes as field manager koordlet)."""
    from manager.kube.client import KubeApi, build_client  # noqa: PLC0415 - cluster mode only

    try:
        client = build_client(kubeconfig)
    except Exception as err:  # lightkube's ConfigError, a missing or unreadable file, ...
        where = kubeconfig or "the in-cluster service account"
        raise ModelError(f"cannot build a Kubernetes client from {where}: {err}") from None
    return KubeApi(client, field_manager=FIELD_MANAGER)


async def cancel_and_wait(*tasks: asyncio.Task[None]) -> None:
    """Cancel ``tasks`` and wait until they are done, cancelling again while one is not (a
    cancellation that lands as a watch read completes can be swallowed by ``wait_for``)."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)
