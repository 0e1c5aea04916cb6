"""The cgroup file parsers the collectors read every second: whole files and wanted keys."""

from __future__ import annotations

import pytest

from koordlet.cgroupfs.readers import MALFORMED, Skip, parse_flat_keyed, parse_keys

V2_MEMORY_STAT = "anon 4096\nfile 8192\nactive_anon 1024\ninactive_anon 3072\nunevictable 0"
V1_MEMORY_STAT = "cache 10\nrss 20\nactive_anon 7\ntotal_rss 99\ntotal_active_anon 70\n"


def test_wanted_keys_match_whole_names_not_their_endings() -> None:
    wanted = frozenset({"anon", "unevictable", "inactive_file"})
    assert parse_keys(V2_MEMORY_STAT, wanted, "m") == {"anon": 4096, "unevictable": 0}
    v1 = parse_keys(V1_MEMORY_STAT, frozenset({"active_anon", "total_active_anon"}), "m")
    assert v1 == {"active_anon": 7, "total_active_anon": 70}
    # only inside a longer name: absent (the caller's ``require`` says malformed)
    assert parse_keys("total_active_anon 70\n", frozenset({"active_anon"}), "m") == {}
    assert parse_keys("xanon 1\nanon 2\n", frozenset({"anon"}), "m") == {"anon": 2}


@pytest.mark.parametrize(
    "text",
    ["anon 12x\nfile 1\n", "anon -5\n", "anon 1 2\n", "anon \n", "file 1\nanon 0x1"],
)
def test_a_wanted_line_that_is_not_a_count_spoils_the_file(text: str) -> None:
    with pytest.raises(Skip) as skipped:
        parse_keys(text, frozenset({"anon", "file"}), "memory.stat")
    assert skipped.value.reason == MALFORMED


def test_an_unwanted_bad_line_is_ignored_but_the_whole_file_parser_refuses_it() -> None:
    text = "anon 5\nweird line here\nfile 9\n"
    assert parse_keys(text, frozenset({"anon", "file"}), "m") == {"anon": 5, "file": 9}
    with pytest.raises(Skip):
        parse_flat_keyed(text, "m")
