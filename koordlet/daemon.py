"""koordlet's composition root: build every component from the configuration and run them.

Order, as in Koordinator: executor, node state (topology, kernel, node config), pod store,
hooks and the NRI server, reconciler. Then three loops run until a signal: the NRI stub
(reconnecting), the reconciler, and the node-config file watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import start_http_server

from koordapi.features import FeatureGates
from koordlet.applying import Applier
from koordlet.executor import Executor, WriteResult
from koordlet.executor.resctrl import RESCTRL_ROOT, Resctrl
from koordlet.hookserver import HookServer
from koordlet.metrics import KoordletMetrics
from koordlet.reconciling import Reconciler
from koordlet.states.nodeconfig import NodeConfigFile
from koordlet.states.pods import PodStore
from koordlet.states.snapshot import build_rules
from koordlet.states.topology import detect_kernel, read_topology
from nri_plugin import Stub
from runtimehooks import HOOKS
from runtimehooks.registry import FailurePolicy
from runtimehooks.rules import DEFAULT_HAMI_CORE_LIBRARY, Rules

log = logging.getLogger(__name__)

CONFIG_POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Config:
    """koordlet's settings; the command line maps Koordinator's flag names onto these."""

    node_name: str = field(default_factory=socket.gethostname)
    cgroup_root: Path = Path("/sys/fs/cgroup/")
    var_run_root: Path = Path("/var/run/")
    sys_root: Path = Path("/sys/")
    proc_root: Path = Path("/proc/")
    resctrl_root: Path = RESCTRL_ROOT
    nri_enabled: bool = True
    nri_socket_path: str = "nri/nri.sock"  # relative to var_run_root unless absolute
    nri_plugin_name: str = "koordlet_nri"
    nri_plugin_index: str = "00"
    failure_policy: FailurePolicy = FailurePolicy.IGNORE
    reconcile_interval: float = 10.0
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    metrics_addr: str = ":9316"
    node_slo_file: Path | None = None
    disable_unset_cpu_quota: bool = False
    hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY

    @property
    def nri_socket(self) -> Path:
        return self.var_run_root / self.nri_socket_path


def split_addr(addr: str) -> tuple[str, int]:
    """ ":9316" → ("", 9316); "127.0.0.1:9316" → ("127.0.0.1", 9316)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class Koordlet:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.metrics = KoordletMetrics(config.node_name)
        self.executor = Executor(config.cgroup_root, on_result=self._count_write)
        self.resctrl = Resctrl(config.resctrl_root)
        self.topology = read_topology(config.sys_root, config.proc_root)
        self.kernel = detect_kernel(config.cgroup_root, self.resctrl)
        self.node_config = NodeConfigFile(config.node_slo_file)
        self.node_config.reload_if_changed()
        self.pods = PodStore()
        self._rules: Rules | None = None
        self._rules_key: tuple[object, int] | None = None
        applier = self.applier = Applier(self.executor, self.resctrl, config.proc_root)
        self.reconciler = Reconciler(
            hooks=HOOKS,
            rules=self.rules,
            pods=self.pods,
            applier=applier,
            metrics=self.metrics,
            interval=config.reconcile_interval,
        )
        self.hookserver = HookServer(
            hooks=HOOKS,
            rules=self.rules,
            pods=self.pods,
            applier=applier,
            policy=config.failure_policy,
            metrics=self.metrics,
            on_container_started=self.reconciler.reconcile_container_now,
            on_synchronized=self.reconciler.wake,
        )
        self.stub: Stub | None = None
        mechanism = self.kernel.group_identity_mechanism
        self.metrics.group_identity.labels(config.node_name, mechanism).set(1)
        self._report_start()

    def _report_start(self) -> None:
        k = self.kernel
        log.info(
            "koordlet on node %s: cgroup v%d, %d CPUs in %d NUMA nodes, group identity via %s, "
            "core scheduling %s, resctrl %s",
            self.config.node_name,
            k.cgroup_version,
            len(self.topology.cpus),
            len(self.topology.numa),
            k.group_identity_mechanism,
            "available" if k.core_sched else "missing (CONFIG_SCHED_CORE)",
            "available" if k.resctrl else "missing",
        )
        gates = self.config.feature_gates
        if gates.enabled("CoreSched") and not k.core_sched:
            log.warning(
                "feature gate CoreSched is on, but this kernel has no core scheduling: no effect"
            )
        if gates.enabled("Resctrl") and not k.resctrl:
            log.warning(
                "feature gate Resctrl is on but resctrl is not mounted at %s",
                self.config.resctrl_root,
            )

    def _count_write(self, result: WriteResult) -> None:
        node, res, status = self.config.node_name, result.write.resource, result.status.value
        self.metrics.resource_updates.labels(node, res, status).inc()
        self.metrics.resource_update_duration.labels(node, res, status).observe(
            result.seconds * 1000
        )

    def rules(self) -> Rules:
        """The current snapshot, rebuilt when the node config or the pinned pods changed."""
        key = (self.node_config.current, self.pods.pinned_generation)
        if self._rules is None or key != self._rules_key:
            self._rules = build_rules(
                self.node_config.current,
                self.topology,
                self.kernel,
                self.pods,
                self.config.feature_gates,
                disable_unset_cpu_quota=self.config.disable_unset_cpu_quota,
                hami_core_library=self.config.hami_core_library,
            )
            self._rules_key = key
        return self._rules

    async def watch_config(self) -> None:
        errors = self.node_config.error
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            if self.node_config.reload_if_changed():
                self.reconciler.wake()
            if self.node_config.error and self.node_config.error != errors:
                self.metrics.node_config_errors.labels(self.config.node_name).inc()
            errors = self.node_config.error

    def _on_handled(self, name: str, seconds: float, outcome: str) -> None:
        if outcome == "overrun":
            self.metrics.nri_overruns.labels(self.config.node_name, name).inc()

    def _on_served(self, method: str, seconds: float) -> None:
        self.metrics.nri_requests.labels(self.config.node_name, method).observe(seconds)

    async def run(self) -> None:
        config = self.config
        if config.metrics_addr:
            host, port = split_addr(config.metrics_addr)
            start_http_server(port, host or "0.0.0.0", registry=self.metrics.registry)  # noqa: S104
            log.info("serving metrics on %s", config.metrics_addr)
        tasks = [
            asyncio.create_task(self.reconciler.run()),
            asyncio.create_task(self.watch_config()),
        ]
        if config.nri_enabled:
            self.stub = Stub(
                self.hookserver,
                name=config.nri_plugin_name,
                index=config.nri_plugin_index,
                socket_path=config.nri_socket,
                on_handled=self._on_handled,
                on_served=self._on_served,
                on_close=lambda: self.metrics.nri_connected.labels(config.node_name).set(0),
            )
            tasks.append(asyncio.create_task(self.stub.run()))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("koordlet stopping")
        if self.stub is not None:
            self.stub.stop()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        self.applier.close()
