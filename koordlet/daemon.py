"""koordlet's composition root: build every component from the configuration and run them.

Order, as in Koordinator: executor, node state (topology, kernel, node config), pod store,
hooks and the NRI server, reconciler. Then three loops run until a signal: the NRI stub
(reconnecting), the reconciler, and the node-config file watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from koordapi.features import GPU_ENV_INJECT
from koordapi.nodemetric import MetricError, read_node_metric
from koordapi.qos import PROD
from koordlet.applying import Applier
from koordlet.cgroupfs.hierarchy import raise_open_files_limit
from koordlet.cluster import build_api, build_eviction_api, cluster_mode
from koordlet.collectors.base import Collector, CollectorRunner, Derived
from koordlet.collectors.be import BECollector
from koordlet.collectors.cpi import CPICollector
from koordlet.collectors.gpu import GPUCollector
from koordlet.collectors.network import NetworkCollector
from koordlet.collectors.node import NodeCollector
from koordlet.collectors.pods import PodCollector
from koordlet.collectors.psi import PSICollector
from koordlet.collectors.rdma import RDMACollector
from koordlet.collectors.system import SystemCollector
from koordlet.config import Config
from koordlet.eviction.backends import EvictByAPI, EvictionBackend, StopContainers
from koordlet.eviction.cri import CRIRuntime
from koordlet.executor import Executor, Status, WriteResult
from koordlet.executor.resctrl import Resctrl
from koordlet.healthseries import HealthCollector
from koordlet.inspect.exposition import SchedLatencyExposition
from koordlet.inspect.schedlat import GATE as SCHED_LATENCY_GATE
from koordlet.inspect.schedlat import SchedLatencyCollector
from koordlet.koordseries import KoordinatorSeries, Sources
from koordlet.metriccache import MetricCache
from koordlet.metrics import KoordletMetrics, LabelCache
from koordlet.nodemetric import build_status
from koordlet.nri.conflicts import ConflictTracker
from koordlet.nri.hooks import HookServer
from koordlet.prediction.peak import PeakPredictor
from koordlet.prediction.server import ServerSettings
from koordlet.qosmanager.audit import Action, AuditTrail
from koordlet.qosmanager.cgreconcile import CgroupReconcile
from koordlet.qosmanager.cpuburst import CPUBurst
from koordlet.qosmanager.cpuevict import CPUEvict
from koordlet.qosmanager.cpusuppress import CPUSuppress
from koordlet.qosmanager.eviction import Evictor
from koordlet.qosmanager.framework import Context, QoSManager, Strategy, node_resources
from koordlet.qosmanager.memoryevict import MemoryEvict
from koordlet.qosmanager.resctrlreconcile import ResctrlReconcile
from koordlet.qosmanager.schedlatency import SchedLatencyGuard, SuppressBoost
from koordlet.qosmanager.sysconfig import SystemConfig
from koordlet.reconciling import Reconciler
from koordlet.sdnotify import notify, watchdog_interval
from koordlet.server import StatusServer
from koordlet.states.devnodes import NvidiaDeviceNodes
from koordlet.states.nodeconfig import NodeConfigFile
from koordlet.states.pods import KnownPod, PodStore
from koordlet.states.snapshot import build_rules
from koordlet.states.topology import detect_kernel, read_topology
from koordlet.states.unsupported import UnsupportedFieldsReport
from koordlet.statusapi import KoordletViews
from koordlet.threads import in_thread
from nri_plugin import Stub
from runtimehooks import HOOKS
from runtimehooks.rules import Rules

if TYPE_CHECKING:  # cluster mode's modules are imported only in cluster mode (lightkube)
    from koordkube.client import KubeApi
    from koordkube.eviction import EvictionAPI
    from koordlet.cluster.kubelet import KubeletPodSync
    from koordlet.cluster.nodeconfig import NodeConfigInformer
    from koordlet.collectors.devices import DeviceInventory

log = logging.getLogger(__name__)

CONFIG_POLL_SECONDS = 2.0
CLUSTER_SYNC_SECONDS = 5.0  # how long start-up waits for the NodeSLO and Node watches
CACHE_FLUSH_SECONDS = 10.0  # samples are written to the metric cache in batches this far apart


def split_addr(addr: str) -> tuple[str, int]:
    """ ":9316" → ("", 9316); "127.0.0.1:9316" → ("127.0.0.1", 9316)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class Koordlet:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.metrics = KoordletMetrics(config.node_name)
        # One executor, so one cache of what was written or seen: the QoS manager re-asserts
        # its values every second and trusts that cache for --resource-force-update-seconds
        # (its writes are cacheable); the NRI path and the reconciler read every file.
        self.executor = Executor(
            config.cgroup_root,
            on_result=self._count_write,
            force_update_seconds=config.resource_force_update_seconds,
        )
        self.resctrl = Resctrl(config.resctrl_root)
        self.topology = read_topology(config.sys_root, config.proc_root)
        # read once here (koordlet cannot start without it); Koordinator re-reads it
        for counter in (self.metrics.cpu_info_status, self.metrics.numa_info_status):
            counter.labels(config.node_name, "succeeded").inc()
        self.kernel = detect_kernel(config.cgroup_root, self.resctrl)
        # Cluster mode: no NodeSLO file, and a kubeconfig or in-cluster credentials.
        self.kube: KubeApi | None = (
            build_api(config.kubeconfig, observe=self.metrics.observe_apiserver)
            if cluster_mode(config.kubeconfig, config.node_slo_file)
            else None
        )
        self.node_config = self._node_config_source()
        self.node_config.reload_if_changed()
        # NodeSLO fields accepted but not acted on: logged once per change of the spec, and
        # served on /metrics (koordctl doctor reads them there)
        self.unsupported = UnsupportedFieldsReport(config.node_name)
        self.metrics.registry.register(self.unsupported)
        self.unsupported.note(self.node_config.current.spec)
        self.pods = PodStore(config.cgroup_driver, config.cgroup_root, config.cgroup_kube_dir)
        self.rdma = (
            RDMACollector(config.sys_root, config.dev_root)
            if config.feature_gates.enabled("RDMADevices")
            else None
        )
        # the NVIDIA device nodes GPU env inject adds (read only with that gate on)
        self.nvidia_nodes = (
            NvidiaDeviceNodes(config.dev_root)
            if config.feature_gates.enabled(GPU_ENV_INJECT)
            else None
        )
        self._rules: Rules | None = None
        self._rules_key: tuple[object, ...] | None = None
        applier = self.applier = Applier(
            self.executor,
            self.resctrl,
            config.proc_root,
            on_core_sched=self.metrics.record_core_sched,
        )
        # what koordlet asked for each container over NRI, checked once it has started
        self.conflicts = ConflictTracker(self.executor, self.metrics)
        self.reconciler = Reconciler(
            hooks=HOOKS,
            rules=self.rules,
            pods=self.pods,
            applier=applier,
            metrics=self.metrics,
            interval=config.reconcile_interval,
            waiting=self.conflicts.waiting,
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
            conflicts=self.conflicts,
        )
        self.cache, cache_problem = MetricCache.open(
            config.tsdb_path / "metrics.db" if config.tsdb_path else None,
            retention_seconds=config.tsdb_retention,
            max_bytes=config.tsdb_max_bytes,
            flush_seconds=CACHE_FLUSH_SECONDS,
        )
        if cache_problem is not None:
            log.error(
                "metric cache degraded: cannot open %s; keeping metrics in memory (no history "
                "across restarts), hooks and QoS strategies run as usual",
                cache_problem,
            )
        self.schedlat = (
            SchedLatencyCollector(
                self.pods.snapshot,
                config.cgroup_root,
                interval=config.sched_latency_interval,
                sample=config.sched_latency_sample,
            )
            if config.feature_gates.enabled(SCHED_LATENCY_GATE)
            else None
        )
        self.collectors = CollectorRunner(self._collectors(), self.cache)
        self.metrics.registry.register(
            HealthCollector(config.node_name, self.collectors, self.cache, self.pods)
        )
        psi = next((x for x in self.collectors.collectors if isinstance(x, PSICollector)), None)
        cpi = next((x for x in self.collectors.collectors if isinstance(x, CPICollector)), None)
        self.metrics.registry.register(
            KoordinatorSeries(
                self.metrics,
                Sources(
                    pods=self.pods.snapshot,
                    cache=self.cache,
                    allocatable=lambda: self.node_config.current.allocatable,
                    rules=self.rules,
                    oom_scores=applier.oom_scores,
                    psi=(lambda: psi.latest) if psi is not None else None,
                    cpi=(lambda: cpi.latest) if cpi is not None else None,
                ),
            )
        )
        schedlat = self.schedlat
        if schedlat is not None:
            self.metrics.registry.register(
                SchedLatencyExposition(config.node_name, lambda: schedlat.state)
            )
        self.views = KoordletViews(
            node_name=config.node_name,
            pods=self.pods,
            cache=self.cache,
            executor=self.executor,
            topology=self.topology,
            kernel=self.kernel,
            health=self._collector_health,
            schedlat=(lambda: schedlat.state) if schedlat is not None else None,
            conflicts=self.conflicts,
        )
        self.audit = AuditTrail(on_action=self._count_action)
        self.views.audit = self.audit
        self.predictor = PeakPredictor(
            self.cache,
            config.tsdb_path,
            ServerSettings(
                training_interval=config.prediction_training_interval,
                cpu_half_life=config.prediction_cpu_half_life,
                memory_half_life=config.prediction_memory_half_life,
                model_expiration=config.prediction_model_expiration,
                checkpoint_interval=config.prediction_checkpoint_interval,
                checkpoint_max_per_step=config.prediction_checkpoint_max_per_step,
            ),
            cold_start=config.prediction_cold_start,
            safety_margin_percent=config.prediction_safety_margin_percent,
            node=lambda: self.node_config.current,
            record=lambda name, pair: self.metrics.record_predicted_reclaimable(name, *pair),
        )
        self.views.reclaimable = self._prod_reclaimable
        self.evictor = Evictor(self._eviction_backend(), self.metrics)
        self.qos = QoSManager(
            self._strategies(),
            context=self.qos_context,
            gates=config.feature_gates,
            collect_interval=config.collect_interval,
            on_run=lambda name, seconds: self.metrics.qos_strategy_duration.labels(
                config.node_name, name
            ).observe(seconds),
        )
        self.stub: Stub | None = None
        self._nri_requests = LabelCache(self.metrics.nri_requests)
        self.status_server: StatusServer | None = None
        mechanism = self.kernel.group_identity_mechanism
        self.metrics.group_identity.labels(config.node_name, mechanism).set(1)
        self._report_start()

    def _collectors(self) -> list[Collector | Derived]:
        """The collectors this configuration turns on, each on its own interval."""
        c, gates, pods = self.config, self.config.feature_gates, self.pods.snapshot
        found: list[Collector | Derived] = [
            NodeCollector(c.proc_root, c.sys_root, interval=c.collect_interval),
            PodCollector(pods, c.cgroup_root, interval=c.collect_interval),
            BECollector(
                pods,
                c.cgroup_root,
                c.sys_root,
                kube_dir=c.cgroup_kube_dir,
                interval=c.collect_interval,
            ),
            SystemCollector(interval=c.collect_interval),
            NetworkCollector(
                pods, proc_root=c.proc_root, cgroup_root=c.cgroup_root, interval=c.collect_interval
            ),
        ]
        if gates.enabled("PSICollector"):
            found.append(PSICollector(pods, c.cgroup_root, c.proc_root, interval=c.psi_interval))
        if gates.enabled("CPICollector"):
            found.append(
                CPICollector(
                    pods, c.cgroup_root, c.sys_root, interval=c.cpi_interval, window=c.cpi_window
                )
            )
        if gates.enabled("Accelerators"):
            found.append(GPUCollector(pods, cgroup_root=c.cgroup_root, interval=c.collect_interval))
        if self.rdma is not None:
            found.append(self.rdma)
        if self.schedlat is not None:
            found.append(self.schedlat)
        return found

    def _node_config_source(self) -> NodeConfigFile | NodeConfigInformer:
        """The NodeSLO file when given; in cluster mode the NodeSLO and Node objects, watched."""
        if self.kube is not None:
            from koordlet.cluster.nodeconfig import NodeConfigInformer  # noqa: PLC0415

            log.info("cluster mode: NodeSLO and Node %s watched", self.config.node_name)
            return NodeConfigInformer(self.kube, self.config.node_name)
        return NodeConfigFile(self.config.node_slo_file)

    def _strategies(self) -> list[Strategy]:
        c = self.config
        boost = SuppressBoost()  # SchedLatencyGuard lowers CPUSuppress's threshold through it
        return [
            CPUSuppress(
                self.executor,
                interval=c.cpu_suppress_interval,
                min_cpus=c.cpu_suppress_min_cpus,
                metrics=self.metrics,
                boost=boost,
            ),
            SchedLatencyGuard(
                boost,
                interval=c.cpu_suppress_interval,
                sample_interval=c.sched_latency_interval,
            ),
            CPUBurst(self.executor, interval=c.cpu_suppress_interval, metrics=self.metrics),
            CgroupReconcile(self.executor, interval=c.qos_reconcile_interval),
            ResctrlReconcile(self.resctrl, self.executor, interval=c.qos_reconcile_interval),
            SystemConfig(c.proc_root, c.sys_root, interval=c.qos_reconcile_interval),
            CPUEvict(
                self.evictor,
                interval=c.cpu_evict_interval,
                cool_down=c.cpu_evict_cool_time,
                collect_interval=c.collect_interval,
            ),
            MemoryEvict(
                self.evictor, interval=c.memory_evict_interval, cool_down=c.memory_evict_cool_time
            ),
        ]

    def _eviction_backend(self) -> EvictionBackend:
        """In cluster mode the Eviction API; standalone, stop containers through CRI, or with
        --only-evict-by-api ask the API server with the in-cluster credentials."""
        self.kube_eviction: EvictionAPI | None = None
        if self.kube is None and not self.config.only_evict_by_api:
            cri = CRIRuntime(self.config.cri_socket, observe=self.metrics.observe_cri)
            return StopContainers(cri)
        self.kube_eviction = build_eviction_api(self.kube, observe=self.metrics.observe_apiserver)
        return EvictByAPI(self.kube_eviction)

    def qos_context(self) -> Context:
        """A fresh context for one strategy run (called from worker threads)."""
        rules = self.rules()
        return Context(
            rules=rules,
            pods=self.pods.snapshot(),
            topology=self.topology,
            node=node_resources(self.topology, rules, self.node_config.current.allocatable),
            cache=self.cache,
            audit=self.audit,
            now=time.time(),
            max_age=2 * self.config.collect_interval,
            qos_dirs=self.pods.kube_qos_dirs(),
        )

    def _count_action(self, action: Action) -> None:
        self.metrics.qos_actions.labels(self.config.node_name, action.strategy, action.kind).inc()

    def _collector_health(self) -> dict[str, Any]:
        return {name: asdict(h) for name, h in self.collectors.health.items()}

    def build_node_metric(self, aggregate_seconds: int, durations: Sequence[int]) -> dict[str, Any]:
        """The NodeMetric status for the policy of the NodeMetric's spec (worker thread)."""
        return self._reported(
            build_status(
                self.cache,
                self.views.store,
                self.views.clock(),
                aggregate_seconds=aggregate_seconds,
                durations=durations,
                reclaimable=self._prod_reclaimable,
            )
        )

    def _prod_reclaimable(self, pods: list[KnownPod], now: float) -> tuple[int, int] | None:
        found = self.predictor.prod_reclaimable(pods, now)
        self.metrics.record_priority_reclaimable(PROD.name, found)
        return found

    def _reported(self, status: dict[str, Any]) -> dict[str, Any]:
        """``status``, after its node and system usage went to koordlet_node_metric_*."""
        try:
            view = read_node_metric({"status": status})
        except MetricError as err:  # our own report: a bug, but not one to stop reporting
            log.warning("the NodeMetric report does not read back: %s", err)
            return status
        for key, pair in (("nodeUsage", view.node_usage), ("systemUsage", view.system_usage)):
            if pair is not None:
                self.metrics.record_node_metric(key, pair[0] / 1000, pair[1])
        return status

    async def run_cluster(self) -> None:
        """Cluster mode: the NodeSLO and Node watches and the NodeMetric status reporter."""
        from koordlet.cluster.nodeconfig import NodeConfigInformer  # noqa: PLC0415
        from koordlet.cluster.reporter import NodeMetricReporter  # noqa: PLC0415
        from koordlet.cluster.topology import (  # noqa: PLC0415
            TopologyPublisher,
            cpu_topology_annotation,
        )

        assert self.kube is not None
        reporter = NodeMetricReporter(
            self.kube,
            self.config.node_name,
            self.build_node_metric,
            fallback_interval=self.config.node_metric_interval,
        )
        tasks = [asyncio.create_task(reporter.run())]
        if isinstance(self.node_config, NodeConfigInformer):
            tasks.append(asyncio.create_task(self.node_config.run()))
            if self.config.kubelet_sync_interval > 0:
                tasks.append(asyncio.create_task(self._kubelet_sync(self.node_config).run()))
            topology = cpu_topology_annotation(self.topology)
            if topology is not None:  # what koord-scheduler binds CPUs from
                publisher = TopologyPublisher(
                    self.kube, self.config.node_name, topology, self.node_config.nodes
                )
                tasks.append(asyncio.create_task(publisher.run()))
        inventory = None
        if self.config.feature_gates.enabled("Accelerators"):
            inventory = self._device_reporter(tasks)
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)
            if inventory is not None:
                inventory.close()

    def _device_reporter(self, tasks: list[asyncio.Task[None]]) -> DeviceInventory:
        """Cluster mode with Accelerators: the Device report (RDMA NICs with RDMADevices)."""
        from koordlet.cluster.devices import DeviceReporter, inventory_builder  # noqa: PLC0415
        from koordlet.cluster.nodeconfig import NodeConfigInformer  # noqa: PLC0415
        from koordlet.collectors.devices import DeviceInventory  # noqa: PLC0415

        assert self.kube is not None
        c = self.config
        inventory = DeviceInventory(c.sys_root, rdma=c.feature_gates.enabled("RDMADevices"))
        informer = self.node_config if isinstance(self.node_config, NodeConfigInformer) else None

        def node_uid() -> str:
            node = informer.nodes.get(c.node_name) if informer is not None else None
            return str(((node or {}).get("metadata") or {}).get("uid", ""))

        reporter = DeviceReporter(
            self.kube, c.node_name, inventory_builder(inventory), node_uid=node_uid
        )
        tasks.append(asyncio.create_task(reporter.run()))
        return inventory

    def _kubelet_sync(self, informer: NodeConfigInformer) -> KubeletPodSync:
        """Pods from the kubelet, for those NRI did not report (cluster mode)."""
        from koordlet.cluster.kubelet import (  # noqa: PLC0415
            KubeletClient,
            KubeletEndpoint,
            KubeletPodSync,
            resolve_endpoint,
        )

        c = self.config

        def endpoint() -> KubeletEndpoint:
            node = informer.nodes.get(c.node_name) or {}
            return resolve_endpoint(
                node,
                preferred_address_type=c.kubelet_preferred_address_type,
                insecure_tls=c.kubelet_insecure_tls,
                read_only_port=c.kubelet_read_only_port,
            )

        client = KubeletClient.for_kubeconfig(
            endpoint,
            c.kubeconfig,
            timeout=c.kubelet_sync_timeout,
            ca_file=c.kubelet_ca_file,
            observe=self.metrics.observe_kubelet,
        )
        self.kubelet_sync = KubeletPodSync(
            self.pods,
            client.get_pods,
            interval=c.kubelet_sync_interval,
            on_change=self.reconciler.wake,
        )
        return self.kubelet_sync

    async def report_node_metric(self) -> None:
        """Write the NodeMetric report (standalone mode's stand-in for the custom resource)."""
        path = self.config.node_metric_file
        while path is not None:
            await asyncio.sleep(self.config.node_metric_interval)
            try:
                status = self._reported(await in_thread(self.views.node_metric))
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps({"status": status}, indent=2))
                tmp.replace(path)  # readers never see half a file
            except OSError as err:
                log.warning("cannot write the NodeMetric report %s: %s", path, err)

    async def serve_status(self) -> None:
        """Serve /metrics and the status API; while the address is taken (a koordlet that is
        still stopping holds it), keep trying instead of failing: NRI comes first."""
        addr = self.config.metrics_addr
        if not addr:
            return
        host, port = split_addr(addr)
        while True:
            try:
                refused = self.metrics.http_refused.labels(self.config.node_name)
                server = StatusServer(
                    host or "0.0.0.0",  # noqa: S104
                    port,
                    self.metrics.registry,
                    self.views,
                    on_refused=refused.inc,
                    api_remote=self.config.status_api_remote,
                )
            except OSError as err:
                log.warning("cannot serve metrics on %s yet (%s); retrying in 2s", addr, err)
                await asyncio.sleep(2)
                continue
            server.start()
            self.status_server = server
            log.info("serving metrics and the status API on %s", addr)
            return

    def ready(self) -> bool:
        """Registered with NRI (when enabled) and one node collection stored."""
        registered = self.stub is None or self.stub.registrations > 0
        node = self.collectors.health.get(NodeCollector.name)
        return registered and node is not None and node.passes > 0

    async def announce_readiness(self) -> None:
        """Tell systemd (Type=notify) once ready; then keep its watchdog fed."""
        while not self.ready():  # noqa: ASYNC110 - two components' states, polled
            await asyncio.sleep(0.1)
        how = f"NRI plugin {self.stub.index}-{self.stub.name}" if self.stub else "NRI off"
        notify(f"READY=1\nSTATUS=ready: {how}, collecting every {self.config.collect_interval}s")
        log.info("koordlet ready (%s)", how)
        interval = watchdog_interval()
        while interval is not None:  # pinged from the event loop: a stuck loop stops the pings
            notify("WATCHDOG=1")
            await asyncio.sleep(interval)

    async def train_predictor(self) -> None:
        """The peak predictor's passes, in a worker thread like the collectors': a pass reads
        the metric cache and never waits on the event loop, so NRI requests are not held up."""
        await in_thread(self.predictor.restore)
        while True:
            await asyncio.sleep(self.config.prediction_training_interval)
            try:
                await in_thread(self.predictor.run_pass, self.pods.snapshot())
            except Exception:  # a bug in one pass must not end prediction for good
                log.exception("peak prediction: the training pass failed")

    async def expire_metrics(self) -> None:
        while True:
            await asyncio.sleep(300)
            await in_thread(self.cache.expire)

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
        c = self.config
        log.info(
            "host layout %s: cgroups %s, sys %s, resctrl %s, proc %s, NRI socket %s, "
            "containerd socket %s, devices %s, metric cache %s",
            c.layout or "as given",
            c.cgroup_root,
            c.sys_root,
            c.resctrl_root,
            c.proc_root,
            c.nri_socket,
            c.cri_socket,
            c.dev_root,
            c.tsdb_path or "in memory",
        )
        gates = c.feature_gates
        # Everything accepted that changes nothing, in one warning (and koordctl doctor's,
        # through the two gauges): Koordinator's flags given, and its gates that are on, by
        # default too (NodeTopologyReport).
        idle_gates = gates.unimplemented()
        for name, _ in c.ignored_flags:
            self.metrics.unimplemented_flags.labels(c.node_name, name).set(1)
        for gate in idle_gates:
            self.metrics.unimplemented_gates.labels(c.node_name, gate).set(1)
        said = [f"--{name} ({why})" for name, why in c.ignored_flags]
        said += [f"feature gate {gate} ({why})" for gate, why in idle_gates.items()]
        if said:
            log.warning("accepted but with no effect here: %s", "; ".join(said))
        if gates.enabled("CoreSched") and not k.core_sched:
            log.warning(
                "feature gate CoreSched is on, but this kernel has no core scheduling: no effect"
            )
        nvidia = self.nvidia_nodes.current() if self.nvidia_nodes is not None else None
        if nvidia is not None:
            if nvidia.gpus or nvidia.control:
                log.info(
                    "GPU env inject: NVIDIA device nodes under %s: GPUs %s, %s",
                    self.config.dev_root,
                    ",".join(str(m) for m in nvidia.gpus) or "none",
                    ", ".join(d.path for d in nvidia.control) or "no control nodes",
                )
            else:
                log.info(
                    "GPU env inject: no NVIDIA device node under %s: containers get "
                    "NVIDIA_VISIBLE_DEVICES only (the NVIDIA runtime adds the nodes)",
                    self.config.dev_root,
                )
        if gates.enabled("Resctrl") and not k.resctrl:
            log.warning(
                "feature gate Resctrl is on but resctrl is not mounted at %s",
                self.config.resctrl_root,
            )

    def _count_write(self, result: WriteResult) -> None:
        self.metrics.observe_write(result.write.resource, result.status.value, result.seconds)
        if result.status in (Status.APPLIED, Status.UNCHANGED):
            self.conflicts.note_write(result.write)  # koordlet's own wish is no conflict

    def rules(self) -> Rules:
        """The current snapshot, rebuilt when the node config or the pinned pods changed."""
        nvidia = self.nvidia_nodes.current() if self.nvidia_nodes is not None else None
        rdma = self.rdma
        verbs, rdma_cm = (rdma.verbs_devices, rdma.rdma_cm) if rdma is not None else ({}, None)
        key = (self.node_config.current, self.pods.pinned_generation, nvidia, verbs, rdma_cm)
        if self._rules is None or key != self._rules_key:
            self._rules = build_rules(
                self.node_config.current,
                self.topology,
                self.kernel,
                self.pods,
                self.config.feature_gates,
                disable_unset_cpu_quota=self.config.disable_unset_cpu_quota,
                hami_core_library=self.config.hami_core_library,
                nvidia=nvidia,
                rdma_verbs=verbs,
                rdma_cm=rdma_cm,
            )
            self._rules_key = key
        return self._rules

    async def watch_config(self) -> None:
        errors = self.node_config.error
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            try:
                if await in_thread(self.node_config.reload_if_changed):
                    self.reconciler.wake()
                    self.unsupported.note(self.node_config.current.spec)
            except Exception as err:  # the watcher must outlive any one bad read
                self.node_config.error = f"{type(err).__name__}: {err}"
                log.exception("node config not loaded, keeping the last good one")
            if self.node_config.error and self.node_config.error != errors:
                self.metrics.node_config_errors.labels(self.config.node_name).inc()
            errors = self.node_config.error

    def _on_handled(self, name: str, seconds: float, outcome: str) -> None:
        if outcome == "overrun":
            self.metrics.nri_overruns.labels(self.config.node_name, name).inc()

    def _on_served(self, method: str, seconds: float) -> None:
        self._nri_requests(self.config.node_name, method).observe(seconds)

    async def run(self) -> None:
        config = self.config
        # Collectors run in worker threads; a short GIL switch interval lets the event loop
        # (the NRI requests, which containerd waits for) take over from them quickly.
        sys.setswitchinterval(0.0005)
        raise_open_files_limit()  # the pods collector keeps its cgroup files open
        if self.kube_eviction is not None:  # strategies' threads evict through this loop
            self.kube_eviction.bind(asyncio.get_running_loop())
        cluster = asyncio.create_task(self.run_cluster()) if self.kube is not None else None
        if not isinstance(self.node_config, NodeConfigFile):
            # The first NodeSLO and Node before the hooks start, unless the API is slow.
            try:
                async with asyncio.timeout(CLUSTER_SYNC_SECONDS):
                    await self.node_config.wait_synced()
            except TimeoutError:
                log.warning("NodeSLO and Node not listed yet: starting with the defaults")
        tasks = [
            asyncio.create_task(self.reconciler.run()),
            asyncio.create_task(self.watch_config()),
            asyncio.create_task(self.collectors.run()),
            cluster or asyncio.create_task(self.report_node_metric()),
            asyncio.create_task(self.expire_metrics()),
            asyncio.create_task(self.train_predictor()),
            asyncio.create_task(self.qos.run()),
            asyncio.create_task(self.serve_status()),
        ]
        stop = asyncio.Event()
        if config.nri_enabled:
            self.stub = Stub(
                self.hookserver,
                name=config.nri_plugin_name,
                index=config.nri_plugin_index,
                socket_path=config.nri_socket,
                request_timeout=config.nri_request_timeout,
                on_handled=self._on_handled,
                on_served=self._on_served,
                on_close=lambda: self.metrics.nri_connected.labels(config.node_name).set(0),
            )
            serving = asyncio.create_task(self.stub.run())
            if not self.stub.reconnect:
                # Launched by containerd: the socket closing means containerd stopped, and it
                # starts a new plugin process when it comes back.
                serving.add_done_callback(lambda _: stop.set())
            tasks.append(serving)
        tasks.append(asyncio.create_task(self.announce_readiness()))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("koordlet stopping")
        notify("STOPPING=1")
        if self.stub is not None:
            self.stub.stop()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.status_server is not None:
            self.status_server.stop()
        self.applier.close()
        self.collectors.close()
        if self.schedlat is not None:
            self.schedlat.close()
        self.predictor.close()
        self.cache.close()
        if self.kube is not None:
            await self.kube.client.close()
        elif self.kube_eviction is not None:  # --only-evict-by-api's own client
            await self.kube_eviction.api.client.close()
