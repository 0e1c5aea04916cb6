"""DeviceShare's pure decisions, as table tests taken from Koordinator v1.8.0's
pkg/scheduler/plugins/deviceshare tests (each table names the upstream test it comes from)."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi import annotation, keys
from scheduler import deviceshare
from scheduler.deviceshare import (
    DeviceShareArgs,
    GPUAllocation,
    GPURequest,
    ScoringStrategy,
)
from tests.unit.scheduler.objects import (
    GI,
    device,
    gpu_entry,
    gpu_pod,
    holder,
    make_node,
    make_pod,
)

CORE, MEM, RATIO = keys.GPU_CORE, keys.GPU_MEMORY, keys.GPU_MEMORY_RATIO
SHARED, KOORD_GPU, NVIDIA = keys.GPU_SHARED, keys.GPU, keys.NVIDIA_GPU
A100_MEMORY = 85198045184  # 83201216Ki, the cards of Koordinator's fakeDeviceCR
# fakeDeviceCR's GPUs: (minor, NUMA node, PCIe root)
FAKE_TOPOLOGY = [(0, 0, "0"), (1, 0, "0"), (2, 0, "1"), (3, 0, "1")]
FAKE_TOPOLOGY += [(4, 1, "2"), (5, 1, "2"), (6, 1, "3"), (7, 1, "3")]
LEAST = DeviceShareArgs()
MOST = DeviceShareArgs(strategy=ScoringStrategy.MOST_ALLOCATED)


def fake_device_cr() -> dict[str, Any]:
    return device("node-1", [gpu_entry(m, numa=n, pcie=p) for m, n, p in FAKE_TOPOLOGY])


# -- TestValidateDeviceRequest -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "valid"),
    [
        ({}, False),  # empty pod request
        ({CORE: 101}, False),  # invalid gpu request 1: gpu-core alone is no request
        ({NVIDIA: 2, KOORD_GPU: 200, CORE: 200, MEM: 32 * GI, RATIO: 200}, False),  # 2
        ({KOORD_GPU: 101}, False),  # invalid gpu request 3
        ({CORE: 100, RATIO: 101}, False),  # invalid gpu request 4
        ({NVIDIA: 2}, True),
        ({KOORD_GPU: 200}, True),
        ({CORE: 200, MEM: 64 * GI}, True),  # valid gpu request 3
        ({CORE: 200, RATIO: 200}, True),  # valid gpu request 4
        ({RATIO: 200}, True),  # valid gpu request 5
        ({MEM: 64 * GI}, True),  # valid gpu request 7
        ({RATIO: 101, SHARED: 1}, False),  # invalid gpu request 8: over 100 a card
        ({RATIO: 101, SHARED: 2}, False),  # invalid gpu request 9: not a multiple
        ({CORE: 101, MEM: 64 * GI, SHARED: 1}, False),  # invalid gpu request 10
        ({CORE: 101, MEM: 64 * GI, SHARED: 2}, False),  # invalid gpu request 11
        ({RATIO: 200, SHARED: 2}, True),  # valid gpu request 12
        ({RATIO: 100, SHARED: 2}, True),  # valid gpu request 13
        ({CORE: 100, MEM: 64 * GI, SHARED: 1}, True),  # gpu request 14
        ({CORE: 100, MEM: 64 * GI, SHARED: 2}, True),  # gpu request 15
    ],
)
def test_validate_request(requests: dict[str, int], valid: bool) -> None:
    assert (deviceshare.validate_request(requests) is None) is valid


def test_validate_request_reasons() -> None:
    assert deviceshare.validate_request({KOORD_GPU: 101}) == (
        "invalid resource unit koordinator.sh/gpu: 101"
    )
    assert deviceshare.validate_request({CORE: 100, RATIO: 101}) == (
        "invalid resource device requests: "
        "[koordinator.sh/gpu-core koordinator.sh/gpu-memory-ratio]"
    )


# -- TestConvertDeviceRequest, Test_calcDesiredRequestsAndCountForGPU --------------------------


@pytest.mark.parametrize(
    ("requests", "converted"),
    [
        ({NVIDIA: 2}, {CORE: 200, RATIO: 200}),  # nvidiaGPU
        ({KOORD_GPU: 50}, {CORE: 50, RATIO: 50}),  # koordGPU
        ({CORE: 50, RATIO: 50}, {CORE: 50, RATIO: 50}),  # gpuCore | gpuMemoryRatio
        ({CORE: 50, MEM: 32 * GI}, {CORE: 50, MEM: 32 * GI}),  # gpuCore | gpuMemory
    ],
)
def test_convert_request(requests: dict[str, int], converted: dict[str, int]) -> None:
    assert deviceshare.convert_request(requests) == converted


@pytest.mark.parametrize(
    ("requests", "each", "count", "shared"),
    [
        ({SHARED: 2, CORE: 100, RATIO: 100}, {CORE: 50, RATIO: 50}, 2, True),  # multi gpu share
        ({SHARED: 1, CORE: 50, RATIO: 50}, {CORE: 50, RATIO: 50}, 1, True),  # gpu share mode
        ({RATIO: 200, CORE: 200}, {RATIO: 100, CORE: 100}, 2, False),  # memory ratio mode
        ({MEM: 1024, CORE: 100}, {MEM: 1024, CORE: 100}, 1, True),  # gpu memory mode
    ],
)
def test_per_gpu(requests: dict[str, int], each: dict[str, int], count: int, shared: bool) -> None:
    assert deviceshare.per_gpu(requests) == (each, count, shared)


def test_gpu_request_reads_the_pod() -> None:
    assert deviceshare.gpu_request(make_pod(requests={"cpu": "1"})) is None
    whole = deviceshare.gpu_request(gpu_pod({NVIDIA: "2"}))
    assert whole == GPURequest({CORE: 100, RATIO: 100}, 2, False)
    half = deviceshare.gpu_request(
        gpu_pod({KOORD_GPU: "50"}, labels={keys.LABEL_GPU_ISOLATION_PROVIDER: "HAMi-core"})
    )
    assert half == GPURequest({CORE: 50, RATIO: 50}, 1, True, "HAMi-core")
    assert deviceshare.gpu_request(gpu_pod({CORE: "50"})) == (
        "invalid resource device requests: [koordinator.sh/gpu-core]"
    )
    # a request of 0 is no request (Koordinator removes zeros first)
    assert deviceshare.gpu_request(gpu_pod({NVIDIA: "0", "cpu": "1"})) is None


# -- Test_memoryRatioToBytes, Test_memoryBytesToRatio, Test_fillGPUTotalMem --------------------


def test_memory_conversions() -> None:
    assert deviceshare.memory_ratio_to_bytes(50, 64 * GI) == 32 * GI
    assert deviceshare.memory_bytes_to_ratio(32 * GI, 64 * GI) == 50
    assert deviceshare.memory_ratio_to_bytes(50, A100_MEMORY) == 42599022592  # gpuShared list


# -- Test_resourceAllocationScorer_scoreDevice -------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "free", "args", "score"),
    [
        (50, 100, LEAST, 50),  # completely idle
        (50, 0, LEAST, 0),  # completely used
        (30, 50, LEAST, 20),  # remaining resources
        (30, 50, MOST, 80),  # remaining resources with MostAllocated
    ],
)
def test_score_device(request_: int, free: int, args: DeviceShareArgs, score: int) -> None:
    assert deviceshare.score_device({RATIO: request_}, {RATIO: 100}, {RATIO: free}, args) == score


# -- Test_allocateGPUWith{LeastAllocated,MostAllocated}Scorer, ...WithUnhealthyInstance ---------

EIGHT_GI_CARDS = device("node-1", [gpu_entry(m, memory="8Gi") for m in (1, 2, 3, 4)])
HALF = {CORE: "50", MEM: "4Gi", RATIO: "50"}


@pytest.mark.parametrize(
    ("used", "args", "minor"),
    [
        ((1, 2), LEAST, 3),  # LeastAllocated: the first empty card
        ((3, 4), MOST, 3),  # MostAllocated: the fullest card, lowest minor first
    ],
)
def test_shared_card_by_strategy(used: tuple[int, ...], args: DeviceShareArgs, minor: int) -> None:
    gpus = deviceshare.node_gpus(EIGHT_GI_CARDS, [holder("held", dict.fromkeys(used, HALF))])
    assert gpus is not None
    request = GPURequest({CORE: 50, RATIO: 50}, 1, True)
    chosen = deviceshare.allocate(request, gpus, args)
    assert chosen == [GPUAllocation(minor, {CORE: 50, RATIO: 50, MEM: 4 * GI}, f"GPU-{minor}")]


def test_unhealthy_card_is_never_given() -> None:
    gpus = deviceshare.node_gpus(
        device("n", [gpu_entry(1, memory="8Gi", healthy=False), gpu_entry(2, memory="8Gi")]), []
    )
    assert gpus is not None
    request = GPURequest({CORE: 50, MEM: 4 * GI, RATIO: 50}, 1, True)
    chosen = deviceshare.allocate(request, gpus, LEAST)
    assert chosen == [GPUAllocation(2, {CORE: 50, MEM: 4 * GI, RATIO: 50}, "GPU-2")]
    # two whole cards cannot be had: only one is healthy
    assert deviceshare.allocate(GPURequest({CORE: 100, RATIO: 100}, 2, False), gpus, LEAST) == (
        deviceshare.REASON_INSUFFICIENT_GPU,
        False,
    )


# -- TestAllocateByTopology (the GPU part; fakeDeviceCR, minor 5 already given) ----------------

WHOLE = {CORE: "100", RATIO: "100", MEM: str(A100_MEMORY)}


@pytest.mark.parametrize(
    ("count", "minors"),
    [
        (1, [4]),  # 1 GPU: beside minor 5, on its PCIe root
        (2, [6, 7]),  # 2 GPUs: minor 5's PCIe root has one left; its NUMA node's other root
        (4, [0, 1, 2, 3]),  # 4 GPUs: only NUMA node 0 has four free
    ],
)
def test_whole_cards_pack_by_topology(count: int, minors: list[int]) -> None:
    gpus = deviceshare.node_gpus(fake_device_cr(), [holder("held", {5: WHOLE})])
    assert gpus is not None and gpus.topology_known
    request = GPURequest({CORE: 100, RATIO: 100}, count, False)
    chosen = deviceshare.allocate(request, gpus, LEAST)
    assert not isinstance(chosen, tuple)
    assert [a.minor for a in chosen] == minors
    assert all(a.resources == {CORE: 100, RATIO: 100, MEM: A100_MEMORY} for a in chosen)


def test_topology_refusal_and_no_gpus() -> None:
    gpus = deviceshare.node_gpus(fake_device_cr(), [holder("held", {5: WHOLE})])
    assert gpus is not None
    eight = GPURequest({CORE: 100, RATIO: 100}, 8, False)
    assert deviceshare.allocate(eight, gpus, LEAST) == (
        deviceshare.REASON_INSUFFICIENT_TOPOLOGY_GPU,
        False,
    )
    empty = deviceshare.node_gpus(device("n", []), [])
    assert empty is not None
    assert deviceshare.filter_gpus(eight, empty, make_node(), LEAST) == (
        deviceshare.REASON_INSUFFICIENT_GPU,
        True,
    )
    assert deviceshare.filter_gpus(eight, None, make_node(), LEAST) is None  # no Device


def test_finished_pods_release_their_gpus() -> None:
    done = holder("done", {0: WHOLE, 1: WHOLE})
    done["status"]["phase"] = "Succeeded"
    gpus = deviceshare.node_gpus(fake_device_cr(), [done, holder("run", {2: HALF})])
    assert gpus is not None
    assert set(gpus.used) == {2}
    assert gpus.free(2) == {CORE: 50, MEM: A100_MEMORY - 4 * GI, RATIO: 50}
    assert gpus.without("default/run").used == {}


def test_isolation_provider_must_match_the_node() -> None:
    request = GPURequest({CORE: 50, RATIO: 50}, 1, True, "HAMi-core")
    gpus = deviceshare.node_gpus(fake_device_cr(), [])
    hami = make_node(labels={keys.LABEL_GPU_ISOLATION_PROVIDER: "HAMi-core"})
    assert deviceshare.filter_gpus(request, gpus, hami, LEAST) is None
    assert deviceshare.filter_gpus(request, gpus, make_node(), LEAST) == (
        deviceshare.REASON_ISOLATION_PROVIDER,
        True,
    )


def test_node_score_spreads_or_packs() -> None:
    idle = deviceshare.node_gpus(fake_device_cr(), [])
    busy = deviceshare.node_gpus(fake_device_cr(), [holder("a", dict.fromkeys(range(4), WHOLE))])
    request = GPURequest({CORE: 100, RATIO: 100}, 1, False)
    # ratio only (the request has no memory): idle 700/800 free after it, busy 300/800
    assert deviceshare.score_gpus(request, idle, LEAST) == (87 + 100) // 2
    assert deviceshare.score_gpus(request, busy, LEAST) == (37 + 50) // 2
    assert deviceshare.score_gpus(request, busy, MOST) > deviceshare.score_gpus(request, idle, MOST)
    assert deviceshare.score_gpus(request, None, LEAST) == 0
    assert deviceshare.normalize_scores([93, 43, 0]) == [100, 46, 0]
    assert deviceshare.normalize_scores([0, 0]) == [0, 0]


def test_annotation_is_what_gpu_env_inject_reads() -> None:
    text = deviceshare.device_allocated(
        [GPUAllocation(3, {CORE: 50, RATIO: 50, MEM: 42599022592}, "GPU-3")]
    )
    assert text == (
        '{"gpu":[{"minor":3,"resources":{"koordinator.sh/gpu-core":"50",'
        '"koordinator.sh/gpu-memory":"41600608Ki","koordinator.sh/gpu-memory-ratio":"50"},'
        '"id":"GPU-3"}]}'
    )
    (parsed,) = annotation.parse_device_allocated(text)["gpu"]
    assert parsed.minor == 3
    assert parsed.resources[MEM] == 42599022592
    assert parsed.resources[RATIO] == 50
