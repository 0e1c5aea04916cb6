"""NodeSLO and node inputs from the API server (a fake client standing in for the transport)."""

from __future__ import annotations

from typing import Any

from koordapi import keys
from koordlet.kubeclient import KubeClient, KubeCredentials, KubeError
from koordlet.states.nodeconfig import NodeConfigAPI

NODE = {
    "metadata": {
        "name": "n1",
        "annotations": {keys.ANNOTATION_CPU_NORMALIZATION_RATIO: "1.2"},
        "labels": {"pool": "batch"},
    },
    "status": {"allocatable": {"cpu": "7", "memory": "15Gi"}},
}
SLO = {"spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 55}}}


class FakeClient(KubeClient):
    """Answers GETs from a dict of path → reply (a KubeError is raised)."""

    def __init__(self, replies: dict[str, Any]) -> None:
        super().__init__(KubeCredentials("http://127.0.0.1:1"))
        self.replies = replies
        self.paths: list[str] = []

    def request(self, method: str, path: str, body: Any = None) -> Any:
        self.paths.append(path)
        reply = self.replies[path]
        if isinstance(reply, KubeError):
            raise reply
        return reply


NODE_PATH = "/api/v1/nodes/n1"
SLO_PATH = "/apis/slo.koordinator.sh/v1alpha1/nodeslos/n1"


def test_nodeslo_and_node_inputs_make_the_config() -> None:
    source = NodeConfigAPI(FakeClient({NODE_PATH: NODE, SLO_PATH: SLO}), "n1")
    assert source.reload_if_changed(now=0)
    config = source.current
    assert config.spec.threshold["cpuSuppressThresholdPercent"] == 55
    assert config.parsed(keys.ANNOTATION_CPU_NORMALIZATION_RATIO) == 1.2
    assert config.labels == {"pool": "batch"}
    assert config.allocatable == {"cpu": 7000, "memory": 15 << 30}
    assert source.error is None


def test_no_nodeslo_yet_means_koordinators_defaults() -> None:
    client = FakeClient({NODE_PATH: NODE, SLO_PATH: KubeError(404, "not found")})
    source = NodeConfigAPI(client, "n1")
    source.reload_if_changed(now=0)
    assert source.current.spec.threshold["enable"] is False
    assert source.error is None


def test_polls_at_most_every_poll_seconds() -> None:
    client = FakeClient({NODE_PATH: NODE, SLO_PATH: SLO})
    source = NodeConfigAPI(client, "n1", poll=10)
    source.reload_if_changed(now=0)
    assert not source.reload_if_changed(now=5)
    assert len(client.paths) == 2
    assert not source.reload_if_changed(now=10)  # polled again, nothing changed
    assert len(client.paths) == 4


def test_an_unreachable_server_or_bad_content_keeps_the_last_good() -> None:
    client = FakeClient({NODE_PATH: NODE, SLO_PATH: SLO})
    source = NodeConfigAPI(client, "n1", poll=0)
    source.reload_if_changed(now=0)
    good = source.current
    client.replies[NODE_PATH] = KubeError(0, "API server unreachable: refused")
    assert not source.reload_if_changed(now=1)
    assert source.current is good
    assert source.error == "API server unreachable: refused"
    client.replies[NODE_PATH] = NODE
    bad = {"spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 300}}}
    client.replies[SLO_PATH] = bad
    assert not source.reload_if_changed(now=2)
    assert source.current is good
    assert source.error is not None and "cpuSuppressThresholdPercent" in source.error
    client.replies[SLO_PATH] = KubeError(500, "etcd timeout")
    assert not source.reload_if_changed(now=3)
    assert source.error == "HTTP 500: etcd timeout"
