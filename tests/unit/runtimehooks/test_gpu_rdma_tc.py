"""GPU env inject, RDMA device inject and TC network QoS."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi import features, keys
from koordapi.errors import AnnotationError
from koordapi.nodeslo import NodeSLOSpec
from runtimehooks.hooks import gpu, rdma, tc
from runtimehooks.patch import ContainerPatch, Device, Mount, PodPatch
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import DEFAULT_HAMI_CORE_LIBRARY, NodeState, Rules
from tests.unit.runtimehooks.builders import container, pod

STAGE = Stage.PRE_CREATE_CONTAINER
HAMI = {keys.LABEL_GPU_ISOLATION_PROVIDER: keys.GPU_ISOLATION_HAMI_CORE}


def allocated(value: dict[str, Any]) -> dict[str, str]:
    return {keys.ANNOTATION_DEVICE_ALLOCATED: json.dumps(value)}


def gpus(*minors: int, **resources: str) -> dict[str, str]:
    """Allocation of GPUs ``minors``, each with ``resources`` (gpu_memory_ratio=...)."""
    res = {f"koordinator.sh/{name.replace('_', '-')}": v for name, v in resources.items()}
    return allocated({"gpu": [{"minor": m, "resources": res} for m in minors]})


# -- GPU -------------------------------------------------------------------------------------

HAMI_ENV = {
    keys.ENV_NVIDIA_VISIBLE_DEVICES: "0",
    keys.ENV_CUDA_DEVICE_MEMORY_LIMIT: str(8 << 30),
    keys.ENV_CUDA_DEVICE_SM_LIMIT: "50",
    keys.ENV_LD_PRELOAD: DEFAULT_HAMI_CORE_LIBRARY,
}
HAMI_MOUNTS = (
    Mount(DEFAULT_HAMI_CORE_LIBRARY, DEFAULT_HAMI_CORE_LIBRARY),
    Mount("/tmp/vgpulock", "/tmp/vgpulock"),
)


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        pytest.param(
            pod("LS", annotations=gpus(0, 1, gpu_core="100")),
            ContainerPatch(env={"NVIDIA_VISIBLE_DEVICES": "0,1"}),
            id="visible-devices-list-minors",
        ),
        pytest.param(
            pod(
                "LS",
                labels=HAMI,
                annotations=gpus(0, gpu_memory_ratio="50", gpu_memory="8Gi", gpu_core="50"),
            ),
            ContainerPatch(env=HAMI_ENV, mounts=HAMI_MOUNTS),
            id="hami-core-partial-gpu",
        ),
        pytest.param(
            pod("LS", labels=HAMI, annotations=gpus(0, gpu_memory_ratio="50", gpu_memory="1Gi")),
            ContainerPatch(
                env={
                    keys.ENV_NVIDIA_VISIBLE_DEVICES: "0",
                    keys.ENV_CUDA_DEVICE_MEMORY_LIMIT: str(1 << 30),
                    keys.ENV_LD_PRELOAD: DEFAULT_HAMI_CORE_LIBRARY,
                },
                mounts=HAMI_MOUNTS,
            ),
            id="hami-core-without-gpu-core-has-no-sm-limit",
        ),
        pytest.param(
            pod("LS", labels=HAMI, annotations=gpus(0, gpu_memory_ratio="100")),
            ContainerPatch(env={"NVIDIA_VISIBLE_DEVICES": "0"}),
            id="hami-core-whole-gpu-not-isolated",
        ),
        pytest.param(
            pod("LS", annotations=gpus(0, gpu_memory_ratio="50", gpu_memory="8Gi")),
            ContainerPatch(env={"NVIDIA_VISIBLE_DEVICES": "0"}),
            id="partial-gpu-without-hami-label",
        ),
        pytest.param(pod("LS"), None, id="no-annotation"),
        pytest.param(pod("LS", annotations=allocated({"rdma": []})), None, id="no-gpu-entries"),
    ],
)
def test_gpu_env_and_mounts_from_device_allocation(
    owner: PodRequest, expected: ContainerPatch | None
) -> None:
    assert gpu.container(container(owner), Rules(), STAGE) == expected


def test_hami_core_library_path_comes_from_the_rules() -> None:
    owner = pod("LS", labels=HAMI, annotations=gpus(2, gpu_memory_ratio="25", gpu_memory="2Gi"))
    patch = gpu.container(container(owner), Rules(hami_core_library="/opt/libvgpu.so"), STAGE)
    assert patch is not None
    assert patch.env[keys.ENV_LD_PRELOAD] == "/opt/libvgpu.so"
    assert patch.mounts[0] == Mount("/opt/libvgpu.so", "/opt/libvgpu.so")


def test_malformed_device_allocation_raises() -> None:
    owner = pod("LS", annotations={keys.ANNOTATION_DEVICE_ALLOCATED: '{"gpu": {"minor": 0}}'})
    with pytest.raises(AnnotationError, match="gpu must be a list"):
        gpu.container(container(owner), Rules(), STAGE)


NVIDIA0 = Device("/dev/nvidia0", "c", 195, 0)
NVIDIA1 = Device("/dev/nvidia1", "c", 195, 1)
NVIDIACTL = Device("/dev/nvidiactl", "c", 195, 255)
NVIDIA_UVM = Device("/dev/nvidia-uvm", "c", 508, 0)
GPU_NODE = Rules(
    node=NodeState(nvidia_gpus={0: NVIDIA0, 1: NVIDIA1}, nvidia_control=(NVIDIACTL, NVIDIA_UVM))
)


@pytest.mark.parametrize(
    ("minors", "devices"),
    [
        pytest.param((1,), (NVIDIA1, NVIDIACTL, NVIDIA_UVM), id="one-gpu-and-the-control-nodes"),
        pytest.param((1, 0), (NVIDIA1, NVIDIA0, NVIDIACTL, NVIDIA_UVM), id="allocation-order"),
        pytest.param((0, 0), (NVIDIA0, NVIDIACTL, NVIDIA_UVM), id="a-shared-gpu-once"),
    ],
)
def test_gpu_device_nodes_of_the_allocated_minors_plus_the_control_nodes(
    minors: tuple[int, ...], devices: tuple[Device, ...]
) -> None:
    owner = pod("LS", annotations=gpus(*minors, gpu_core="100"))
    patch = gpu.container(container(owner), GPU_NODE, STAGE)
    assert patch is not None
    assert patch.devices == devices
    assert patch.env == {keys.ENV_NVIDIA_VISIBLE_DEVICES: ",".join(map(str, minors))}


def test_gpu_device_nodes_keep_the_hami_core_env_and_mounts() -> None:
    owner = pod(
        "LS",
        labels=HAMI,
        annotations=gpus(0, gpu_memory_ratio="50", gpu_memory="8Gi", gpu_core="50"),
    )
    patch = gpu.container(container(owner), GPU_NODE, STAGE)
    assert patch == ContainerPatch(
        env=HAMI_ENV, mounts=HAMI_MOUNTS, devices=(NVIDIA0, NVIDIACTL, NVIDIA_UVM)
    )


def test_gpu_minor_not_on_this_node_is_an_error() -> None:
    owner = pod("LS", annotations=gpus(0, 3, gpu_core="100"))
    with pytest.raises(
        AnnotationError, match=r"GPU minor 3 is not on this node \(no /dev/nvidia3\)"
    ):
        gpu.container(container(owner), GPU_NODE, STAGE)


def test_gpu_without_any_nvidia_node_seen_gets_the_env_only_as_in_koordinator() -> None:
    """koordlet sees no NVIDIA node at all (no /dev of the host): the NVIDIA runtime adds them."""
    owner = pod("LS", annotations=gpus(3, gpu_core="100"))
    patch = gpu.container(container(owner), Rules(), STAGE)
    assert patch == ContainerPatch(env={keys.ENV_NVIDIA_VISIBLE_DEVICES: "3"})


def test_control_nodes_alone_still_make_a_missing_minor_an_error() -> None:
    rules = Rules(node=NodeState(nvidia_control=(NVIDIACTL,)))
    with pytest.raises(AnnotationError, match="GPU minor 0 is not on this node"):
        gpu.container(container(pod("LS", annotations=gpus(0))), rules, STAGE)


# -- RDMA ------------------------------------------------------------------------------------

RDMA_CM = Device("/dev/infiniband/rdma_cm", "c", 10, 58)
UVERBS0 = Device("/dev/infiniband/uverbs0", "c", 231, 192)
UVERBS1 = Device("/dev/infiniband/uverbs1", "c", 231, 193)
RDMA_NODE = Rules(
    node=NodeState(
        rdma_cm=RDMA_CM,
        rdma_verbs={"0000:3b:00.0": (UVERBS0,), "0000:3b:00.2": (UVERBS1,)},
    )
)


@pytest.mark.parametrize(
    ("entries", "devices"),
    [
        pytest.param([{"id": "0000:3b:00.0"}], (RDMA_CM, UVERBS0), id="pf"),
        pytest.param(
            [{"id": "0000:3b:00.0", "extension": {"vfs": [{"busID": "0000:3b:00.2"}]}}],
            (RDMA_CM, UVERBS1),
            id="vf-instead-of-pf",
        ),
        pytest.param(
            [{"id": "0000:3b:00.0"}, {"id": "0000:3b:00.0"}, {"id": "0000:3b:00.2"}],
            (RDMA_CM, UVERBS0, UVERBS1),
            id="duplicates-once",
        ),
    ],
)
def test_rdma_devices_for_allocated_functions_plus_rdma_cm(
    entries: list[dict[str, Any]], devices: tuple[Device, ...]
) -> None:
    owner = pod("LS", annotations=allocated({"rdma": entries}))
    assert rdma.container(container(owner), RDMA_NODE, STAGE) == ContainerPatch(devices=devices)


def test_rdma_function_not_on_this_node_is_an_error() -> None:
    owner = pod("LS", annotations=allocated({"rdma": [{"id": "0000:af:00.0"}]}))
    with pytest.raises(AnnotationError, match=r"RDMA function '0000:af:00.0' is not on this node"):
        rdma.container(container(owner), RDMA_NODE, STAGE)


def test_rdma_nothing_without_rdma_entries() -> None:
    assert rdma.container(container(pod("LS")), RDMA_NODE, STAGE) is None
    only_gpu = pod("LS", annotations=gpus(0))
    assert rdma.container(container(only_gpu), RDMA_NODE, STAGE) is None


# -- TC --------------------------------------------------------------------------------------


def tc_rules(strategy: dict[str, Any] | None = None, total: str = "1000M") -> Rules:
    spec: dict[str, Any] = {"systemStrategy": {"totalNetworkBandwidth": total}}
    if strategy is not None:
        spec["resourceQOSStrategy"] = strategy
    return Rules(slo=NodeSLOSpec.parse(spec))


def test_tc_plan_splits_the_total_between_system_ls_and_be() -> None:
    rules = tc_rules(
        {
            "lsClass": {"networkQOS": {"enable": True, "egressRequest": 30, "egressLimit": 80}},
            "beClass": {
                "networkQOS": {"enable": True, "egressRequest": "100M", "egressLimit": "500M"}
            },
        }
    )
    total = 125_000_000  # 1000 Mbit/s in bytes/s
    assert tc.plan(rules) == tc.TcPlan(
        total,
        (
            tc.HtbClass(1, total, total, 0),
            tc.HtbClass(2, total - 37_500_000 - 12_500_000, total, 1),
            tc.HtbClass(3, 37_500_000, 100_000_000, 2),
            tc.HtbClass(4, 12_500_000, 62_500_000, 3),
        ),
    )


def test_tc_plan_gives_disabled_classes_the_whole_link_without_reservation() -> None:
    plan = tc.plan(tc_rules())
    assert plan is not None
    assert plan.classes[1:] == (
        tc.HtbClass(2, 125_000_000, 125_000_000, 1),
        tc.HtbClass(3, 1, 125_000_000, 2),
        tc.HtbClass(4, 1, 125_000_000, 3),
    )


@pytest.mark.parametrize(
    "rules",
    [
        pytest.param(Rules(), id="default-total-zero"),
        pytest.param(
            tc_rules({"policies": {"netQOSPolicy": "terway-qos"}}), id="terway-qos-policy"
        ),
    ],
)
def test_tc_is_off_without_bandwidth_or_with_terway(rules: Rules) -> None:
    assert tc.plan(rules) is None
    assert tc.pod(pod("BE"), rules, Stage.PRE_RUN_POD_SANDBOX) is None


@pytest.mark.parametrize(
    ("qos", "classid"),
    [
        pytest.param("SYSTEM", 0x10002, id="system"),
        pytest.param("LSE", 0x10003, id="lse"),
        pytest.param("LSR", 0x10003, id="lsr"),
        pytest.param("LS", 0x10003, id="ls"),
        pytest.param("BE", 0x10004, id="be"),
        pytest.param(None, 0x10003, id="no-label-counts-as-ls"),
    ],
)
def test_pod_net_cls_classid_by_qos_class(qos: str | None, classid: int) -> None:
    patch = tc.pod(pod(qos), tc_rules(), Stage.PRE_RUN_POD_SANDBOX)
    assert patch == PodPatch(net_cls_classid=classid)


def test_hooks_are_gated_off_by_default_with_koordinator_names() -> None:
    assert (gpu.HOOK.name, rdma.HOOK.name, tc.HOOK.name) == (
        "gpu env inject",
        "rdma device inject",
        "TCNetworkQoS",
    )
    for hook in (gpu.HOOK, rdma.HOOK, tc.HOOK):
        assert features.DEFAULTS[hook.gate] is False
    assert gpu.HOOK.stages == rdma.HOOK.stages == {Stage.PRE_CREATE_CONTAINER}
