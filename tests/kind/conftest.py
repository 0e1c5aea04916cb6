"""A real cluster (kind, in Docker) for the control plane: run with ``make kind``.

Not part of ``make test``: this machine, and CI, have no Docker engine. Every test here is
skipped with the reason when Docker, pytest-kind or helm is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "koordinator-py/koordlet:kind"


def missing() -> list[str]:
    found = []
    if shutil.which("docker") is None:
        found.append("docker (no Docker engine)")
    elif subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        found.append("a running Docker engine")
    try:
        import pytest_kind  # noqa: F401, PLC0415
    except ImportError:
        found.append("pytest-kind (pip install pytest-kind)")
    if shutil.which("helm") is None:
        found.append("helm")
    return found


@pytest.fixture(scope="session")
def kind_cluster() -> Iterator[Any]:
    absent = missing()
    if absent:
        pytest.skip(f"the kind suite needs {', '.join(absent)}; run it where Docker is available")
    from pytest_kind import KindCluster  # noqa: PLC0415

    build = ["docker", "build", "-f", "Containerfile", "-t", IMAGE, "."]
    subprocess.run(build, cwd=ROOT, check=True)
    cluster = KindCluster("koordinator-py")
    cluster.create()
    try:
        cluster.load_docker_image(IMAGE)
        repository, _, tag = IMAGE.partition(":")
        subprocess.run(
            ["helm", "install", "koordinator", str(ROOT / "charts" / "koordinator-py"),
             "--namespace", "koordinator-system", "--create-namespace", "--wait",
             "--kubeconfig", str(cluster.kubeconfig_path),
             "--set", f"koordlet.image.repository={repository},koordlet.image.tag={tag}",
             "--set", "koordlet.image.pullPolicy=Never"],
            check=True,
        )  # fmt: skip
        yield cluster
    finally:
        cluster.delete()
