"""Fixtures for the end-to-end suite: one private containerd per session, fresh pods per test.

- ``e2e_node``: the session's Node (private containerd with NRI, CRI client, cgroup reader).
  Its teardown must leave nothing behind; anything left fails the session.
- ``node``: the same Node for one test; every sandbox the test created is removed afterwards.
- ``fresh_node``: a Node of the test's own, for tests that stop or inspect a whole containerd.

A failing test gets the tail of containerd's log in its report; the whole log of the session is
kept in ``.cache/e2e-logs/``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator

import pytest

from tests.e2e import tiers
from tests.e2e.harness import paths
from tests.e2e.harness.cgroups import CGROUP_ROOT
from tests.e2e.harness.node import Node

LOG_KEEP_DIR = paths.CACHE / "e2e-logs"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the tests of this run's tier (tests/e2e/tiers.py; "host" unless set)."""
    tier = os.environ.get(tiers.TIER_ENV, "host")
    if tier not in tiers.TIERS:
        raise pytest.UsageError(f"{tiers.TIER_ENV}={tier!r}: not one of {sorted(tiers.TIERS)}")
    keep = [i for i in items if tiers.selected(i.nodeid, tier)]
    dropped = [i for i in items if not tiers.selected(i.nodeid, tier)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def missing_prerequisites() -> list[str]:
    """What this machine lacks for the e2e suite, as short phrases (empty: all there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    if not ((CGROUP_ROOT / "cgroup.controllers").exists() or (CGROUP_ROOT / "cpu").is_dir()):
        missing.append(f"a cgroup filesystem at {CGROUP_ROOT}")
    for path, what in [
        (paths.CONTAINERD_BIN_DIR / "containerd", "containerd"),
        (paths.RUNC, "runc"),
        (paths.CRI_STUBS_DIR / "gen" / "cri_v1" / "api_pb2.py", "CRI stubs"),
        (paths.IMAGES_DIR / "pause.tar", "OCI images"),
    ]:
        if not path.exists():
            missing.append(f"{what} ({path})")
    return missing


@pytest.fixture(scope="session")
def e2e_node() -> Iterator[Node]:
    missing = missing_prerequisites()
    if missing:
        pytest.skip(f"e2e prerequisites missing: {', '.join(missing)}; {paths.SETUP_HINT}")
    node = Node.start()
    yield node
    _keep_log(node, "session")
    problems = node.teardown()
    assert not problems, f"e2e teardown left things behind: {problems}"


@pytest.fixture
def node(e2e_node: Node) -> Iterator[Node]:
    if e2e_node.containerd.pid is None:  # fail now, not after every CRI call's timeout
        pytest.fail(f"the session's containerd has exited:\n{e2e_node.containerd.log_tail()}")
    before = {p.id for p in e2e_node.cri.list_pods()}
    yield e2e_node
    for pod in e2e_node.cri.list_pods():
        if pod.id not in before:
            e2e_node.remove_pod(pod.id)


@pytest.fixture
def fresh_node(request: pytest.FixtureRequest) -> Iterator[Node]:
    missing = missing_prerequisites()
    if missing:
        pytest.skip(f"e2e prerequisites missing: {', '.join(missing)}; {paths.SETUP_HINT}")
    node = Node.start()
    yield node
    _keep_log(node, request.node.name)
    node.teardown()  # a no-op when the test tore the node down itself and checked the result


def _keep_log(node: Node, name: str) -> None:
    if node.containerd.layout.log.exists():
        LOG_KEEP_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(node.containerd.layout.log, LOG_KEEP_DIR / f"containerd-{name}.log")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in ("node", "fresh_node"):
            node = funcargs.get(name)
            if isinstance(node, Node):
                report.sections.append(
                    (
                        f"containerd log tail ({node.containerd.layout.log})",
                        node.containerd.log_tail(60),
                    )
                )
    return report
