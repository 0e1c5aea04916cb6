"""The network collector: node interfaces from a fake netlink (shaped like pyroute2's ifinfmsg),
pods from a fake /proc (ns/net links as the kernel names them, net/dev as it prints it), and
one check of the real pyroute2 against this machine's own interfaces."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import IPRoute  # type: ignore[import-untyped]

from koordlet.collectors import network
from koordlet.collectors.base import Collector, CollectorUnavailable
from koordlet.collectors.network import (
    MALFORMED_NET_DEV,
    NO_HOST_NETNS,
    NO_LINK_STATS,
    NetworkCollector,
    Traffic,
    link_traffic,
    parse_net_dev,
)
from koordlet.collectors.rates import COUNTER_RESET, TIME_NOT_ADVANCING
from koordlet.collectors.rtnetlink import LinkDump
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerRequest
from tests.unit.koordlet.collectors.fakes import pod, write

HOST_NETNS = 4026531840
IFF_UP, IFF_LOOPBACK, IFF_BROADCAST, IFF_RUNNING = 0x1, 0x8, 0x2, 0x40
NET_DEV_HEADER = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|"
    "bytes    packets errs drop fifo colls carrier compressed\n"
)


class Stats64(dict[str, int]):
    """pyroute2's ifstats64 nla: indexable by rx_bytes, tx_bytes, rx_packets, tx_packets, ..."""


class FakeLink:
    """An ifinfmsg: header fields by key (index, flags, ifi_type), attributes via get_attr,
    which answers None for an attribute the message does not carry."""

    def __init__(self, index: int, name: str, stats: dict[str, int] | None, flags: int) -> None:
        self.fields: dict[str, Any] = {
            "family": 0,
            "index": index,
            "flags": flags,
            "ifi_type": 772 if flags & IFF_LOOPBACK else 1,
            "change": 0,
        }
        self.attrs: dict[str, Any] = {"IFLA_IFNAME": name, "IFLA_MTU": 1500}
        if stats is not None:
            self.attrs["IFLA_STATS64"] = Stats64(stats)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get_attr(self, name: str) -> Any:
        return self.attrs.get(name)


def stats(rx: int, tx: int, rx_packets: int = 0, tx_packets: int = 0) -> dict[str, int]:
    return {
        "rx_packets": rx_packets,
        "tx_packets": tx_packets,
        "rx_bytes": rx,
        "tx_bytes": tx,
        "rx_errors": 0,
        "tx_errors": 0,
        "rx_dropped": 0,
        "tx_dropped": 0,
        "multicast": 0,
    }


class FakeNetlink:
    """IPRoute's get_links and close, answering with the links set before each pass."""

    def __init__(self) -> None:
        self.links: list[FakeLink] = []
        self.closed = False

    def set(self, *links: tuple[int, str, dict[str, int] | None]) -> None:
        self.links = [
            FakeLink(
                i, name, s, IFF_UP | IFF_RUNNING | (IFF_LOOPBACK if name == "lo" else IFF_BROADCAST)
            )
            for i, name, s in links
        ]

    def get_links(self) -> Iterable[FakeLink]:
        return tuple(self.links)

    def close(self) -> None:
        self.closed = True


class FakeProc:
    """/proc/<pid>/ns/net links and /proc/<pid>/net/dev files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.netns("self", HOST_NETNS)

    def netns(self, pid: int | str, inode: int) -> None:
        path = self.root / str(pid) / "ns" / "net"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.symlink_to(f"net:[{inode}]")  # the kernel's magic link reads like this

    def net_dev(self, pid: int, interfaces: dict[str, tuple[int, int]]) -> None:
        lines = [
            f"{name:>6}: {rx:>7} {rx // 100:>7}    0    0    0     0          0         0 "
            f"{tx:>8} {tx // 100:>7}    0    0    0     0       0          0"
            for name, (rx, tx) in interfaces.items()
        ]
        write(self.root / str(pid) / "net" / "dev", NET_DEV_HEADER + "\n".join(lines) + "\n")


def series(samples: list[Sample]) -> dict[tuple[str, str], float]:
    return {(s.name, next(iter(s.labels.values()))): s.value for s in samples}


def node_collector(netlink: FakeNetlink, tmp_path: Path) -> NetworkCollector:
    FakeProc(tmp_path)
    return NetworkCollector(netlink=netlink, proc_root=tmp_path)


def test_node_rates_per_interface_skip_loopback_and_the_first_pass(tmp_path: Path) -> None:
    nl = FakeNetlink()
    collector = node_collector(nl, tmp_path)
    nl.set((1, "lo", stats(10, 10)), (2, "eth0", stats(1000, 500, 10, 5)))
    assert collector.collect(100.0) == []

    nl.set((1, "lo", stats(900, 900)), (2, "eth0", stats(5000, 1500, 30, 9)))
    samples = collector.collect(102.0)

    assert series(samples) == {
        ("node_network_receive_bytes_rate", "eth0"): 2000.0,
        ("node_network_transmit_bytes_rate", "eth0"): 500.0,
        ("node_network_receive_packets_rate", "eth0"): 10.0,
        ("node_network_transmit_packets_rate", "eth0"): 2.0,
    }
    assert all(s.labels == {"interface": "eth0"} and s.ts == 102.0 for s in samples)
    assert not collector.skipped


def test_a_counter_going_backwards_is_skipped_and_counted_then_rates_resume(
    tmp_path: Path,
) -> None:
    nl = FakeNetlink()
    collector = node_collector(nl, tmp_path)
    for now, rx in [(1.0, 5000), (2.0, 100), (3.0, 400)]:
        nl.set((2, "eth0", stats(rx, 0)))
        samples = collector.collect(now)

    assert collector.skipped[COUNTER_RESET] == 1
    assert series(samples)[("node_network_receive_bytes_rate", "eth0")] == 300.0


def test_a_re_created_interface_starts_a_new_series_without_a_reset(tmp_path: Path) -> None:
    nl = FakeNetlink()
    collector = node_collector(nl, tmp_path)
    nl.set((7, "veth1", stats(5000, 5000)))
    collector.collect(1.0)
    nl.set((9, "veth1", stats(10, 10)))  # same name, new ifindex: counters from zero

    assert collector.collect(2.0) == []
    assert not collector.skipped


def test_time_that_did_not_advance_is_skipped(tmp_path: Path) -> None:
    nl = FakeNetlink()
    collector = node_collector(nl, tmp_path)
    nl.set((2, "eth0", stats(1, 1)))
    collector.collect(5.0)
    nl.set((2, "eth0", stats(2, 2)))

    assert collector.collect(5.0) == []
    assert collector.skipped == {TIME_NOT_ADVANCING: 1}


def test_a_link_without_counters_is_counted_and_32_bit_counters_serve_when_alone() -> None:
    with_32 = FakeLink(3, "tun0", None, IFF_UP)
    with_32.attrs["IFLA_STATS"] = Stats64(stats(7, 8, 1, 2))

    traffic, without = link_traffic(
        [FakeLink(1, "lo", stats(1, 1), IFF_LOOPBACK), FakeLink(2, "gre0", None, 0), with_32]
    )

    assert traffic == {("tun0", 3): Traffic(7, 8, 1, 2)}
    assert without == 1


def test_links_without_counters_show_in_skipped(tmp_path: Path) -> None:
    nl = FakeNetlink()
    collector = node_collector(nl, tmp_path)
    nl.set((2, "gre0", None))
    collector.collect(1.0)
    assert collector.skipped == {NO_LINK_STATS: 1}


def test_netlink_that_cannot_be_opened_turns_the_collector_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(network, "LinkDump", refused)
    with pytest.raises(CollectorUnavailable, match=r"netlink socket: .*Operation not permitted"):
        NetworkCollector().collect(1.0)


def test_close_releases_the_netlink_socket(tmp_path: Path) -> None:
    nl = FakeNetlink()
    collector: Collector = node_collector(nl, tmp_path)
    assert (collector.name, collector.interval) == ("network", 1.0)
    assert isinstance(collector, NetworkCollector)
    collector.close()
    assert nl.closed


# -- pods ------------------------------------------------------------------------------------


PIDS = {
    "kubepods/poda/ca": [4001],
    "kubepods/podb/cb": [4002],  # a hostNetwork pod
    "kubepods/podc/cc": [],  # no process (yet)
}
POD_A = pod("a", "kubepods/poda", {"ca": "kubepods/poda/ca"})
POD_B = pod("b", "kubepods/podb", {"cb": "kubepods/podb/cb"})
POD_C = pod("c", "kubepods/podc", {"cc": "kubepods/podc/cc"})


def pod_collector(
    proc: FakeProc, pods: list[KnownPod], pids: dict[str, list[int]] | None = None
) -> tuple[NetworkCollector, FakeNetlink]:
    nl = FakeNetlink()
    table = PIDS if pids is None else pids
    collector = NetworkCollector(
        lambda: pods,
        netlink=nl,
        proc_root=proc.root,
        pids_of=lambda d: table.get(d, []),
    )
    return collector, nl


def test_pod_rates_sum_the_interfaces_of_its_namespace_and_skip_host_network_pods(
    tmp_path: Path,
) -> None:
    proc = FakeProc(tmp_path)
    proc.netns(4001, 4026532501)
    proc.netns(4002, HOST_NETNS)
    proc.net_dev(4002, {"eth0": (10**9, 10**9)})
    collector, _ = pod_collector(proc, [POD_A, POD_B, POD_C])

    proc.net_dev(4001, {"lo": (50, 50), "eth0": (1000, 2000), "net1": (0, 100)})
    assert collector.collect(10.0) == []
    proc.net_dev(4001, {"lo": (9999, 9999), "eth0": (4000, 2500), "net1": (1000, 100)})
    samples = collector.collect(12.0)

    assert series(samples) == {
        ("pod_network_receive_bytes_rate", "a"): 2000.0,
        ("pod_network_transmit_bytes_rate", "a"): 250.0,
    }
    assert all(s.labels == {"pod_uid": "a"} for s in samples)
    assert not collector.skipped


def test_a_restarted_sandbox_has_a_new_namespace_and_starts_over(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.netns(4001, 4026532501)
    proc.net_dev(4001, {"eth0": (10**6, 10**6)})
    collector, _ = pod_collector(proc, [POD_A])
    collector.collect(1.0)

    proc.netns(4001, 4026532777)
    proc.net_dev(4001, {"eth0": (10, 10)})
    assert collector.collect(2.0) == []
    proc.net_dev(4001, {"eth0": (110, 10)})
    assert series(collector.collect(3.0))[("pod_network_receive_bytes_rate", "a")] == 100.0
    assert not collector.skipped


def test_a_process_that_exited_is_passed_over_for_the_next_one(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.netns(4011, 4026532501)  # 4010 has no /proc entry any more
    proc.net_dev(4011, {"eth0": (0, 0)})
    two = pod("a", "kubepods/poda", {"ca": "kubepods/poda/ca", "cz": "kubepods/poda/cz"})
    collector, _ = pod_collector(
        proc, [two], {"kubepods/poda/ca": [4010], "kubepods/poda/cz": [4011]}
    )

    collector.collect(1.0)
    proc.net_dev(4011, {"eth0": (500, 0)})

    assert series(collector.collect(2.0))[("pod_network_receive_bytes_rate", "a")] == 500.0


def test_the_sandbox_cgroup_is_asked_first_and_the_pod_cgroup_last(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    known = pod("a", "kubepods/poda", {"ca": "kubepods/poda/ca"})
    known.containers["sb"] = ContainerRequest(
        known.request, "", id="sb", cgroup_dir="kubepods/poda/sb", sandbox=True
    )
    asked: list[str] = []

    def pids_of(cgroup_dir: str) -> list[int]:
        asked.append(cgroup_dir)
        return []

    collector = NetworkCollector(
        lambda: [known], netlink=FakeNetlink(), proc_root=proc.root, pids_of=pids_of
    )
    collector.collect(1.0)

    assert asked == ["kubepods/poda/sb", "kubepods/poda/ca", "kubepods/poda"]


def test_without_koordlets_own_namespace_no_pod_is_reported(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    (proc.root / "self/ns/net").unlink()
    proc.netns(4001, HOST_NETNS)  # would pass for a pod network when nothing compares
    proc.net_dev(4001, {"eth0": (0, 0)})
    collector, _ = pod_collector(proc, [POD_A])

    assert collector.collect(1.0) == collector.collect(2.0) == []
    assert collector.skipped == {NO_HOST_NETNS: 2}


def test_the_host_namespace_can_be_given(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.netns(4001, 4026532501)
    proc.net_dev(4001, {"eth0": (0, 0)})
    collector = NetworkCollector(
        lambda: [POD_A],
        netlink=FakeNetlink(),
        proc_root=proc.root,
        pids_of=lambda d: PIDS.get(d, []),
        host_netns=4026532501,  # as if koordlet shared the pod's namespace
    )
    collector.collect(1.0)
    assert collector.collect(2.0) == []


def test_a_malformed_net_dev_is_skipped_and_counted(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.netns(4001, 4026532501)
    write(proc.root / "4001/net/dev", NET_DEV_HEADER + "  eth0: 12 x\n")
    collector, _ = pod_collector(proc, [POD_A])

    assert collector.collect(1.0) == []
    assert collector.skipped == {MALFORMED_NET_DEV: 1}


def test_pods_are_read_through_the_default_cgroup_procs_reader(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.netns(4001, 4026532501)
    proc.net_dev(4001, {"eth0": (0, 0)})
    cgroups = tmp_path / "cgroup"
    write(cgroups / "cpu/kubepods/poda/ca/cgroup.procs", "4001\n")  # v1: the cpu hierarchy
    collector = NetworkCollector(
        lambda: [POD_A], netlink=FakeNetlink(), proc_root=proc.root, cgroup_root=cgroups
    )
    collector.collect(1.0)
    proc.net_dev(4001, {"eth0": (300, 0)})

    assert series(collector.collect(2.0))[("pod_network_receive_bytes_rate", "a")] == 300.0


def test_parse_net_dev_reads_the_receive_and_transmit_columns() -> None:
    text = NET_DEV_HEADER + (
        "    lo:  772049     407    0    0    0     0          0         0   772049     407"
        "    0    0    0     0       0          0\n"
        "  eth0: 702249182   16142    0    0    0     0          0         0   753561    8464"
        "    0    0    0     0       0          0\n"
    )
    assert parse_net_dev(text) == {
        "lo": Traffic(772049, 772049, 407, 407),
        "eth0": Traffic(702249182, 753561, 16142, 8464),
    }


# -- this machine, read-only -----------------------------------------------------------------


def test_our_link_dump_reads_what_pyroute2_decodes_on_this_machine() -> None:
    try:
        ipr = IPRoute()
        ours = LinkDump()
    except OSError as err:
        pytest.skip(f"netlink not permitted here: {err}")
    with ipr, ours:
        before = {link["index"]: link for link in ours.get_links()}
        theirs = {msg["index"]: msg for msg in ipr.get_links()}
        after = {link["index"]: link for link in ours.get_links()}
    assert set(before) == set(theirs) == set(after)
    for index, msg in theirs.items():
        assert before[index].get_attr("IFLA_IFNAME") == msg.get_attr("IFLA_IFNAME")
        assert before[index]["flags"] == msg["flags"]
        for counter in ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets"):
            low = before[index].get_attr("IFLA_STATS64")[counter]
            high = after[index].get_attr("IFLA_STATS64")[counter]
            assert low <= msg.get_attr("IFLA_STATS64")[counter] <= high, (index, counter)


def test_real_pyroute2_links_have_the_attributes_the_collector_reads() -> None:
    try:
        ipr = IPRoute()
    except OSError as err:
        pytest.skip(f"netlink not permitted here: {err}")
    with ipr:
        links = list(ipr.get_links())
        names = {msg.get_attr("IFLA_IFNAME") for msg in links}
        assert "lo" in names
        for msg in links:
            s = msg.get_attr("IFLA_STATS64")
            assert {"rx_bytes", "tx_bytes", "rx_packets", "tx_packets"} <= set(s.keys())
            assert isinstance(msg["index"], int) and isinstance(msg["flags"], int)

        collector = NetworkCollector(netlink=ipr)
        assert collector.collect(1.0) == []
        samples = collector.collect(2.0)

    interfaces = {s.labels["interface"] for s in samples}
    assert interfaces == names - {"lo"}
    assert all(s.value >= 0 for s in samples)
    # /proc/net/dev of our own namespace lists the interfaces netlink does.
    assert set(parse_net_dev(Path("/proc/self/net/dev").read_text())) == names
