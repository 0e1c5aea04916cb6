"""koordlet under faults and hostile input, on the real containerd: it keeps applying QoS.

* A metric-cache disk that is full at start-up: koordlet starts with the cache in memory, says
  so, and the hooks still give a BE pod its batch values.
* A batch-memory limit past int64 in a pod's annotation: the container runs with the other
  hooks' values, and the BatchResource failure is counted.
* A NodeSLO file that is not UTF-8, then a valid one: the bad one is refused with its reason
  and counted, the watcher goes on, and the valid one applies.
* Fifteen containerd restarts, a BE pod created right after each re-registration: koordlet
  reconnects as the new socket appears (no backoff), and the pod gets its values.
* A slowloris of 1,000 idle connections to koordlet's HTTP server: new pods still get their
  values, and the server refuses what it cannot serve instead of running out of descriptors.

The behaviour does not depend on the cgroup version or the runtime, so these run in the host
tier only (tests/e2e/tiers.py).
"""

from __future__ import annotations

import errno
import json
import resource
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordapi import keys
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import PLUGIN_ID, KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.test_koordlet import (
    GROUP_IDENTITY_ON,
    MiB,
    assert_batch_values_applied,
    be_pod,
)


@pytest.fixture
def full_disk(node: Node) -> Iterator[Path]:
    """A 64 KiB tmpfs under the node's private folder, filled up."""
    mount = node.containerd.layout.base / "full-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        try:
            with (mount / "filler").open("wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError as err:  # full (the open itself may already be refused)
            assert err.errno == errno.ENOSPC
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
        mount.rmdir()


def test_a_full_metric_cache_disk_does_not_stop_koordlet_or_its_hooks(
    node: Node, full_disk: Path
) -> None:
    args = ("--tsdb-path", str(full_disk / "metric-data"))
    with KoordletProcess(node, args=args) as koordlet:
        assert_batch_values_applied(node)
        assert "metric cache degraded: cannot open" in koordlet.log_text()
        assert koordlet.alive


def test_a_batch_memory_limit_past_int64_fails_only_its_hook(node: Node) -> None:
    spec = {
        "batch": {
            "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: "1Gi"},
            "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: "1e400"},
        }
    }
    pod = PodSpec.new(
        qos="besteffort",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps({"containers": spec})},
    )
    with KoordletProcess(node, node_slo=GROUP_IDENTITY_ON) as koordlet:
        pod_id = node.run_pod(pod)
        cid = node.run_container(pod_id, ContainerSpec("batch", cpu_shares=2))
        assert node.cri.container_pid(cid) > 0  # created and started
        # group identity (another hook) still made the BE pod idle; no batch limit was set
        assert node.pod_values(pod_id).cpu_idle == 1
        assert node.container_values(pod_id, cid).memory_limit == -1
        failures = koordlet.metric(
            "koordlet_runtime_hook_failures_total",
            hook="BatchResource",
            cause=f"AnnotationError:{keys.ANNOTATION_EXTENDED_RESOURCE_SPEC}",
        )
        assert failures >= 2  # the pod and the container stage
        assert "past int64" in koordlet.log_text()


def test_a_nodeslo_that_is_not_utf8_is_refused_and_the_next_valid_one_applies(
    node: Node,
) -> None:
    with KoordletProcess(node) as koordlet:
        errors = "koordlet_node_config_errors_total"
        koordlet.slo_file.write_bytes(b"resourceQOSStrategy: {beClass: \xff\xfe}\n")
        koordlet.wait_until(lambda: koordlet.metric(errors) == 1, 20, "the error counted")
        assert "not UTF-8" in koordlet.log_text()

        mark = len(koordlet.log_text())
        koordlet.slo_file.write_text(GROUP_IDENTITY_ON)
        koordlet.wait_until(
            lambda: "node config loaded from" in koordlet.log_text()[mark:],
            20,
            "the valid NodeSLO loaded",
        )
        pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
        node.run_container(pod_id, ContainerSpec("batch"))
        assert node.pod_values(pod_id).cpu_idle == 1  # the valid file's group identity


def test_a_slowloris_on_the_http_server_leaves_the_hooks_working(node: Node) -> None:
    count = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 200:  # this test process's own limit, for its client sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 200), hard))
    with KoordletProcess(node) as koordlet:
        conns: list[socket.socket] = []
        try:
            for _ in range(count):
                conns.append(socket.create_connection(("127.0.0.1", koordlet.port), timeout=10))
            assert_batch_values_applied(node)
            assert koordlet.alive
        finally:
            for conn in conns:
                conn.close()

        # Once the idle ones are let go, the server answers again and says what it refused.
        def refused() -> float:
            try:
                return koordlet.metric("koordlet_http_connections_refused_total")
            except OSError:  # still refused: every slot taken
                return -1.0

        koordlet.wait_until(lambda: refused() >= count - 40, 30, "the refused connections counted")


def test_fifteen_containerd_restarts_each_followed_by_a_be_pod_with_its_values(
    node: Node,
) -> None:
    """After every restart koordlet registers again (at once: it watches the socket's folder)
    and a BE pod created right after gets its batch values from the hooks."""
    with KoordletProcess(node) as koordlet:
        connected = f'plugin \\"{PLUGIN_ID}\\" connected'
        for _ in range(15):
            node.restart_containerd()
            node.containerd.wait_for_log(connected, timeout=5)
            assert_batch_values_applied(node)
        assert koordlet.alive
        assert koordlet.metric("koordlet_nri_connected") == 1
