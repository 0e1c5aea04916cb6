"""Cluster mode or standalone: the flags and the environment decide."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from koordapi.errors import ModelError
from koordkube.eviction import EvictionAPI, EvictionResult
from koordlet.cli import build_parser, config_from_args
from koordlet.cluster import build_api, cluster_mode, in_cluster
from tests.fakekube import FakeKubeAPI

IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def service_account(tmp_path: Path) -> Path:
    (tmp_path / "token").write_text("token")
    (tmp_path / "namespace").write_text("koordinator-system")
    return tmp_path


def test_a_kubeconfig_means_cluster_mode(tmp_path: Path) -> None:
    empty = tmp_path / "no-sa"
    assert cluster_mode(tmp_path / "kubeconfig", None, environ={}, service_account_dir=empty)


def test_in_cluster_credentials_mean_cluster_mode(service_account: Path) -> None:
    assert in_cluster(IN_CLUSTER, service_account)
    assert cluster_mode(None, None, environ=IN_CLUSTER, service_account_dir=service_account)
    # The env var without a service account token is not enough.
    missing = service_account / "missing"
    assert not cluster_mode(None, None, environ=IN_CLUSTER, service_account_dir=missing)


def test_standalone_without_credentials_or_with_a_nodeslo_file(
    tmp_path: Path, service_account: Path
) -> None:
    assert not cluster_mode(None, None, environ={}, service_account_dir=service_account)
    slo = tmp_path / "nodeslo.yaml"
    assert not cluster_mode(
        tmp_path / "kubeconfig", slo, environ=IN_CLUSTER, service_account_dir=service_account
    )


def test_the_kubeconfig_flag(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--kubeconfig", str(tmp_path / "kc")])
    assert config_from_args(args).kubeconfig == tmp_path / "kc"
    assert config_from_args(build_parser().parse_args([])).kubeconfig is None


def test_an_unreadable_kubeconfig_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot build a Kubernetes client"):
        build_api(tmp_path / "missing-kubeconfig")


def test_eviction_over_the_kube_api() -> None:
    async def scenario() -> None:
        eviction = EvictionAPI(FakeKubeAPI().kube_api(), timeout=2)
        result, _ = await asyncio.to_thread(eviction.evict, "ns", "p", "uid-1")
        assert result is EvictionResult.FAILED  # not bound to the loop yet
        eviction.bind(asyncio.get_running_loop())
        # No such pod on the fake: 404, gone.
        result, _ = await asyncio.to_thread(eviction.evict, "ns", "p", "uid-1")
        assert result is EvictionResult.GONE

    asyncio.run(asyncio.wait_for(scenario(), 10))
