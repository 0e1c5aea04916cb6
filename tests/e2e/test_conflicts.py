"""Two NRI plugins, one resource (Koordinator issue #2334): koordlet notices when another plugin
changed what it asked for a container.

koordlet (index 00) asks a BE container's memory limit from its batch-memory limit (512 MiB); a
second plugin written with ``nri_plugin`` (index 20, tests/e2e/plugins/memory_override.py) gives
BE containers 256 MiB through an unsolicited UpdateContainers right after their creation, so the
container starts with 256 MiB. Once it has started, koordlet counts the conflict in
``koordlet_nri_conflicts_total{resource="memory_limit"}``, logs it once with both values, and
``koordctl explain`` and ``koordctl doctor`` report it; the shares and quota nobody else touched
are no conflict. Then koordlet's post-start pass puts its 512 MiB back, with the v1
``memory.memsw.limit_in_bytes`` the runtime lowered beside it.

The detection does not depend on the cgroup version's files beyond what the unit tests cover
(tests/unit/koordlet/nri/test_conflicts.py), so this runs in the host tier.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from koordlet.nri.conflicts import RESOURCES
from tests.e2e.harness.cri import ContainerSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.plugin import PluginThread
from tests.e2e.harness.timing import scaled
from tests.e2e.plugins.memory_override import MemoryOverride
from tests.e2e.test_koordlet import MiB, be_pod

KOORDCTL = Path(sys.executable).parent / "koordctl"
CONFLICTS = "koordlet_nri_conflicts_total"


def koordctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KOORDCTL), *args], capture_output=True, text=True, timeout=scaled(120), check=False
    )


def test_a_second_plugin_overriding_be_memory_limits_is_counted_logged_and_reported(
    node: Node,
) -> None:
    override = MemoryOverride(256 * MiB)
    socket_path = node.containerd.layout.nri_socket
    with (
        KoordletProcess(node) as koordlet,
        PluginThread(
            override, name="memory-override", index="20", socket_path=socket_path
        ) as plugin,
    ):
        plugin.wait_registrations(1)
        node.containerd.wait_for_log('plugin \\"20-memory-override\\" connected')
        worker = asyncio.run_coroutine_threadsafe(override.run(plugin.stub), plugin.loop)
        try:
            pod = be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)})
            pod_id = node.run_pod(pod)
            cid = node.create_container(pod_id, ContainerSpec("batch"))
            assert override.wait_overridden(cid) == []  # the runtime took the other limit
            node.cri.start_container(cid)

            koordlet.wait_until(
                lambda: koordlet.metric(CONFLICTS, resource="memory_limit") == 1,
                20,
                "the memory limit conflict counted",
            )
            # the same check compared shares and quota, which nobody else touched
            others = {r: koordlet.metric(CONFLICTS, resource=r) for r in RESOURCES}
            assert others == {"cpuset": 0, "cpu_shares": 0, "cpu_quota": 0, "memory_limit": 1}
            said = [line for line in koordlet.log_text().splitlines() if "NRI conflict" in line]
            assert len(said) == 1, said
            assert f"memory_limit asked {512 * MiB}, found {256 * MiB}" in said[0]
            assert f"/{pod.name}/batch" in said[0] and "memory.limit_in_bytes" in said[0]

            addr = f"127.0.0.1:{koordlet.port}"
            explain = koordctl("explain", pod.name, "--addr", addr)
            assert explain.returncode == 0, explain.stderr
            print("\n" + explain.stdout)
            lines = explain.stdout.splitlines()
            assert any(
                line.endswith(
                    f" batch: memory_limit asked {512 * MiB}, found {256 * MiB}"
                    " (memory.limit_in_bytes)"
                )
                for line in lines
            ), explain.stdout

            doctor = koordctl(
                "doctor",
                "--containerd-config", str(node.containerd.layout.config),
                "--containerd-bin", str(node.containerd.bin_dir / "containerd"),
                "--addr", addr,
            )  # fmt: skip
            lines = doctor.stdout.splitlines()
            (warned,) = [i for i, line in enumerate(lines) if "nri-conflicts" in line]
            print("\n" + "\n".join(lines[warned : warned + 2]))
            assert lines[warned].startswith("WARN  nri-conflicts")
            assert "memory_limit 1" in lines[warned]
            assert lines[warned + 1].strip().startswith("fix: ")

            # koordlet's own value comes back, where the kernel lets it: on v1 the runtime
            # lowered memsw with the limit, so koordlet raises memsw first (still no swap)
            cgroup = node.container_cgroup(pod_id, cid)
            koordlet.wait_until(
                lambda: node.container_values(pod_id, cid).memory_limit == 512 * MiB,
                20,
                "koordlet's memory limit back",
            )
            assert node.reader.memory_swap_limit(cgroup) in (None, 512 * MiB)
            assert "Invalid argument" not in koordlet.log_text()
        finally:
            worker.cancel()
