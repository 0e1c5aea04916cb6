"""koordctl whatif: a synthetic history with a known shape, replayed under configurations whose
outcomes differ by amounts derived by hand below.

The node (13 cores, 50 GiB): an LS pod peaks every 30 minutes (5.5 cores and 30 GiB node
memory during the second and fourth quarter of each hour, 2.5 cores and 22 GiB otherwise); BE
pods use 3.25 cores throughout; the system 0.75 cores (node - pods). Samples every second.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from math import isnan
from pathlib import Path
from typing import Any

import pytest

from koordctl import build_parser, client, main
from koordctl.whatif import compute
from koordctl.whatif_history import load_history
from koordlet.metriccache import MetricCache, Sample

GI = 1 << 30
T0 = 1_765_000_800  # 2025-12-06 06:00:00 UTC, an hour boundary
HOURS = 2
CAPACITY = "cpu=13,memory=50Gi"
PSI = {"psi_resource_type": "cpu", "psi_precision": "avg10"}


def peak(second: int) -> bool:
    return (second // 900) % 2 == 1


def samples(start: int, end: int) -> list[Sample]:
    out = []
    be = {"be_resource": "cpu"}
    for s in range(start, end):
        t = T0 + s + 0.25
        ls, memory = (5.5, 30 * GI) if peak(s) else (2.5, 22 * GI)
        out += [
            Sample("node_cpu_usage", {}, t, ls + 3.25 + 0.75),
            Sample("node_memory_usage", {}, t, memory),
            Sample("pod_cpu_usage", {"pod_uid": "ls-1"}, t, ls),
            Sample("pod_cpu_usage", {"pod_uid": "be-1"}, t, 3.25),
            Sample("pod_memory_usage", {"pod_uid": "ls-1"}, t, memory - 10 * GI),
            Sample("pod_memory_usage", {"pod_uid": "be-1"}, t, 6 * GI),
            Sample("node_be", {**be, "be_allocation": "usage"}, t, 3250),
            Sample("node_be", {**be, "be_allocation": "request"}, t, 4000),
            Sample(
                "pod_psi",
                {"pod_uid": "ls-1", **PSI, "psi_degree": "some"},
                t,
                12.5 if peak(s) else 0.5,
            ),
            Sample("qos_runq_latency_p99", {"qos": "LS"}, t, 900.0 if peak(s) else 40.0),
        ]
    return out


def write_history(path: Path, seconds: int = HOURS * 3600) -> None:
    cache = MetricCache(path, retention_seconds=1e9, max_bytes=1 << 40)
    cache.append(samples(0, seconds))
    cache.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("whatif") / "metrics.db"
    write_history(path)
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def colocation(tmp_path: Path, name: str, reclaim: int) -> Path:
    return write(
        tmp_path / name, json.dumps({"enable": True, "cpuReclaimThresholdPercent": reclaim})
    )


THRESHOLDS = {
    "enable": True,
    "cpuSuppressThresholdPercent": 65,
    "memoryEvictThresholdPercent": 65,
    "cpuEvictThresholdPercent": 70,
    "evictEnabledPriorityThreshold": 5000,
}


def configmap(tmp_path: Path, reclaim: int, thresholds: Mapping[str, object]) -> Path:
    """The slo-controller-config ConfigMap as users write it (YAML, JSON strings in data)."""
    threshold_json = json.dumps({"clusterStrategy": thresholds})
    colocation_json = json.dumps({"enable": True, "cpuReclaimThresholdPercent": reclaim})
    return write(
        tmp_path / "slo-controller-config.yaml",
        "apiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: slo-controller-config, namespace: koordinator-system}\n"
        "data:\n"
        f"  colocation-config: '{colocation_json}'\n"
        f"  resource-threshold-config: '{threshold_json}'\n",
    )


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["whatif", "--since", "all", "--capacity", CAPACITY, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_lower_reclaim_threshold_gives_exactly_the_margin_less_batch_cpu(
    db: Path, tmp_path: Path
) -> None:
    # batch cpu = 13 - 13 x (100 - reclaim)% - system 0.75 - LS used; 70% → 8.35 - LS,
    # 55% → 6.4 - LS: 1.95 cores less at every step (LS 2.5 → 5.85 / 3.9, LS 5.5 → 2.85 / 0.9)
    args = build_parser().parse_args(
        ["whatif", "--db", str(db), "--since", "all", "--capacity", CAPACITY,
         "--baseline", str(colocation(tmp_path, "base.json", 70)),
         "--colocation", str(colocation(tmp_path, "new.json", 55))]
    )  # fmt: skip
    outcome = compute(args)
    base, proposed = outcome.replays
    assert len(base.batch_cpu) == HOURS * 60
    assert {b - p for b, p in zip(base.batch_cpu, proposed.batch_cpu, strict=True)} == {1950}
    # a step whose 300 s window lies in one level gives that level's amount
    assert min(base.batch_cpu) == 2850 and max(base.batch_cpu) == 5850
    assert min(proposed.batch_cpu) == 900 and max(proposed.batch_cpu) == 3900
    for hour in outcome.hours:
        assert hour.extra_batch_cpu == pytest.approx(-1.95)
        assert hour.sides["baseline"].batch_cpu_min == pytest.approx(2.85)
        assert hour.sides["proposed"].batch_cpu_min == pytest.approx(0.9)
        assert hour.node_cpu == pytest.approx((2.5 + 5.5) / 2 + 4.0)


def test_disabled_colocation_publishes_nothing_and_the_defaults_are_named(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["whatif", "--db", str(db), "--since", "all", "--capacity", CAPACITY,
               "--colocation", str(colocation(tmp_path, "new.json", 70))])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "baseline: Koordinator's defaults: colocation disabled" in out
    assert "proposed: " in out and "cpuReclaimThresholdPercent 70" in out
    rows = [line for line in out.splitlines() if line.startswith("2025-12-06 0")]
    assert len(rows) == HOURS
    assert rows[0].split()[3] == "0.00/0.00"  # the baseline's batch CPU


def test_suppress_seconds_and_eviction_triggers_between_two_usage_levels(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # suppress = 13 x 65% - LS - 0.75: off-peak 5.2 → 6 CPUs, peak 2.2 → 3 CPUs < BE's 3.25:
    # every peak second is suppressed (2 x 900 per hour), none other.
    # Node memory 30/50 GiB = 60% in peaks, 22/50 = 44% otherwise: a 58% threshold fires in
    # peaks only, every 4 s (cool-down): 900 / 4 = 225 per peak. Node CPU 9.5/13 = 73% >= 70%
    # in peaks (6.5/13 = 50% otherwise), every 20 s: 45 per peak.
    thresholds = {**THRESHOLDS, "memoryEvictThresholdPercent": 58}
    data = run_json(capsys, "--db", str(db), "--nodeslo", str(configmap(tmp_path, 60, thresholds)))
    hours = data["hours"]
    assert len(hours) == HOURS
    for hour in hours:
        proposed, baseline = hour["sides"]["proposed"], hour["sides"]["baseline"]
        assert proposed["suppress_seconds"] == 1800
        assert proposed["memory_evictions"] == 450
        assert proposed["cpu_evictions"] == 90
        assert baseline["suppress_seconds"] == 0 and baseline["memory_evictions"] == 0
        assert hour["psi_some"] == pytest.approx((12.5 + 0.5) / 2)
        assert hour["runq_p99"] == 900.0


def test_a_threshold_above_both_levels_suppresses_and_evicts_nothing(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 13 x 80% - 5.5 - 0.75 = 4.15 → 5 CPUs >= 3.25; memory 60% < 61%; CPU 73% < 74%
    thresholds = {**THRESHOLDS, "cpuSuppressThresholdPercent": 80,
                  "memoryEvictThresholdPercent": 61, "cpuEvictThresholdPercent": 74}  # fmt: skip
    data = run_json(capsys, "--db", str(db), "--nodeslo", str(configmap(tmp_path, 60, thresholds)))
    for hour in data["hours"]:
        side = hour["sides"]["proposed"]
        assert (side["suppress_seconds"], side["memory_evictions"], side["cpu_evictions"]) == (
            0,
            0,
            0,
        )


def test_cfs_quota_policy_suppresses_at_the_quota(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # cfsQuota: the quota follows suppress itself (2.2 cores at peak < 3.25; 5.2 off-peak),
    # growing by at most 10% of the node (1.3 cores) per second: from 2.2 back to 5.2 takes
    # 3 s in which 2.2 → 3.5 is already above 3.25, so again only the peak seconds count
    thresholds = {**THRESHOLDS, "cpuSuppressPolicy": "cfsQuota", "memoryEvictThresholdPercent": 90,
                  "cpuEvictThresholdPercent": 95}  # fmt: skip
    data = run_json(capsys, "--db", str(db), "--nodeslo", str(configmap(tmp_path, 60, thresholds)))
    assert [h["sides"]["proposed"]["suppress_seconds"] for h in data["hours"]] == [1800, 1800]


def test_be_pods_memory_is_not_counted_as_ls_usage(db: Path, tmp_path: Path) -> None:
    # naming be-1 BE takes its 6 GiB out of the high-priority usage: 6 GiB more batch memory
    argv = ["whatif", "--db", str(db), "--since", "all", "--capacity", CAPACITY,
            "--colocation", str(colocation(tmp_path, "new.json", 70))]  # fmt: skip
    plain = compute(build_parser().parse_args(argv)).replays[1]
    named = compute(build_parser().parse_args([*argv, "--be-pod", "be-1"])).replays[1]
    diffs = {n - p for n, p in zip(named.batch_memory, plain.batch_memory, strict=True)}
    assert diffs == {6 * GI}


def test_more_room_in_an_hour_under_pressure_is_marked(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = colocation(tmp_path, "base.json", 55)
    new = colocation(tmp_path, "new.json", 70)
    argv = ["whatif", "--db", str(db), "--since", "all", "--capacity", CAPACITY,
            "--baseline", str(base), "--colocation", str(new)]  # fmt: skip
    assert main([*argv, "--pressure-psi", "6"]) == 0  # hour average 6.5%
    marked = capsys.readouterr().out
    assert marked.count("<- more batch CPU in an hour with LS PSI >= 6%") == HOURS
    assert "room +1.95" in marked
    assert main([*argv, "--pressure-psi", "7"]) == 0
    assert "<- more batch CPU" not in capsys.readouterr().out


def test_since_keeps_the_newest_hour(db: Path, tmp_path: Path) -> None:
    argv = ["whatif", "--db", str(db), "--since", "1h", "--capacity", CAPACITY,
            "--colocation", str(colocation(tmp_path, "new.json", 70))]  # fmt: skip
    outcome = compute(build_parser().parse_args(argv))
    assert len(outcome.history) == 3601  # the newest sample and the 3600 s before it
    assert [h.start for h in outcome.hours] == [T0 + 3600 - 3600, T0 + 3600]


def test_plot_is_xml_with_both_configurations(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svg = tmp_path / "whatif.svg"
    base, new = colocation(tmp_path, "base.json", 55), colocation(tmp_path, "new.json", 70)
    rc = main(["whatif", "--db", str(db), "--since", "all", "--capacity", CAPACITY,
               "--baseline", str(base), "--colocation", str(new), "--plot", str(svg)])  # fmt: skip
    capsys.readouterr()
    assert rc == 0
    root = ET.parse(svg).getroot()  # noqa: S314 - our own file
    ns = "{http://www.w3.org/2000/svg}"
    series = {e.get("data-name"): e.get("points", "") for e in root.iter(f"{ns}polyline")}
    for name in ("batch (baseline)", "batch (proposed)", "node usage", "LS usage", "BE usage"):
        assert series.get(name, "").count(",") > 100, name
    lines = [e.get("data-name") for e in root.iter(f"{ns}polyline")]
    assert lines.count("batch (baseline)") == lines.count("batch (proposed)") == 2  # CPU, memory
    # the CPU panel's axis reaches the capacity (13 cores, ticks of 5: top 15)
    texts = [e.text for e in root.iter(f"{ns}text")]
    assert texts[: texts.index("06:00")] == ["CPU (cores)", "0", "5", "10", "15"]


def test_the_database_is_only_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.db"
    write_history(path, 600)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    files_before = sorted(p.name for p in tmp_path.iterdir())
    run_json(capsys, "--db", str(path), "--colocation", str(colocation(tmp_path, "c.json", 70)))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    # SQLite's read-only reader of a WAL database may leave an empty log and its index beside
    # it (it may not delete them); nothing is written to the log
    wal = tmp_path / "metrics.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    left = set(p.name for p in tmp_path.iterdir()) - {*files_before, "c.json"}
    assert left <= {"metrics.db-wal", "metrics.db-shm"}


def test_reads_while_koordlet_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.db"
    writer = MetricCache(path, retention_seconds=1e9, max_bytes=1 << 40)
    try:
        writer.append(samples(0, 600))
        new = colocation(tmp_path, "c.json", 70)
        first = run_json(capsys, "--db", str(path), "--colocation", str(new))
        writer.append(samples(600, 1200))  # committed to the WAL, not checkpointed
        second = run_json(capsys, "--db", str(path), "--colocation", str(new))
    finally:
        writer.close()
    assert first["end"] == T0 + 599.25 and second["end"] == T0 + 1199.25


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: d / "absent.db", "no such metric cache"),
        (lambda d: write(d / "junk.db", "not a database, just text\n" * 200), "not a readable"),
        (lambda d: _empty_cache(d / "empty.db"), "holds no node_cpu_usage samples"),
    ],
)
def test_unusable_databases_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: object, message: str
) -> None:
    path = setup(tmp_path)  # type: ignore[operator]
    new = colocation(tmp_path, "c.json", 70)
    rc = main(["whatif", "--db", str(path), "--capacity", CAPACITY, "--colocation", str(new)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("koordctl whatif: ") and message in err and err.count("\n") == 1


def _empty_cache(path: Path) -> Path:
    MetricCache(path).close()
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"enable": true, "cpuReclaimThresholdPercent": "sixty"}', "must be an integer"),
        ("{enable: [true", "not YAML or JSON"),
        ("kind: ConfigMap\ndata:\n  resource-threshold-config: '{\"clusterStrategy\": "
         "{\"cpuSuppressThresholdPercent\": 170}}'\n", "resource-threshold-config"),
        ("kind: ConfigMap\ndata:\n  unrelated: x\n", "data has none of the keys"),
        ("- a list\n", "not a YAML or JSON object"),
    ],
)  # fmt: skip
def test_malformed_configurations_exit_2_naming_the_file(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    bad = write(tmp_path / "bad.yaml", text)
    rc = main(["whatif", "--db", str(db), "--capacity", CAPACITY, "--nodeslo", str(bad)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"koordctl whatif: {bad}: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--since", "yesterday"], "--since"),
        (["--since", "0s"], "must be above 0"),
        (["--capacity", "cpu=13"], "both cpu= and memory="),
        (["--capacity", "cpu=thirteen,memory=1Gi"], "--capacity"),
        (["--node-label", "zone"], "KEY=VALUE"),
    ],
)
def test_bad_arguments_exit_2(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    new = colocation(tmp_path, "c.json", 70)
    argv = ["whatif", "--db", str(db), "--capacity", CAPACITY, "--colocation", str(new)]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_nothing_to_compare_exits_2(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", "--db", str(db), "--capacity", CAPACITY]) == 2
    assert "--nodeslo FILE and/or --colocation FILE" in capsys.readouterr().err


def test_a_nodeslo_object_keeps_the_baseline_colocation(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodeslo = write(
        tmp_path / "nodeslo.yaml",
        "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeSLO\nmetadata: {name: n1}\n"
        "spec:\n  resourceUsedThresholdWithBE:\n    enable: true\n"
        "    cpuSuppressThresholdPercent: 65\n",
    )
    base = colocation(tmp_path, "base.json", 70)
    data = run_json(capsys, "--db", str(db), "--baseline", str(base), "--nodeslo", str(nodeslo))
    for hour in data["hours"]:
        sides = hour["sides"]
        assert sides["proposed"]["batch_cpu_avg"] == sides["baseline"]["batch_cpu_avg"]
        assert sides["proposed"]["suppress_seconds"] == 1800


def test_a_sample_holds_for_two_collect_intervals_then_the_gap_shows(tmp_path: Path) -> None:
    # koordlet's "fresh" rule (2 x the interval): after the sample of second 9 the next comes
    # at 20; seconds 10 and 11 still see 9's value, 12 to 19 nothing (NaN)
    path = tmp_path / "metrics.db"
    cache = MetricCache(path)
    seconds = [*range(10), *range(20, 30)]
    cache.append(Sample("node_cpu_usage", {}, T0 + s + 0.5, 1.0 + s) for s in seconds)
    cache.close()
    history = load_history(path, None)
    assert len(history) == 30
    assert list(history.node_cpu[8:12]) == [9.0, 10.0, 10.0, 10.0]
    assert all(isnan(v) for v in history.node_cpu[12:20])
    assert history.node_cpu[20] == 21.0
    assert all(isnan(v) for v in history.node_memory)  # never recorded


def test_be_satisfaction_eviction_with_the_replayed_limit(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # suppress at 55%: 7.15 - 5.5 - 0.75 = 0.9 → the 2-CPU floor in peaks, 3.9 → 4 CPUs off
    # peak. BE's 3.25 cores are capped at the limit: 2/2 = 100% >= 90% used, satisfaction
    # 2/4 (request 4 cores) = 50% <= 55% → release 4 x (80% - 50%) > 0. Over a 30 s window
    # the average limit is at most 2.2 (55% of 4) once at most 3 of its seconds are off-peak:
    # from second 26 of each peak, then every 20 s (cool-down): 26, 46, ..., 886 = 44 per peak.
    thresholds = {
        "enable": True,
        "cpuSuppressThresholdPercent": 55,
        "cpuEvictBESatisfactionLowerPercent": 55,
        "cpuEvictBESatisfactionUpperPercent": 80,
        "cpuEvictTimeWindowSeconds": 30,
    }
    data = run_json(capsys, "--db", str(db), "--nodeslo", str(configmap(tmp_path, 60, thresholds)))
    assert [h["sides"]["proposed"]["cpu_evictions"] for h in data["hours"]] == [88, 88]


def test_prod_requests_and_reservation_enter_the_request_based_formulas(
    db: Path, tmp_path: Path
) -> None:
    # maxUsageRequest: 13 - 3.9 (70% reclaim) - max(system 0.75, reserved 1) - max(LS used,
    # request 7) = 1.1 at every step; mid: unallocated 13 - 1 - 7 = 5 x 50% = 2.5 (no
    # prodReclaimable), under the 100% threshold
    strategy = {"enable": True, "cpuReclaimThresholdPercent": 70,
                "cpuCalculatePolicy": "maxUsageRequest", "midUnallocatedPercent": 50}  # fmt: skip
    new = write(tmp_path / "new.json", json.dumps(strategy))
    argv = ["whatif", "--db", str(db), "--since", "all", "--capacity", CAPACITY,
            "--colocation", str(new), "--prod-requests", "cpu=7,memory=20Gi",
            "--reserved", "cpu=1,memory=1Gi"]  # fmt: skip
    proposed = compute(build_parser().parse_args(argv)).replays[1]
    assert set(proposed.batch_cpu) == {1100}
    assert set(proposed.mid_cpu) == {2500}


def test_capacity_from_koordlet_when_not_given(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[tuple[str, str]] = []

    def fetch(addr: str, path: str) -> dict[str, int]:
        asked.append((addr, path))
        return {"cpus": 13, "memory_bytes": 50 * GI}

    monkeypatch.setattr("koordctl.client.fetch", fetch)
    new = str(colocation(tmp_path, "c.json", 70))
    argv = ["whatif", "--db", str(db), "--since", "all", "--colocation", new, "--json"]
    assert main([*argv, "--addr", "10.0.0.7:9316"]) == 0
    from_koordlet = json.loads(capsys.readouterr().out)["hours"]
    assert asked == [("10.0.0.7:9316", "/api/v1/node")]
    assert main([*argv, "--capacity", CAPACITY]) == 0
    assert json.loads(capsys.readouterr().out)["hours"] == from_koordlet


def test_no_capacity_and_no_koordlet_exits_2(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fetch(addr: str, path: str) -> dict[str, int]:
        raise client.KoordletUnreachable(f"cannot reach koordlet at {addr}")

    monkeypatch.setattr("koordctl.client.fetch", fetch)
    new = str(colocation(tmp_path, "c.json", 70))
    assert main(["whatif", "--db", str(db), "--colocation", new]) == 2
    err = capsys.readouterr().err
    assert "no --capacity and koordlet's node API is not usable" in err and err.count("\n") == 1


def test_node_strategies_are_matched_with_the_node_labels(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # suppress is on only for nodes labelled pool=batch (a nodeStrategies entry)
    threshold = {
        "clusterStrategy": {"enable": False},
        "nodeStrategies": [
            {
                "name": "batch-pool",
                "nodeSelector": {"matchLabels": {"pool": "batch"}},
                "enable": True,
                "cpuSuppressThresholdPercent": 65,
            }
        ],
    }
    cm = write(
        tmp_path / "cm.yaml",
        "kind: ConfigMap\ndata:\n  resource-threshold-config: '" + json.dumps(threshold) + "'\n",
    )
    args = ("--db", str(db), "--nodeslo", str(cm))
    other = run_json(capsys, *args, "--node-label", "pool=web")
    batch = run_json(capsys, *args, "--node-label", "pool=batch")
    assert [h["sides"]["proposed"]["suppress_seconds"] for h in other["hours"]] == [0, 0]
    assert [h["sides"]["proposed"]["suppress_seconds"] for h in batch["hours"]] == [1800, 1800]


def test_dynamic_mid_replays_the_prod_reclaimable_koordlet_predicted(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # koordlet's training passes, every 60 s: 0.85 cores / 3 GiB reclaimable at rest, 0.35 / 1 GiB
    # in the LS peaks. Mid (midUnallocatedPercent 0) = min(prodReclaimable, node unused, the
    # threshold) = the prediction of the step, the node being far from full.
    path = tmp_path / "metrics.db"
    write_history(path)
    cache = MetricCache(path, retention_seconds=1e9, max_bytes=1 << 40)
    for s in range(0, HOURS * 3600, 60):
        cpu, memory = (0.35, 1 * GI) if peak(s) else (0.85, 3 * GI)
        cache.append(
            [
                Sample("prod_reclaimable_cpu", {}, T0 + s + 0.5, cpu),
                Sample("prod_reclaimable_memory", {}, T0 + s + 0.5, memory),
            ]
        )
    cache.close()
    new = colocation(tmp_path, "new.json", 70)
    argv = ["whatif", "--since", "all", "--capacity", CAPACITY, "--colocation", str(new)]
    replay = compute(build_parser().parse_args([*argv, "--db", str(path)])).replays[1]
    assert set(replay.mid_cpu) == {850, 350}
    assert set(replay.mid_memory) == {3 * GI, 1 * GI}
    assert replay.mid_cpu.count(350) == len(replay.mid_cpu) // 2  # the peaks' half of each hour
    # without a recorded prediction the manager's "not reported": 0, and the output says so
    without = compute(build_parser().parse_args([*argv, "--db", str(db)])).replays[1]
    assert set(without.mid_cpu) == {0}
    assert main([*argv, "--db", str(db)]) == 0
    assert "no prodReclaimable recorded" in capsys.readouterr().out
