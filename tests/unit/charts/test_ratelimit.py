"""The rate limits in the chart: manager.webhook.rateLimit and scheduler.rateLimit become the
components' --webhook-rate-limit-* and --rate-limit-* arguments (parsed here by the real
command lines), the webhook configurations' timeout and failure policies, and the schema
refusing what the flags would refuse at start."""

from __future__ import annotations

from typing import Any

import pytest

from koordkube.ratelimit import RateLimits
from scheduler import cli as scheduler_cli
from tests.unit.charts import helm
from tests.unit.charts.test_manager import manager_container, manager_options, webhooks
from tests.unit.charts.test_scheduler import scheduler_args, scheduler_container

CUSTOM = {
    "manager": {
        "webhook": {
            "rateLimit": {"qps": 0.5, "burst": 3, "perClientQps": 0, "perClientBurst": 1},
            "timeoutSeconds": 5,
        }
    },
    # a million renders as Go's "1e+06": the flag still reads it
    "scheduler": {"rateLimit": {"qps": 1000000, "burst": 1000000, "perClientQps": 250}},
}
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "negative-qps": ({"manager": {"webhook": {"rateLimit": {"qps": -1}}}}, "qps"),
    "zero-burst": ({"scheduler": {"rateLimit": {"burst": 0}}}, "burst"),
    "fractional-burst": ({"scheduler": {"rateLimit": {"perClientBurst": 1.5}}}, "perClientBurst"),
    "text-rate": ({"scheduler": {"rateLimit": {"perClientQps": "lots"}}}, "perClientQps"),
    "misspelt": ({"manager": {"webhook": {"rateLimit": {"qpss": 10}}}}, "qpss"),
    "long-timeout": ({"manager": {"webhook": {"timeoutSeconds": 60}}}, "timeoutSeconds"),
}


@pytest.fixture(scope="module")
def releases() -> dict[str, helm.Release]:
    names = ["default", "custom", *REFUSED]
    renders = [helm.Render(helm.CHART), helm.Render(helm.CHART, CUSTOM)]
    renders += [helm.Render(helm.CHART, values) for values, _ in REFUSED.values()]
    results = helm.run(*renders)
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(names, results, strict=True))  # type: ignore[arg-type]


def scheduler_limits(release: helm.Release) -> RateLimits:
    return scheduler_cli.options_from_args(scheduler_args(release)).rate_limits()


def test_the_defaults_reach_both_components_as_the_flags_defaults(
    releases: dict[str, helm.Release],
) -> None:
    release = releases["default"]
    assert not release.error, release.error
    manager_args = manager_container(release)["args"]
    assert [a for a in manager_args if a.startswith("--webhook-rate-limit-")] == [
        "--webhook-rate-limit-qps=2000",
        "--webhook-rate-limit-burst=4000",
        "--webhook-rate-limit-per-client-qps=1000",
        "--webhook-rate-limit-per-client-burst=2000",
    ]
    assert manager_options(release).webhook_rate_limits() == RateLimits()
    scheduler_flags = [a for a in scheduler_container(release)["args"] if "rate-limit" in a]
    assert len(scheduler_flags) == 4
    assert scheduler_limits(release) == RateLimits()


def test_the_webhooks_wait_the_api_servers_default_and_keep_their_failure_policies(
    releases: dict[str, helm.Release],
) -> None:
    hooks = webhooks(releases["default"])
    assert {name: hook["timeoutSeconds"] for name, hook in hooks.items()} == {
        "mpod.koordinator.sh": 10,
        "vpod.koordinator.sh": 10,
        "vconfigmap.koordinator.sh": 10,
        "melasticquota.koordinator.sh": 10,
        "velasticquota.koordinator.sh": 10,
    }
    policies = {name: hook["failurePolicy"] for name, hook in hooks.items()}
    assert policies == {
        "mpod.koordinator.sh": "Ignore",
        "vpod.koordinator.sh": "Ignore",
        "vconfigmap.koordinator.sh": "Fail",
        "melasticquota.koordinator.sh": "Ignore",
        "velasticquota.koordinator.sh": "Ignore",
    }


def test_set_values_reach_the_components(releases: dict[str, helm.Release]) -> None:
    release = releases["custom"]
    assert not release.error, release.error
    assert manager_options(release).webhook_rate_limits() == RateLimits(
        qps=0.5, burst=3, per_client_qps=0, per_client_burst=1
    )
    assert {h["timeoutSeconds"] for h in webhooks(release).values()} == {5}
    assert "--rate-limit-qps=1e+06" in scheduler_container(release)["args"]
    assert scheduler_limits(release) == RateLimits(
        qps=1_000_000, burst=1_000_000, per_client_qps=250, per_client_burst=2000
    )


@pytest.mark.parametrize("case", REFUSED)
def test_the_schema_refuses_what_the_flags_would(
    releases: dict[str, helm.Release], case: str
) -> None:
    error = releases[case].error
    _, key = REFUSED[case]
    assert error, f"{case}: installed"
    assert "values don't meet the specifications of the schema" in error, error
    assert key in error, error


def test_without_webhooks_there_is_no_webhook_rate_limit_flag() -> None:
    (release,) = helm.run(helm.Render(helm.CHART, {"manager": {"webhook": {"enabled": False}}}))
    assert isinstance(release, helm.Release) and not release.error
    args: list[Any] = manager_container(release)["args"]
    assert "--disable-webhooks" in args
    assert not [a for a in args if "rate-limit" in a]
