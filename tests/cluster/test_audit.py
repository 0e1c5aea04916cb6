"""The API server's audit log of the whole session (conftest.py runs this module last): what
the product's components asked the real API server, with the chart's ServiceAccounts and RBAC,
and what it answered (audit.py)."""

from __future__ import annotations

from tests.cluster import audit
from tests.cluster.cluster import Cluster
from tests.cluster.conftest import LOG_KEEP_DIR, keep_logs
from tests.cluster.helm import NAMESPACE
from tests.e2e.harness import paths


def test_no_product_component_was_refused_by_the_authorizer(cluster: Cluster) -> None:
    events = audit.product(audit.read(cluster.audit_log))
    assert events
    refused = audit.refusals(events)
    assert not refused, "\n".join([*refused, f"expected: {audit.EXPECTED}"])


def test_every_write_of_the_product_reads_back_as_it_was_sent(cluster: Cluster) -> None:
    events = audit.product(audit.read(cluster.audit_log))
    writes = [e for e in events if e["verb"] in ("create", "update", "patch")]
    assert writes, "no product write was audited"
    lost = audit.not_stored(writes)
    assert not lost, "\n".join(lost[:40])


def test_no_product_log_reports_a_refusal(cluster: Cluster) -> None:
    """What the audit log cannot see: a component refused by the kubelet's own authorizer
    (koordlet's pod list) or a refusal it only logged. Logs of pods an earlier test removed are
    the ones kept before the removal (conftest.keep_logs)."""
    keep_logs(cluster)
    logs = sorted((LOG_KEEP_DIR / paths.CONTAINERD_VERSION).glob(f"pod-{NAMESPACE}-*.log"))
    assert logs, "no product pod's log was kept"
    refused = [
        f"{log.name}: {line[:300]}"
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
        if ("forbidden" in line.lower() or " 403" in line) and not audit.expected_in(line)
    ]
    assert not refused, "\n".join(refused[:20])
