"""NetQoS on a private veth pair: HTB classes from a TcPlan, egress classified by cgroup v2 id.

Two network namespaces of the test's own (``koord-e2e-<random>-a``/``-b``) joined by a veth
pair; NetQoS works on the first end. Classification is proved with real packets: a process in
a test-owned cgroup v2 directory sends UDP to the peer and HTB class 1:4's counters grow by
exactly its packets; a process in an unmapped cgroup lands in the default class 1:2. Nothing
here needs containerd; everything created is removed, and the removal is checked.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import IPRoute, netns  # type: ignore[import-untyped]

from koordlet.executor import bpf
from koordlet.executor.netqos import (
    NETNS_DIR,
    NetQoS,
    NetQoSError,
    cgroup2_mounts,
    cgroup_id,
    handle_str,
)
from runtimehooks.hooks.tc import HtbClass, TcPlan

CGROUP_ROOT = Path("/sys/fs/cgroup")
MBIT = 1_000_000 // 8  # bytes per second in one Mbit/s
PAYLOAD = 1000
FRAME = 14 + 20 + 8 + PAYLOAD  # what HTB counts per UDP datagram: Ethernet + IPv4 + UDP
MNT_DETACH = 2

# Runs as its own process: joins the cgroup (if any) before creating its socket, since a socket
# belongs to the cgroup its creator was in; then enters the namespace and sends.
SENDER = """
import ctypes, os, socket, sys
cgroup, nspath, host, count, size = sys.argv[1:6]
if cgroup:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
fd = os.open(nspath, os.O_RDONLY)
if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
    raise OSError(ctypes.get_errno(), "setns " + nspath)
os.close(fd)
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(count)):
    sock.sendto(b"k" * int(size), (host, 9))
"""


def plan(total_mbit: int, ls: tuple[int, int], be: tuple[int, int]) -> TcPlan:
    """A TcPlan by hand: rates in Mbit/s → bytes/s, as runtimehooks.hooks.tc builds them."""
    total = total_mbit * MBIT
    return TcPlan(
        total,
        (
            HtbClass(1, total, total, 0),
            HtbClass(2, total - (ls[0] + be[0]) * MBIT, total, 1),
            HtbClass(3, ls[0] * MBIT, ls[1] * MBIT, 2),
            HtbClass(4, be[0] * MBIT, be[1] * MBIT, 3),
        ),
    )


PLAN = plan(100, ls=(10, 50), be=(5, 10))
EXPECTED_SHAPE = {
    "1:1": ("1:", 100 * MBIT, 100 * MBIT, 0),
    "1:2": ("1:1", 85 * MBIT, 100 * MBIT, 1),
    "1:3": ("1:1", 10 * MBIT, 50 * MBIT, 2),
    "1:4": ("1:1", 5 * MBIT, 10 * MBIT, 3),
}


@dataclass
class Pair:
    ns: str  # NetQoS's namespace
    peer_ns: str
    ifname: str
    local: str
    peer: str


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, tc, bpf, cgroups)")


def _cgroup2_root() -> Path:
    """The v2 tree: /sys/fs/cgroup/unified on hybrid machines, /sys/fs/cgroup on pure v2."""
    mounts = cgroup2_mounts()
    for candidate in (CGROUP_ROOT / "unified", CGROUP_ROOT):
        if candidate in mounts:
            return candidate
    if not mounts:
        pytest.skip("no cgroup2 filesystem mounted: bpf_skb_cgroup_id has nothing to report")
    return mounts[0]


def _umount_run_netns_if_ours(created: bool) -> None:
    """pyroute2 (like iproute2) makes /run/netns a shared bind mount of itself; undo that if
    this test created the directory and no other namespace lives there now."""
    if not created or not NETNS_DIR.is_dir() or any(NETNS_DIR.iterdir()):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(str(NETNS_DIR).encode(), MNT_DETACH)  # EINVAL when it is no mount point
    NETNS_DIR.rmdir()


@pytest.fixture
def pair() -> Iterator[Pair]:
    _require_root()
    token = secrets.token_hex(4)
    names = (f"koord-e2e-{token}-a", f"koord-e2e-{token}-b")
    net = secrets.randbelow(256)
    created_dir = not NETNS_DIR.exists()
    made: list[str] = []
    try:
        for name in names:
            netns.create(name)
            made.append(name)
        local, peer = f"10.250.{net}.1", f"10.250.{net}.2"
        with IPRoute(netns=names[0], flags=0, groups=0) as ip:
            ip.link("add", ifname="kq0", kind="veth", peer={"ifname": "kq1", "net_ns_fd": names[1]})
            index = ip.link_lookup(ifname="kq0")[0]
            ip.addr("add", index=index, address=local, prefixlen=24)
            ip.link("set", index=index, state="up")
        with IPRoute(netns=names[1], flags=0, groups=0) as ip:
            index = ip.link_lookup(ifname="kq1")[0]
            ip.addr("add", index=index, address=peer, prefixlen=24)
            ip.link("set", index=index, state="up")
        yield Pair(names[0], names[1], "kq0", local, peer)
    finally:
        for name in made:
            netns.remove(name)  # the veth pair goes with its namespaces
        _umount_run_netns_if_ours(created_dir)
    assert not set(names) & set(netns.listnetns()), "namespaces left behind"
    assert not created_dir or not NETNS_DIR.exists(), f"{NETNS_DIR} left behind"


@pytest.fixture
def qos(pair: Pair) -> Iterator[NetQoS]:
    q = NetQoS(pair.ifname, netns=pair.ns)
    try:
        yield q
    finally:
        q.close()


@pytest.fixture
def cgroup() -> Iterator[Path]:
    _require_root()
    path = _cgroup2_root() / f"koord-e2e-netqos-{secrets.token_hex(4)}"
    path.mkdir()
    try:
        yield path
    finally:
        deadline = time.monotonic() + 10
        while (path / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)  # a sender still exiting
        path.rmdir()
    assert not path.exists(), f"cgroup {path} left behind"


def send(pair: Pair, cgroup: Path | None, count: int) -> None:
    """``count`` UDP datagrams to the peer from a new process (in ``cgroup`` if given)."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            SENDER,
            str(cgroup or ""),
            str(NETNS_DIR / pair.ns),
            pair.peer,
            str(count),
            str(PAYLOAD),
        ],
        check=True,
        timeout=30,
    )


def classes(q: NetQoS) -> dict[str, dict[str, Any]]:
    return {c["classid"]: c for c in q.state()["classes"]}


def shape(q: NetQoS) -> dict[str, tuple[str, int, int, int]]:
    """Each class's parent, rate, ceil and prio: what a plan decides (counters left out)."""
    return {
        cid: (c["parent"], c["rate_bps"], c["ceil_bps"], c["prio"]) for cid, c in classes(q).items()
    }


def wait_packets(q: NetQoS, classid: str, at_least: int) -> dict[str, dict[str, Any]]:
    """Classes once ``classid`` has counted ``at_least`` packets (HTB counts on dequeue)."""
    deadline = time.monotonic() + 10
    while True:
        now = classes(q)
        if now[classid]["packets"] >= at_least or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def kernel_dump(pair: Pair) -> tuple[list[Any], list[Any], list[Any]]:
    """qdiscs, classes and filters of the veth as pyroute2 reads them, independent of NetQoS."""
    with IPRoute(netns=pair.ns, flags=0, groups=0) as ip:
        index = ip.link_lookup(ifname=pair.ifname)[0]
        return (
            list(ip.get_qdiscs(index)),
            list(ip.get_classes(index)),
            [f for f in ip.get_filters(index, parent=0x10000) if f["handle"]],
        )


def test_plan_applied_once_then_changed_then_removed(pair: Pair, qos: NetQoS) -> None:
    ok, why = qos.available()
    assert ok, why

    assert qos.apply_plan(PLAN) is True
    state = qos.state()
    assert state["qdisc"] == {"kind": "htb", "handle": "1:", "default": "1:2", "ours": True}
    assert shape(qos) == EXPECTED_SHAPE
    [flt] = state["filters"]
    assert (flt["kind"], flt["prio"], flt["handle"], flt["ours"]) == ("bpf", 1, 1, True)

    # The same, read straight from the kernel.
    qdiscs, kclasses, filters = kernel_dump(pair)
    [root] = [q for q in qdiscs if q["parent"] == 0xFFFFFFFF]
    assert (root.get_attr("TCA_KIND"), root["handle"]) == ("htb", 0x10000)
    assert root.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT")["defcls"] == 2
    rates = {
        handle_str(c["handle"]): (
            c.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")["rate"],
            c.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")["ceil"],
        )
        for c in kclasses
    }
    assert rates == {
        "1:1": (12_500_000, 12_500_000),
        "1:2": (10_625_000, 12_500_000),
        "1:3": (1_250_000, 6_250_000),
        "1:4": (625_000, 1_250_000),
    }
    assert [(f.get_attr("TCA_KIND"), f["info"] >> 16) for f in filters] == [("bpf", 1)]
    assert filters[0].get_attr("TCA_OPTIONS").get_attr("TCA_BPF_NAME") == qos.filter_name

    # Again: nothing to do, nothing touched.
    before = shape(qos)
    assert qos.apply_plan(PLAN) is False
    assert shape(qos) == before
    assert qos.state()["filters"] == state["filters"]

    # BE may now borrow up to 20 Mbit/s: only 1:4 changes.
    assert qos.apply_plan(plan(100, ls=(10, 50), be=(5, 20))) is True
    after = shape(qos)
    assert after["1:4"] == ("1:1", 5 * MBIT, 20 * MBIT, 3)
    assert {k: v for k, v in after.items() if k != "1:4"} == {
        k: v for k, v in before.items() if k != "1:4"
    }
    assert qos.state()["filters"] == state["filters"]  # the filter was left as it was

    # A new NetQoS (a restarted koordlet) replaces the filter that points at the old map.
    with NetQoS(pair.ifname, netns=pair.ns) as second:
        assert second.apply_plan(plan(100, ls=(10, 50), be=(5, 20))) is True
        [flt2] = second.state()["filters"]
        assert flt2["ours"] and flt2["name"] != flt["name"]
        assert second.apply_plan(plan(100, ls=(10, 50), be=(5, 20))) is False

    assert qos.apply_plan(None) is True
    gone = qos.state()
    assert gone["qdisc"] in (
        None,
        {"kind": "noqueue", "handle": "0:", "default": None, "ours": False},
    )
    assert gone["classes"] == gone["filters"] == []
    assert qos.apply_plan(None) is False


def test_foreign_trees_are_brought_to_the_plan(pair: Pair, qos: NetQoS) -> None:
    """Whatever another tool left on the interface ends as exactly the plan's tree."""
    ip = IPRoute(netns=pair.ns, flags=0, groups=0)
    try:
        index = ip.link_lookup(ifname=pair.ifname)[0]
        u32 = {"protocol": 0x0800, "target": 0x10003, "keys": ["0x0/0x0+0"]}

        # htb 1: with 1:3 under an extra inner class 1:5, a stale leaf and a u32 at our prio.
        ip.tc("add", "htb", index, 0x10000, default=0x2)
        ip.tc("add-class", "htb", index, 0x10001, parent=0x10000, rate=MBIT, ceil=MBIT)
        ip.tc("add-class", "htb", index, 0x10005, parent=0x10001, rate=MBIT // 2, ceil=MBIT)
        ip.tc("add-class", "htb", index, 0x10003, parent=0x10005, rate=MBIT // 4, ceil=MBIT)
        ip.tc("add-filter", "u32", index, parent=0x10000, prio=1, **u32)
        assert qos.apply_plan(PLAN) is True
        assert shape(qos) == EXPECTED_SHAPE
        assert [f["ours"] for f in qos.state()["filters"]] == [True]
        assert qos.apply_plan(PLAN) is False

        # A stale leaf, and our filter swapped for a u32: only those two are mended.
        ip.tc("add-class", "htb", index, 0x10007, parent=0x10001, rate=MBIT, ceil=MBIT)
        ip.tc("del-filter", index=index, parent=0x10000, prio=1)
        ip.tc("add-filter", "u32", index, parent=0x10000, prio=1, **u32)
        assert qos.apply_plan(PLAN) is True
        assert shape(qos) == EXPECTED_SHAPE
        assert [(f["kind"], f["ours"]) for f in qos.state()["filters"]] == [("bpf", True)]

        # Another htb with another default class: rebuilt (HTB cannot change its default).
        ip.tc("del", "htb", index, 0x10000, parent=0xFFFFFFFF)
        ip.tc("add", "htb", index, 0x10000, default=0x30)
        assert qos.apply_plan(PLAN) is True
        assert qos.state()["qdisc"]["default"] == "1:2"
        assert shape(qos) == EXPECTED_SHAPE

        # Somebody else's root qdisc (htb 2:): not ours to remove, but replaced by a plan.
        ip.tc("del", "htb", index, 0x10000, parent=0xFFFFFFFF)
        ip.tc("add", "htb", index, 0x20000, default=0x1)
        assert qos.apply_plan(None) is False
        assert qos.state()["qdisc"]["handle"] == "2:"
        assert qos.apply_plan(PLAN) is True
        assert qos.state()["qdisc"]["handle"] == "1:"
        assert shape(qos) == EXPECTED_SHAPE
    finally:
        ip.close()


def test_plans_htb_cannot_hold_are_refused(qos: NetQoS) -> None:
    root, system = HtbClass(1, MBIT, MBIT, 0), HtbClass(2, MBIT, MBIT, 1)
    for bad, message in [
        (TcPlan(MBIT, (system,)), "no class 1:1"),
        (TcPlan(MBIT, (root,)), "no class 1:2"),
        (TcPlan(MBIT, (root, system, HtbClass(3, MBIT, MBIT, 8))), "prio 8"),
        (TcPlan(MBIT, (root, system, HtbClass(3, 0, MBIT, 2))), "positive rate"),
        (TcPlan(MBIT, (root, system, system)), "duplicate"),
    ]:
        with pytest.raises(ValueError, match=message):
            qos.apply_plan(bad)
    assert qos.state()["qdisc"] is None or not qos.state()["qdisc"]["ours"]


def test_egress_classified_by_sender_cgroup(pair: Pair, qos: NetQoS, cgroup: Path) -> None:
    cg = cgroup_id(cgroup)
    assert cg == cgroup.stat().st_ino
    qos.apply_plan(PLAN)
    assert qos.classify({cg: 0x10004}) == 1
    assert qos.classify({cg: 0x10004}) == 0
    assert qos.classified() == {cg: 0x10004}
    assert qos.state()["classified"] == {cg: "1:4"}
    start = classes(qos)

    send(pair, cgroup, 50)
    mid = wait_packets(qos, "1:4", start["1:4"]["packets"] + 50)
    assert mid["1:4"]["packets"] - start["1:4"]["packets"] == 50
    assert mid["1:4"]["bytes"] - start["1:4"]["bytes"] == 50 * FRAME
    assert mid["1:3"]["bytes"] == start["1:3"]["bytes"]

    send(pair, None, 40)  # the test's own cgroup: not in the map → default class 1:2
    end = wait_packets(qos, "1:2", mid["1:2"]["packets"] + 40)
    assert end["1:2"]["packets"] - mid["1:2"]["packets"] >= 40
    assert end["1:2"]["bytes"] - mid["1:2"]["bytes"] >= 40 * FRAME
    assert end["1:4"]["bytes"] == mid["1:4"]["bytes"]
    assert end["1:3"]["bytes"] == start["1:3"]["bytes"]
    print(
        f"bytes per class: 1:2 {end['1:2']['bytes']} ({end['1:2']['packets']} packets), "
        f"1:3 {end['1:3']['bytes']}, 1:4 {end['1:4']['bytes']} ({end['1:4']['packets']} packets)"
    )

    # Re-mapped to LS: the same cgroup's traffic moves to 1:3 without touching the filter.
    assert qos.classify({cg: 0x10003}) == 1
    send(pair, cgroup, 30)
    last = wait_packets(qos, "1:3", end["1:3"]["packets"] + 30)
    assert last["1:3"]["packets"] - end["1:3"]["packets"] == 30
    assert last["1:4"]["bytes"] == end["1:4"]["bytes"]

    assert qos.classify({}) == 1
    assert qos.classified() == {}


def test_cgroup_id_refuses_what_is_not_cgroup_v2(cgroup: Path, tmp_path: Path) -> None:
    v1 = CGROUP_ROOT / "cpu"  # a cgroup v1 hierarchy on hybrid machines
    for other in (v1, tmp_path) if v1.is_dir() else (tmp_path,):
        with pytest.raises(NetQoSError, match="not in a cgroup2 filesystem"):
            cgroup_id(other)
    with pytest.raises(NetQoSError) as raised:
        cgroup_id(cgroup / "missing")
    assert raised.value.errno == errno.ENOENT
    assert cgroup_id(cgroup) == cgroup.stat().st_ino > 1


def test_interface_that_disappears(pair: Pair, qos: NetQoS) -> None:
    assert qos.apply_plan(PLAN) is True
    with IPRoute(netns=pair.ns, flags=0, groups=0) as ip:
        ip.link("del", index=ip.link_lookup(ifname=pair.ifname)[0])
    with pytest.raises(NetQoSError) as raised:
        qos.apply_plan(PLAN)
    assert raised.value.errno == errno.ENODEV
    assert pair.ifname in str(raised.value)
    assert qos.apply_plan(None) is False
    assert qos.state()["present"] is False
    assert qos.classify({12345: 0x10004}) == 1  # the map does not depend on the interface


def test_no_default_route_is_reported(pair: Pair) -> None:
    with NetQoS(netns=pair.ns) as q:  # the namespace has a connected route only
        ok, why = q.available()
        assert not ok
        assert "no default IPv4 route" in why


def test_refused_classifier_is_explained_with_the_verifier_log(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program the verifier refuses makes available() say so, with the verifier's words."""
    real = bpf.classifier
    # Without its first instruction the program stores r0 before anything set it.
    monkeypatch.setattr(bpf, "classifier", lambda fd: real(fd)[bpf.INSN_SIZE :])
    with NetQoS(pair.ifname, netns=pair.ns) as q:
        ok, why = q.available()
        assert not ok
        assert "load BPF classifier" in why and "verifier log" in why
        assert "R0 !read_ok" in why
        with pytest.raises(NetQoSError) as raised:
            q.apply_plan(PLAN)
        assert raised.value.errno == errno.EACCES
        assert q.state()["qdisc"] is None or not q.state()["qdisc"]["ours"]  # nothing touched
