"""ResctrlReconcile: the class-level resctrl groups LSR, LS and BE, their schemata and tasks.

Every interval, on a node where resctrl is mounted:

* the groups ``LSR``, ``LS`` and ``BE`` exist under the resctrl root (LSE pods share LSR's);
* each group's schemata follow its class's resctrlQOS in the merged NodeSLO, also when the
  class has it disabled (then the "None" values: the full cache and 100% bandwidth, which undo
  an earlier limit). The L3 line covers every cache id with the mask of [start%, end%) of the
  ways; the MB line, where the kernel has MBA, the percent as the vendor wants it (Intel: up
  to a multiple of 10; AMD: 2048 for 100%). The arithmetic is the Resctrl hook's;
* the threads of the containers of pods whose class has resctrlQOS enabled, read from their
  cgroups (v1 ``tasks`` in the cpu hierarchy, v2 ``cgroup.threads``), join the class group
  when they are not in it yet. Pods with their own group (the ``node.koordinator.sh/resctrl``
  annotation) belong to the Resctrl hook and are left alone.

A bad class config (start >= end, an MBA percent of 0) skips that line of that group and says
so in the status; the other lines and groups still apply. Without resctrl nothing is written
and the status says where it was looked for.
"""

from __future__ import annotations

from dataclasses import replace

from koordapi import keys
from koordapi.annotation import ResctrlConfig
from koordapi.errors import ModelError
from koordapi.features import FeatureGates
from koordapi.nodeslo import ResctrlQOS
from koordapi.qos import QoSClass
from koordlet.executor import Executor
from koordlet.executor.resctrl import Resctrl, ResctrlError, has_line
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context
from runtimehooks.hooks import resctrl as resctrl_hook
from runtimehooks.request import PodRequest
from runtimehooks.rules import KernelFeatures

NAME = "ResctrlReconcile"
GATE = "RdtResctrl"
GROUPS = {QoSClass.LSR: "LSR", QoSClass.LS: "LS", QoSClass.BE: "BE"}


def group_class(pod: PodRequest) -> QoSClass | None:
    """The class whose group the pod's threads join; None for SYSTEM pods (no group)."""
    qos = pod.qos_with_default
    qos = QoSClass.LSR if qos is QoSClass.LSE else qos
    return qos if qos in GROUPS else None


class ResctrlReconcile:
    """See the module docstring. ``executor`` locates the container cgroups (root, version)."""

    name = NAME

    def __init__(self, resctrl: Resctrl, executor: Executor, *, interval: float = 1.0) -> None:
        self.resctrl = resctrl
        self.executor = executor
        self.interval = interval

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled(GATE)

    def run(self, ctx: Context) -> None:
        if not self.resctrl.available:
            ctx.status(NAME, f"resctrl not available at {self.resctrl.root}: nothing written")
            return
        root = self.resctrl.schemata()
        kernel, problems = self._kernel(ctx.rules.kernel, root)
        ready: list[QoSClass] = []
        for qos in GROUPS:
            try:
                self._schemata(ctx, qos, kernel, "MB" in root, problems)
            except ResctrlError as err:  # the group cannot be made or written: no tasks either
                problems.append(str(err))
                continue
            ready.append(qos)
        self._tasks(ctx, ready)
        text = f"groups {', '.join(GROUPS[q] for q in ready) or 'none'} reconciled"
        ctx.status(NAME, "; ".join([text, *problems]))

    def _kernel(
        self, kernel: KernelFeatures, root: dict[str, dict[int, int]]
    ) -> tuple[KernelFeatures, list[str]]:
        """The cache mask and ids as resctrl shows them now (the hook's inputs)."""
        problems: list[str] = []
        ids = tuple(sorted(root.get("L3") or root.get("MB") or {0: 0}))
        mask = 0
        if "L3" in root:
            try:
                mask = self.resctrl.cbm_mask()
            except (OSError, ValueError) as err:
                problems.append(f"no L3 cbm_mask: {err}")
        return replace(kernel, l3_cbm_mask=mask, l3_cache_ids=ids), problems

    def _schemata(
        self, ctx: Context, qos: QoSClass, kernel: KernelFeatures, mba: bool, problems: list[str]
    ) -> None:
        group = GROUPS[qos]
        cfg = ctx.rules.slo.resctrl_qos(qos)
        configs: list[ResctrlConfig] = []
        if kernel.l3_cbm_mask:
            configs.append(
                ResctrlConfig(llc_range=(cfg.cat_range_start_percent, cfg.cat_range_end_percent))
            )
        if mba:
            if cfg.mba_percent <= 0:  # the hook would read 0 as "unset"; Koordinator skips it
                problems.append(f"{group}: mbaPercent {cfg.mba_percent} is outside (0, 100]")
            else:
                configs.append(ResctrlConfig(mb_percent=cfg.mba_percent))
        lines: list[str] = []
        for config in configs:
            try:
                lines += resctrl_hook.schemata(config, kernel)
            except ModelError as err:
                problems.append(f"{group}: {err}")
        current = self.resctrl.schemata(group)
        changed = [line for line in lines if not current or not has_line(current, line)]
        if current and not changed:
            return
        self.resctrl.ensure_group(group, changed)
        reason = _explain(qos, cfg, kernel)
        for line in changed:
            ctx.record(
                Action(ctx.now, NAME, "schemata", f"resctrl/{group}", line, reason, scope=qos.value)
            )

    def _tasks(self, ctx: Context, ready: list[QoSClass]) -> None:
        """Move the new threads of enabled classes' pods into their groups."""
        tids: dict[QoSClass, list[int]] = {qos: [] for qos in ready}
        for known in ctx.pods:
            pod = known.request
            qos = group_class(pod)
            if keys.ANNOTATION_RESCTRL in pod.annotations or qos not in tids:
                continue  # the Resctrl hook's pod, a SYSTEM pod, or a group that failed
            if not ctx.rules.slo.resctrl_qos(qos).enable:
                continue
            for ctr in known.containers.values():
                if ctr.cgroup_dir:
                    tids[qos] += self._threads(ctr.cgroup_dir)
        for qos, found in tids.items():
            moved = self.resctrl.add_tasks(GROUPS[qos], found) if found else 0
            if moved:
                target = f"resctrl/{GROUPS[qos]}"
                reason = (
                    f"{qos.value} resctrlQOS enabled: {moved} threads of its pods not yet in it"
                )
                action = Action(
                    ctx.now, NAME, "tasks", target, f"+{moved}", reason, scope=qos.value
                )
                ctx.record(action)

    def _threads(self, cgroup: str) -> list[int]:
        """Thread ids in a cgroup ([] when it is gone): v1 cpu ``tasks``, v2 ``cgroup.threads``."""
        if self.executor.version == 2:
            path = self.executor.root / cgroup.strip("/") / "cgroup.threads"
        else:
            path = self.executor.root / "cpu" / cgroup.strip("/") / "tasks"
        try:
            return [int(t) for t in path.read_text().split()]
        except (OSError, ValueError):
            return []


def _explain(qos: QoSClass, cfg: ResctrlQOS, kernel: KernelFeatures) -> str:
    state = "enabled" if cfg.enable else "disabled: None values"
    return (
        f"{qos.value} resctrlQOS {state}: cat {cfg.cat_range_start_percent}-"
        f"{cfg.cat_range_end_percent}% of {kernel.l3_cbm_mask.bit_length()} ways, "
        f"mba {cfg.mba_percent}% ({kernel.mba_vendor})"
    )
