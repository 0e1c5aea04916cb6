"""The cluster tier: a real single-node Kubernetes (cluster.py) with the chart installed by
Helm, once per session, on the containerd that KOORD_E2E_CONTAINERD names (1.7 unless set).

The binary must be built first (``python -m tests.cluster.kubebuild``; ``make e2e-cluster``
does it before pytest, so that no test's time limit covers a cold build). Every component's
log, and each product pod's, is kept in ``.cache/cluster-logs/<containerd version>/``; the
session fails if the teardown leaves anything behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.cluster import kubebuild
from tests.cluster.cluster import Cluster
from tests.cluster.product import KOORDLET_IMAGE, install
from tests.e2e.harness import paths

LOG_KEEP_DIR = paths.CACHE / "cluster-logs"


def missing_prerequisites() -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    binary = kubebuild.folder() / kubebuild.BINARY
    if not binary.exists():
        missing.append(f"the Kubernetes binary ({binary}: python -m tests.cluster.kubebuild)")
    for path, what in [
        (paths.CONTAINERD_BIN_DIR / "containerd", "containerd"),
        (KOORDLET_IMAGE, "the koordlet image"),
        (paths.CRI_STUBS_DIR / "gen" / "cri_v1" / "api_pb2.py", "CRI stubs"),
    ]:
        if not path.exists():
            missing.append(f"{what} ({path}; {paths.SETUP_HINT})")
    if shutil.which("nsenter") is None or shutil.which("unshare") is None:
        missing.append("nsenter and unshare (util-linux)")
    return missing


LAST = ("test_upgrade_uninstall.py", "test_koordinator_values.py", "test_audit.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``cluster_tier(VERSION)`` runs only in the tier on that containerd
    (control-plane behaviour, the same on either: run once, the tiers' time budgets shared);
    the uninstall comes after every test that needs the product, then the installs with
    other values; the audit log is read once every other test has made its requests."""
    other = [
        item
        for item in items
        if (marker := item.get_closest_marker("cluster_tier")) is not None
        and marker.args[0] != paths.CONTAINERD_VERSION
    ]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]
    items.sort(key=lambda item: LAST.index(item.path.name) + 1 if item.path.name in LAST else 0)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    missing = missing_prerequisites()
    if missing:
        pytest.skip(f"the cluster tier needs {', '.join(missing)}")
    running = Cluster.start(binary=kubebuild.folder() / kubebuild.BINARY)
    # after start: a session waiting for another one's cluster must not remove its logs
    shutil.rmtree(LOG_KEEP_DIR / paths.CONTAINERD_VERSION, ignore_errors=True)
    try:
        install(running)
        yield running
    finally:
        keep_logs(running)
        problems = running.teardown()
    assert not problems, f"the cluster's teardown left things behind: {problems}"


def keep_logs(cluster: Cluster) -> None:
    """Each component's log, each pod's and the Events (through the API, while it answers);
    called again before the uninstall test removes the product's pods."""
    target = LOG_KEEP_DIR / paths.CONTAINERD_VERSION
    target.mkdir(parents=True, exist_ok=True)
    for log in (cluster.base / "logs").glob("*.log"):
        shutil.copyfile(log, target / log.name)
    containerd_log = cluster.base / "containerd" / "containerd.log"
    if containerd_log.exists():
        shutil.copyfile(containerd_log, target / "containerd.log")
    try:
        pods = cluster.kubectl_json("get", "pods", "-A")["items"]
        events = cluster.kubectl("get", "events", "-A", "--sort-by=.lastTimestamp", check=False)
    except Exception:
        return
    (target / "events.txt").write_text(events)
    for pod in pods:
        meta = pod["metadata"]
        text = cluster.kubectl(
            "logs", "-n", meta["namespace"], meta["name"], "--all-containers", check=False
        )
        kept = target / f"pod-{meta['namespace']}-{meta['name']}.log"
        if text or not kept.exists():  # a pod's log kept before the uninstall stays
            kept.write_text(text)
        # A restarted container's last run (a koord-manager leader that lost its Lease exits).
        if any(c.get("restartCount") for c in pod["status"].get("containerStatuses", [])):
            previous = cluster.kubectl(
                "logs", "-n", meta["namespace"], meta["name"], "--all-containers", "--previous",
                check=False,
            )  # fmt: skip
            (target / f"pod-{meta['namespace']}-{meta['name']}.previous.log").write_text(previous)
