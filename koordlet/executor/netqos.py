"""Egress bandwidth QoS on one network interface: an HTB tree from a TcPlan, and each packet's
class from its sender's cgroup v2 id, all through netlink and bpf(2).

What it does:

- ``apply_plan(plan)`` keeps the interface's root qdisc at ``htb 1:`` (default class 1:2) with
  the plan's classes: 1:1 (the total) under 1:, every other class under 1:1. It compares what
  the kernel reports first and changes only what differs; ``apply_plan(None)`` deletes the root
  qdisc if it is ours (htb, handle 1:) and leaves any other alone.
- Classification needs neither net_cls nor cls_cgroup: a cls_bpf filter (prio 1 at parent 1:,
  not direct-action, so its return value is the class id and 0 means "no match" → HTB's default
  1:2) looks the socket's cgroup v2 id up in a BPF hash map (u64 cgroup id → u32 class id).
  ``classify(mapping)`` makes the map hold exactly ``mapping``. Each NetQoS has its own map and
  program, and its first ``apply_plan`` swaps its filter in for any earlier one (a restarted
  koordlet's), so call ``classify`` first: the swapped-in filter then starts with a full map.
- ``state()`` describes what is installed; ``available()`` says whether all this can work here
  and, if not, why.

What it does not: compute the plan (``runtimehooks.hooks.tc``), decide which cgroup gets which
class (koordlet's reconciler), shape ingress, pin the map or program (they live as long as this
object: ``close()`` releases them, and the kernel keeps the program while a filter uses it), or
touch any qdisc but its own root ``htb 1:``.

Rates in a TcPlan are bytes per second, as HTB's netlink parameters are. Every failure is a
``NetQoSError`` (an OSError with the kernel's errno) naming the interface and the operation; an
interface that disappears gives ENODEV and leaves the object usable.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import socket
import stat
import struct
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from koordlet.executor import bpf
from runtimehooks.hooks.tc import ROOT_MINOR, SYSTEM_MINOR, TcPlan, classid

log = logging.getLogger(__name__)

HTB_HANDLE = classid(0)  # 1:
DEFAULT_MINOR = SYSTEM_MINOR  # unclassified traffic goes to 1:2
TC_H_ROOT = 0xFFFFFFFF
TC_HTB_NUMPRIO = 8  # HTB clamps a larger prio to 7, which would never compare equal
FILTER_PRIO = 1
FILTER_HANDLE = 1
FILTER_NAME = "koordlet-netqos"  # the program id is appended: it tells our filter from a stale one
ETH_P_ALL = 0x0003
MAP_MAX_ENTRIES = 16384  # cgroups classified at once: pods and containers on one node
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF = 12, 21, 39
_KEY, _VALUE = struct.Struct("=Q"), struct.Struct("=I")  # the map's u64 key and u32 value

_libc = ctypes.CDLL(None, use_errno=True)


class NetQoSError(OSError):
    """A traffic-control or BPF operation failed; the message names the interface and the step."""


def handle_str(handle: int) -> str:
    """tc's notation: 0x10003 → "1:3", 0x10000 → "1:"."""
    if handle == TC_H_ROOT:
        return "root"
    major, minor = handle >> 16, handle & 0xFFFF
    return f"{major:x}:{minor:x}" if minor else f"{major:x}:"


def cgroup_id(path: Path) -> int:
    """The cgroup v2 id of a cgroup directory: its inode number in the cgroup2 filesystem.

    This is what ``bpf_skb_cgroup_id`` returns for sockets created by the cgroup's processes.
    A cgroup v1 directory has an inode number too, but it means nothing to BPF, so it is
    refused.
    """
    try:
        st = path.stat()
    except OSError as err:
        raise NetQoSError(err.errno, f"cgroup {path}: {err.strerror}") from err
    if not stat.S_ISDIR(st.st_mode):
        raise NetQoSError(errno.ENOTDIR, f"cgroup {path}: not a directory")
    mounts = cgroup2_mounts()
    resolved = path.resolve()
    if not any(resolved == m or m in resolved.parents for m in mounts):
        where = ", ".join(map(str, mounts)) or "nowhere"
        raise NetQoSError(
            errno.EINVAL, f"cgroup {path}: not in a cgroup2 filesystem (mounted at {where})"
        )
    return st.st_ino


def cgroup2_mounts() -> list[Path]:
    """Mount points of cgroup2 filesystems in this mount namespace."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    # Fields: device, mount point (with " ", tab, newline and "\\" as octal escapes), type, ...
    return [
        Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1]))
        for fields in (line.split() for line in lines)
        if len(fields) > 2 and fields[2] == "cgroup2"
    ]


def _netns_socket(netns: str) -> int:
    """A NETLINK_ROUTE socket in the named network namespace; returns its fd.

    setns(CLONE_NEWNET) changes only the calling thread, so a short-lived thread enters the
    namespace and creates the socket there; a socket keeps its namespace for life. No fork:
    koordlet is multi-threaded, and pyroute2's own netns support forks a child.
    """
    path = Path(netns) if "/" in netns else NETNS_DIR / netns
    result: list[int] = []
    failure: list[OSError] = []

    def enter() -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            failure.append(err)
            return
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                err_no = ctypes.get_errno()
                failure.append(OSError(err_no, f"setns: {os.strerror(err_no)}"))
                return
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, socket.NETLINK_ROUTE)
            result.append(sock.detach())
        except OSError as err:
            failure.append(err)
        finally:
            os.close(fd)

    worker = threading.Thread(target=enter, name=f"netqos-netns-{netns}")
    worker.start()
    worker.join()
    if failure:
        err = failure[0]
        raise NetQoSError(err.errno, f"network namespace {netns} ({path}): {err.strerror or err}")
    return result[0]


def _has_capability(cap: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> cap & 1)
    except (OSError, ValueError):
        pass
    return False


def _nla(msg: Any, name: str, default: Any = None) -> Any:
    value = msg.get_attr(name)
    return default if value is None else value


def _stats(msg: Any) -> tuple[int, int]:
    """(bytes, packets) from a tc dump message's TCA_STATS2/TCA_STATS_BASIC."""
    stats2 = msg.get_attr("TCA_STATS2")
    basic = stats2.get_attr("TCA_STATS_BASIC") if stats2 is not None else None
    if basic is None:
        return 0, 0
    return int(basic["bytes"]), int(basic["packets"])


class NetQoS:
    """HTB classes and cgroup-id classification on ``ifname`` (default: the interface of the
    default IPv4 route, looked up again on every call) in network namespace ``netns`` (a name
    under /run/netns or a path; default: ours). See the module docstring."""

    def __init__(self, ifname: str | None = None, netns: str | None = None) -> None:
        self.ifname = ifname
        self.netns = netns
        self._ipr: Any = None
        self._map_fd = -1
        self._prog_fd = -1
        self._prog_id = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release the netlink socket, the map fd and the program fd.

        An installed filter keeps the program (and through it the map) alive in the kernel, but
        this object can no longer change the map; the next NetQoS replaces that filter. The
        netlink socket holds its network namespace alive until then.
        """
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None
        for fd in (self._prog_fd, self._map_fd):
            if fd >= 0:
                os.close(fd)
        self._map_fd = self._prog_fd = -1
        self._prog_id = 0

    def __enter__(self) -> NetQoS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def filter_name(self) -> str:
        return f"{FILTER_NAME}-{self._prog_id}"

    # -- netlink plumbing --------------------------------------------------------------------

    def _where(self, ifname: str | None = None) -> str:
        name = ifname or self.ifname or "default-route interface"
        return f"{name} (netns {self.netns})" if self.netns else name

    def _route(self) -> Any:
        # pyroute2 (some 12 MiB) is loaded only where network QoS is on
        from pyroute2 import IPRoute  # type: ignore[import-untyped]  # noqa: PLC0415

        if self._ipr is None:
            fileno = _netns_socket(self.netns) if self.netns else None
            try:
                # groups=0: no multicast subscriptions, so no events pile up unread.
                self._ipr = IPRoute(fileno=fileno, groups=0)
            except OSError as err:
                if fileno is not None:
                    os.close(fileno)
                raise NetQoSError(err.errno, f"{self._where()}: netlink: {err}") from err
        return self._ipr

    def _call(
        self, what: str, ifname: str, fn: Callable[..., Any], /, *args: Any, **kw: Any
    ) -> Any:
        """``fn(*args, **kw)``; any netlink or OS error becomes a NetQoSError naming the step."""
        from pyroute2.netlink.exceptions import (  # type: ignore[import-untyped]  # noqa: PLC0415
            NetlinkError,
        )

        try:
            return fn(*args, **kw)
        except NetlinkError as err:
            code = int(err.code) if err.code else errno.EIO
            raise NetQoSError(code, f"{self._where(ifname)}: {what}: {os.strerror(code)}") from err
        except OSError as err:
            raise NetQoSError(
                err.errno or errno.EIO, f"{self._where(ifname)}: {what}: {err.strerror or err}"
            ) from err

    def _default_interface(self) -> str:
        ipr = self._route()
        routes = self._call("dump IPv4 routes", "", ipr.route, "dump", family=socket.AF_INET)
        best: tuple[int, int] | None = None
        for route in routes:
            if route["dst_len"] != 0 or _nla(route, "RTA_TABLE", route["table"]) != 254:
                continue
            oif = route.get_attr("RTA_OIF")
            if oif is None:
                hops = route.get_attr("RTA_MULTIPATH") or []
                oif = hops[0]["oif"] if hops else None  # multipath: the first next hop
            if oif is None:
                continue
            metric = int(_nla(route, "RTA_PRIORITY", 0))
            if best is None or metric < best[0]:
                best = (metric, int(oif))
        if best is None:
            raise NetQoSError(errno.ENETUNREACH, f"{self._where()}: no default IPv4 route")
        links = self._call("get link", "", ipr.link, "get", index=best[1])
        return str(links[0].get_attr("IFLA_IFNAME"))

    def _link(self) -> tuple[str, int]:
        """(interface name, ifindex) now; ENODEV if it does not exist."""
        ifname = self.ifname or self._default_interface()
        found = self._call("look up", ifname, self._route().link_lookup, ifname=ifname)
        if not found:
            raise NetQoSError(errno.ENODEV, f"{self._where(ifname)}: no such interface")
        return ifname, int(found[0])

    # -- reading -----------------------------------------------------------------------------

    def _root_qdisc(self, ifname: str, index: int) -> Any | None:
        qdiscs = self._call("dump qdiscs", ifname, self._route().get_qdiscs, index)
        for q in qdiscs:
            if q["index"] == index and q["parent"] == TC_H_ROOT:
                return q
        return None  # the device's built-in default (noqueue, or noop while down)

    @staticmethod
    def _is_ours(qdisc: Any | None) -> bool:
        return (
            qdisc is not None
            and qdisc.get_attr("TCA_KIND") == "htb"
            and qdisc["handle"] == HTB_HANDLE
        )

    def _classes(self, ifname: str, index: int) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        for msg in self._call("dump classes", ifname, self._route().get_classes, index):
            if msg["index"] != index or msg.get_attr("TCA_KIND") != "htb":
                continue
            if msg["handle"] >> 16 != HTB_HANDLE >> 16:
                continue
            options = msg.get_attr("TCA_OPTIONS")
            parms = options.get_attr("TCA_HTB_PARMS")
            rate = _nla(options, "TCA_HTB_RATE64", parms["rate"])
            ceil = _nla(options, "TCA_HTB_CEIL64", parms["ceil"])
            sent, packets = _stats(msg)
            # HTB reports a top-level class's parent as TC_H_ROOT; we call it 1:.
            parent = HTB_HANDLE if msg["parent"] == TC_H_ROOT else int(msg["parent"])
            found[int(msg["handle"])] = {
                "classid": handle_str(msg["handle"]),
                "parent": handle_str(parent),
                "rate_bps": int(rate),
                "ceil_bps": int(ceil),
                "prio": int(parms["prio"]),
                "level": int(parms["level"]),
                "bytes": sent,
                "packets": packets,
            }
        return found

    def _filters(self, ifname: str, index: int) -> list[dict[str, Any]]:
        msgs = self._call(
            "dump filters", ifname, self._route().get_filters, index, parent=HTB_HANDLE
        )
        found = []
        for msg in msgs:
            if msg["handle"] == 0:
                continue  # the per-prio chain head, not a filter
            options = msg.get_attr("TCA_OPTIONS")
            name = options.get_attr("TCA_BPF_NAME") if options is not None else None
            found.append(
                {
                    "kind": msg.get_attr("TCA_KIND"),
                    "prio": msg["info"] >> 16,
                    "handle": int(msg["handle"]),
                    "name": name,
                    "ours": bool(self._prog_id) and name == self.filter_name,
                }
            )
        return found

    def state(self) -> dict[str, Any]:
        """What is installed now: root qdisc, HTB classes (rates in bytes/s, byte and packet
        counters), filters at 1:, and the classification map. JSON-serialisable."""
        result: dict[str, Any] = {"interface": self.ifname, "netns": self.netns}
        try:
            ifname, index = self._link()
        except NetQoSError as err:
            result.update(present=False, error=err.strerror)
            return result
        result.update(interface=ifname, ifindex=index, present=True)
        try:
            qdisc = self._root_qdisc(ifname, index)
            if qdisc is None:
                result["qdisc"] = None
            else:
                options = qdisc.get_attr("TCA_OPTIONS")
                init = options.get_attr("TCA_HTB_INIT") if self._is_ours(qdisc) else None
                result["qdisc"] = {
                    "kind": qdisc.get_attr("TCA_KIND"),
                    "handle": handle_str(qdisc["handle"]),
                    "default": handle_str(classid(init["defcls"])) if init else None,
                    "ours": self._is_ours(qdisc),
                }
            ours = self._is_ours(qdisc)
            result["classes"] = list(self._classes(ifname, index).values()) if ours else []
            result["filters"] = self._filters(ifname, index) if ours else []
        except NetQoSError as err:
            result.update(present=err.errno != errno.ENODEV, error=err.strerror)
        result["classified"] = {k: handle_str(v) for k, v in self.classified().items()}
        return result

    def classified(self) -> dict[int, int]:
        """The map's entries now: cgroup v2 id → class id ({} before the map exists)."""
        if self._map_fd < 0:
            return {}
        entries: dict[int, int] = {}
        try:
            for key in list(bpf.map_keys(self._map_fd, _KEY.size)):
                value = bpf.map_lookup(self._map_fd, key, _VALUE.size)
                if value is not None:
                    entries[_KEY.unpack(key)[0]] = _VALUE.unpack(value)[0]
        except bpf.BpfError as err:
            raise NetQoSError(err.errno, f"classification map: {err.strerror}") from err
        return entries

    # -- writing -----------------------------------------------------------------------------

    def apply_plan(self, plan: TcPlan | None) -> bool:
        """Make the interface match ``plan`` (None: remove our qdisc); True if anything changed.

        Raises ValueError for a plan HTB cannot hold exactly, NetQoSError when the kernel
        refuses a step or the interface is gone (ENODEV; nothing to remove for None).
        """
        if plan is None:
            return self._remove()
        wanted = _wanted_classes(plan)
        self._ensure_bpf()
        ifname, index = self._link()
        changed = False

        qdisc = self._root_qdisc(ifname, index)
        if not self._is_ours(qdisc):
            was = "none" if qdisc is None else qdisc.get_attr("TCA_KIND")
            log.info("netqos %s: root qdisc %s → htb 1:", self._where(ifname), was)
            self._install_qdisc(ifname, index, "replace")
            changed = True
        else:
            assert qdisc is not None  # _is_ours
            init = qdisc.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT")
            if init["defcls"] != DEFAULT_MINOR:
                # HTB has no "change" for its qdisc options: a new default means a new qdisc.
                log.warning(
                    "netqos %s: htb 1: has default 1:%x, rebuilding",
                    self._where(ifname),
                    init["defcls"],
                )
                self._install_qdisc(ifname, index, "rebuild")
                changed = True

        changed |= self._ensure_classes(ifname, index, wanted)
        changed |= self._ensure_filter(ifname, index)
        return changed

    def _install_qdisc(self, ifname: str, index: int, how: Literal["replace", "rebuild"]) -> None:
        """An empty root htb 1: with default class 1:2, replacing whatever root qdisc is there
        ("replace"), or deleting our own first ("rebuild": a replace of an htb 1: by an htb 1:
        would be a change, which HTB does not support)."""
        ipr = self._route()
        if how == "rebuild":
            self._call(
                "delete root qdisc htb 1:",
                ifname,
                ipr.tc,
                "del",
                "htb",
                index,
                HTB_HANDLE,
                parent=TC_H_ROOT,
            )
        self._call(
            f"{'replace root qdisc with' if how == 'replace' else 'add root qdisc'} htb 1:",
            ifname,
            ipr.tc,
            "replace" if how == "replace" else "add",
            "htb",
            index,
            HTB_HANDLE,
            parent=TC_H_ROOT,
            default=DEFAULT_MINOR,
        )

    def _remove(self) -> bool:
        try:
            ifname, index = self._link()
            qdisc = self._root_qdisc(ifname, index)
        except NetQoSError as err:
            if err.errno == errno.ENODEV:
                return False  # the interface is gone, and our qdisc with it
            raise
        if not self._is_ours(qdisc):
            return False
        try:
            self._call(
                "delete root qdisc htb 1:",
                ifname,
                self._route().tc,
                "del",
                "htb",
                index,
                HTB_HANDLE,
                parent=TC_H_ROOT,
            )
        except NetQoSError as err:
            if err.errno in (errno.ENODEV, errno.ENOENT):
                return False  # gone meanwhile
            raise
        return True

    def _ensure_classes(self, ifname: str, index: int, wanted: dict[int, dict[str, int]]) -> bool:
        ipr = self._route()
        current = self._classes(ifname, index)
        stale = [c for c in current if c not in wanted]
        misplaced = [
            c
            for c, want in wanted.items()
            if c in current and current[c]["parent"] != handle_str(want["parent"])
        ]
        if misplaced or any(current[c]["level"] > 0 for c in stale):
            # HTB cannot move a class to another parent, and a stale inner class has children:
            # start over from an empty htb 1: rather than untangle someone else's tree.
            log.warning(
                "netqos %s: rebuilding htb 1: (misplaced %s, stale %s)",
                self._where(ifname),
                [handle_str(c) for c in misplaced],
                [handle_str(c) for c in stale],
            )
            self._install_qdisc(ifname, index, "rebuild")
            current, stale = {}, []
        changed = False
        for c in stale:
            self._call(
                f"delete stale class {handle_str(c)}",
                ifname,
                ipr.tc,
                "del-class",
                index=index,
                handle=c,  # no kind: pyroute2 would encode HTB rate tables for it
            )
            changed = True
        # Parents first: dict order is the plan's order with the root class moved to the front.
        for c, want in wanted.items():
            have = current.get(c)
            if have is not None and all(
                have[k] == want[k] for k in ("rate_bps", "ceil_bps", "prio")
            ):
                continue
            command = "add-class" if have is None else "change-class"
            self._call(
                f"{command} {handle_str(c)} rate {want['rate_bps']} ceil {want['ceil_bps']} B/s",
                ifname,
                ipr.tc,
                command,
                "htb",
                index,
                c,
                parent=want["parent"],
                rate=want["rate_bps"],
                ceil=want["ceil_bps"],
                prio=want["prio"],
                quantum=_quantum(want["rate_bps"]),
            )
            changed = True
        return changed

    def _ensure_filter(self, ifname: str, index: int) -> bool:
        filters = self._filters(ifname, index)
        at_prio = [f for f in filters if f["prio"] == FILTER_PRIO]
        if len(at_prio) == 1 and at_prio[0]["ours"] and at_prio[0]["handle"] == FILTER_HANDLE:
            return False
        ipr = self._route()
        if any(f["handle"] != FILTER_HANDLE or f["kind"] != "bpf" for f in at_prio):
            # Someone else's filters at our prio (or a different kind): clear the whole prio.
            self._call(
                f"delete filters at prio {FILTER_PRIO}",
                ifname,
                ipr.tc,
                "del-filter",
                index=index,
                parent=HTB_HANDLE,
                prio=FILTER_PRIO,
            )
        # replace: atomically swaps the program of a stale filter of ours, or creates it.
        self._call(
            f"attach bpf filter {self.filter_name} at 1: prio {FILTER_PRIO}",
            ifname,
            ipr.tc,
            "replace-filter",
            "bpf",
            index,
            FILTER_HANDLE,
            parent=HTB_HANDLE,
            prio=FILTER_PRIO,
            protocol=ETH_P_ALL,
            fd=self._prog_fd,
            name=self.filter_name,
        )
        return True

    # -- BPF ---------------------------------------------------------------------------------

    def _ensure_bpf(self) -> None:
        """Create the map and load the classifier once per object."""
        if self._prog_fd >= 0:
            return
        try:
            if self._map_fd < 0:
                self._map_fd = bpf.create_hash_map(
                    _KEY.size, _VALUE.size, MAP_MAX_ENTRIES, "koord_netqos"
                )
            self._prog_fd = bpf.load_program(
                bpf.BPF_PROG_TYPE_SCHED_CLS, bpf.classifier(self._map_fd), "GPL", "koord_netqos"
            )
            self._prog_id = bpf.prog_id(self._prog_fd)
        except bpf.BpfError as err:
            detail = f"\nverifier log:\n{err.log}" if err.log else ""
            raise NetQoSError(
                err.errno, f"{self._where()}: load BPF classifier: {err.strerror}{detail}"
            ) from err

    def classify(self, mapping: Mapping[int, int]) -> int:
        """Make the map hold exactly ``mapping`` (cgroup v2 id → class id, e.g. 0x10004).

        Returns how many entries were added, changed or removed. Traffic of a cgroup not in
        the map goes to the default class 1:2.
        """
        for cg, cls in mapping.items():
            if not 0 < cg < 1 << 64 or not 0 < cls < 1 << 32:
                raise ValueError(f"classify: cgroup id {cg} → class {cls:#x} out of range")
        if len(mapping) > MAP_MAX_ENTRIES:
            raise ValueError(f"classify: {len(mapping)} cgroups, at most {MAP_MAX_ENTRIES}")
        self._ensure_bpf()
        current = self.classified()
        changes = 0
        try:
            for cg in current.keys() - mapping.keys():
                bpf.map_delete(self._map_fd, _KEY.pack(cg))
                changes += 1
            for cg, cls in mapping.items():
                if current.get(cg) != cls:
                    bpf.map_update(self._map_fd, _KEY.pack(cg), _VALUE.pack(cls))
                    changes += 1
        except bpf.BpfError as err:
            raise NetQoSError(err.errno, f"classification map: {err.strerror}") from err
        return changes

    # -- probing -----------------------------------------------------------------------------

    def available(self) -> tuple[bool, str]:
        """Whether HTB and cgroup-id classification can work here; the reason when not.

        Loads the classifier (so a verifier refusal shows its log), resolves the interface,
        and checks capabilities and cgroup2; it changes nothing on the interface.
        """
        if not _has_capability(CAP_NET_ADMIN):
            return False, "no permission: CAP_NET_ADMIN is needed to change traffic control"
        if not (_has_capability(CAP_BPF) or _has_capability(CAP_SYS_ADMIN)):
            return False, "no permission: CAP_BPF (or CAP_SYS_ADMIN) is needed to load BPF"
        if not cgroup2_mounts():
            return False, "no cgroup2 filesystem mounted: cgroup ids mean nothing to BPF"
        try:
            ifname, _ = self._link()
            self._ensure_bpf()
        except NetQoSError as err:
            return False, str(err.strerror)
        return True, f"{self._where(ifname)}: htb and cls_bpf classifier {self.filter_name}"


def _quantum(rate: int) -> int:
    """HTB's rate / r2q, clamped as the kernel would, but explicit so it does not warn."""
    return max(1000, min(rate // 10, 200000))


def _wanted_classes(plan: TcPlan) -> dict[int, dict[str, int]]:
    """The plan's classes by class id, root first; ValueError for what HTB cannot hold."""
    by_minor = {c.minor: c for c in plan.classes}
    if len(by_minor) != len(plan.classes):
        raise ValueError("TcPlan: duplicate class minors")
    for required in (ROOT_MINOR, DEFAULT_MINOR):
        if required not in by_minor:
            raise ValueError(f"TcPlan: no class 1:{required:x}")
    wanted: dict[int, dict[str, int]] = {}
    for c in sorted(plan.classes, key=lambda c: c.minor != ROOT_MINOR):
        if not 0 < c.minor < 0xFFFF:
            raise ValueError(f"TcPlan: class minor {c.minor} out of range")
        if not 0 <= c.prio < TC_HTB_NUMPRIO:
            raise ValueError(f"TcPlan: class 1:{c.minor:x} prio {c.prio} not in 0..7")
        if c.rate_bps <= 0 or c.ceil_bps <= 0:
            raise ValueError(f"TcPlan: class 1:{c.minor:x} needs positive rate and ceil")
        wanted[classid(c.minor)] = {
            "parent": HTB_HANDLE if c.minor == ROOT_MINOR else classid(ROOT_MINOR),
            "rate_bps": c.rate_bps,
            # HTB lets a class borrow up to ceil; a ceil below the rate makes no sense to it.
            "ceil_bps": max(c.rate_bps, c.ceil_bps),
            "prio": c.prio,
        }
    return wanted
