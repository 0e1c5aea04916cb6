"""NRI conflict detection: the comparison (v1 and v2 files), the tracker, and the whole path
through the NRI server on a fake cgroup tree (a container whose memory limit another plugin
changed before it started), with the metric, the log line and ``koordctl explain``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from koordctl.explain import render_explain
from koordlet.applying import Applier
from koordlet.executor import CgroupWrite, Executor
from koordlet.executor.resctrl import Resctrl
from koordlet.metriccache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.nri.conflicts import (
    MEMORY_LIMIT,
    RESOURCES,
    Asked,
    ConflictTracker,
    Found,
    asked_in,
    compare,
    shares_weights,
)
from koordlet.nri.hooks import HookServer
from koordlet.reconciling import Reconciler
from koordlet.states.pods import PodStore
from koordlet.states.topology import Topology
from koordlet.statusapi import KoordletViews
from nri_plugin import Stub, api
from nri_plugin.testing import FakeRuntime, PluginSession
from runtimehooks import HOOKS
from runtimehooks.registry import FailurePolicy
from runtimehooks.request import ContainerRequest, PodRequest
from runtimehooks.rules import KernelFeatures, NodeState, Rules
from tests.unit.koordlet.nri.test_hooks import POD_DIR, be_pod, cgroup_tree, container

MiB = 1 << 20
PAGE = 4096
V1_MAX = "9223372036854771712"  # what v1 shows for "no limit"

# -- the comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    asked: Asked
    found: Found
    version: int
    conflicts: list[tuple[str, str, str]]  # (resource, asked, found) expected


CASES = {
    # cpusets: as sets, whatever the notation
    "v1-cpuset-ranges-vs-list": Case(Asked(cpuset="0-3"), Found(cpuset="0,1,2,3\n"), 1, []),
    "v2-cpuset-split-ranges": Case(Asked(cpuset="0-3"), Found(cpuset="0-1,2-3\n"), 2, []),
    "v1-cpuset-other-cpus": Case(
        Asked(cpuset="0-3"), Found(cpuset="4-7\n"), 1, [("cpuset", "0-3", "4-7")]
    ),
    "v2-cpuset-emptied": Case(
        Asked(cpuset="0-1"), Found(cpuset="\n"), 2, [("cpuset", "0-1", "(empty)")]
    ),
    "v1-cpuset-unparsable-is-no-conflict": Case(Asked(cpuset="0-1"), Found(cpuset="x\n"), 1, []),
    # shares: v1 as the kernel clamps them, v2 as the weight runc computes
    "v1-shares-same": Case(Asked(cpu_shares=512), Found(cpu_shares="512\n"), 1, []),
    "v1-shares-other": Case(
        Asked(cpu_shares=512), Found(cpu_shares="1024\n"), 1, [("cpu_shares", "512", "1024")]
    ),
    "v1-shares-1-clamped-to-2": Case(Asked(cpu_shares=1), Found(cpu_shares="2\n"), 1, []),
    "v1-shares-past-max-clamped": Case(
        Asked(cpu_shares=300_000), Found(cpu_shares="262144\n"), 1, []
    ),
    "v2-shares-512-as-weight-20": Case(Asked(cpu_shares=512), Found(cpu_shares="20\n"), 2, []),
    "v2-shares-1024-as-weight-39": Case(Asked(cpu_shares=1024), Found(cpu_shares="39\n"), 2, []),
    "v2-shares-1024-newer-runc-100": Case(Asked(cpu_shares=1024), Found(cpu_shares="100\n"), 2, []),
    "v2-shares-2-as-weight-1": Case(Asked(cpu_shares=2), Found(cpu_shares="1\n"), 2, []),
    "v2-shares-max-as-10000": Case(Asked(cpu_shares=262_144), Found(cpu_shares="10000\n"), 2, []),
    "v2-shares-other-weight": Case(
        Asked(cpu_shares=512),
        Found(cpu_shares="100\n"),
        2,
        [("cpu_shares", "512 (cpu.weight 20)", "100")],
    ),
    # quota: -1, any negative number and "max" are one thing
    "v1-quota-unlimited": Case(Asked(cpu_quota=-1), Found(cpu_quota="-1\n"), 1, []),
    "v1-quota-negative-is-unlimited": Case(Asked(cpu_quota=-5), Found(cpu_quota="-1\n"), 1, []),
    "v2-quota-unlimited-is-max": Case(Asked(cpu_quota=-1), Found(cpu_quota="max 100000\n"), 2, []),
    "v2-quota-same": Case(Asked(cpu_quota=50_000), Found(cpu_quota="50000 100000\n"), 2, []),
    "v1-quota-other": Case(
        Asked(cpu_quota=100_000),
        Found(cpu_quota="50000\n"),
        1,
        [("cpu_quota", "100000", "50000")],
    ),
    "v2-quota-lifted": Case(
        Asked(cpu_quota=50_000), Found(cpu_quota="max 100000\n"), 2, [("cpu_quota", "50000", "max")]
    ),
    "v2-quota-set-where-unlimited-asked": Case(
        Asked(cpu_quota=-1), Found(cpu_quota="25000 100000\n"), 2, [("cpu_quota", "max", "25000")]
    ),
    "v1-period-other": Case(
        Asked(cpu_quota=100_000, cpu_period=100_000),
        Found(cpu_quota="100000\n", cpu_period="50000\n"),
        1,
        [("cpu_quota", "100000 period 100000", "100000 period 50000")],
    ),
    "v2-period-other": Case(
        Asked(cpu_quota=50_000, cpu_period=100_000),
        Found(cpu_quota="50000 200000\n"),
        2,
        [("cpu_quota", "50000 period 100000", "50000 period 200000")],
    ),
    "v2-period-same": Case(
        Asked(cpu_quota=50_000, cpu_period=100_000), Found(cpu_quota="50000 100000\n"), 2, []
    ),
    # memory: rounded down to whole pages by the kernel; unlimited in every spelling
    "v1-memory-same": Case(
        Asked(memory_limit=512 * MiB), Found(memory_limit=f"{512 * MiB}\n"), 1, []
    ),
    "v1-memory-rounded-to-pages": Case(
        Asked(memory_limit=1_000_000_000), Found(memory_limit="999997440\n"), 1, []
    ),
    "v2-memory-rounded-to-pages": Case(
        Asked(memory_limit=1_000_000_001), Found(memory_limit="999997440\n"), 2, []
    ),
    "v1-memory-unlimited": Case(Asked(memory_limit=-1), Found(memory_limit=V1_MAX + "\n"), 1, []),
    "v1-memory-past-int63-is-unlimited": Case(
        Asked(memory_limit=(1 << 63) - 1), Found(memory_limit=V1_MAX + "\n"), 1, []
    ),
    "v2-memory-unlimited": Case(Asked(memory_limit=-1), Found(memory_limit="max\n"), 2, []),
    "v1-memory-other": Case(
        Asked(memory_limit=512 * MiB),
        Found(memory_limit=f"{256 * MiB}\n"),
        1,
        [("memory_limit", str(512 * MiB), str(256 * MiB))],
    ),
    "v1-memory-a-page-less": Case(
        Asked(memory_limit=512 * MiB),
        Found(memory_limit=f"{512 * MiB - PAGE}\n"),
        1,
        [("memory_limit", str(512 * MiB), str(512 * MiB - PAGE))],
    ),
    "v2-memory-lifted": Case(
        Asked(memory_limit=512 * MiB),
        Found(memory_limit="max\n"),
        2,
        [("memory_limit", str(512 * MiB), "max")],
    ),
    "v1-memory-limit-set-where-unlimited-asked": Case(
        Asked(memory_limit=-1),
        Found(memory_limit=f"{256 * MiB}\n"),
        1,
        [("memory_limit", "-1", str(256 * MiB))],
    ),
    "v1-memory-garbage-is-no-conflict": Case(
        Asked(memory_limit=512 * MiB), Found(memory_limit="\n"), 1, []
    ),
    # only what was both asked and read
    "not-read-is-no-conflict": Case(Asked(memory_limit=512 * MiB, cpu_shares=512), Found(), 1, []),
    "not-asked-is-not-compared": Case(
        Asked(), Found(cpuset="9", cpu_shares="3", cpu_quota="1000", memory_limit="4096"), 1, []
    ),
    "v2-several-in-resource-order": Case(
        Asked(cpuset="0", cpu_shares=512, cpu_quota=-1, memory_limit=512 * MiB),
        Found(cpuset="1", cpu_shares="20", cpu_quota="max 100000", memory_limit="268435456"),
        2,
        [("cpuset", "0", "1"), ("memory_limit", str(512 * MiB), "268435456")],
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_compare(case: Case) -> None:
    conflicts = compare(case.asked, case.found, case.version, page_size=PAGE)
    assert [(c.resource, c.asked, c.found) for c in conflicts] == case.conflicts


def test_a_conflict_names_the_file_of_its_cgroup_version() -> None:
    asked = Asked(cpuset="0", cpu_shares=512, cpu_quota=-1, memory_limit=512 * MiB)
    v1 = Found(cpuset="1", cpu_shares="2", cpu_quota="1000", memory_limit="4096")
    v2 = Found(cpuset="1", cpu_shares="2", cpu_quota="1000 100000", memory_limit="4096")
    assert [c.file for c in compare(asked, v1, 1, PAGE)] == [
        "cpuset.cpus",
        "cpu.shares",
        "cpu.cfs_quota_us",
        "memory.limit_in_bytes",
    ]
    assert [c.file for c in compare(asked, v2, 2, PAGE)] == [
        "cpuset.cpus",
        "cpu.weight",
        "cpu.max",
        "memory.max",
    ]
    assert [c.resource for c in compare(asked, v2, 2, PAGE)] == list(RESOURCES)


@pytest.mark.parametrize(
    ("shares", "weights"),
    [(2, {1}), (512, {20, 59}), (1024, {39, 100}), (262_144, {10_000}), (1, {1})],
)
def test_shares_weights_are_runcs_old_and_new_mappings(shares: int, weights: set[int]) -> None:
    assert shares_weights(shares) == weights


def test_asked_in_takes_what_the_adjustment_sets_and_zero_as_unset() -> None:
    resources = api.LinuxResources()
    resources.cpu.cpus = "0-1"
    resources.cpu.shares.value = 512
    resources.cpu.period.value = 100_000
    resources.memory.limit.value = 512 * MiB
    assert asked_in(resources) == Asked(
        cpuset="0-1", cpu_shares=512, cpu_period=100_000, memory_limit=512 * MiB
    )

    zeros = api.LinuxResources()
    zeros.cpu.shares.value = 0  # runc leaves 0 alone
    zeros.cpu.quota.value = 0
    zeros.memory.limit.value = 0
    assert asked_in(zeros) == Asked()
    assert asked_in(zeros).empty


def test_a_newer_ask_replaces_only_what_it_sets() -> None:
    first = Asked(cpu_shares=512, memory_limit=512 * MiB)
    assert first.merged(Asked(memory_limit=256 * MiB, cpuset="0")) == Asked(
        cpuset="0", cpu_shares=512, memory_limit=256 * MiB
    )


# -- the tracker on a fake tree -------------------------------------------------------------

CTR_DIR = f"{POD_DIR}/c-main"


def container_tree(root: Path, memory: int, shares: int = 512, quota: int = 100_000) -> Path:
    """The container's cgroup as runc left it: the BE container's shares, quota and limit."""
    cgroup_tree(root)
    for sub, files in (
        ("cpu", {"cpu.shares": str(shares), "cpu.cfs_quota_us": str(quota)}),
        ("memory", {"memory.limit_in_bytes": str(memory)}),
    ):
        folder = root / sub / CTR_DIR
        folder.mkdir(parents=True)
        for name, value in files.items():
            (folder / name).write_text(value + "\n")
    return root


def request(cgroup: str = CTR_DIR, cid: str = "c-main") -> ContainerRequest:
    pod = PodRequest(uid="u1", name="batch-pod", namespace="jobs")
    return ContainerRequest(pod=pod, name="main", id=cid, cgroup_dir=cgroup)


def adjustment(memory: int = 512 * MiB) -> api.ContainerAdjustment:
    adjust = api.ContainerAdjustment()
    adjust.linux.resources.memory.limit.value = memory
    return adjust


def count(metrics: KoordletMetrics, resource: str) -> float | None:
    return metrics.registry.get_sample_value(
        "koordlet_nri_conflicts_total", {"node": "n1", "resource": resource}
    )


def test_the_counter_starts_at_zero_for_every_resource(tmp_path: Path) -> None:
    metrics = KoordletMetrics("n1")
    assert count(metrics, RESOURCES[0]) is None  # the tracker makes them
    ConflictTracker(Executor(tmp_path), metrics)
    assert [count(metrics, r) for r in RESOURCES] == [0.0] * 4


def test_a_container_is_checked_once_then_forgotten(tmp_path: Path) -> None:
    root = container_tree(tmp_path / "cgroup", memory=256 * MiB)
    metrics = KoordletMetrics("n1")
    tracker = ConflictTracker(Executor(root), metrics)
    tracker.asked(request(), adjustment())
    assert tracker.waiting("c-main")

    (conflict,) = tracker.check("c-main")
    assert (conflict.resource, conflict.asked, conflict.found) == (
        MEMORY_LIMIT,
        str(512 * MiB),
        str(256 * MiB),
    )
    assert not tracker.waiting("c-main")
    assert tracker.check("c-main") == []  # a second post-start (never sent) changes nothing
    assert count(metrics, MEMORY_LIMIT) == 1.0


def test_nothing_asked_is_not_remembered(tmp_path: Path) -> None:
    tracker = ConflictTracker(Executor(container_tree(tmp_path, 256 * MiB)), KoordletMetrics("n1"))
    tracker.asked(request(), None)
    tracker.asked(request(cid="c-other"), api.ContainerAdjustment())  # env or mounts only
    assert not tracker.waiting("c-main") and not tracker.waiting("c-other")


@pytest.mark.parametrize("cgroup", ["../../outside", "kubepods/../../../outside", "/../../outside"])
def test_a_cgroup_path_that_leaves_the_root_is_never_read(tmp_path: Path, cgroup: str) -> None:
    root = container_tree(tmp_path / "cgroup", memory=512 * MiB)
    # what the path reaches from <root>/memory if followed: a file with another limit
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "memory.limit_in_bytes").write_text(f"{256 * MiB}\n")
    assert (root / "memory" / cgroup.strip("/")).resolve() == outside
    metrics = KoordletMetrics("n1")
    tracker = ConflictTracker(Executor(root), metrics)
    tracker.asked(request(cgroup=cgroup), adjustment())

    assert tracker.check("c-main") == []
    assert count(metrics, MEMORY_LIMIT) == 0.0


def test_waiting_containers_are_bounded_oldest_dropped_first(tmp_path: Path) -> None:
    root = container_tree(tmp_path, memory=256 * MiB)
    metrics = KoordletMetrics("n1")
    tracker = ConflictTracker(Executor(root), metrics, max_pending=2)
    for cid in ("c-1", "c-2", "c-3"):
        tracker.asked(request(cid=cid), adjustment())

    assert [tracker.waiting(c) for c in ("c-1", "c-2", "c-3")] == [False, True, True]
    assert tracker.check("c-1") == []  # dropped: never read, never counted
    assert count(metrics, MEMORY_LIMIT) == 0.0


def test_a_stopped_container_is_forgotten_and_a_removed_pod_takes_its_records(
    tmp_path: Path,
) -> None:
    root = container_tree(tmp_path, memory=256 * MiB)
    tracker = ConflictTracker(Executor(root), KoordletMetrics("n1"), clock=lambda: 5.0)
    tracker.asked(request(cid="c-stopped"), adjustment())
    tracker.forget("c-stopped")
    assert tracker.check("c-stopped") == []

    tracker.asked(request(), adjustment())
    tracker.check("c-main")
    assert [(r["container"], r["resource"], r["ts"]) for r in tracker.for_pod("u1")] == [
        ("main", MEMORY_LIMIT, 5.0)
    ]
    assert tracker.for_pod("u-other") == []
    tracker.forget_pod("u1")
    assert tracker.for_pod("u1") == []


def test_koordlets_own_write_before_the_start_is_no_conflict(tmp_path: Path) -> None:
    root = container_tree(tmp_path, memory=256 * MiB)
    metrics = KoordletMetrics("n1")
    tracker = ConflictTracker(Executor(root), metrics)
    tracker.asked(request(), adjustment())
    tracker.note_write(CgroupWrite("/" + CTR_DIR, "memory.limit_in_bytes", 256 * MiB))
    tracker.note_write(CgroupWrite(CTR_DIR, "cpuset.cpus", "0"))  # not asked: not compared

    assert tracker.check("c-main") == []
    assert count(metrics, MEMORY_LIMIT) == 0.0


def test_an_update_before_the_start_is_what_koordlet_asks_then(tmp_path: Path) -> None:
    root = container_tree(tmp_path, memory=256 * MiB, shares=1024)
    tracker = ConflictTracker(Executor(root), KoordletMetrics("n1"))
    tracker.asked(request(), adjustment())
    update = api.ContainerUpdate(container_id="c-main")
    update.linux.resources.memory.limit.value = 256 * MiB
    update.linux.resources.cpu.shares.value = 2
    tracker.updated("c-main", update)

    (conflict,) = tracker.check("c-main")
    assert (conflict.resource, conflict.asked, conflict.found) == ("cpu_shares", "2", "1024")


# -- through the NRI server, with the reconciler and explain ---------------------------------


@dataclass
class Koordlet:
    server: HookServer
    reconciler: Reconciler
    views: KoordletViews
    metrics: KoordletMetrics


def koordlet(root: Path, tmp_path: Path) -> Koordlet:
    """The parts of koordlet's composition root this path goes through (see daemon.py)."""
    rules = Rules(node=NodeState(cpus=frozenset({0, 1})), kernel=KernelFeatures(cpu_idle=True))
    metrics = KoordletMetrics("n1")
    executor = Executor(root)
    pods = PodStore()
    applier = Applier(executor, Resctrl(tmp_path / "resctrl"))
    tracker = ConflictTracker(executor, metrics)
    reconciler = Reconciler(
        hooks=HOOKS,
        rules=lambda: rules,
        pods=pods,
        applier=applier,
        metrics=metrics,
        interval=10,
        waiting=tracker.waiting,
    )
    server = HookServer(
        hooks=HOOKS,
        rules=lambda: rules,
        pods=pods,
        applier=applier,
        policy=FailurePolicy.IGNORE,
        metrics=metrics,
        on_container_started=reconciler.reconcile_container_now,
        conflicts=tracker,
    )
    views = KoordletViews(
        node_name="n1",
        pods=pods,
        cache=MetricCache(),
        executor=executor,
        topology=Topology(frozenset({0, 1}), {0: frozenset({0, 1})}, {0: 0}, 8 << 30),
        kernel=rules.kernel,
        health=dict,
        conflicts=tracker,
    )
    return Koordlet(server, reconciler, views, metrics)


def serve(
    tmp_path: Path,
    server: HookServer,
    scenario: Callable[[PluginSession], Coroutine[Any, Any, None]],
) -> None:
    async def main() -> None:
        runtime = FakeRuntime()
        await runtime.listen(tmp_path / "nri.sock")
        stub = Stub(server, name="koordlet_nri", index="00", socket_path=tmp_path / "nri.sock")
        task = asyncio.create_task(stub.run())
        session = await runtime.next_session()
        try:
            await scenario(session)
        finally:
            stub.stop()
            await task
            await runtime.close()

    asyncio.run(asyncio.wait_for(main(), 15))


def start_be_container(tmp_path: Path, held: int, caplog: pytest.LogCaptureFixture) -> Koordlet:
    """Create the BE container (koordlet asks 512 MiB), let its cgroup hold ``held`` bytes as
    another plugin left it, run a periodic reconcile pass, then send PostStartContainer."""
    root = cgroup_tree(tmp_path / "cgroup")
    parts = koordlet(root, tmp_path)
    memory_file = root / "memory" / CTR_DIR / "memory.limit_in_bytes"

    async def scenario(session: PluginSession) -> None:
        await session.state_change(api.RUN_POD_SANDBOX, be_pod())
        reply = await session.create_container(be_pod(), container())
        assert reply.adjust.linux.resources.memory.limit.value == 512 * MiB
        # runc creates the cgroup at the start, with the value the runtime ended up with
        for sub in ("cpu", "memory"):
            (root / sub / CTR_DIR).mkdir()
        (root / "cpu" / CTR_DIR / "cpu.shares").write_text("512\n")
        (root / "cpu" / CTR_DIR / "cpu.cfs_quota_us").write_text("100000\n")
        memory_file.write_text(f"{held}\n")
        parts.reconciler.reconcile_all()  # a periodic pass: leaves the waiting container alone
        assert memory_file.read_text().strip() == str(held)
        with caplog.at_level(logging.WARNING, logger="koordlet.nri.conflicts"):
            await session.state_change(api.POST_START_CONTAINER, be_pod(), container())

    serve(tmp_path, parts.server, scenario)
    # the post-start reconcile ran after the check: koordlet's value is back either way
    assert memory_file.read_text().strip() == str(512 * MiB)
    return parts


def test_a_memory_limit_another_plugin_changed_is_counted_logged_and_explained(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parts = start_be_container(tmp_path, 256 * MiB, caplog)

    assert count(parts.metrics, MEMORY_LIMIT) == 1.0
    assert [count(parts.metrics, r) for r in RESOURCES if r != MEMORY_LIMIT] == [0.0] * 3
    (line,) = [r.getMessage() for r in caplog.records if "NRI conflict" in r.getMessage()]
    assert "jobs/batch-pod/main" in line
    assert f"memory_limit asked {512 * MiB}, found {256 * MiB}" in line
    assert f"{CTR_DIR}/memory.limit_in_bytes" in line

    explained = parts.views.explain("jobs/batch-pod")
    assert explained is not None
    (conflict,) = explained["conflicts"]
    assert {
        k: conflict[k] for k in ("container", "container_id", "resource", "asked", "found")
    } == {
        "container": "main",
        "container_id": "c-main",
        "resource": MEMORY_LIMIT,
        "asked": str(512 * MiB),
        "found": str(256 * MiB),
    }
    text = render_explain(explained)
    (shown,) = [line for line in text.splitlines() if "memory_limit" in line]
    assert shown.endswith(
        f" main: memory_limit asked {512 * MiB}, found {256 * MiB} (memory.limit_in_bytes)"
    )


def test_the_value_koordlet_asked_is_no_conflict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parts = start_be_container(tmp_path, 512 * MiB, caplog)

    assert [count(parts.metrics, r) for r in RESOURCES] == [0.0] * 4
    assert not [r for r in caplog.records if "NRI conflict" in r.getMessage()]
    explained = parts.views.explain("jobs/batch-pod")
    assert explained is not None and explained["conflicts"] == []
    assert "conflicts" not in render_explain(explained)
