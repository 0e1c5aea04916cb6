"""The reconciler: keep every known pod's and container's values true, pass after pass.

Every ``interval`` (``--runtime-hooks-reconcile-interval``, 10 s by default), right after a
Synchronize, and for one container right after it starts, the same hooks run again in their
reconcile stages from the requests the runtime made, and the results are written through the
executor: kube-QoS directories first, then each pod and its containers as one leveled batch
(the pod is loosened before its containers tighten). Values that already hold are not written;
a value changed behind koordlet's back is put back on the next pass. A container created but
not started yet is left to the pass at its start, which follows the check of what its cgroup
holds (``koordlet.nri.conflicts``): a periodic pass in between would hide another plugin's value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from koordlet.applying import Applier
from koordlet.executor import CgroupWrite, Status
from koordlet.hookresults import failure_cause, pod_writes
from koordlet.metrics import KoordletMetrics
from koordlet.states.pods import KnownPod, PodStore
from koordlet.threads import in_thread
from runtimehooks.hooks import tc
from runtimehooks.registry import (
    FailurePolicy,
    Hook,
    HookFailure,
    run_container_stage,
    run_kube_qos_stage,
    run_pod_stage,
)
from runtimehooks.request import Stage
from runtimehooks.rules import Rules

log = logging.getLogger(__name__)


class Reconciler:
    def __init__(
        self,
        *,
        hooks: Sequence[Hook],
        rules: Callable[[], Rules],
        pods: PodStore,
        applier: Applier,
        metrics: KoordletMetrics,
        interval: float,
        waiting: Callable[[str], bool] = lambda container_id: False,
    ) -> None:
        """``waiting(container_id)``: created, not started yet (periodic passes skip it)."""
        self.hooks = hooks
        self.rules = rules
        self.pods = pods
        self.applier = applier
        self.metrics = metrics
        self.interval = interval
        self.waiting = waiting
        self.passes = 0
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """Run a pass now (after a Synchronize, or when the node config changed). Safe from
        any thread: the NRI handlers run in the stub's handler thread."""
        if self._loop is None:  # not running yet: the first pass comes anyway
            self._wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            try:
                # In a worker thread: a pass over thousands of pods takes a second, and the
                # event loop must stay free for the NRI connection meanwhile.
                await in_thread(self.reconcile_all)
            except Exception:  # a bug in one pass must not end the loop
                log.exception("reconcile pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    # -- passes -------------------------------------------------------------------------------

    def reconcile_all(self) -> None:
        start = time.perf_counter()
        rules = self.rules()
        self.reconcile_kube_qos(rules)
        live: set[tuple[str, str]] = set()
        for known in self.pods.snapshot():
            self.reconcile_pod(known, rules)
            live.update((known.request.uid, container_id) for container_id in known.containers)
        self.applier.forget_gone(live)
        self.reconcile_net_qos(rules)
        self.passes += 1
        self._observe("allpods", "all", start, "succeeded")

    def reconcile_container_now(self, pod_id: str, container_id: str) -> None:
        known = self.pods.pod(pod_id)
        if known is not None and container_id in known.containers:
            self.reconcile_pod(known, self.rules(), only=container_id)

    def reconcile_net_qos(self, rules: Rules) -> None:
        """The uplink's HTB classes, and every container's class by its cgroup."""
        plan = tc.plan(rules) if rules.gates.enabled(tc.HOOK.gate) else None
        classes = {
            container.cgroup_dir: tc.classid(tc.pod_minor(known.request))
            for known in self.pods.snapshot()
            for container in known.containers.values()
            if container.cgroup_dir
        }
        self.applier.apply_net_qos(plan, classes)

    def reconcile_kube_qos(self, rules: Rules) -> None:
        """The kube-QoS directories' values from the hooks' kube-QoS stage, written where the
        file exists (a kernel without cpu.bvt_warp_ns or cpu.idle has nothing to set)."""
        writes: list[CgroupWrite] = []
        for kube, folder in self.pods.kube_qos_dirs().items():
            outcome = run_kube_qos_stage(self.hooks, kube, rules)
            self._note_failures(outcome.failures, f"kube QoS {kube.value}")
            writes += pod_writes(folder, outcome.patch, rules.kernel)
        existing = [
            w for w in writes if self.applier.executor.read(w.cgroup, w.resource) is not None
        ]
        self.applier.executor.apply(existing)

    def reconcile_pod(self, known: KnownPod, rules: Rules, only: str | None = None) -> None:
        start = time.perf_counter()
        pod = known.request
        pod_level: list[CgroupWrite] = []
        if only is None:
            outcome = run_pod_stage(
                self.hooks, Stage.RECONCILE_POD, pod, rules, FailurePolicy.IGNORE
            )
            self._note_failures(outcome.failures, pod.key)
            pod_level = self.applier.pod_values(pod, outcome.patch, rules.kernel)
        container_level: list[CgroupWrite] = []
        for cid, container in list(known.containers.items()):  # NRI events change it
            if (only is not None and cid != only) or (only is None and self.waiting(cid)):
                continue
            c_outcome = run_container_stage(
                self.hooks, Stage.RECONCILE_CONTAINER, container, rules, FailurePolicy.IGNORE
            )
            self._note_failures(c_outcome.failures, container.key)
            container_level += self.applier.container_values(
                container, c_outcome.patch, rules.kernel
            )
        results = self.applier.apply_leveled([pod_level, container_level])
        status = "failed" if any(r.status is Status.FAILED for r in results) else "succeeded"
        self._observe("pod", "all", start, status)

    # -- helpers ------------------------------------------------------------------------------

    def _note_failures(self, failures: Sequence[HookFailure], subject: str) -> None:
        # Counted every pass, logged at debug: the NRI path already logged the first time.
        for failure in failures:
            cause = failure_cause(failure.error)
            self.metrics.hook_failures.labels(self.metrics.node, failure.hook, cause).inc()
            log.debug("reconcile: hook %s for %s: %s", failure.hook, subject, failure.error)

    def _observe(self, level: str, resource: str, start: float, status: str) -> None:
        self.metrics.observe_reconcile(level, resource, status, time.perf_counter() - start)
