"""The cgroup file parsers the collectors read every second: whole files and wanted keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from koordlet.cgroupfs import readers
from koordlet.cgroupfs.readers import MALFORMED, CgroupFS, Skip, parse_flat_keyed, parse_keys

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


class TestTheSameCpuStatIsNotParsedTwice:
    """CgroupFS(keep_open=True): a cpu.stat with last pass's very text gives last pass's
    numbers without parsing; any change is parsed, errors are never remembered; memory.stat is
    parsed every time."""

    KEYS = frozenset({"total_active_anon", "total_rss"})

    @pytest.fixture
    def parsed(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        calls: list[str] = []

        def counting(real: Callable[..., dict[str, int]]) -> Callable[..., dict[str, int]]:
            def parse(text: str, *args: object) -> dict[str, int]:
                calls.append(text)
                return real(text, *args)

            return parse

        monkeypatch.setattr(readers, "parse_keys", counting(readers.parse_keys))
        monkeypatch.setattr(readers, "parse_flat_keyed", counting(readers.parse_flat_keyed))
        return calls

    @staticmethod
    def cgroups(tmp_path: Path) -> CgroupFS:
        for sub in ("cpu", "memory"):
            (tmp_path / sub / "pod").mkdir(parents=True)
        (tmp_path / "cpu" / "pod" / "cpu.stat").write_text("nr_periods 5\nnr_throttled 1\n")
        return CgroupFS(tmp_path, 1, keep_open=True)

    def test_an_unchanged_cpu_stat_is_parsed_once_and_a_change_after_it_is_seen(
        self, tmp_path: Path, parsed: list[str]
    ) -> None:
        cgroups = self.cgroups(tmp_path)
        for _ in range(3):
            assert cgroups.cpu_stat("pod") == {"nr_periods": 5, "nr_throttled": 1}
            cgroups.sweep()
        assert len(parsed) == 1  # the second and third passes reused the first's numbers
        (tmp_path / "cpu" / "pod" / "cpu.stat").write_text("nr_periods 6\nnr_throttled 1\n")
        assert cgroups.cpu_stat("pod") == {"nr_periods": 6, "nr_throttled": 1}
        assert len(parsed) == 2

    def test_a_bad_cpu_stat_is_refused_every_time(self, tmp_path: Path, parsed: list[str]) -> None:
        cgroups = self.cgroups(tmp_path)
        cgroups.cpu_stat("pod")
        cgroups.sweep()
        (tmp_path / "cpu" / "pod" / "cpu.stat").write_text("nr_periods 5\nnr_throttled x\n")
        for _ in range(2):
            with pytest.raises(Skip):
                cgroups.cpu_stat("pod")
            cgroups.sweep()
        assert len(parsed) == 3

    def test_a_cgroup_not_read_in_a_pass_is_forgotten_at_its_sweep(
        self, tmp_path: Path, parsed: list[str]
    ) -> None:
        cgroups = self.cgroups(tmp_path)
        cgroups.cpu_stat("pod")
        cgroups.sweep()
        cgroups.sweep()  # a pass that did not read it: the pod is gone
        cgroups.cpu_stat("pod")
        assert len(parsed) == 2

    def test_memory_stat_and_reads_without_keep_open_are_parsed_every_time(
        self, tmp_path: Path, parsed: list[str]
    ) -> None:
        cgroups = self.cgroups(tmp_path)
        (tmp_path / "memory" / "pod" / "memory.stat").write_text(V1_MEMORY_STAT)
        for _ in range(2):
            assert cgroups.memory_stat("pod", self.KEYS) == {
                "total_rss": 99,
                "total_active_anon": 70,
            }
            cgroups.sweep()
        assert len(parsed) == 2
        plain = CgroupFS(tmp_path, 1)
        for _ in range(2):
            plain.cpu_stat("pod")
            plain.sweep()
        assert len(parsed) == 4
