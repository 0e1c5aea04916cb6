"""`make demo`: a local node (private containerd with NRI, runc, real cgroups) with koordlet.

Starts the e2e harness's private containerd, starts koordlet as a user would (standalone, a
NodeSLO file that turns CPU QoS on for every class), runs an LSR, an LS and a BE pod through
CRI, and prints side by side what each container asked for and what its cgroups hold after
koordlet's hooks; then removes everything it created.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import koordctl as ctl
from koordapi import keys
from tests.e2e.harness import paths
from tests.e2e.harness.cgroups import CgroupValues, allowed_cpus, shares_to_weight
from tests.e2e.harness.containerd import ContainerdError
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.paths import SetupMissing

MiB = 1 << 20
NODE_SLO = """\
resourceQOSStrategy:
  lsrClass: {cpuQOS: {enable: true}}
  lsClass: {cpuQOS: {enable: true}}
  beClass: {cpuQOS: {enable: true}, memoryQOS: {enable: true, throttlingPercent: 80}}
"""


@dataclass(frozen=True)
class Sample:
    qos_class: str  # koordinator.sh/qosClass
    kube_qos: str  # Kubernetes QoS class: the kubelet cgroup parent
    annotations: dict[str, str]
    container: ContainerSpec


def samples() -> list[Sample]:
    last_cpu = allowed_cpus(64).split(",")[-1]
    batch = {
        "containers": {
            "batch": {
                "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: str(256 * MiB)},
                "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: str(512 * MiB)},
            }
        }
    }
    return [
        Sample(
            "LSR",
            "guaranteed",
            {keys.ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": last_cpu})},
            ContainerSpec(
                "web", cpu_shares=1024, cpu_quota=100000, cpu_period=100000, memory_limit=128 * MiB
            ),
        ),
        Sample(
            "LS",
            "burstable",
            {},
            ContainerSpec(
                "api", cpu_shares=512, cpu_quota=50000, cpu_period=100000, memory_limit=64 * MiB
            ),
        ),
        Sample(
            "BE",
            "besteffort",
            {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(batch)},
            ContainerSpec("batch", cpu_shares=2, command=["/bin/sh", "-c", "while :; do :; done"]),
        ),
    ]


# On cgroup v2 the CPU weight is cpu.weight (the request's shares by runc's conversion), the
# quota cpu.max, the memory limit memory.max, and memory QoS's throttle memory.high.
COLUMNS = {
    1: ["QoS", "container", "", "shares", "quota", "cpuset", "memory", "cpu.idle"],
    2: ["QoS", "container", "", "weight", "cpu.max", "cpuset", "mem.max", "cpu.idle", "mem.high"],
}
WIDTHS = [5, 10, 9, 7, 10, 7, 10, 8, 9]


def row(cells: list[str]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, WIDTHS, strict=False)).rstrip()


def show(value: object) -> str:
    return "unlimited" if value == -1 else "-" if value is None else str(value)


def memory(value: int | None) -> str:
    return f"{value // MiB}Mi" if value is not None and value > 0 else show(value)


def requested(spec: ContainerSpec, version: int) -> list[str]:
    shares = spec.cpu_shares
    weight = shares if version == 1 or shares is None else shares_to_weight(shares)
    cells = [show(weight), show(spec.cpu_quota), show(spec.cpuset_cpus), memory(spec.memory_limit)]
    return [*cells, "-"] if version == 1 else [*cells, "-", "-"]


def actual(values: CgroupValues, version: int) -> list[str]:
    cells = [
        show(values.cpu_share.value),
        show(values.cpu_quota),
        show(values.cpuset_cpus),
        memory(values.memory_limit),
        show(values.cpu_idle),
    ]
    return cells if version == 1 else [*cells, memory(values.memory_high)]


def main() -> int:
    print(f"demo: starting a private containerd {paths.CONTAINERD_VERSION} with NRI enabled")
    try:
        node = Node.start()
    except (SetupMissing, ContainerdError) as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    try:
        layout = node.containerd.layout
        print(
            f"demo: containerd pid {node.containerd.pid}, CRI {layout.address}, "
            f"cgroup v{node.reader.version}"
        )
        # MemoryQOS: memory.min/low/high with the container (ours; Koordinator's CgroupReconcile
        # writes them only afterwards), so the table shows memory.high on cgroup v2.
        args = ("--feature-gates", "MemoryQOS=true")
        with KoordletProcess(node, node_slo=NODE_SLO, args=args) as koordlet:
            mechanism = (
                "cpu.idle"
                if koordlet.metric("koordlet_group_identity_mechanism_info", mechanism="cpu.idle")
                else "bvt or none"
            )
            print(
                "demo: koordlet registered as NRI plugin 00-koordlet_nri "
                f"(group identity via {mechanism})"
            )
            print(
                f"demo: NodeSLO {koordlet.slo_file}: cpuQOS enabled for LSR, LS and BE, "
                "memoryQOS (feature gate MemoryQOS) for BE\n"
            )
            version = node.reader.version
            print(row(COLUMNS[version]))
            for sample in samples():
                pod = PodSpec.new(
                    name=f"demo-{sample.container.name}",
                    qos=sample.kube_qos,
                    labels={keys.LABEL_QOS_CLASS: sample.qos_class},
                    annotations=sample.annotations,
                )
                pod_id = node.run_pod(pod)
                cid = node.run_container(pod_id, sample.container)
                name = sample.container.name
                asked = requested(sample.container, version)
                print(row([sample.qos_class, name, "asked", *asked]))
                got = actual(node.container_values(pod_id, cid), version)
                print(row(["", "", "container", *got]))
                print(row(["", "", "pod", *actual(node.pod_values(pod_id), version)]))
            addr = f"127.0.0.1:{koordlet.port}"
            koordlet.wait_until(
                lambda: koordlet.metric("koordlet_pod_used_cpu_cores") > 0.5,
                timeout=20,
                what="the busy BE container in the metrics",
            )
            print(f"\ndemo: koordctl top --once --addr {addr}   (the BE container spins)\n")
            ctl.main(["top", "--once", "--addr", addr])
            print(f"\ndemo: koordlet metrics on http://{addr}/metrics, e.g.")
            for line in koordlet.metrics_text().splitlines():
                applied = 'status="applied"' in line
                if line.startswith("koordlet_resource_updates_total") and applied:
                    print(f"  {line}")
    finally:
        problems = node.teardown()
    if problems:
        print(f"demo: teardown left things behind: {problems}", file=sys.stderr)
        return 1
    print(
        "demo: removed every pod, container and cgroup it created; koordlet and containerd stopped"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
