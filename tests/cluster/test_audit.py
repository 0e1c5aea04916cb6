"""The API server's audit log of the whole session (conftest.py runs this module last): what
the product's components asked the real API server, with the chart's ServiceAccounts and RBAC,
and what it answered (audit.py)."""

from __future__ import annotations

from tests.cluster import audit
from tests.cluster.cluster import Cluster


def test_no_product_component_was_refused_by_the_authorizer(cluster: Cluster) -> None:
    events = audit.read(cluster.audit_log)
    assert any(audit.PRODUCT_GROUP in e["user"].get("groups", []) for e in events)
    refused = audit.refusals(events)
    assert not refused, "\n".join(refused)


def test_every_write_of_the_product_reads_back_as_it_was_sent(cluster: Cluster) -> None:
    events = audit.read(cluster.audit_log)
    writes = [e for e in events if e["verb"] in ("create", "update", "patch")]
    assert writes, "no product write was audited"
    lost = audit.not_stored(writes)
    assert not lost, "\n".join(lost[:40])
