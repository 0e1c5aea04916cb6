"""SystemConfig on fake /proc and /sys folders: formulas, ranges, missing files, sched_features."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from koordapi.features import FeatureGates
from koordlet.qosmanager.framework import Context
from koordlet.qosmanager.sysconfig import SystemConfig
from tests.unit.koordlet.qosmanager.fakes import context, topology, write

GI = 1 << 30
FILES = {
    "proc/sys/vm/min_free_kbytes": "67584",
    "proc/sys/vm/watermark_scale_factor": "10",
    "proc/sys/kernel/sched_group_identity_enabled": "0",
    "proc/sys/kernel/sched_idle_saver_wmark": "0",
    "sys/kernel/mm/memcg_reaper/reap_background": "0",
    "sys/kernel/mm/pagecache_limit/enabled": "0",
    "sys/kernel/debug/sched_features": "GENTLE_FAIR_SLEEPERS NO_HRTICK ID_ABSOLUTE_EXPEL",
}


def fake_roots(tmp_path: Path, files: Mapping[str, str] = FILES) -> SystemConfig:
    for rel, text in files.items():
        write(tmp_path / rel, text + "\n")
    return SystemConfig(tmp_path / "proc", tmp_path / "sys")


def run(strategy: SystemConfig, system: Mapping[str, Any], memory: int = 16 * GI) -> Context:
    ctx = context(spec={"systemStrategy": dict(system)}, topo=topology(memory=memory))
    strategy.run(ctx)
    return ctx


def read(tmp_path: Path, rel: str) -> str:
    return (tmp_path / rel).read_text().strip()


def status(ctx: Context) -> str:
    return ctx.audit.statuses()["SystemConfig"].text


def test_min_free_kbytes_is_total_kb_times_factor_over_10000(tmp_path: Path) -> None:
    ctx = run(fake_roots(tmp_path), {"minFreeKbytesFactor": 100})
    assert read(tmp_path, "proc/sys/vm/min_free_kbytes") == "167772"  # 16777216 kB x 100 / 1e4
    [action] = ctx.audit.recent()
    assert action.kind == "min_free_kbytes" and action.value == "167772"
    assert action.reason == "minFreeKbytesFactor 100 x total memory 16777216 kB / 10000 = 167772"


@pytest.mark.parametrize(("factor", "value"), [(1, 1677), (10000, 16777216)])
def test_min_free_kbytes_outside_its_range_is_not_written(
    tmp_path: Path, factor: int, value: int
) -> None:
    ctx = run(fake_roots(tmp_path), {"minFreeKbytesFactor": factor})
    assert read(tmp_path, "proc/sys/vm/min_free_kbytes") == "67584"
    assert f"min_free_kbytes {value} is outside [10240, 10485760]" in status(ctx)


def test_each_set_field_goes_to_its_file_and_unset_ones_are_left(tmp_path: Path) -> None:
    system = {
        "watermarkScaleFactor": 150,
        "memcgReapBackGround": 1,
        "schedGroupIdentityEnabled": 1,
        "schedIdleSaverWmark": 5,
        "pageCacheLimitEnabled": 1,
    }
    ctx = run(fake_roots(tmp_path), system)
    assert read(tmp_path, "proc/sys/vm/watermark_scale_factor") == "150"
    assert read(tmp_path, "sys/kernel/mm/memcg_reaper/reap_background") == "1"
    assert read(tmp_path, "proc/sys/kernel/sched_group_identity_enabled") == "1"
    assert read(tmp_path, "proc/sys/kernel/sched_idle_saver_wmark") == "5"
    assert read(tmp_path, "sys/kernel/mm/pagecache_limit/enabled") == "1"
    assert read(tmp_path, "proc/sys/vm/min_free_kbytes") == "67584"  # factor unset
    assert len(ctx.audit.recent()) == 5
    assert status(ctx) == "settings in place"


def test_values_already_there_are_not_rewritten(tmp_path: Path) -> None:
    strategy = fake_roots(tmp_path)
    run(strategy, {"watermarkScaleFactor": 150})
    again = run(strategy, {"watermarkScaleFactor": 150})
    assert again.audit.recent() == []


def test_watermark_scale_factor_outside_10_400_is_refused(tmp_path: Path) -> None:
    ctx = run(fake_roots(tmp_path), {"watermarkScaleFactor": 500})
    assert read(tmp_path, "proc/sys/vm/watermark_scale_factor") == "10"
    assert "watermarkScaleFactor 500 is outside [10, 400]" in status(ctx)


def test_a_file_missing_on_this_kernel_is_skipped_and_named(tmp_path: Path) -> None:
    files = {k: v for k, v in FILES.items() if "memcg_reaper" not in k}
    ctx = run(fake_roots(tmp_path, files), {"memcgReapBackGround": 1, "watermarkScaleFactor": 20})
    missing = tmp_path / "sys/kernel/mm/memcg_reaper/reap_background"
    assert not missing.exists()
    assert f"not on this kernel: {missing}" in status(ctx)
    assert read(tmp_path, "proc/sys/vm/watermark_scale_factor") == "20"


def test_sched_features_write_only_the_differing_ones(tmp_path: Path) -> None:
    features = {"HRTICK": True, "GENTLE_FAIR_SLEEPERS": True, "ID_ABSOLUTE_EXPEL": False}
    ctx = run(fake_roots(tmp_path), {"schedFeatures": features})
    assert [a.value for a in ctx.audit.recent()] == ["HRTICK", "NO_ID_ABSOLUTE_EXPEL"]
    assert read(tmp_path, "sys/kernel/debug/sched_features") == "NO_ID_ABSOLUTE_EXPEL"


@pytest.mark.parametrize(
    ("features", "note"),
    [
        ({"NOT_A_FEATURE": True}, "sched feature 'NOT_A_FEATURE' not on this kernel"),
        ({"HRTICK\nX": True}, "not on this kernel"),
        ({"HRTICK": "yes"}, "schedFeatures.HRTICK: 'yes' is not true or false"),
        (["HRTICK"], "schedFeatures must map names to true or false"),
    ],
)
def test_bad_sched_features_are_named_not_written(tmp_path: Path, features: Any, note: str) -> None:
    ctx = run(fake_roots(tmp_path), {"schedFeatures": features})
    assert note in status(ctx)
    assert ctx.audit.recent() == []


def test_nothing_configured(tmp_path: Path) -> None:
    ctx = run(fake_roots(tmp_path), {})
    assert status(ctx) == "nothing configured in systemStrategy"
    assert read(tmp_path, "proc/sys/vm/min_free_kbytes") == "67584"


def test_gate_is_off_by_default(tmp_path: Path) -> None:
    strategy = SystemConfig(tmp_path, tmp_path)
    assert strategy.name == "SystemConfig" and strategy.interval == 1.0
    assert not strategy.enabled(FeatureGates())
    assert strategy.enabled(FeatureGates.parse("SystemConfig=true"))
