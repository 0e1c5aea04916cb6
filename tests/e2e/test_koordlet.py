"""koordlet as users run it (standalone, NRI) on the real containerd: QoS values in the cgroups."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from koordapi import keys
from tests.e2e.harness.cgroups import CgroupValues, allowed_cpus
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node

MiB = 1 << 20
GROUP_IDENTITY_ON = """
resourceQOSStrategy:
  lsrClass: {cpuQOS: {enable: true}}
  lsClass: {cpuQOS: {enable: true}}
  beClass: {cpuQOS: {enable: true}}
"""


def be_pod(containers: dict[str, tuple[int, int, int, int]]) -> PodSpec:
    """A BE pod; container → (batch-cpu request, limit in milli-cores, batch-memory req, limit)."""
    spec = {
        name: {
            "requests": {keys.BATCH_CPU: str(cr), keys.BATCH_MEMORY: str(mr)},
            "limits": {keys.BATCH_CPU: str(cl), keys.BATCH_MEMORY: str(ml)},
        }
        for name, (cr, cl, mr, ml) in containers.items()
    }
    return PodSpec.new(
        qos="besteffort",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps({"containers": spec})},
    )


def assert_batch_values_applied(node: Node) -> CgroupValues:
    """A BE pod asking 500m/1000m batch-cpu and 256Mi/512Mi batch-memory is run: its container
    must hold koordlet's values (shares for 500m, quota for 1000m, the memory limit); they are
    returned."""
    pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
    cid = node.run_container(pod_id, ContainerSpec("batch", cpu_shares=2))
    values = node.container_values(pod_id, cid)
    assert (values.cpu_share, values.cpu_quota, values.memory_limit) == (
        node.reader.cpu_share(512),
        100000,
        512 * MiB,
    )
    return values


def pinned_pod(cpuset: str, qos_class: str = "LSR") -> PodSpec:
    return PodSpec.new(
        qos="guaranteed",
        labels={keys.LABEL_QOS_CLASS: qos_class},
        annotations={keys.ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": cpuset})},
    )


def cpu_set(text: str | None) -> set[int]:
    cpus: set[int] = set()
    for part in (text or "").split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


@pytest.fixture
def koordlet(node: Node) -> Iterator[KoordletProcess]:
    with KoordletProcess(node) as running:
        yield running


@pytest.fixture
def koordlet_gi(node: Node) -> Iterator[KoordletProcess]:
    with KoordletProcess(node, node_slo=GROUP_IDENTITY_ON) as running:
        yield running


def test_be_pod_gets_shares_quota_and_memory_from_batch_resources(
    node: Node, koordlet: KoordletProcess
) -> None:
    pod = be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)})
    pod_id = node.run_pod(pod)
    cid = node.run_container(pod_id, ContainerSpec("batch", cpu_shares=2))

    pod_values = node.pod_values(pod_id)
    container = node.container_values(pod_id, cid)

    assert (pod_values.cpu_share, pod_values.cpu_quota, pod_values.memory_limit) == (
        node.reader.cpu_share(512),
        100000,
        512 * MiB,
    )
    assert (container.cpu_share, container.cpu_quota, container.memory_limit) == (
        node.reader.cpu_share(512),
        100000,
        512 * MiB,
    )


def test_lsr_pod_gets_its_cpuset_and_no_quota(node: Node, koordlet: KoordletProcess) -> None:
    cpu = allowed_cpus(2).split(",")[-1]
    pod_id = node.run_pod(pinned_pod(cpu))
    cid = node.run_container(pod_id, ContainerSpec("web", cpu_shares=1024, cpu_quota=100000))

    values = node.container_values(pod_id, cid)

    assert values.cpuset_cpus == cpu
    assert values.cpu_quota == -1
    assert node.pod_values(pod_id).cpu_quota == -1


def test_ls_pod_gets_the_ls_share_pool_without_pinned_cpus(
    node: Node, koordlet: KoordletProcess
) -> None:
    cpus = allowed_cpus(2).split(",")
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to pin one and share the other")
    node.run_container(node.run_pod(pinned_pod(cpus[-1])), ContainerSpec("pinned"))
    ls = PodSpec.new(qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"})
    pod_id = node.run_pod(ls)

    cid = node.run_container(pod_id, ContainerSpec("api", cpu_shares=512, cpu_quota=50000))

    values = node.container_values(pod_id, cid)
    assert cpu_set(values.cpuset_cpus) == cpu_set(allowed_cpus(4096)) - {int(cpus[-1])}
    assert values.cpu_quota == 50000  # LS keeps the kubelet's quota


def test_be_pod_is_cpu_idle_with_group_identity_on_a_mainline_kernel(
    node: Node, koordlet_gi: KoordletProcess
) -> None:
    be_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
    node.run_container(be_id, ContainerSpec("batch"))
    ls_id = node.run_pod(PodSpec.new(qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"}))
    node.run_container(ls_id, ContainerSpec("api"))

    assert node.pod_values(be_id).cpu_idle == 1
    assert node.pod_values(ls_id).cpu_idle == 0
    assert koordlet_gi.metric("koordlet_group_identity_mechanism_info", mechanism="cpu.idle") == 1
    besteffort = node.layout.qos_dir("besteffort")
    koordlet_gi.wait_until(
        lambda: node.reader.values(besteffort).cpu_idle == 1, what="besteffort dir idle"
    )


def test_update_of_a_be_container_keeps_the_batch_values(
    node: Node, koordlet: KoordletProcess
) -> None:
    pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
    cid = node.run_container(pod_id, ContainerSpec("batch"))

    node.cri.update_resources(
        cid, ContainerSpec("batch", cpu_shares=2, cpu_quota=200000, memory_limit=1024 * MiB)
    )

    values = node.container_values(pod_id, cid)
    assert (values.cpu_share, values.cpu_quota, values.memory_limit) == (
        node.reader.cpu_share(512),
        100000,
        512 * MiB,
    )


def test_malformed_annotations_start_the_container_and_koordlet_keeps_serving(
    node: Node, koordlet: KoordletProcess
) -> None:
    broken_be = PodSpec.new(
        qos="besteffort",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"},
    )
    outside = pinned_pod("0-999")  # CPUs this node does not have
    unknown_qos = PodSpec.new(labels={keys.LABEL_QOS_CLASS: "GOLD"})
    started = []
    for pod in (broken_be, outside, unknown_qos):
        pod_id = node.run_pod(pod)
        cid = node.run_container(pod_id, ContainerSpec("app", cpu_quota=30000))
        started.append(node.container_values(pod_id, cid))

    assert [v.cpu_quota for v in started] == [30000, 30000, 30000]  # untouched, but running
    assert koordlet.metric("koordlet_runtime_hook_failures_total", cause="UnknownQoSClass") == 1
    assert koordlet.metric("koordlet_runtime_hook_failures_total", hook="CPUSetAllocator") >= 1
    assert (
        koordlet.metric(
            "koordlet_runtime_hook_failures_total",
            hook="BatchResource",
            cause=f"AnnotationError:{keys.ANNOTATION_EXTENDED_RESOURCE_SPEC}",
        )
        >= 1
    )
    assert "this node does not have" in koordlet.log_text()
    good = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
    cid = node.run_container(good, ContainerSpec("batch"))
    assert node.container_values(good, cid).cpu_share == node.reader.cpu_share(512)
    assert koordlet.alive


def test_a_value_changed_behind_koordlets_back_is_restored(
    node: Node, koordlet: KoordletProcess
) -> None:
    pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
    cid = node.run_container(pod_id, ContainerSpec("batch"))

    # Our own container. The kernel took the value once the write returned; no read-back, as
    # koordlet may already have restored it by then (seen in the VM).
    node.reader.write_cpu_share(node.container_cgroup(pod_id, cid), 100)

    koordlet.wait_until(
        lambda: node.container_values(pod_id, cid).cpu_share == node.reader.cpu_share(512),
        what="shares restored",
    )


def test_after_a_restart_koordlet_reconciles_existing_and_adjusts_new_containers(
    node: Node, koordlet: KoordletProcess
) -> None:
    pod_id = node.run_pod(
        be_pod({"a": (500, 1000, 256 * MiB, 512 * MiB), "b": (1000, 2000, 256 * MiB, 512 * MiB)})
    )
    first = node.run_container(pod_id, ContainerSpec("a"))
    koordlet.stop()
    node.reader.write_cpu_quota(node.container_cgroup(pod_id, first), 300000)  # while it is down

    koordlet.start()

    koordlet.wait_until(
        lambda: node.container_values(pod_id, first).cpu_quota == 100000, what="quota reconciled"
    )
    second = node.run_container(pod_id, ContainerSpec("b"))
    assert node.container_values(pod_id, second).cpu_quota == 200000


MEMORY_QOS_BE = """
resourceQOSStrategy:
  beClass:
    memoryQOS: {enable: true, minLimitPercent: 50, lowLimitPercent: 80, throttlingPercent: 80}
"""


def test_memory_qos_on_cgroup_v2_protects_and_throttles_a_be_container(node: Node) -> None:
    # Batch-memory request 256Mi, limit 512Mi (cgroup v2 only: tests/e2e/tiers.py ONLY_IN).
    args = ("--feature-gates", "MemoryQOS=true")
    with KoordletProcess(node, node_slo=MEMORY_QOS_BE, args=args) as koordlet:
        pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
        cid = node.run_container(pod_id, ContainerSpec("batch"))
        folder = node.reader.root / node.container_cgroup(pod_id, cid).strip("/")

        def values() -> tuple[str, ...]:
            names = ("memory.min", "memory.low", "memory.high", "memory.max")
            return tuple((folder / name).read_text().strip() for name in names)

        # min 50 % of the request; low 80 % of it, as the kernel keeps it (whole 4 KiB pages:
        # 214748364 bytes asked, 52428 pages); high = request + 80 % of (limit - request),
        # page-aligned; max the batch limit.
        expected = tuple(str(v) for v in (128 * MiB, 52428 * 4096, 117964 * 4096, 512 * MiB))
        koordlet.wait_until(lambda: values() == expected, 20, f"memory QoS values {expected}")
