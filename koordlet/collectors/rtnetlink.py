"""The node's links and their counters from one RTM_GETLINK dump on a NETLINK_ROUTE socket.

The network collector needs, once a second, each interface's name, index, flags and four
64-bit counters. pyroute2 decodes every attribute of every message into dicts and weighs
some 12 MiB of a koordlet's memory; this reads the fixed layouts the kernel's uapi headers
give and nothing else:

* ``struct nlmsghdr`` (<linux/netlink.h>): len u32, type u16, flags u16, seq u32, pid u32.
* ``struct ifinfomsg`` (<linux/rtnetlink.h>): family u8, pad u8, type u16, index s32,
  flags u32, change u32; then ``struct rtattr`` (len u16, type u16, data, 4-byte aligned).
* IFLA_IFNAME (3): a NUL-terminated name; IFLA_STATS64 (23): ``struct rtnl_link_stats64``,
  whose first four u64 are rx_packets, tx_packets, rx_bytes, tx_bytes (<linux/if_link.h>);
  IFLA_STATS (7): the same four first, as u32.

Messages come back as ``Link``, which answers ``get_attr`` and ``[]`` by the names the
collector asks pyroute2's messages for, so either can feed it.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

NLMSG_ERROR = 2
NLMSG_DONE = 3
RTM_NEWLINK = 16
RTM_GETLINK = 18
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
IFLA_IFNAME = 3
IFLA_STATS = 7
IFLA_STATS64 = 23

_NLMSGHDR = struct.Struct("=IHHII")
_IFINFOMSG = struct.Struct("=BxHiII")
_RTATTR = struct.Struct("=HH")
_STATS64 = struct.Struct("=4Q")
_STATS32 = struct.Struct("=4I")
_COUNTERS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes")
RECV_SIZE = 1 << 16


class NetlinkError(OSError):
    """The kernel answered the dump with an error (NLMSG_ERROR), or a message was cut short."""


@dataclass(frozen=True)
class Link:
    """One RTM_NEWLINK message: header fields by key, the attributes read by name."""

    index: int
    flags: int
    attrs: dict[str, Any] = field(default_factory=dict)

    def get_attr(self, name: str) -> Any:
        return self.attrs.get(name)

    def __getitem__(self, key: str) -> Any:
        return {"index": self.index, "flags": self.flags}[key]


def _align(n: int) -> int:
    return (n + 3) & ~3


def parse_link(body: bytes) -> Link:
    """An RTM_NEWLINK payload (ifinfomsg and attributes) → ``Link``."""
    if len(body) < _IFINFOMSG.size:
        raise NetlinkError(f"RTM_NEWLINK of {len(body)} bytes: shorter than ifinfomsg")
    _family, _type, index, flags, _change = _IFINFOMSG.unpack_from(body)
    attrs: dict[str, Any] = {}
    at = _IFINFOMSG.size
    while at + _RTATTR.size <= len(body):
        length, kind = _RTATTR.unpack_from(body, at)
        if length < _RTATTR.size or at + length > len(body):
            raise NetlinkError(f"attribute of length {length} at {at} overruns the message")
        data = body[at + _RTATTR.size : at + length]
        kind &= 0x3FFF  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER
        if kind == IFLA_IFNAME:
            attrs["IFLA_IFNAME"] = data.split(b"\0", 1)[0].decode(errors="replace")
        elif kind == IFLA_STATS64 and len(data) >= _STATS64.size:
            attrs["IFLA_STATS64"] = dict(zip(_COUNTERS, _STATS64.unpack_from(data), strict=True))
        elif kind == IFLA_STATS and len(data) >= _STATS32.size:
            attrs["IFLA_STATS"] = dict(zip(_COUNTERS, _STATS32.unpack_from(data), strict=True))
        at += _align(length)
    return Link(index, flags, attrs)


def parse_messages(data: bytes, seq: int) -> tuple[list[Link], bool]:
    """The links in one datagram of the dump answering ``seq``, and whether it was the last."""
    links: list[Link] = []
    at = 0
    while at + _NLMSGHDR.size <= len(data):
        length, kind, _flags, got_seq, _pid = _NLMSGHDR.unpack_from(data, at)
        if length < _NLMSGHDR.size or at + length > len(data):
            raise NetlinkError(f"netlink message of length {length} at {at} is cut short")
        body = data[at + _NLMSGHDR.size : at + length]
        at += _align(length)
        if got_seq != seq:
            continue  # an answer to an earlier, abandoned request
        if kind == NLMSG_DONE:
            return links, True
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", body) if len(body) >= 4 else (-1,)
            raise NetlinkError(-code, f"RTM_GETLINK: {os.strerror(-code)}")
        if kind == RTM_NEWLINK:
            links.append(parse_link(body))
    return links, False


class LinkDump:
    """A NETLINK_ROUTE socket kept open for RTM_GETLINK dumps (the collector's ``Netlink``)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.settimeout(5.0)  # a kernel that never answers must not hang the collector
        self._seq = itertools.count(1)

    def get_links(self) -> list[Link]:
        seq = next(self._seq)
        header = _NLMSGHDR.pack(
            _NLMSGHDR.size + _IFINFOMSG.size, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
        )
        self._sock.send(header + _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
        links: list[Link] = []
        done = False
        while not done:
            found, done = parse_messages(self._sock.recv(RECV_SIZE), seq)
            links.extend(found)
        return links

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> LinkDump:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
