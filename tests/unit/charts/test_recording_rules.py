"""The chart's recording rules that give koordlet's counters Koordinator's names back
(charts/koordinator-py/rules/koordinator-names.rules.yaml), checked and tested by promtool."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from koordlet.koordseries import NOT_MEASURED
from tests.unit.koordlet.upstream_metrics import UPSTREAM

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "charts/koordinator-py/rules/koordinator-names.rules.yaml"
PROMTOOL = ROOT / ".cache/prometheus/usr/bin/promtool"
EVICTED = 'node="n1",reason="trigger by koordlet feature BEMemoryEvict"'
CPU_INFO = 'koordlet_collect_node_cpu_info_status_total{node="n1",status="succeeded"}'


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    if not PROMTOOL.exists():
        pytest.skip(f"promtool not found at {PROMTOOL} (scripts/setup.sh installs it)")
    return subprocess.run(
        [str(PROMTOOL), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def recorded() -> dict[str, str]:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return {rule["record"]: rule["expr"] for rule in rules}


def test_every_koordinator_counter_exported_here_has_its_name_back() -> None:
    counters = {
        name
        for name, (kind, _) in UPSTREAM.items()
        if kind == "counter" and name not in NOT_MEASURED
    }
    assert set(recorded()) == counters
    assert all(expr == f"{name}_total" for name, expr in recorded().items())


def test_the_rules_pass_promtool_check(tmp_path: Path) -> None:
    result = promtool("check", "rules", str(RULES), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_koordinators_queries_work_on_the_recorded_series(tmp_path: Path) -> None:
    # A koordlet scraped every minute: two evictions (one counter reset by a restart between),
    # read the way Koordinator's dashboards read koordlet_pod_eviction.
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"koordlet_pod_eviction_total{{{EVICTED}}}", "values": "0 1 1 0 1"},
                    {
                        "series": CPU_INFO,
                        "values": "1 1 1 1 1",
                    },
                ],
                "promql_expr_test": [
                    {
                        "expr": "koordlet_pod_eviction",
                        "eval_time": "2m",
                        "exp_samples": [
                            {"labels": f"koordlet_pod_eviction{{{EVICTED}}}", "value": 1}
                        ],
                    },
                    {
                        # two evictions: the reset at 3m is seen through the recorded series
                        "expr": "increase(koordlet_pod_eviction[4m])",
                        "eval_time": "4m",
                        "exp_samples": [{"labels": f"{{{EVICTED}}}", "value": 2}],
                    },
                    {
                        "expr": 'sum(koordlet_collect_node_cpu_info_status{status="succeeded"})',
                        "eval_time": "1m",
                        "exp_samples": [{"labels": "{}", "value": 1}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "rules.test.yaml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "rules.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
