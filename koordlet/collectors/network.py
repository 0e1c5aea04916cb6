"""Network throughput: per node interface from netlink, per pod from its network namespace.

Node: one RTM_GETLINK dump (``rtnetlink.LinkDump``, a netlink socket kept open) gives each
interface's 64-bit counters (IFLA_STATS64: rx_bytes, tx_bytes, rx_packets, tx_packets); their
growth per second between passes becomes ``node_network_{receive,transmit}_{bytes,packets}_rate``
{interface}. Loopback is left out: it is traffic the node sends to itself.

Pods: a pod on the pod network has its own network namespace, shared by all its containers.
The collector finds one process of the pod (cgroup.procs of the pod's containers, the sandbox
first where the pod store has it), compares the inode of /proc/<pid>/ns/net with koordlet's own
namespace (koordlet runs on the host network: same inode means a hostNetwork pod, whose
traffic is the node's and gets no per-pod sample) and reads /proc/<pid>/net/dev, which the
kernel renders for that process's namespace, so no setns is needed. The pod's non-loopback
interfaces add up to ``pod_network_{receive,transmit}_bytes_rate`` {pod_uid}.

A series' first pass gives no sample (a rate needs two readings). An interface re-created under
the same name (a new ifindex) or a sandbox restarted (a new namespace) starts a new series; a
counter that still went backwards is skipped and counted (see rates). Nothing here changes an
interface or enters a namespace.

Usage::

    collector = NetworkCollector(lambda: pod_store, proc_root=Path("/proc"))
    collector.collect(time.time())   # first pass: baselines only
    collector.collect(time.time())   # rates
    collector.close()                # the netlink socket
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from koordlet.cgroupfs.hierarchy import read_file
from koordlet.cgroupfs.readers import CgroupProcs, PidsOf, Skip
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.rates import Counters
from koordlet.collectors.rtnetlink import LinkDump
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

IFF_LOOPBACK = 0x8  # <linux/if.h>
_NETNS = re.compile(r"^net:\[(\d+)\]\Z")  # what readlink says of /proc/<pid>/ns/net

# Reasons counted in ``skipped`` besides the rates' counter-reset and time-not-advancing.
NO_LINK_STATS = "no-link-stats"  # a link without IFLA_STATS64 or IFLA_STATS
MALFORMED_NET_DEV = "malformed-net-dev"  # /proc/<pid>/net/dev did not parse
NO_HOST_NETNS = "no-host-netns"  # koordlet's own namespace unknown: no pass of pod samples


class LinkMessage(Protocol):
    """An RTM_NEWLINK message (``rtnetlink.Link``, or pyroute2's ifinfmsg): header fields by
    key plus netlink attributes read with get_attr."""

    def get_attr(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...


class Netlink(Protocol):
    """What this collector calls of a link source (``rtnetlink.LinkDump``; pyroute2's IPRoute
    answers the same)."""

    def get_links(self) -> Iterable[LinkMessage]: ...
    def close(self) -> None: ...


def open_netlink() -> Netlink:
    """A NETLINK_ROUTE socket, or CollectorUnavailable when netlink cannot be opened."""
    try:
        socket: Netlink = LinkDump()
    except OSError as err:
        raise CollectorUnavailable(f"netlink socket: {err}") from err
    return socket


@dataclass(frozen=True)
class Traffic:
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int


def link_traffic(links: Iterable[LinkMessage]) -> tuple[dict[tuple[str, int], Traffic], int]:
    """(interface name, ifindex) → counters for every non-loopback link; and how many links
    had no counters at all."""
    out: dict[tuple[str, int], Traffic] = {}
    without_stats = 0
    for msg in links:
        name = msg.get_attr("IFLA_IFNAME")
        if not name or msg["flags"] & IFF_LOOPBACK:
            continue
        # IFLA_STATS64 since Linux 2.6.35; the 32-bit IFLA_STATS has the same field names.
        stats = msg.get_attr("IFLA_STATS64") or msg.get_attr("IFLA_STATS")
        if not stats:
            without_stats += 1
            continue
        out[(str(name), int(msg["index"]))] = Traffic(
            int(stats["rx_bytes"]),
            int(stats["tx_bytes"]),
            int(stats["rx_packets"]),
            int(stats["tx_packets"]),
        )
    return out, without_stats


def parse_net_dev(text: str) -> dict[str, Traffic]:
    """/proc/net/dev (two header lines, then "name: 8 receive fields 8 transmit fields")."""
    out: dict[str, Traffic] = {}
    for line in text.splitlines()[2:]:
        # Interface names cannot contain ':' (dev_valid_name), so the first one ends the name.
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 16 or not all(f.isdigit() for f in fields):
            raise Skip(MALFORMED_NET_DEV, f"line {line.strip()[:60]!r}")
        out[name.strip()] = Traffic(int(fields[0]), int(fields[8]), int(fields[1]), int(fields[9]))
    return out


def netns_inode(ns_link: str) -> int | None:
    """The namespace inode a /proc/<pid>/ns/net link names, None if the process is gone."""
    try:
        # a string path and os-level call: this runs for every pod every second
        target = os.readlink(ns_link)  # noqa: PTH115
    except OSError:
        return None
    match = _NETNS.match(target)
    return int(match.group(1)) if match else None


class NetworkCollector:
    """See the module docstring."""

    name = "network"

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]] = tuple,
        *,
        proc_root: Path = Path("/proc"),
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        netlink: Netlink | None = None,
        pids_of: PidsOf | None = None,
        host_netns: int | None = None,
        interval: float = 1.0,
    ) -> None:
        self.pods = pods
        self.proc_root = proc_root
        self._proc = str(proc_root).rstrip("/")
        self.interval = interval
        self.skipped: Counter[str] = Counter()
        self._netlink = netlink
        self._pids_of = CgroupProcs(cgroup_root) if pids_of is None else pids_of
        self._host_netns = host_netns  # None: koordlet's own, read on the first pass
        self._links: Counters[tuple[str, int]] = Counters()
        self._pods: Counters[tuple[str, int]] = Counters()  # (pod uid, netns inode)
        # Pod uid → (pid, netns inode) found last time: while that process is still in that
        # namespace (one readlink tells), the pod's cgroups need not be searched again.
        self._netns: dict[str, tuple[int, int]] = {}

    def close(self) -> None:
        if self._netlink is not None:
            self._netlink.close()
            self._netlink = None

    def collect(self, now: float) -> list[Sample]:
        if self._netlink is None:
            self._netlink = open_netlink()
        traffic, without_stats = link_traffic(self._netlink.get_links())
        if without_stats:
            self.skipped[NO_LINK_STATS] += without_stats
        samples: list[Sample] = []
        for key, t in traffic.items():
            labels = {"interface": key[0]}
            try:
                delta = self._links.update(
                    key, now, t.rx_bytes, t.tx_bytes, t.rx_packets, t.tx_packets
                )
            except Skip as skip:
                self.skipped[skip.reason] += 1
                continue
            if delta is None:
                continue
            for i, name in enumerate(
                (
                    "node_network_receive_bytes_rate",
                    "node_network_transmit_bytes_rate",
                    "node_network_receive_packets_rate",
                    "node_network_transmit_packets_rate",
                )
            ):
                samples.append(Sample(name, labels, now, delta.per_second(i)))
        self._links.retain_only(traffic.keys())
        samples.extend(self._pod_samples(now))
        return samples

    def _host(self) -> int | None:
        if self._host_netns is None:
            self._host_netns = netns_inode(f"{self._proc}/self/ns/net")
        return self._host_netns

    def _pod_netns(self, pod: KnownPod) -> tuple[int, int] | None:
        """(pid, netns inode) of one live process of the pod, None if it has none."""
        # The sandbox owns the namespace, but every container of the pod joins it, so any
        # live process of the pod will do. list() copies in one step: NRI may add meanwhile.
        containers = sorted(list(pod.containers.values()), key=lambda c: not c.sandbox)
        dirs = [c.cgroup_dir for c in containers if c.cgroup_dir]
        if pod.request.cgroup_dir:
            dirs.append(pod.request.cgroup_dir)
        for cgroup_dir in dirs:
            for pid in self._pids_of(cgroup_dir):
                inode = netns_inode(f"{self._proc}/{pid}/ns/net")
                if inode is not None:
                    return pid, inode
        return None

    def _pod_samples(self, now: float) -> list[Sample]:
        host = self._host()
        if host is None:
            # Without it a hostNetwork pod would be reported with the whole node's traffic.
            self.skipped[NO_HOST_NETNS] += 1
            return []
        samples: list[Sample] = []
        live: set[tuple[str, int]] = set()
        seen: set[str] = set()
        for pod in self.pods():
            uid = pod.request.uid
            seen.add(uid)
            found = self._netns.get(uid)
            if found is None or netns_inode(f"{self._proc}/{found[0]}/ns/net") != found[1]:
                found = self._pod_netns(pod)
                if found is None:
                    self._netns.pop(uid, None)
                    continue  # no process yet (or any more)
                self._netns[uid] = found
            if found[1] == host:
                continue  # the host network: its traffic is the node's
            pid, inode = found
            try:
                text = read_file(f"{self._proc}/{pid}/net/dev")
            except OSError:
                continue  # the process exited between the two reads
            key = (uid, inode)  # a new sandbox brings a new namespace: a new series baseline
            live.add(key)
            try:
                interfaces = parse_net_dev(text)
                rx = sum(t.rx_bytes for name, t in interfaces.items() if name != "lo")
                tx = sum(t.tx_bytes for name, t in interfaces.items() if name != "lo")
                delta = self._pods.update(key, now, rx, tx)
            except Skip as skip:
                self.skipped[skip.reason] += 1
                continue
            if delta is not None:
                labels = {"pod_uid": uid}
                samples.append(
                    Sample("pod_network_receive_bytes_rate", labels, now, delta.per_second(0))
                )
                samples.append(
                    Sample("pod_network_transmit_bytes_rate", labels, now, delta.per_second(1))
                )
        self._pods.retain_only(live)
        self._netns = {uid: v for uid, v in self._netns.items() if uid in seen}
        return samples
