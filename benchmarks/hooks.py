"""Hook evaluation time per container: every runtime hook on, the work koordlet does in
CreateContainer before it answers (run the stage, merge, translate to an NRI adjustment).

    PYTHONPATH=. .venv/bin/python benchmarks/hooks.py -n 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from koordapi import keys
from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from koordlet.nri.translate import to_adjustment
from runtimehooks import HOOKS
from runtimehooks.hooks.cpuset import share_pools
from runtimehooks.registry import FailurePolicy, run_container_stage
from runtimehooks.request import ContainerRequest, ContainerResources, PodRequest, Stage
from runtimehooks.rules import KernelFeatures, NodeState, Rules

GATES = (
    "GroupIdentity,CPUSetAllocator,BatchResource,CPUNormalization,CoreSched,Resctrl,"
    "OOMScoreAdj,MemoryQOS,TCNetworkQoS,GPUEnvInject,RDMADeviceInject"
)


def rules() -> Rules:
    classes = {
        c: {"cpuQOS": {"enable": True}, "memoryQOS": {"enable": True, "throttlingPercent": 80}}
        for c in ("lsrClass", "lsClass", "beClass")
    }
    cpus = frozenset(range(16))
    ls, be = share_pools(
        {0: frozenset(range(8)), 1: frozenset(range(8, 16))},
        {0: 0, 1: 1},
        frozenset({2, 3}),
        frozenset(),
    )
    return Rules(
        slo=NodeSLOSpec.parse({"resourceQOSStrategy": classes}),
        gates=FeatureGates.parse(",".join(f"{g}=true" for g in GATES.split(","))),
        node=NodeState(
            cpus=cpus,
            ls_pools=ls,
            be_pools=be,
            allocatable_memory=64 << 30,
            cpu_normalization_ratio=1.2,
        ),
        kernel=KernelFeatures(cgroup_version=2, cpu_idle=True),
    )


def requests() -> dict[str, ContainerRequest]:
    batch = {
        "containers": {
            "app": {
                "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: "1Gi"},
                "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: "2Gi"},
            }
        }
    }
    pods = {
        "LSR": PodRequest(
            "u1",
            "web",
            "prod",
            {keys.LABEL_QOS_CLASS: "LSR"},
            {keys.ANNOTATION_RESOURCE_STATUS: '{"cpuset": "2-3"}'},
            "kubepods/podu1",
        ),
        "LS": PodRequest(
            "u2",
            "api",
            "prod",
            {keys.LABEL_QOS_CLASS: "LS"},
            {keys.ANNOTATION_OOM_SCORE_ADJ: "-100"},
            "kubepods/burstable/podu2",
        ),
        "BE": PodRequest(
            "u3",
            "job",
            "batch",
            {keys.LABEL_QOS_CLASS: "BE"},
            {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(batch)},
            "kubepods/besteffort/podu3",
        ),
    }
    resources = ContainerResources(cpu_shares=512, cpu_quota=50000, memory_limit=1 << 30)
    return {
        q: ContainerRequest(p, "app", f"c-{q}", f"{p.cgroup_dir}/c", resources)
        for q, p in pods.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--iterations", type=int, default=20000)
    args = parser.parse_args()
    snapshot = rules()
    result: dict[str, object] = {"benchmark": "hooks", "iterations": args.iterations}
    for qos, request in requests().items():
        samples = []
        for _ in range(args.iterations):
            t0 = time.perf_counter()
            outcome = run_container_stage(
                HOOKS, Stage.PRE_CREATE_CONTAINER, request, snapshot, FailurePolicy.IGNORE
            )
            to_adjustment(outcome.patch, snapshot.kernel)
            samples.append((time.perf_counter() - t0) * 1e6)
            assert not outcome.failures, outcome.failures
        samples.sort()
        result[qos] = {
            "p50_us": round(samples[len(samples) // 2], 1),
            "p99_us": round(samples[int(len(samples) * 0.99)], 1),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
