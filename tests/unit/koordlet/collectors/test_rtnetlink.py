"""The RTM_GETLINK decoder on datagrams built by hand: links, counters, errors, bad lengths."""

from __future__ import annotations

import errno
import struct

import pytest

from koordlet.collectors.rtnetlink import (
    IFLA_IFNAME,
    IFLA_STATS,
    IFLA_STATS64,
    NLMSG_DONE,
    NLMSG_ERROR,
    RTM_NEWLINK,
    NetlinkError,
    parse_messages,
)

SEQ = 41


def attr(kind: int, data: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(data), kind) + data
    return raw + b"\0" * (-len(raw) % 4)


def message(kind: int, body: bytes, seq: int = SEQ) -> bytes:
    raw = struct.pack("=IHHII", 16 + len(body), kind, 2, seq, 0) + body
    return raw + b"\0" * (-len(raw) % 4)


def link(index: int, flags: int, *attrs: bytes) -> bytes:
    return message(RTM_NEWLINK, struct.pack("=BxHiII", 0, 1, index, flags, 0) + b"".join(attrs))


STATS64 = struct.pack("=4Q", 7, 9, 2**40 + 3, 2**33 + 5) + b"\0" * (23 - 4) * 8


def test_links_with_names_flags_and_64_bit_counters_then_done() -> None:
    data = (
        link(1, 0x49, attr(IFLA_IFNAME, b"lo\0"), attr(IFLA_STATS64, STATS64))
        + link(7, 0x1043, attr(99, b"\x01\x02\x03"), attr(IFLA_IFNAME, b"veth9f\0"))
        + message(NLMSG_DONE, struct.pack("=i", 0))
    )
    links, done = parse_messages(data, SEQ)
    assert done
    assert [(x["index"], x["flags"], x.get_attr("IFLA_IFNAME")) for x in links] == [
        (1, 0x49, "lo"),
        (7, 0x1043, "veth9f"),
    ]
    assert links[0].get_attr("IFLA_STATS64") == {
        "rx_packets": 7,
        "tx_packets": 9,
        "rx_bytes": 2**40 + 3,
        "tx_bytes": 2**33 + 5,
    }
    assert links[1].get_attr("IFLA_STATS64") is None  # unknown attribute 99 skipped


def test_the_32_bit_counters_of_an_old_kernel_and_a_dump_spread_over_datagrams() -> None:
    first, done = parse_messages(
        link(3, 0, attr(IFLA_IFNAME, b"eth0\0"), attr(IFLA_STATS, struct.pack("=4I", 1, 2, 3, 4)))
        + message(RTM_NEWLINK + 5, b"\0" * 16),  # not a link: ignored
        SEQ,
    )
    assert not done and first[0].get_attr("IFLA_STATS")["tx_bytes"] == 4
    rest, done = parse_messages(message(NLMSG_DONE, b"\0" * 4, seq=SEQ - 1), SEQ)
    assert (rest, done) == ([], False)  # the end of an older request is not ours


def test_an_error_answer_is_raised_with_its_errno() -> None:
    with pytest.raises(NetlinkError) as raised:
        parse_messages(message(NLMSG_ERROR, struct.pack("=i", -errno.EPERM) + b"\0" * 16), SEQ)
    assert raised.value.errno == errno.EPERM


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(link(1, 0)[:-4] + b"", id="ifinfomsg-cut"),
        pytest.param(struct.pack("=IHHII", 400, RTM_NEWLINK, 2, SEQ, 0), id="length-past-end"),
        pytest.param(struct.pack("=IHHII", 8, RTM_NEWLINK, 2, SEQ, 0), id="length-under-header"),
        pytest.param(
            message(RTM_NEWLINK, struct.pack("=BxHiII", 0, 1, 2, 0, 0) + struct.pack("=HH", 64, 3)),
            id="attribute-overruns",
        ),
        pytest.param(
            message(RTM_NEWLINK, struct.pack("=BxHiII", 0, 1, 2, 0, 0) + struct.pack("=HH", 2, 3)),
            id="attribute-under-header",
        ),
    ],
)
def test_lengths_that_do_not_add_up_are_refused(data: bytes) -> None:
    with pytest.raises(NetlinkError):
        parse_messages(data, SEQ)
