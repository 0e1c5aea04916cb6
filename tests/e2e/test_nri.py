"""The NRI protocol stack against the real containerd: 1.7.24 (NRI v0.6.1) or 2.1.9 (NRI v0.8.0),
as the tier says (tests/e2e/tiers.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from nri_plugin import api
from tests.e2e.harness import paths
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.node import Node
from tests.e2e.harness.plugin import PluginProcess, PluginThread, install_preinstalled
from tests.e2e.harness.timing import scaled
from tests.e2e.plugins.shares import Shares


class Recording(Shares):
    """The e2e shares plugin, also recording what Synchronize listed."""

    def __init__(self, shares: int) -> None:
        super().__init__(shares)
        self.synced_pods: list[str] = []
        self.synced_containers: list[str] = []

    async def synchronize(
        self, pods: list[api.PodSandbox], containers: list[api.Container]
    ) -> None:
        self.synced_pods = [p.name for p in pods]
        self.synced_containers = [c.id for c in containers]


def connected(name: str) -> str:
    return f'plugin \\"{name}\\" connected'


def test_synchronize_lists_pods_and_containers_that_existed_before(node: Node) -> None:
    pod = PodSpec.new()
    pod_id = node.run_pod(pod)
    cid = node.run_container(pod_id, ContainerSpec("early"))
    plugin = Recording(700)

    with PluginThread(plugin, socket_path=node.containerd.layout.nri_socket) as running:
        running.wait_registrations(1)
        node.containerd.wait_for_log(connected("10-e2e"))

        assert pod.name in plugin.synced_pods
        assert cid in plugin.synced_containers
        assert running.stub.runtime_name == "containerd"
        assert running.stub.runtime_version.startswith(f"{paths.CONTAINERD_VERSION}.")


def test_create_container_adjustment_reaches_the_cgroup(node: Node) -> None:
    with PluginThread(Recording(700), socket_path=node.containerd.layout.nri_socket) as running:
        running.wait_registrations(1)
        node.containerd.wait_for_log(connected("10-e2e"))
        pod_id = node.run_pod(PodSpec.new())

        cid = node.run_container(pod_id, ContainerSpec("app", cpu_shares=512, cpu_quota=50000))

        values = node.container_values(pod_id, cid)
        # the plugin's value, not the requested 512
        assert values.cpu_share == node.reader.cpu_share(700)
        assert values.cpu_quota == 50000  # what the plugin left alone stays as requested


def test_unsolicited_update_containers_is_applied(node: Node) -> None:
    with PluginThread(Recording(700), socket_path=node.containerd.layout.nri_socket) as running:
        running.wait_registrations(1)
        node.containerd.wait_for_log(connected("10-e2e"))
        pod_id = node.run_pod(PodSpec.new())
        cid = node.run_container(pod_id, ContainerSpec("app", cpu_quota=50000))
        update = api.ContainerUpdate(container_id=cid)
        update.linux.resources.cpu.quota.value = 30000
        update.linux.resources.cpu.period.value = 100000

        failed = running.call(running.stub.update_containers([update]))

        assert failed == []
        assert node.container_values(pod_id, cid).cpu_quota == 30000


def test_five_containerd_restarts_leave_exactly_one_live_registration(fresh_node: Node) -> None:
    node = fresh_node
    pod = PodSpec.new()
    pod_id = node.run_pod(pod)
    with PluginThread(Recording(700), socket_path=node.containerd.layout.nri_socket) as running:
        running.wait_registrations(1)
        for restart in range(1, 6):
            node.restart_containerd()
            running.wait_registrations(restart + 1)
            node.containerd.wait_for_log(connected("10-e2e"))

            cid = node.run_container(pod_id, ContainerSpec(f"after-{restart}", cpu_shares=512))

            assert node.container_values(pod_id, cid).cpu_share == node.reader.cpu_share(700)
            log = node.containerd.log_text(since_start=True)
            assert log.count(connected("10-e2e")) == 1, (
                f"restart {restart}: more than one registration"
            )
            assert "#2:" not in log  # containerd lists its plugins; ours appears once
            assert "both tried to set" not in log
        assert running.stub.registrations == 6


def test_killed_plugin_does_not_stop_containerd_and_a_new_one_recovers(
    node: Node, tmp_path: Path
) -> None:
    socket_path = node.containerd.layout.nri_socket
    pod_id = node.run_pod(PodSpec.new())
    first = PluginProcess(socket_path, 800, name="proc", index="20", log=tmp_path / "plugin.log")
    try:
        node.containerd.wait_for_log(connected("20-proc"))
        before = node.run_container(pod_id, ContainerSpec("before", cpu_shares=512))
        assert node.container_values(pod_id, before).cpu_share == node.reader.cpu_share(800)

        first.kill()
        during = node.run_container(pod_id, ContainerSpec("during", cpu_shares=512))
        # created without the plugin
        assert node.container_values(pod_id, during).cpu_share == node.reader.cpu_share(512)

        second = PluginProcess(
            socket_path, 800, name="proc", index="20", log=tmp_path / "plugin.log"
        )
        try:
            node.containerd.wait_for_log(connected("20-proc"), count=2)
            after = node.run_container(pod_id, ContainerSpec("after", cpu_shares=512))
            assert node.container_values(pod_id, after).cpu_share == node.reader.cpu_share(800)
        finally:
            second.kill()
    finally:
        first.kill()


def test_preinstalled_plugin_is_launched_by_containerd_and_adjusts(fresh_node: Node) -> None:
    node = fresh_node
    layout = node.containerd.layout
    install_preinstalled(layout.nri_plugin_path, layout.nri_plugin_config_path, "shares", "05", 900)

    node.restart_containerd()  # pre-installed plugins are launched when containerd starts
    node.containerd.wait_for_log('registered as \\"05-shares\\"')
    pod_id = node.run_pod(PodSpec.new())
    cid = node.run_container(pod_id, ContainerSpec("app", cpu_shares=512))

    # from 05-shares.conf
    assert node.container_values(pod_id, cid).cpu_share == node.reader.cpu_share(900)
    assert node.containerd.pid is not None


def test_koordctl_nri_events_prints_each_message_as_json(node: Node) -> None:
    koordctl = Path(sys.executable).parent / "koordctl"
    pod = PodSpec.new()
    early_pod = node.run_pod(pod)
    proc = subprocess.Popen(
        [str(koordctl), "nri-events", "--socket", str(node.containerd.layout.nri_socket)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        node.containerd.wait_for_log(connected("99-nri-events"))
        cid = node.run_container(early_pod, ContainerSpec("watched"))
        node.cri.stop_container(cid)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=scaled(10))

    assert proc.returncode == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    names = [r["event"] for r in records]
    assert names[:2] == ["configure", "synchronize"]
    assert records[0]["runtime_name"] == "containerd"
    assert pod.name in [p["name"] for p in records[1]["pods"]]
    create = next(r for r in records if r["event"] == "create_container")
    assert (create["pod"]["name"], create["container"]["name"]) == (pod.name, "watched")
    assert {
        "post_create_container",
        "start_container",
        "post_start_container",
        "stop_container",
    } <= set(names)
