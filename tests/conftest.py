"""Suite-wide rules: e2e tests are marked and run last; under CI a skipped e2e test fails.

``.ci/run`` and ``make test`` set ``KOORD_E2E_REQUIRED=1``: the end-to-end suite is the proof
that the product works on a real containerd, so on CI a missing prerequisite (no root, no
containerd, no cgroups) must fail loudly instead of skipping quietly.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).parent / "e2e"
CLUSTER_DIR = Path(__file__).parent / "cluster"  # the cluster tier: end-to-end as well
E2E_REQUIRED = os.environ.get("KOORD_E2E_REQUIRED") == "1"


def _is_e2e(item: pytest.Item) -> bool:
    parents = Path(str(item.fspath)).parents
    return E2E_DIR in parents or CLUSTER_DIR in parents


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=_is_e2e)  # stable: unit tests keep their order, e2e tests go last


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if E2E_REQUIRED and report.skipped and _is_e2e(item) and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"e2e test skipped while KOORD_E2E_REQUIRED=1: {reason}"
    return report
