"""`make demo`: a local node (private containerd with NRI, runc, real cgroups) and sample pods.

Starts the e2e harness's private containerd, runs a few pods shaped like Koordinator's QoS
classes through CRI, prints each container's effective cgroup values, and removes everything it
created. Later issues put koordlet between containerd and these containers; then the table
shows the values koordlet chose.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tests.e2e.harness.cgroups import CgroupValues, allowed_cpus
from tests.e2e.harness.containerd import ContainerdError
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.node import Node
from tests.e2e.harness.paths import SetupMissing

MiB = 1 << 20


@dataclass(frozen=True)
class Sample:
    qos_class: str  # Koordinator's koordinator.sh/qosClass label
    kube_qos: str  # Kubernetes QoS class: decides the kubelet cgroup parent
    container: ContainerSpec


SAMPLES = [
    Sample(
        "LSR",
        "guaranteed",
        ContainerSpec(
            "web",
            cpu_shares=1024,
            cpu_quota=100000,
            cpu_period=100000,
            memory_limit=128 * MiB,
            cpuset_cpus=allowed_cpus(1),
        ),
    ),
    Sample(
        "LS",
        "burstable",
        ContainerSpec(
            "api", cpu_shares=512, cpu_quota=50000, cpu_period=100000, memory_limit=64 * MiB
        ),
    ),
    Sample("BE", "besteffort", ContainerSpec("batch", cpu_shares=2)),
]


def row(cells: list[str]) -> str:
    widths = [6, 11, 7, 7, 9, 10, 8, 10]
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))


def describe(sample: Sample, values: CgroupValues) -> list[str]:
    def show(v: object) -> str:
        return "unlimited" if v == -1 else "-" if v is None else str(v)

    memory = values.memory_limit
    shares = values.cpu_shares if values.cpu_shares is not None else values.cpu_weight
    return [
        sample.qos_class,
        sample.kube_qos,
        sample.container.name,
        show(shares),
        show(values.cpu_quota),
        show(values.cpu_period),
        show(values.cpuset_cpus),
        f"{memory // MiB}Mi" if memory is not None and memory > 0 else show(memory),
    ]


def main() -> int:
    print("demo: starting a private containerd 1.7 with NRI enabled")
    try:
        node = Node.start()
    except (SetupMissing, ContainerdError) as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    try:
        layout = node.containerd.layout
        print(f"demo: containerd pid {node.containerd.pid}, CRI {layout.address}")
        print(f"demo: NRI socket {layout.nri_socket}, cgroup v{node.reader.version}")
        print(row(["QoS", "kube QoS", "name", "shares", "quota", "period", "cpuset", "memory"]))
        for sample in SAMPLES:
            pod = PodSpec.new(
                name=f"demo-{sample.container.name}",
                qos=sample.kube_qos,
                labels={"koordinator.sh/qosClass": sample.qos_class},
            )
            pod_id = node.run_pod(pod)
            cid = node.run_container(pod_id, sample.container)
            print(row(describe(sample, node.container_values(pod_id, cid))))
            print(f"        cgroup {node.container_cgroup(pod_id, cid)}")
    finally:
        problems = node.teardown()
    if problems:
        print(f"demo: teardown left things behind: {problems}", file=sys.stderr)
        return 1
    print("demo: removed every pod, container and cgroup it created; containerd stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
