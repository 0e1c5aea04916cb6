"""CPU binding for LSE/LSR pods on a 2-socket, 8-core, 2-thread node (one NUMA node per
socket; socket 0 = CPUs 0-7 and their siblings 16-23)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi import annotation, keys
from koordapi.cpuset import format_cpuset
from koordapi.errors import AnnotationError
from scheduler import cpubind
from scheduler.cpubind import (
    REASON_INVALID_REQUESTED_CPUS,
    REASON_NOT_ENOUGH_CPUS,
    REASON_POLICY_CONFLICT,
    REASON_SMT_ALIGNMENT,
    CPUBindArgs,
    CPUBindPolicy,
    CPUBindRequest,
    choose_cpus,
    cpu_bind_request,
    fits_cpus,
    resource_status,
)
from scheduler.cputopology import NodeCPUs, node_cpus
from tests.unit.scheduler.objects import lsr_pod, make_pod, topology_node

ARGS = CPUBindArgs()


def pick(
    pod: dict[str, Any],
    pinned: list[str] = (),  # type: ignore[assignment]
    node: dict[str, Any] | None = None,
    args: CPUBindArgs = ARGS,
) -> str:
    """The cpuset chosen for ``pod`` next to pods pinned to ``pinned``, or the reason."""
    node = node or topology_node()
    request = cpu_bind_request(pod, args)
    assert isinstance(request, CPUBindRequest)
    pods = [lsr_pod(f"p{i}", cpuset=cpus) for i, cpus in enumerate(pinned)]
    state = node_cpus(node, pods)
    reason = fits_cpus(request, state)
    chosen = choose_cpus(request, state, args)
    if isinstance(chosen, str):
        assert reason == chosen  # the filter and the choice agree
        return chosen
    assert reason is None
    return format_cpuset(chosen)


# -- which pods ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(lsr_pod(cpus=4), CPUBindRequest(4, CPUBindPolicy.FULL_PCPUS), id="lsr"),
        pytest.param(
            lsr_pod(cpus=2, qos="LSE"), CPUBindRequest(2, CPUBindPolicy.FULL_PCPUS), id="lse"
        ),
        pytest.param(lsr_pod(qos="LS"), None, id="ls-pod-shares"),
        pytest.param(
            make_pod(requests={"cpu": "4"}, labels={keys.LABEL_QOS_CLASS: "LSR"}, priority=5500),
            None,
            id="lsr-label-but-batch-priority",
        ),
        pytest.param(
            make_pod(requests={"cpu": "4"}, limits={"cpu": "4"}),
            None,
            id="guaranteed-without-label",
        ),
        pytest.param(lsr_pod(cpus="1500m"), REASON_INVALID_REQUESTED_CPUS, id="fractional-cpus"),
        pytest.param(lsr_pod(cpus=0), None, id="no-cpu-request"),
        pytest.param(
            lsr_pod(spec={"preferredCPUBindPolicy": "ConstrainedBurst"}),
            None,
            id="constrained-burst-pins-nothing",
        ),
        pytest.param(
            lsr_pod(spec={"preferredCPUBindPolicy": "Default"}),
            CPUBindRequest(4, CPUBindPolicy.FULL_PCPUS, spec={"preferredCPUBindPolicy": "Default"}),
            id="default-means-the-configured-default",
        ),
        pytest.param(
            lsr_pod(spec={"requiredCPUBindPolicy": "SpreadByPCPUs"}),
            CPUBindRequest(
                4,
                CPUBindPolicy.SPREAD_BY_PCPUS,
                CPUBindPolicy.SPREAD_BY_PCPUS,
                {"requiredCPUBindPolicy": "SpreadByPCPUs"},
            ),
            id="required-policy-wins",
        ),
    ],
)
def test_cpu_bind_request(pod: dict[str, Any], expected: CPUBindRequest | str | None) -> None:
    assert cpu_bind_request(pod, ARGS) == expected


def test_default_policy_comes_from_the_args() -> None:
    request = cpu_bind_request(lsr_pod(), CPUBindArgs(default_policy=CPUBindPolicy.SPREAD_BY_PCPUS))
    assert isinstance(request, CPUBindRequest)
    assert request.policy is CPUBindPolicy.SPREAD_BY_PCPUS


@pytest.mark.parametrize("text", ["{", "[1]", '{"preferredCPUBindPolicy": 3}'])
def test_unreadable_resource_spec_raises(text: str) -> None:
    pod = lsr_pod()
    pod["metadata"]["annotations"][keys.ANNOTATION_RESOURCE_SPEC] = text
    with pytest.raises(AnnotationError):
        cpu_bind_request(pod, ARGS)


# -- which CPUs ------------------------------------------------------------------------------

FULL = {"preferredCPUBindPolicy": "FullPCPUs"}
SPREAD = {"preferredCPUBindPolicy": "SpreadByPCPUs"}
MOST_ALLOCATED = {keys.LABEL_NODE_NUMA_ALLOCATE_STRATEGY: "MostAllocated"}


@pytest.mark.parametrize(
    ("pod", "pinned", "labels", "cpuset"),
    [
        pytest.param(lsr_pod(cpus=4), [], {}, "0-1,16-17", id="full-pcpus-takes-two-whole-cores"),
        pytest.param(lsr_pod(cpus=4, spec=SPREAD), [], {}, "0-3", id="spread-takes-one-per-core"),
        pytest.param(lsr_pod(cpus=3, spec=SPREAD), [], {}, "0-2", id="spread-odd-count"),
        pytest.param(
            lsr_pod(cpus=3, spec=FULL),
            [],
            {},
            "0-1,16",
            id="full-pcpus-odd-count-takes-a-half-core",
        ),
        pytest.param(
            lsr_pod(cpus=4),
            ["0-3,16-19"],
            {},
            "8-9,24-25",
            id="numa-least-allocated-prefers-the-emptier-node",
        ),
        pytest.param(
            lsr_pod(cpus=4),
            ["0-3,16-19"],
            MOST_ALLOCATED,
            "4-5,20-21",
            id="numa-most-allocated-packs-the-fuller-node",
        ),
        pytest.param(
            lsr_pod(cpus=10),
            ["0-3,16-19"],
            MOST_ALLOCATED,
            "8-12,24-28",
            id="numa-node-that-fits-is-preferred-over-packing",
        ),
        pytest.param(
            lsr_pod(cpus=20), [], {}, "0-9,16-25", id="beyond-one-numa-node-spills-over-whole-cores"
        ),
        pytest.param(
            lsr_pod(cpus=2), ["16-31"], {}, "0-1", id="no-whole-core-left-falls-back-to-threads"
        ),
        pytest.param(lsr_pod(cpus=2), ["0"], {}, "8,24", id="partly-used-core-is-skipped"),
        pytest.param(lsr_pod(cpus=30), ["0-1"], {}, "2-31", id="takes-everything-left"),
        pytest.param(lsr_pod(cpus=31), ["0-1"], {}, REASON_NOT_ENOUGH_CPUS, id="not-enough-cpus"),
    ],
)
def test_choose_cpus(
    pod: dict[str, Any], pinned: list[str], labels: dict[str, str], cpuset: str
) -> None:
    assert pick(pod, pinned, topology_node(labels=labels)) == cpuset


@pytest.mark.parametrize(
    ("pod", "pinned", "label", "outcome"),
    [
        pytest.param(
            lsr_pod(cpus=3, spec={"requiredCPUBindPolicy": "FullPCPUs"}),
            [],
            None,
            REASON_SMT_ALIGNMENT,
            id="required-full-pcpus-needs-whole-cores",
        ),
        pytest.param(
            lsr_pod(cpus=2, spec={"requiredCPUBindPolicy": "FullPCPUs"}),
            ["16-31"],
            None,
            REASON_NOT_ENOUGH_CPUS,
            id="required-full-pcpus-without-whole-cores",
        ),
        pytest.param(
            lsr_pod(cpus=4, spec={"requiredCPUBindPolicy": "SpreadByPCPUs"}),
            ["16-31"],
            None,
            "0-3",
            id="required-spread-with-one-thread-per-core-free",
        ),
        pytest.param(
            lsr_pod(cpus=17, spec={"requiredCPUBindPolicy": "SpreadByPCPUs"}),
            [],
            None,
            REASON_NOT_ENOUGH_CPUS,
            id="required-spread-has-one-cpu-per-core",
        ),
        pytest.param(
            lsr_pod(cpus=2),
            ["16-31"],
            "FullPCPUsOnly",
            REASON_NOT_ENOUGH_CPUS,
            id="node-label-makes-full-pcpus-required",
        ),
        pytest.param(
            lsr_pod(cpus=2, spec={"requiredCPUBindPolicy": "SpreadByPCPUs"}),
            [],
            "FullPCPUsOnly",
            REASON_POLICY_CONFLICT,
            id="node-and-pod-required-policies-conflict",
        ),
        pytest.param(
            lsr_pod(cpus=4), [], "SpreadByPCPUs", "0-3", id="node-label-spread-overrides-preferred"
        ),
    ],
)
def test_required_policies(
    pod: dict[str, Any], pinned: list[str], label: str | None, outcome: str
) -> None:
    labels = {keys.LABEL_NODE_CPU_BIND_POLICY: label} if label else {}
    assert pick(pod, pinned, topology_node(labels=labels)) == outcome


def test_reserved_cpus_are_never_chosen() -> None:
    reservation = json.dumps({"reservedCPUs": "0-15"})
    node = topology_node(annotations={keys.ANNOTATION_NODE_RESERVATION: reservation})
    assert pick(lsr_pod(cpus=2), node=node) == "16-17"


def test_invalid_topology_fails_the_node() -> None:
    node = topology_node(topology='{"detail": []}')
    request = cpu_bind_request(lsr_pod(), ARGS)
    assert isinstance(request, CPUBindRequest)
    state = node_cpus(node, [])
    assert fits_cpus(request, state) == cpubind.REASON_INVALID_CPU_TOPOLOGY
    assert choose_cpus(request, state, ARGS) == cpubind.REASON_INVALID_CPU_TOPOLOGY


def test_single_thread_cores() -> None:
    topology = json.dumps(
        {"detail": [{"id": i, "core": i, "socket": 0, "node": i // 4} for i in range(8)]}
    )
    node = topology_node(topology=topology)
    assert pick(lsr_pod(cpus=3), ["0"], node) == "4-6"  # NUMA node 1 has 4 free, node 0 three


# -- annotations -----------------------------------------------------------------------------


def test_resource_status_is_compact_json_koordlet_reads() -> None:
    text = resource_status([17, 0, 1, 16])
    assert text == '{"cpuset":"0-1,16-17"}'
    assert annotation.parse_resource_status(text).cpuset == "0-1,16-17"


@pytest.mark.parametrize(
    ("spec", "label", "written"),
    [
        pytest.param(None, None, {"preferredCPUBindPolicy": "FullPCPUs"}, id="no-spec"),
        pytest.param(SPREAD, None, None, id="pod-named-its-policy"),
        pytest.param(
            {"preferredCPUBindPolicy": "Default", "preferredCPUExclusivePolicy": "PCPULevel"},
            None,
            {"preferredCPUBindPolicy": "FullPCPUs", "preferredCPUExclusivePolicy": "PCPULevel"},
            id="default-is-resolved-and-other-fields-kept",
        ),
        pytest.param(
            None, "FullPCPUsOnly", {"requiredCPUBindPolicy": "FullPCPUs"}, id="node-forced"
        ),
    ],
)
def test_resource_spec_write_back(
    spec: dict[str, str] | None, label: str | None, written: dict[str, str] | None
) -> None:
    request = cpu_bind_request(lsr_pod(spec=spec), ARGS)
    assert isinstance(request, CPUBindRequest)
    labels = {keys.LABEL_NODE_CPU_BIND_POLICY: label} if label else {}
    state = node_cpus(topology_node(labels=labels), [])
    assert isinstance(state, NodeCPUs)
    text = cpubind.resource_spec_write_back(request, state)
    assert (json.loads(text) if text else None) == written
