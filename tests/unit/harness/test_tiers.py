"""Which e2e tests run in which tier (tests/e2e/tiers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e import tiers
from tests.e2e.harness import vm


def test_the_host_tier_runs_everything_but_what_belongs_elsewhere() -> None:
    assert tiers.selected("tests/e2e/test_nri.py::test_a", "host")
    assert tiers.selected("tests/e2e/test_chain.py::test_b[x]", "host")
    assert not tiers.selected("tests/e2e/test_systemd.py::test_c", "host")


def test_a_tier_runs_its_files_and_named_tests_only() -> None:
    assert tiers.selected("tests/e2e/test_koordlet.py::test_a", "v2")
    assert not tiers.selected("tests/e2e/test_chain.py::test_a", "v2-containerd17")
    named = (
        "tests/e2e/test_inspect.py::"
        + "test_waits_are_recorded_under_the_waking_pod_and_not_another"
    )
    assert tiers.selected(named, "v2")
    assert tiers.selected(named + "[p]", "v2")
    assert not tiers.selected(named + "_too", "v2")  # a prefix of a name is not the test
    assert not tiers.selected("tests/e2e/test_inspect.py::test_other", "v2")
    assert tiers.selected("tests/e2e/test_systemd.py::test_c", "v2-systemd")


def test_unit_tests_are_never_deselected() -> None:
    assert tiers.selected("tests/unit/koordlet/test_x.py::test_y", "v2-systemd")


def test_every_tier_names_tests_that_exist() -> None:
    e2e = Path(tiers.__file__).parent
    for tier in tiers.TIERS.values():
        for test in tier.tests:
            assert (e2e / test.split("::")[0]).is_file(), (tier.name, test)


def test_vm_tiers_are_refused_outside_the_vm(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        tiers.main(["v2"])
    assert "a VM tier (run it with --vm)" in capsys.readouterr().err


def test_a_vm_that_cannot_run_is_a_skip_or_under_required_a_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vm, "missing_prerequisites", lambda: ["qemu-system-x86_64"])
    monkeypatch.delenv(tiers.REQUIRED_ENV, raising=False)
    assert tiers.main(["--vm", "v2"]) == 0
    assert "cannot run here: qemu-system-x86_64" in capsys.readouterr().err
    monkeypatch.setenv(tiers.REQUIRED_ENV, "1")
    assert tiers.main(["--vm", "v2"]) == 1
    assert "KOORD_E2E_REQUIRED=1: that is a failure" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tiers.main(["--vm", "host"])


def test_vm_tiers_are_spread_over_lanes_longest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {
        name: tiers.Tier(name, vm=True, minutes=minutes)
        for name, minutes in [("a", 4.0), ("b", 11.0), ("c", 5.0), ("d", 3.5)]
    }
    monkeypatch.setattr(tiers, "TIERS", fake)
    # b (11) alone; a (4), c (5) and d (3.5) beside it, each lane in the order asked for.
    assert tiers.plan_lanes(["a", "b", "c", "d"], 2) == [["b"], ["a", "c", "d"]]
    assert tiers.plan_lanes(["a", "b", "c", "d"], 1) == [["a", "b", "c", "d"]]
    assert tiers.plan_lanes(["d", "a"], 8) == [["a"], ["d"]]
    assert tiers.plan_lanes(["c"], 0) == [["c"]]  # at least one VM


SUMMARY = "FAILED tests/e2e/test_nri.py::test_x - AssertionError: 2 != 1024"


def test_a_failed_tiers_tests_are_named_again_in_its_last_lines(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    fake = {name: tiers.Tier(name, vm=False) for name in ("a", "b")}
    monkeypatch.setattr(tiers, "TIERS", fake)
    # tier a prints pytest's summary line and fails; tier b passes after it
    scripts = {
        "a": f"print('F.'); print({SUMMARY!r}); raise SystemExit(1)",
        "b": "print('ERRORS are words, not a summary line')",
    }
    monkeypatch.setattr(
        tiers, "pytest_command", lambda tier: [sys.executable, "-c", scripts[tier.name]]
    )
    assert tiers.run_here(["a", "b"]) == 1
    out = capfd.readouterr().out
    assert SUMMARY in out.split("tiers: a: FAILED", 1)[0]  # copied as it came
    *_, a, named, b = out.splitlines()
    assert a.startswith("tiers: a: FAILED (exit 1) in ")
    assert named == f"tiers:   {SUMMARY}"
    assert b.startswith("tiers: b: passed in ")


def test_a_failed_vms_tests_are_named_after_all_lanes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = {name: tiers.Tier(name, vm=True) for name in ("a", "b")}
    monkeypatch.setattr(tiers, "TIERS", fake)
    monkeypatch.setattr(vm, "missing_prerequisites", list)

    def run(command: list[str], **_: object) -> vm.VmResult:
        failed = "b" in command
        output = f"tiers: b: FAILED (exit 1) in 3 s\ntiers:   {SUMMARY}\n{SUMMARY}\n"
        return vm.VmResult(int(failed), 4.0, 9.0, output if failed else "all passed\n")

    monkeypatch.setattr(vm, "run", run)
    assert tiers.run_in_vm(["a", "b"], timeout=60, lanes=2) == 1
    assert capsys.readouterr().out.splitlines() == [
        "tiers: VM a: passed",
        "tiers: VM b: FAILED (exit 1)",
        f"tiers:   {SUMMARY}",  # once: the guest's own repetition is not a summary line
    ]
