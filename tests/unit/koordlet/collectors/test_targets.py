"""The collectors' targets, remembered per pod while its request and containers stay the same."""

from __future__ import annotations

from dataclasses import replace

from koordlet.collectors.targets import TargetMemo, targets
from runtimehooks.request import ContainerRequest

from .fakes import pod


def test_a_pod_that_did_not_change_keeps_its_targets_and_a_changed_one_is_rebuilt() -> None:
    a = pod("a", "kubepods/poda", {"c1": "kubepods/poda/c1"})
    b = pod("b", "", {"c2": "kubepods/podb/c2"})  # no pod directory: counted
    memo = TargetMemo()
    first, missing = memo([a, b])
    assert [t.key for t in first] == [("a",), ("a", "c1"), ("b", "c2")]
    assert missing == 1
    again, _ = memo([a, b])
    assert all(x is y for x, y in zip(first, again, strict=True))  # not built again

    a.containers["c3"] = ContainerRequest(pod=a.request, name="c-c3", id="c3", cgroup_dir="x/c3")
    grown, _ = memo([a, b])
    assert [t.key for t in grown] == [("a",), ("a", "c1"), ("a", "c3"), ("b", "c2")]

    a.request = replace(a.request, cgroup_dir="kubepods/besteffort/poda")
    moved, _ = memo([a])
    assert moved[0].cgroup_dir == "kubepods/besteffort/poda"
    assert [t.key for t in moved] == [t.key for t in targets([a])[0]]

    assert memo([]) == ([], 0)
    rebuilt, _ = memo([a])
    assert rebuilt[0] is not moved[0]  # forgotten once gone
