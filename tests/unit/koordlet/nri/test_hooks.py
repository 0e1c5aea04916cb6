"""koordlet's NRI server against the fake runtime and a fake cgroup tree (no root needed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from koordapi import keys
from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from koordlet.applying import Applier
from koordlet.executor import Executor
from koordlet.executor.resctrl import Resctrl
from koordlet.metrics import KoordletMetrics
from koordlet.nri.hooks import HookServer
from koordlet.states.pods import PodStore
from nri_plugin import Stub, api, status
from nri_plugin.errors import RpcError
from nri_plugin.testing import FakeRuntime, PluginSession
from runtimehooks import HOOKS
from runtimehooks.registry import FailurePolicy
from runtimehooks.rules import KernelFeatures, NodeState, Rules

POD_DIR = "kubepods/besteffort/podu1"
MiB = 1 << 20


def cgroup_tree(root: Path) -> Path:
    for sub, files in (
        ("cpu", {"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "cpu.idle": "0"}),
        ("memory", {"memory.limit_in_bytes": "9223372036854771712"}),
    ):
        d = root / sub / POD_DIR
        d.mkdir(parents=True)
        for name, value in files.items():
            (d / name).write_text(value + "\n")
    return root


def be_pod() -> api.PodSandbox:
    pod = api.PodSandbox(id="p1", name="batch-pod", uid="u1", namespace="jobs")
    pod.labels[keys.LABEL_QOS_CLASS] = "BE"
    pod.linux.cgroup_parent = "/" + POD_DIR
    spec = {
        "containers": {
            "main": {
                "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: str(256 * MiB)},
                "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: str(512 * MiB)},
            }
        }
    }
    pod.annotations[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(spec)
    return pod


def container(name: str = "main") -> api.Container:
    c = api.Container(id=f"c-{name}", pod_sandbox_id="p1", name=name)
    c.linux.cgroups_path = f"/{POD_DIR}/c-{name}"
    return c


def run_with(
    tmp_path: Path,
    scenario: Callable[[PluginSession, HookServer], Coroutine[Any, Any, None]],
    *,
    policy: FailurePolicy = FailurePolicy.IGNORE,
    rules: Rules | None = None,
) -> HookServer:
    root = cgroup_tree(tmp_path / "cgroup")
    rules = rules or Rules(
        node=NodeState(cpus=frozenset({0, 1})), kernel=KernelFeatures(cpu_idle=True)
    )
    server = HookServer(
        hooks=HOOKS,
        rules=lambda: rules,
        pods=PodStore(),
        applier=Applier(Executor(root), Resctrl(tmp_path / "resctrl")),
        policy=policy,
        metrics=KoordletMetrics("n1"),
    )

    async def main() -> None:
        runtime = FakeRuntime()
        await runtime.listen(tmp_path / "nri.sock")
        stub = Stub(server, name="koordlet_nri", index="00", socket_path=tmp_path / "nri.sock")
        task = asyncio.create_task(stub.run())
        session = await runtime.next_session()
        try:
            await scenario(session, server)
        finally:
            stub.stop()
            await task
            await runtime.close()

    asyncio.run(asyncio.wait_for(main(), 15))
    return server


def test_run_pod_sandbox_writes_pod_values_and_create_returns_the_adjustment(
    tmp_path: Path,
) -> None:
    seen: dict[str, api.CreateContainerResponse] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        await session.state_change(api.RUN_POD_SANDBOX, be_pod())
        seen["reply"] = await session.create_container(be_pod(), container())

    run_with(tmp_path, scenario)

    cpu = tmp_path / "cgroup" / "cpu" / POD_DIR
    assert (cpu / "cpu.shares").read_text().strip() == "512"
    assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "100000"
    assert (
        tmp_path / "cgroup" / "memory" / POD_DIR / "memory.limit_in_bytes"
    ).read_text().strip() == str(512 * MiB)
    resources = seen["reply"].adjust.linux.resources
    assert (resources.cpu.shares.value, resources.cpu.quota.value) == (512, 100000)
    assert resources.memory.limit.value == 512 * MiB
    assert not resources.cpu.cpus  # BE: no cpuset from the hook


def test_update_returns_an_update_for_the_container(tmp_path: Path) -> None:
    seen: dict[str, api.UpdateContainerResponse] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        asked = api.LinuxResources()
        asked.cpu.quota.value = 200000
        seen["reply"] = await session.update_container(be_pod(), container(), asked)

    run_with(tmp_path, scenario)

    (update,) = seen["reply"].update
    assert update.container_id == "c-main"
    assert update.linux.resources.cpu.quota.value == 100000


BROKEN = {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{oops"}


def test_ignore_policy_starts_the_container_and_counts_the_cause(tmp_path: Path) -> None:
    seen: dict[str, api.CreateContainerResponse] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        pod = be_pod()
        pod.annotations.update(BROKEN)
        seen["reply"] = await session.create_container(pod, container())

    server = run_with(tmp_path, scenario)

    assert not seen["reply"].HasField("adjust")
    cause = f"AnnotationError:{keys.ANNOTATION_EXTENDED_RESOURCE_SPEC}"
    value = server.metrics.registry.get_sample_value(
        "koordlet_runtime_hook_failures_total",
        {"node": "n1", "hook": "BatchResource", "cause": cause},
    )
    assert value == 1.0


@pytest.mark.parametrize(
    ("cpu", "memory"),
    [
        pytest.param("1000", "1e400", id="memory-1e400"),
        pytest.param("1000", "8Ei", id="memory-8Ei"),
        pytest.param("1e20", str(512 * MiB), id="cpu-1e20"),
        pytest.param("1000", "1", id="memory-1-byte"),
    ],
)
def test_a_batch_limit_the_kernel_cannot_take_fails_only_that_hook(
    tmp_path: Path, cpu: str, memory: str
) -> None:
    seen: dict[str, api.CreateContainerResponse] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        pod = be_pod()
        limits = {keys.BATCH_CPU: cpu, keys.BATCH_MEMORY: memory}
        spec = {"containers": {"main": {"requests": {keys.BATCH_CPU: "500"}, "limits": limits}}}
        pod.annotations[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(spec)
        await session.state_change(api.RUN_POD_SANDBOX, pod)
        seen["reply"] = await session.create_container(pod, container())

    slo = NodeSLOSpec.parse({"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}})
    rules = Rules(slo=slo, gates=FeatureGates(), kernel=KernelFeatures(cpu_idle=True))
    server = run_with(tmp_path, scenario, rules=rules)

    assert "reply" in seen  # created: the translation to NRI never saw the value
    cause = f"AnnotationError:{keys.ANNOTATION_EXTENDED_RESOURCE_SPEC}"
    value = server.metrics.registry.get_sample_value(
        "koordlet_runtime_hook_failures_total",
        {"node": "n1", "hook": "BatchResource", "cause": cause},
    )
    assert value == 2.0  # the pod and the container stage
    # the pod's cgroup keeps what it had; group identity (another hook) still made it idle
    memory_file = tmp_path / "cgroup" / "memory" / POD_DIR / "memory.limit_in_bytes"
    assert memory_file.read_text().strip() == "9223372036854771712"
    assert (tmp_path / "cgroup" / "cpu" / POD_DIR / "cpu.idle").read_text().strip() == "1"


def test_fail_policy_fails_the_runtime_request(tmp_path: Path) -> None:
    seen: dict[str, RpcError] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        pod = be_pod()
        pod.annotations.update(BROKEN)
        with pytest.raises(RpcError) as err:
            await session.create_container(pod, container())
        seen["error"] = err.value
        reply = await session.create_container(be_pod(), container())  # still serving
        assert reply.adjust.linux.resources.cpu.shares.value == 512

    run_with(tmp_path, scenario, policy=FailurePolicy.FAIL)

    assert seen["error"].code == status.UNKNOWN
    assert "BatchResource" in seen["error"].message


def test_group_identity_on_a_mainline_kernel_makes_the_be_pod_idle(tmp_path: Path) -> None:
    slo = NodeSLOSpec.parse({"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}})
    rules = Rules(slo=slo, gates=FeatureGates(), kernel=KernelFeatures(cpu_idle=True))

    async def scenario(session: PluginSession, server: HookServer) -> None:
        await session.state_change(api.RUN_POD_SANDBOX, be_pod())

    run_with(tmp_path, scenario, rules=rules)

    cpu = tmp_path / "cgroup" / "cpu" / POD_DIR
    assert (cpu / "cpu.idle").read_text().strip() == "1"
    assert (
        cpu / "cpu.shares"
    ).read_text().strip() == "2"  # shares are not written to an idle cgroup


def test_a_stopped_container_is_forgotten(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        await session.state_change(api.RUN_POD_SANDBOX, be_pod())
        await session.create_container(be_pod(), container("a"))
        await session.create_container(be_pod(), container("b"))
        request = api.StopContainerRequest(pod=be_pod(), container=container("a"))
        await session.call("StopContainer", request, api.StopContainerResponse)
        seen["left"] = [cid for known in server.pods for cid in known.containers]

    run_with(tmp_path, scenario)
    assert seen["left"] == ["c-b"]


def test_a_runtime_cgroup_path_out_of_the_root_gets_nothing_written_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # What "/../../escape/pod" reaches from <root>/cpu and <root>/memory: tmp_path/escape/pod.
    escape = tmp_path / "escape" / "pod"
    escape.mkdir(parents=True)
    planted = {"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "memory.limit_in_bytes": "-1"}
    for name, value in planted.items():
        (escape / name).write_text(value + "\n")
    seen: dict[str, api.CreateContainerResponse] = {}

    async def scenario(session: PluginSession, server: HookServer) -> None:
        pod = be_pod()
        pod.linux.cgroup_parent = "/../../escape/pod"
        ctr = container()
        ctr.linux.cgroups_path = "/../../escape/pod/c-main"
        await session.state_change(api.RUN_POD_SANDBOX, pod)
        seen["reply"] = await session.create_container(pod, ctr)

    run_with(tmp_path, scenario)

    assert "reply" in seen  # the container is still created
    assert {name: (escape / name).read_text().strip() for name in planted} == planted
    said = [r.getMessage() for r in caplog.records if "refused cgroup path" in r.getMessage()]
    assert said == [f"refused cgroup path '../../escape/pod': it leaves {tmp_path / 'cgroup'}"]
