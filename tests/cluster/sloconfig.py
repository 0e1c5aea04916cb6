"""Changing the chart's slo-controller-config ConfigMap as an operator would (``kubectl patch``)
and putting it back: each key holds one JSON document (Koordinator's layout)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from tests.cluster.cluster import Cluster
from tests.cluster.helm import NAMESPACE

NAME = "slo-controller-config"


def read(cluster: Cluster) -> dict[str, str]:
    return dict(cluster.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}")["data"])


def write(cluster: Cluster, data: dict[str, str]) -> None:
    cluster.kubectl("patch", "configmap", "-n", NAMESPACE, NAME, "--type=merge",
                    "-p", json.dumps({"data": data}))  # fmt: skip


def document(cluster: Cluster, key: str) -> dict[str, Any]:
    return dict(json.loads(read(cluster)[key]))


@contextlib.contextmanager
def kept(cluster: Cluster) -> Iterator[None]:
    """Whatever the block changes, the ConfigMap's data is as it was afterwards."""
    saved = read(cluster)
    try:
        yield
    finally:
        write(cluster, saved)


def change(cluster: Cluster, key: str, strategy: dict[str, Any], *, cluster_strategy: bool) -> None:
    """Merge ``strategy`` into document ``key`` (into its clusterStrategy where it has one)."""
    doc = document(cluster, key)
    (doc["clusterStrategy"] if cluster_strategy else doc).update(strategy)
    write(cluster, {key: json.dumps(doc)})
