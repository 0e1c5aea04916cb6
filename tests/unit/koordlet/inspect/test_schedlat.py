"""The run-queue latency collector on a fake probe and a fake cgroup v2 tree: attribution by
cgroup inode, windows, samples, and the reasons it is off."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from koordlet.collectors.base import CollectorUnavailable
from koordlet.inspect import bpfsys, program
from koordlet.inspect.program import InspectUnavailable
from koordlet.inspect.schedlat import SchedLatencyCollector
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod
from tests.unit.koordlet.qosmanager.fakes import known_pod


class FakeProbe:
    """Cumulative histograms by cgroup id, set by the test."""

    def __init__(self) -> None:
        self.counts: dict[int, dict[int, int]] = {}
        self.closed = False
        self.attached = True  # loaded attached, as the real one
        self.switches: list[str] = []

    def read(self) -> dict[int, dict[int, int]]:
        return {cg: dict(h) for cg, h in self.counts.items()}

    def attach(self) -> None:
        self.attached = True
        self.switches.append("attach")

    def detach(self) -> None:
        self.attached = False
        self.switches.append("detach")

    def close(self) -> None:
        self.closed = True


def v2_tree(root: Path, pods: list[KnownPod]) -> dict[str, int]:
    """A hybrid host's unified tree with each pod's dir, its containers and a sandbox dir;
    returns directory (relative) → inode, the cgroup id BPF reports."""
    unified = root / "unified"
    unified.mkdir(parents=True)
    (unified / "cgroup.controllers").write_text("")
    ids = {}
    for known in pods:
        dirs = [known.request.cgroup_dir, f"{known.request.cgroup_dir}/sandbox"]
        dirs += [c.cgroup_dir for c in known.containers.values()]
        for d in dirs:
            (unified / d).mkdir(parents=True, exist_ok=True)
            ids[d] = (unified / d).stat().st_ino
    return ids


def make(
    tmp_path: Path, pods: list[KnownPod]
) -> tuple[SchedLatencyCollector, FakeProbe, dict[str, int]]:
    ids = v2_tree(tmp_path, pods)
    probe = FakeProbe()
    collector = SchedLatencyCollector(lambda: pods, tmp_path, sample=10.0, loader=lambda: probe)
    return collector, probe, ids


def values(samples: list[Sample], name: str) -> dict[str, float]:
    """Sample values of one series name, by pod uid (or QoS class)."""
    return {
        s.labels.get("pod_uid", s.labels.get("qos", "")): s.value for s in samples if s.name == name
    }


def test_waits_are_attributed_to_their_own_pod_and_container(tmp_path: Path) -> None:
    ls = known_pod("web", qos="LS")
    be = known_pod("batch", qos="BE", kube="BestEffort")
    collector, probe, ids = make(tmp_path, [ls, be])
    web_ctr = next(iter(ls.containers.values()))
    probe.counts = {ids[web_ctr.cgroup_dir]: {3: 10}, 1: {2: 7}}  # id 1: a system daemon
    collector.collect(100.0)  # the first read is the baseline for the next window
    probe.counts = {
        ids[web_ctr.cgroup_dir]: {3: 110, 12: 2},  # 100 waits of 8-16 us, 2 of 4-8 ms
        ids[f"{ls.request.cgroup_dir}/sandbox"]: {1: 5},  # the pause process: the pod's
        1: {2: 9},
    }
    samples = collector.collect(110.0)

    state = collector.state
    web = state.pods[ls.request.uid]
    assert web.window == {3: 100, 12: 2, 1: 5}
    assert web.containers == {"main": {3: 100, 12: 2}}
    assert state.pods[be.request.uid].window == {}
    assert state.node == {2: 2}
    assert state.classes["LS"] == web.window and state.classes["BE"] == {}
    assert state.window_seconds == 10.0
    waits = values(samples, "pod_runq_waits")
    assert waits == {ls.request.uid: 107}  # nothing for the idle BE pod
    assert values(samples, "pod_runq_latency_p99")[ls.request.uid] > 4096
    assert be.request.uid not in values(samples, "pod_runq_latency_p50")
    # cumulative totals for Prometheus include the first window too
    assert web.total == {3: 110, 12: 2, 1: 5}


def test_gone_pods_are_forgotten_and_missing_v2_dirs_are_counted(tmp_path: Path) -> None:
    ls = known_pod("web", qos="LS")
    collector, _, _ = make(tmp_path, [ls])
    collector.collect(1.0)
    ghost = known_pod("ghost", qos="LS")  # known to koordlet but runc made no v2 cgroup
    collector.pods = lambda: [ghost]
    collector.collect(2.0)
    assert list(collector.state.pods) == [ghost.request.uid]
    assert collector.skipped["no-cgroup-v2-tree"] == 1


def test_no_v2_hierarchy_makes_the_collector_unavailable(tmp_path: Path) -> None:
    collector = SchedLatencyCollector(lambda: [], tmp_path, loader=FakeProbe)
    with pytest.raises(CollectorUnavailable, match="no cgroup v2 hierarchy"):
        collector.collect(1.0)


def test_a_program_that_cannot_load_makes_the_collector_unavailable_with_the_reason(
    tmp_path: Path,
) -> None:
    def refuse() -> FakeProbe:
        raise InspectUnavailable("bcc is not installed (No module named 'bcc')")

    collector = SchedLatencyCollector(lambda: [], tmp_path, loader=refuse)
    with pytest.raises(CollectorUnavailable, match="run-queue latency off: bcc is not installed"):
        collector.collect(1.0)


def test_close_releases_the_probe(tmp_path: Path) -> None:
    collector, probe, _ = make(tmp_path, [])
    collector.collect(1.0)
    collector.close()
    assert probe.closed


def test_prerequisites_name_what_is_missing(tmp_path: Path) -> None:
    tracefs = tmp_path / "tracing"
    (tracefs / "events" / "sched" / "sched_switch").mkdir(parents=True)
    modules = tmp_path / "modules"
    assert "not root" in str(program.missing_prerequisite((tracefs,), modules, euid=lambda: 1000))
    no_tracefs = program.missing_prerequisite((tmp_path / "none",), modules, euid=lambda: 0)
    assert no_tracefs is not None and "tracefs is not mounted" in no_tracefs
    no_headers = program.missing_prerequisite((tracefs,), modules, euid=lambda: 0)
    assert no_headers is not None and "no kernel headers" in no_headers
    import platform  # noqa: PLC0415

    (modules / platform.release() / "build").mkdir(parents=True)
    assert program.missing_prerequisite((tracefs,), modules, euid=lambda: 0) is None


def fake_bcc(folder: Path, body: str) -> Path:
    """A folder holding a stand-in ``bcc`` package, to put first on the child's path."""
    (folder / "bcc").mkdir(parents=True)
    (folder / "bcc" / "__init__.py").write_text(body)
    return folder


def test_load_without_bcc_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shadow = fake_bcc(tmp_path, 'raise ImportError("no libbcc here")\n')
    monkeypatch.setattr(program, "missing_prerequisite", lambda: None)
    monkeypatch.setenv("PYTHONPATH", f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with pytest.raises(InspectUnavailable, match=r"bcc is not installed \(no libbcc here\)"):
        program.load()


def test_a_program_the_compiler_refuses_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = (
        "class BPF:\n"
        "    RAW_TRACEPOINT = 17\n"
        "    def __init__(self, text):\n"
        "        raise Exception('error: use of undeclared identifier')\n"
    )
    shadow = fake_bcc(tmp_path, body)
    monkeypatch.setattr(program, "missing_prerequisite", lambda: None)
    monkeypatch.setenv("PYTHONPATH", f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with pytest.raises(InspectUnavailable, match="cannot load the BPF program: error: use of"):
        program.load("int broken(")


def test_probes_sample_part_of_each_interval(tmp_path: Path) -> None:
    ls = known_pod("web", qos="LS")
    v2_tree(tmp_path, [ls])
    probe = FakeProbe()
    collector = SchedLatencyCollector(
        lambda: [ls], tmp_path, interval=0.5, sample=0.1, loader=lambda: probe
    )
    collector.collect(1.0)
    assert probe.switches == ["attach"]  # sampling now...
    time.sleep(0.3)
    assert probe.switches == ["attach", "detach"]  # ...and off after the sample
    collector.collect(1.5)
    assert probe.switches[-1] == "attach"
    assert collector.state.window_seconds == 0.1  # the window is the sampled time
    collector.close()
    assert probe.closed


def test_a_sample_as_long_as_the_interval_stays_attached(tmp_path: Path) -> None:
    probe = FakeProbe()
    v2_tree(tmp_path, [])
    collector = SchedLatencyCollector(
        lambda: [], tmp_path, interval=1, sample=1, loader=lambda: probe
    )
    collector.collect(1.0)
    collector.collect(2.0)
    assert probe.attached and "detach" not in probe.switches


def test_possible_cpus_counts_ranges_and_singles(tmp_path: Path) -> None:
    cpu = tmp_path / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "possible").write_text("0-3,8,10-11\n")
    assert bpfsys.possible_cpus(tmp_path) == 7
