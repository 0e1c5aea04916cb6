"""koord-manager's /readyz: a replica that serves the webhooks is ready only once their server
listens, since the Service sends the API server's webhook calls to ready replicas. On the
cluster tier a replica whose informers had synced while it still waited for its certificate (an
API server restarting) was called, refused the connection, and failurePolicy Fail refused the
write."""

from __future__ import annotations

import asyncio
from pathlib import Path

from manager.app import Manager, ManagerOptions
from tests.unit.manager.test_admission_audit_app import free_port
from tests.unit.manager.test_controllers import seeded, until

SECRET = "koord-manager-webhook-cert"


def test_not_ready_until_the_webhook_server_listens(tmp_path: Path) -> None:
    api = seeded()
    # the first read of the certificate Secret fails: the keeper tries again later
    api.fail("GET", rf"/secrets/{SECRET}$", 503)
    options = ManagerOptions(
        webhook_port=free_port(),
        webhook_cert_dir=tmp_path,
        webhook_cert_secret=SECRET,
        metrics_addr="",
        leader_elect=False,
    )
    manager = Manager(api.kube_api(), options)
    seen: dict[str, bool] = {}

    async def scenario() -> None:
        task = asyncio.create_task(manager.run())
        try:
            await until(lambda: all(i.synced.is_set() for i in manager.state.informers))
            seen["synced, no webhook server"] = manager.synced()
            await until(lambda: manager.webhooks is not None and manager.webhooks.listening, 15)
            seen["webhook server listening"] = manager.synced()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert seen == {"synced, no webhook server": False, "webhook server listening": True}


def test_without_webhooks_the_caches_alone_decide() -> None:
    manager = Manager(seeded().kube_api(), ManagerOptions(webhook_port=None, metrics_addr=""))
    assert not manager.synced()
    for informer in manager.state.informers:
        informer.synced.set()
    assert manager.synced()
