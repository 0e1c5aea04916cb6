"""koordlet's NRI plugin: runtime events in, Koordinator's hooks run, adjustments out.

It holds no policy. For each event it does three steps: record the pod or container in the
pod store and turn the NRI message into a hook request; run the stage's hooks against the
current rules; translate the merged patch into the NRI reply (container values) or cgroup
writes through the executor (pod values, which NRI cannot adjust). Hook failures are decided
here, once: with failure policy Ignore (the default) they are logged and counted and the
container starts with whatever the other hooks computed; with Fail the runtime request fails.
What a container was asked is remembered until it has started, then compared with its cgroup
(``koordlet.nri.conflicts``: values another NRI plugin or the kubelet changed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from koordapi import keys
from koordapi.qos import is_known_qos_label
from koordlet.applying import Applier
from koordlet.hookresults import failure_cause
from koordlet.metrics import KoordletMetrics, LabelCache
from koordlet.nri.conflicts import ConflictTracker
from koordlet.nri.translate import to_adjustment, to_update
from koordlet.states.pods import PodStore
from nri_plugin import api
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.registry import (
    FailurePolicy,
    Hook,
    Outcome,
    run_container_stage,
    run_pod_stage,
)
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import Rules

log = logging.getLogger(__name__)


class HookFailed(Exception):
    """Raised to the runtime under failure policy Fail: the request fails."""


class HookServer:
    """The NRI plugin object; ``nri_plugin.Stub`` calls its methods."""

    def __init__(
        self,
        *,
        hooks: Sequence[Hook],
        rules: Callable[[], Rules],
        pods: PodStore,
        applier: Applier,
        policy: FailurePolicy,
        metrics: KoordletMetrics,
        on_container_started: Callable[[str, str], None] | None = None,
        on_synchronized: Callable[[], None] | None = None,
        conflicts: ConflictTracker | None = None,
    ) -> None:
        self.hooks = hooks
        self.rules = rules
        self.pods = pods
        self.applier = applier
        self.policy = policy
        self.metrics = metrics
        self._hook_duration = LabelCache(metrics.hook_duration)
        self._hook_duration_ms = LabelCache(metrics.hook_duration_ms)
        self.on_container_started = on_container_started
        self.on_synchronized = on_synchronized
        self.conflicts = conflicts or ConflictTracker(applier.executor, metrics)

    # -- outcome handling (once, for every stage) ---------------------------------------------

    def _settle(
        self, stage: Stage, subject: str, outcome: Outcome[PodPatch] | Outcome[ContainerPatch]
    ) -> None:
        node = self.metrics.node
        failed = {f.hook for f in outcome.failures}
        for hook, seconds in outcome.timings.items():
            status = "failed" if hook in failed else "succeeded"
            self._hook_duration(node, hook, stage.value, status).observe(seconds)
            self._hook_duration_ms(node, hook, stage.value, status).observe(seconds * 1000)
        for failure in outcome.failures:
            cause = failure_cause(failure.error)
            self.metrics.hook_failures.labels(node, failure.hook, cause).inc()
            log.warning(
                "hook %s failed at %s for %s: %s", failure.hook, stage.value, subject, failure.error
            )
        if outcome.aborted:
            raise HookFailed(f"{stage.value} {subject}: {outcome.failures[-1]}")

    # -- NRI handlers -------------------------------------------------------------------------

    def configure(self, config: str, runtime_name: str, runtime_version: str) -> None:
        log.info("connected to %s %s over NRI", runtime_name, runtime_version)
        self.metrics.nri_connected.labels(self.metrics.node).set(1)

    def synchronize(
        self, pods: list[api.PodSandbox], containers: list[api.Container]
    ) -> list[api.ContainerUpdate]:
        """Take over the runtime's pods; the reconciler applies their values right away."""
        self.pods.replace_all(pods, containers)
        self.metrics.known_pods.labels(self.metrics.node).set(len(self.pods))
        log.info(
            "synchronized with the runtime: %d pods, %d containers", len(pods), len(containers)
        )
        if self.on_synchronized is not None:
            self.on_synchronized()
        return []

    def _check_labels(self, request: PodRequest) -> None:
        """An unknown QoS label counts as no label (Koordinator's rule), said once per pod."""
        value = request.labels.get(keys.LABEL_QOS_CLASS)
        if value is not None and not is_known_qos_label(value):
            self.metrics.hook_failures.labels(
                self.metrics.node, "QoSClass", "UnknownQoSClass"
            ).inc()
            log.warning(
                "pod %s: unknown %s %r, treated as no QoS class",
                request.key,
                keys.LABEL_QOS_CLASS,
                value,
            )

    def run_pod_sandbox(self, pod: api.PodSandbox) -> None:
        request = self.pods.put_pod(pod)
        self._check_labels(request)
        self.metrics.known_pods.labels(self.metrics.node).set(len(self.pods))
        rules = self.rules()
        outcome = run_pod_stage(self.hooks, Stage.PRE_RUN_POD_SANDBOX, request, rules, self.policy)
        self._settle(Stage.PRE_RUN_POD_SANDBOX, request.key, outcome)
        self.applier.apply_pod(request, outcome.patch, rules.kernel)

    def create_container(
        self, pod: api.PodSandbox, container: api.Container
    ) -> tuple[api.ContainerAdjustment | None, list[api.ContainerUpdate]]:
        request = self.pods.put_container(pod, container)
        rules = self.rules()
        outcome = run_container_stage(
            self.hooks, Stage.PRE_CREATE_CONTAINER, request, rules, self.policy
        )
        self._settle(Stage.PRE_CREATE_CONTAINER, request.key, outcome)
        adjustment = to_adjustment(outcome.patch, rules.kernel)
        self.conflicts.asked(request, adjustment)
        return adjustment, []

    def update_container(
        self, pod: api.PodSandbox, container: api.Container, resources: api.LinuxResources
    ) -> list[api.ContainerUpdate]:
        request = self.pods.put_container(pod, container, resources)
        rules = self.rules()
        outcome = run_container_stage(
            self.hooks, Stage.PRE_UPDATE_CONTAINER_RESOURCES, request, rules, self.policy
        )
        self._settle(Stage.PRE_UPDATE_CONTAINER_RESOURCES, request.key, outcome)
        update = to_update(container.id, outcome.patch, rules.kernel)
        self.conflicts.updated(container.id, update)
        return [] if update is None else [update]

    def post_start_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        """Compare what the container's cgroup holds with what koordlet asked (before koordlet
        writes anything to it), then the values that need its processes (oom_score_adj, core
        scheduling): the reconciler's pass for this one container."""
        self.conflicts.check(container.id)
        if self.on_container_started is not None:
            self.on_container_started(pod.id, container.id)

    def stop_container(
        self, pod: api.PodSandbox, container: api.Container
    ) -> list[api.ContainerUpdate]:
        """A stopped container never runs again (a restart is a new container): forget it, so
        no strategy counts it, writes to it or evicts it a second time."""
        self.pods.remove_container(pod.id, container.id)
        self.conflicts.forget(container.id)
        return []

    def remove_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self.pods.remove_container(pod.id, container.id)
        self.conflicts.forget(container.id)

    def remove_pod_sandbox(self, pod: api.PodSandbox) -> None:
        known = self.pods.pod(pod.id)
        if known is not None:
            rules = self.rules()
            outcome = run_pod_stage(
                self.hooks, Stage.PRE_REMOVE_POD_SANDBOX, known.request, rules, self.policy
            )
            try:
                self._settle(Stage.PRE_REMOVE_POD_SANDBOX, known.request.key, outcome)
            finally:
                self.applier.apply_pod(known.request, outcome.patch, rules.kernel)
        self.pods.remove_pod(pod.id)
        self.conflicts.forget_pod(pod.uid)
        self.metrics.known_pods.labels(self.metrics.node).set(len(self.pods))
