"""Apply hook results to the node through the executor: cgroup files, resctrl, processes.

Both the NRI server (pod values at RunPodSandbox) and the reconciler (everything, every pass)
come through here, so a value is written the same way whoever computed it. They run in
different threads (the stub's handler thread, a worker thread), so what is not a plain cgroup
write (resctrl groups, core-scheduling cookies, the remembered oom_score_adj) is done under one
lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence, Set
from pathlib import Path

from koordlet.executor import CgroupWrite, Executor, WriteResult, coresched, procfs
from koordlet.executor.netqos import NetQoS, cgroup_id
from koordlet.executor.resctrl import Resctrl, ResctrlError
from koordlet.hookresults import container_writes, pod_writes
from runtimehooks.hooks.tc import TcPlan
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.request import ContainerRequest, PodRequest
from runtimehooks.rules import KernelFeatures

log = logging.getLogger(__name__)


class Applier:
    def __init__(
        self,
        executor: Executor,
        resctrl: Resctrl,
        proc_root: Path = procfs.PROC_ROOT,
        *,
        on_core_sched: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.executor = executor
        self.resctrl = resctrl
        self.proc_root = proc_root
        self.cookies = coresched.CookieGroups()
        self.on_core_sched = on_core_sched  # (group, succeeded) of each cookie change
        # (pod uid, container id) → the oom_score_adj last given to the container's processes
        self.oom_scores: dict[tuple[str, str], int] = {}
        self.net_qos: NetQoS | None = None
        self._net_qos_error = ""
        self._lock = threading.Lock()

    def pod_values(
        self, pod: PodRequest, patch: PodPatch, kernel: KernelFeatures
    ) -> list[CgroupWrite]:
        """Write the resctrl part now; return the pod's cgroup writes (for a leveled batch)."""
        with self._lock:
            if patch.resctrl is not None:
                try:
                    self.resctrl.ensure_group(patch.resctrl.closid, patch.resctrl.schemata)
                except ResctrlError as err:
                    log.warning("resctrl for pod %s: %s", pod.key, err)
            if patch.remove_resctrl is not None:
                try:
                    self.resctrl.remove_group(patch.remove_resctrl)
                except ResctrlError as err:
                    log.warning("resctrl for pod %s: %s", pod.key, err)
        return pod_writes(pod.cgroup_dir, patch, kernel) if pod.cgroup_dir else []

    def apply_pod(
        self, pod: PodRequest, patch: PodPatch, kernel: KernelFeatures
    ) -> list[WriteResult]:
        return self.executor.apply(self.pod_values(pod, patch, kernel))

    def container_values(
        self, container: ContainerRequest, patch: ContainerPatch, kernel: KernelFeatures
    ) -> list[CgroupWrite]:
        """Apply the per-process part now; return the container's cgroup writes."""
        if not container.cgroup_dir:
            return []
        if patch.oom_score_adj is not None or patch.core_sched is not None:
            with self._lock:
                self._process_values(container, patch)
        return container_writes(container.cgroup_dir, patch, kernel)

    def _process_values(self, container: ContainerRequest, patch: ContainerPatch) -> None:
        """oom_score_adj and the core-scheduling cookie of the container's processes."""
        pids = self.executor.procs(container.cgroup_dir)
        if patch.oom_score_adj is not None:
            procfs.set_oom_score_adj(pids, patch.oom_score_adj, self.proc_root)
            self.oom_scores[(container.pod.uid, container.id)] = patch.oom_score_adj
        if patch.core_sched is not None and pids:
            ok = True
            try:
                if patch.core_sched.enabled:
                    self.cookies.assign(patch.core_sched.name, sorted(pids))
                else:
                    self.cookies.clear(sorted(pids))
            except coresched.CoreSchedError as err:
                ok = False
                log.warning("core scheduling for %s: %s", container.key, err)
            if self.on_core_sched is not None:
                self.on_core_sched(patch.core_sched.name, ok)

    def forget_gone(self, live: Set[tuple[str, str]]) -> None:
        """Drop what was given to containers that are gone: ``live`` holds every known
        (pod uid, container id). Each reconcile pass calls it, so the map stays as large as the
        node's containers, whether /metrics is scraped or not."""
        with self._lock:
            for key in [key for key in self.oom_scores if key not in live]:
                del self.oom_scores[key]

    def apply_leveled(self, levels: Sequence[Sequence[CgroupWrite]]) -> list[WriteResult]:
        return self.executor.apply_leveled(levels)

    def apply_net_qos(self, plan: TcPlan | None, classes: Mapping[str, int]) -> None:
        """Egress classes on the uplink; ``classes`` maps cgroup dirs to their class ids.

        The map is filled before the plan (and its filter) goes in, so a restarted koordlet's
        filter never starts empty. A failure is logged once per distinct message.
        """
        if plan is None and self.net_qos is None:
            return
        try:
            if self.net_qos is None:
                self.net_qos = NetQoS()
            ids = {}
            for cgroup, class_id in classes.items():
                folder = self.executor.v2_dir(cgroup)
                if folder is not None:
                    ids[cgroup_id(folder)] = class_id
            self.net_qos.classify(ids if plan is not None else {})
            self.net_qos.apply_plan(plan)
            self._net_qos_error = ""
        except (OSError, ValueError) as err:
            if str(err) != self._net_qos_error:
                log.warning("network QoS: %s", err)
            self._net_qos_error = str(err)

    def close(self) -> None:
        if self.net_qos is not None:
            self.net_qos.close()
            self.net_qos = None
