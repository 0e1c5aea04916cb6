"""koordlet's settings: one table that is both the typed Config and the command line.

Each field that has a flag says so in its metadata (``koordapi.settings.flag``): the flag's
name (Koordinator's where it has the setting, so existing DaemonSet arguments work), help,
--help section and, where the field's type does not say it, how the text is read. koordlet.cli
builds its parser and the Config from this table; nothing repeats a default.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from koordapi.duration import parse_seconds
from koordapi.features import NOT_IMPLEMENTED, FeatureGates
from koordapi.goflags import Ignored
from koordapi.settings import flag
from koordlet.executor.resctrl import RESCTRL_ROOT
from koordlet.states.pods import CGROUP_DRIVERS, DEFAULT_KUBE_DIR, parse_kube_dir
from runtimehooks.registry import FailurePolicy
from runtimehooks.rules import DEFAULT_HAMI_CORE_LIBRARY

QOS = "QoS manager"
KUBELET = "kubelet (cluster mode)"
PREDICTION = "peak prediction (prodReclaimableMetric)"


def checked_kube_dir(text: str) -> str:
    """--cgroup-kube-dir as given, once it names a directory below the hierarchy root."""
    parse_kube_dir(text)
    return text


def positive_seconds(text: str) -> float:
    """A duration that must be more than 0 (a training interval of 0 would spin; a half-life
    of 0 has no decay to speak of)."""
    seconds = parse_seconds(text)
    if seconds <= 0:
        raise ValueError(f"{text!r} is not more than 0")
    return seconds


def resctrl_under(sys_fs_root: str) -> Path:
    """--sys-fs-root-dir names sysfs' fs/ folder; koordlet keeps the resctrl mount under it."""
    return Path(sys_fs_root) / "resctrl"


@dataclass(frozen=True)
class Config:
    """koordlet's settings; the command line maps Koordinator's flag names onto these.

    A float setting is seconds: its flag takes a Go duration ("1m30s") or plain seconds.
    """

    node_name: str = field(default_factory=socket.gethostname)  # $NODE_NAME, else the host's
    cgroup_root: Path = field(
        default=Path("/sys/fs/cgroup/"), metadata=flag("cgroup-root-dir", "cgroup mount point")
    )
    # the kubelet's, "cgroupfs" or "systemd"; "": detected (PodStore)
    cgroup_driver: str = field(
        default="",
        metadata=flag(
            "cgroup-driver",
            "the kubelet's cgroup driver; by default the pods' cgroup paths or the kubepods "
            "directory tell",
            choices=["", *CGROUP_DRIVERS],
            ours=True,
        ),
    )
    # relative to cgroup_root; Koordinator's (v0.6 to v1.4; it never read it for cgroups)
    cgroup_kube_dir: str = field(
        default=DEFAULT_KUBE_DIR,
        metadata=flag(
            "cgroup-kube-dir",
            "the kubelet's kubepods cgroup under its cgroupfs driver, relative to "
            "--cgroup-root-dir: the kubelet's cgroupRoot + kubepods/, e.g. "
            "koordk8s/kubepods/ for cgroupRoot /koordk8s (default %(default)s); the systemd "
            "driver's kubepods.slice is fixed",
            parse=checked_kube_dir,
        ),
    )
    var_run_root: Path = field(
        default=Path("/var/run/"), metadata=flag("var-run-root-dir", "parent of the NRI socket")
    )
    sys_root: Path = field(
        default=Path("/sys/"), metadata=flag("sys-root-dir", "sysfs mount point")
    )
    proc_root: Path = field(
        default=Path("/proc/"), metadata=flag("proc-root-dir", "procfs mount point")
    )
    # ours: Koordinator's hooks read the host's /dev where koordlet runs
    dev_root: Path = field(
        default=Path("/dev/"),
        metadata=flag(
            "dev-root-dir",
            "device nodes' folder (the host's /dev): where the GPU and RDMA nodes that GPU env "
            "inject and RDMA device inject add to containers are read",
            ours=True,
        ),
    )
    resctrl_root: Path = field(
        default=RESCTRL_ROOT,
        metadata=flag("sys-fs-root-dir", "resctrl lives in its resctrl/", parse=resctrl_under),
    )
    nri_enabled: bool = field(default=True, metadata=flag("enable-nri-runtime-hook"))
    # relative to var_run_root unless absolute
    nri_socket_path: str = field(
        default="nri/nri.sock",
        metadata=flag(
            "runtime-hooks-nri-socket-path",
            "NRI socket, relative to --var-run-root-dir (default %(default)s)",
        ),
    )
    nri_plugin_name: str = field(
        default="koordlet_nri", metadata=flag("runtime-hooks-nri-plugin-name")
    )
    nri_plugin_index: str = field(default="00", metadata=flag("runtime-hooks-nri-plugin-index"))
    nri_request_timeout: float = field(
        default=2.0,
        metadata=flag(
            "runtime-hooks-nri-request-timeout",
            "the runtime's time for each NRI request (containerd's plugin_request_timeout), for a "
            "runtime that does not say it (NRI before v0.7: containerd 1.7); each hook then has "
            "a quarter of it before it is answered with no change",
            parse=positive_seconds,
            ours=True,
        ),
    )
    failure_policy: FailurePolicy = field(
        default=FailurePolicy.IGNORE, metadata=flag("runtime-hooks-plugin-failure-policy")
    )
    reconcile_interval: float = field(
        default=10.0, metadata=flag("runtime-hooks-reconcile-interval")
    )
    disable_unset_cpu_quota: bool = field(default=False, metadata=flag("disable-unset-cpu-quota"))
    hami_core_library: str = field(
        default=DEFAULT_HAMI_CORE_LIBRARY, metadata=flag("hami-core-library-directory-path")
    )
    feature_gates: FeatureGates = field(
        default_factory=FeatureGates,
        metadata=flag(
            "feature-gates",
            "e.g. CPUNormalization=true,GroupIdentity=false; accepted but not implemented "
            f"(they change nothing): {', '.join(sorted(NOT_IMPLEMENTED))}",
            parse=FeatureGates.parse,
        ),
    )
    metrics_addr: str = field(
        default=":9316", metadata=flag("addr", "metrics address; empty to disable")
    )
    # the JSON API for remote clients too (ours)
    status_api_remote: bool = field(
        default=False,
        metadata=flag(
            "status-api-remote",
            "answer the JSON status API (/api/v1/...) for remote clients too; by default only "
            "this machine's loopback may read pods, uids and cgroup paths",
            ours=True,
        ),
    )
    node_slo_file: Path | None = field(
        default=None,
        metadata=flag(
            "node-slo-file",
            "NodeSLO spec (YAML or JSON) with optional node inputs; reloaded on change",
            ours=True,
        ),
    )
    # cluster mode: this, or in-cluster credentials
    kubeconfig: Path | None = field(
        default=None,
        metadata=flag(
            "kubeconfig",
            "kubeconfig file for cluster mode (default: in-cluster credentials when present; "
            "standalone when neither, or with --node-slo-file)",
        ),
    )
    collect_interval: float = field(default=1.0, metadata=flag("collect-res-used-interval"))
    psi_interval: float = field(default=10.0, metadata=flag("psi-collector-interval"))
    cpi_interval: float = field(default=60.0, metadata=flag("cpi-collector-interval"))
    cpi_window: float = field(default=10.0, metadata=flag("collect-cpi-timewindow"))
    sched_latency_interval: float = field(
        default=10.0,
        metadata=flag(
            "sched-latency-interval",
            "how often run-queue latency histograms are read (gate SchedLatencyCollector)",
            ours=True,
        ),
    )
    sched_latency_sample: float = field(
        default=2.0,
        metadata=flag(
            "sched-latency-sample-seconds",
            "how long the probes stay attached in each interval (sampling keeps their cost "
            "low; at least the interval: always attached)",
            ours=True,
        ),
    )
    # None: in memory
    tsdb_path: Path | None = field(
        default=Path("/var/lib/koordlet/metric-data/"),
        metadata=flag("tsdb-path", "metric cache folder; empty keeps metrics in memory"),
    )
    tsdb_retention: float = field(default=12 * 3600.0, metadata=flag("tsdb-retention-duration"))
    tsdb_max_bytes: int = field(default=100 << 20, metadata=flag("tsdb-max-bytes"))
    node_metric_file: Path | None = field(
        default=Path("/var/lib/koordlet/nodemetric.json"),
        metadata=flag(
            "node-metric-file",
            "where the NodeMetric report is written in standalone mode; empty: nowhere",
            ours=True,
        ),
    )
    node_metric_interval: float = field(
        default=60.0, metadata=flag("node-metric-report-interval", ours=True)
    )
    # QoS manager (Koordinator's flags and defaults; its *-seconds flags take whole seconds)
    qos_reconcile_interval: float = field(
        default=1.0, metadata=flag("reconcile-interval-seconds", group=QOS, parse=int)
    )
    cpu_suppress_interval: float = field(
        default=1.0, metadata=flag("cpu-suppress-interval-seconds", group=QOS, parse=int)
    )
    # ours: the BE cpuset floor (Koordinator: 2)
    cpu_suppress_min_cpus: int = field(
        default=2,
        metadata=flag(
            "cpu-suppress-min-cpus",
            "fewest CPUs the cpuset policy leaves to BE pods (default %(default)s)",
            group=QOS,
            ours=True,
        ),
    )
    cpu_evict_interval: float = field(
        default=1.0, metadata=flag("cpu-evict-interval-seconds", group=QOS, parse=int)
    )
    memory_evict_interval: float = field(
        default=1.0, metadata=flag("memory-evict-interval-seconds", group=QOS, parse=int)
    )
    memory_evict_cool_time: float = field(
        default=4.0, metadata=flag("memory-evict-cool-time-seconds", group=QOS, parse=int)
    )
    cpu_evict_cool_time: float = field(
        default=20.0, metadata=flag("cpu-evict-cool-time-seconds", group=QOS, parse=int)
    )
    resource_force_update_seconds: float = field(
        default=60.0,
        metadata=flag(
            "resource-force-update-seconds",
            "the QoS manager trusts a value it wrote or saw this long before reading it again",
            group=QOS,
            parse=int,
        ),
    )
    only_evict_by_api: bool = field(
        default=False,
        metadata=flag(
            "only-evict-by-api",
            "evict through the Kubernetes Eviction API instead of stopping containers over CRI",
            group=QOS,
        ),
    )
    # relative to var_run_root
    containerd_endpoint: str = field(
        default="containerd/containerd.sock",
        metadata=flag(
            "containerd-endpoint",
            "CRI socket for evictions, relative to --var-run-root-dir (default %(default)s)",
            group=QOS,
        ),
    )
    # The kubelet's pod list in cluster mode (Koordinator's statesinformer flags and defaults)
    kubelet_preferred_address_type: str = field(
        default="InternalIP",
        metadata=flag(
            "kubelet-preferred-address-type",
            "the Node address used to reach the kubelet (default %(default)s)",
            group=KUBELET,
        ),
    )
    # 0 or less: do not list the kubelet's pods
    kubelet_sync_interval: float = field(
        default=10.0,
        metadata=flag(
            "kubelet-sync-interval",
            "how often the kubelet's pods are listed; 0 turns the list off",
            group=KUBELET,
        ),
    )
    kubelet_sync_timeout: float = field(
        default=3.0,
        metadata=flag("kubelet-sync-timeout", "one kubelet request's limit", group=KUBELET),
    )
    # plain HTTP on the read-only port
    kubelet_insecure_tls: bool = field(
        default=False,
        metadata=flag(
            "kubelet-insecure-tls",
            "plain HTTP on the kubelet's read-only port instead of HTTPS with the token",
            group=KUBELET,
        ),
    )
    kubelet_read_only_port: int = field(
        default=10255,
        metadata=flag(
            "kubelet-read-only-port",
            "the kubelet's read-only port; 0: the authenticated port (default %(default)s)",
            group=KUBELET,
        ),
    )
    # ours; None: the serving cert is not verified
    kubelet_ca_file: Path | None = field(
        default=None,
        metadata=flag(
            "kubelet-ca-file",
            "CA of the kubelet's serving certificate; empty: not verified, as in Koordinator",
            group=KUBELET,
            ours=True,
        ),
    )

    # Peak prediction (koordlet.prediction): Koordinator's flags and defaults
    prediction_cold_start: float = field(
        default=24 * 3600.0,
        metadata=flag(
            "prediction-cold-start-duration",
            "a prod pod younger than this adds nothing to the per-pod reclaimable estimate",
            group=PREDICTION,
        ),
    )
    prediction_safety_margin_percent: int = field(
        default=10,
        metadata=flag(
            "prediction-safety-margin-percent",
            "added to each predicted peak, in percent",
            group=PREDICTION,
        ),
    )
    prediction_memory_half_life: float = field(
        default=24 * 3600.0,
        metadata=flag(
            "prediction-memory-histogram-decay-halflife",
            "a memory sample this much older counts half",
            group=PREDICTION,
            parse=positive_seconds,
        ),
    )
    prediction_cpu_half_life: float = field(
        default=12 * 3600.0,
        metadata=flag(
            "prediction-cpu-histogram-decay-halflife",
            "a cpu sample this much older counts half",
            group=PREDICTION,
            parse=positive_seconds,
        ),
    )
    prediction_training_interval: float = field(
        default=60.0,
        metadata=flag(
            "prediction-training-interval",
            "how often the models take a sample (the p90 of the last interval)",
            group=PREDICTION,
            parse=positive_seconds,
        ),
    )
    prediction_model_expiration: float = field(
        default=1800.0,
        metadata=flag(
            "prediction-model-expiration-duration",
            "a model without a sample for this long is dropped with its checkpoint",
            group=PREDICTION,
        ),
    )
    prediction_checkpoint_interval: float = field(
        default=600.0,
        metadata=flag(
            "prediction-model-checkpoint-interval",
            "how often each model is saved to the metric cache folder's prediction.db",
            group=PREDICTION,
        ),
    )
    prediction_checkpoint_max_per_step: int = field(
        default=12,
        metadata=flag(
            "prediction-model-checkpoint-max-per-step",
            "the most models saved after one training pass",
            group=PREDICTION,
        ),
    )

    # Not flags: how the command line was read (koordlet.cli), said once at start-up.
    # Koordinator's flags given that have no effect here, with why (KOORDINATOR_ONLY, klog's).
    ignored_flags: tuple[tuple[str, str], ...] = ()
    # The host layout the path defaults came from (HostLayout.describe()).
    layout: str = ""

    @property
    def nri_socket(self) -> Path:
        return self.var_run_root / self.nri_socket_path

    @property
    def cri_socket(self) -> Path:
        return self.var_run_root / self.containerd_endpoint


_PREDICTION_FILES = (
    "prediction checkpoints are kept in prediction.db beside the metric cache (--tsdb-path)"
)
_TSDB = "tunes Prometheus' TSDB; the metric cache here is SQLite (--tsdb-path, --tsdb-max-bytes)"
_AUDIT = "the QoS audit trail is logged and kept in memory for /api/v1/explain, not in files"
_PROXY = "koord-runtime-proxy hooks are not served: the hooks reach containerd over NRI only"
_NRI_RETRY = "NRI reconnects when the socket reappears (inotify), else backs off 0.1 s to 5 s"
_CONTAINERD = "containerd only (NRI and CRI); no docker or pouch"
_NOT_COLLECTED = "that collector is not implemented here"
_PPROF = "no pprof (a Go profiler); py-spy profiles a running koordlet"
_CLIENT_LIMIT = (
    "koordlet's API calls are not rate limited on the client side here (its watches and one "
    "NodeMetric update per report interval)"
)

# Koordinator's koordlet flags (v1.8) whose concept does not exist here: accepted, so that its
# DaemonSets start unchanged, and said once at start-up (koordapi.goflags).
KOORDINATOR_ONLY: dict[str, Ignored] = {
    "audit-log-dir": Ignored(_AUDIT),
    "audit-max-concurrent-readers": Ignored(_AUDIT),
    "audit-max-disk-space-mb": Ignored(_AUDIT),
    "audit-max-events-limit": Ignored(_AUDIT),
    "audit-verbose": Ignored(_AUDIT),
    "coldpage-collector-interval": Ignored(_NOT_COLLECTED),
    "enable-pagecache-collector": Ignored(_NOT_COLLECTED, boolean=True),
    "enable-resctrl-collector": Ignored(_NOT_COLLECTED, boolean=True),
    "resctrl-collector-interval": Ignored(_NOT_COLLECTED),
    "collect-node-cpu-info-interval": Ignored("the CPU topology is read once at start"),
    "collect-node-storage-info-interval": Ignored("no node storage information is collected"),
    "collect-sys-metric-outdated-interval": Ignored(
        "metrics age by --tsdb-retention-duration; NodeMetric windows by colocation-config"
    ),
    "metric-expire-seconds": Ignored("metrics age by --tsdb-retention-duration"),
    "metric-gc-interval-seconds": Ignored("the metric cache drops old chunks as it writes"),
    "configmap-name": Ignored("koordlet reads its NodeSLO, not a koordlet ConfigMap"),
    "configmap-namespace": Ignored("koordlet reads its NodeSLO, not a koordlet ConfigMap"),
    "enable-pprof": Ignored(_PPROF, boolean=True),
    "pprof-addr": Ignored(_PPROF),
    "kube-api-qps": Ignored(_CLIENT_LIMIT),
    "kube-api-burst": Ignored(_CLIENT_LIMIT),
    "qos-extension-plugins": Ignored(
        "no QoS extension plugins (Koordinator v1.8 registers none either)"
    ),
    "runtime-hooks-disable-stages": Ignored(
        "every hook stage runs; a hook is turned off by its feature gate"
    ),
    "default-runtime-type": Ignored(_CONTAINERD),
    "docker-endpoint": Ignored(_CONTAINERD),
    "pouch-endpoint": Ignored(_CONTAINERD),
    "disable-query-kubelet-config": Ignored(
        "the kubelet's configuration is not queried; the CPU manager policy comes from the "
        "node's annotations",
        boolean=True,
    ),
    "enable-node-metric-report": Ignored(
        "NodeMetric is always reported in cluster mode (--node-metric-file in standalone)",
        boolean=True,
    ),
    "enable-pod-taskids": Ignored("pods' task ids are read when a strategy needs them", True),
    "node-topology-sync-interval": Ignored("NodeTopologyReport is not implemented"),
    "pod-resources-proxy-path": Ignored("PodResourcesProxy is not implemented"),
    "prediction-checkpoint-filepath": Ignored(_PREDICTION_FILES),
    "report-interval": Ignored(
        "deprecated in Koordinator too: colocation-config's metricReportIntervalSeconds"
    ),
    "run-root-dir": Ignored("nothing is read from the host's /run; --var-run-root-dir is"),
    "var-lib-kubelet-dir": Ignored("nothing is read from the kubelet's folder"),
    "runtime-hooks-addr": Ignored(_PROXY),
    "runtime-hooks-config-path": Ignored(_PROXY),
    "runtime-hooks-failure-policy": Ignored(
        _PROXY + " (their failure policy: --runtime-hooks-plugin-failure-policy)"
    ),
    "runtime-hooks-host-endpoint": Ignored(_PROXY),
    "runtime-hooks-network": Ignored(_PROXY),
    "runtime-hooks-nri-backoff-cap": Ignored(_NRI_RETRY),
    "runtime-hooks-nri-backoff-duration": Ignored(_NRI_RETRY),
    "runtime-hooks-nri-backoff-factor": Ignored(_NRI_RETRY),
    "runtime-hooks-nri-backoff-steps": Ignored(_NRI_RETRY),
    "runtime-hooks-nri-connect-timeout": Ignored(_NRI_RETRY),
    "tsdb-enable-prometheus-metric": Ignored(_TSDB, boolean=True),
    "tsdb-head-chunks-write-buffer-size": Ignored(_TSDB),
    "tsdb-max-block-chunk-segment-size": Ignored(_TSDB),
    "tsdb-max-block-duration": Ignored(_TSDB),
    "tsdb-min-block-duration": Ignored(_TSDB),
    "tsdb-stripe-size": Ignored(_TSDB),
    "tsdb-wal-segment-size": Ignored(_TSDB),
    "xpu-device-infos-dir": Ignored("GPUs are read through NVML, not device-info files"),
    "xpu-enforce-collect-from-device-infos": Ignored(
        "GPUs are read through NVML, not device-info files", boolean=True
    ),
}


# Koordinator's two host layouts (pkg/koordlet/util/system/config.go: NewHostModeConfig and
# NewDsModeConfig, picked by the environment variable agent_mode). Its DaemonSet mounts the
# host's folders at these places and passes none of them but --cgroup-root-dir, so a koordlet
# started from that DaemonSet must find them by itself.
AGENT_MODE_ENV = "agent_mode"
HOST_MODE = "hostMode"
DS_MODE = "dsMode"
# the DaemonSet's mount of the host's cgroups: where a pod has it, it runs in that layout (no
# host has the folder, so a systemd or host install stays in host mode)
DS_MARKER = "/host-cgroup/"
# the DaemonSet's metric-db-path volume (Koordinator's --tsdb-path default)
DS_METRIC_DATA = "/metric-data/"
DS_MODE_PATHS: Mapping[str, str] = {
    "cgroup-root-dir": DS_MARKER,
    "sys-root-dir": "/host-sys/",
    "sys-fs-root-dir": "/host-sys-fs/",
    # Koordinator keeps /proc/: the DaemonSet runs with hostPID
    "proc-root-dir": "/proc/",
    # the NRI socket and containerd's are found below it
    "var-run-root-dir": "/host-var-run/",
}


@dataclass(frozen=True)
class HostLayout:
    """Where the host's folders are: Koordinator's mode, why it was chosen, and the defaults
    of the path flags it changes (flag name → text; the others keep Config's)."""

    mode: str
    why: str
    defaults: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.mode} ({self.why})"


def choose_layout(
    env: Mapping[str, str], is_dir: Callable[[str], bool] = lambda p: Path(p).is_dir()
) -> HostLayout:
    """Koordinator's choice: agent_mode=hostMode is the host's own paths, anything else the
    DaemonSet's. Ours differs where nothing is said: Koordinator's binary assumes its
    DaemonSet, ours is installed on hosts too (koordctl install, the systemd unit), so with no
    agent_mode the DaemonSet layout is taken where its cgroup mount is there."""
    mode = env.get(AGENT_MODE_ENV, "")
    if mode == HOST_MODE:
        return HostLayout(HOST_MODE, f"{AGENT_MODE_ENV}={HOST_MODE}")
    if mode:
        why = f"{AGENT_MODE_ENV}={mode}"
    elif is_dir(DS_MARKER):
        why = f"{DS_MARKER} is mounted (Koordinator's DaemonSet)"
    else:
        return HostLayout(HOST_MODE, f"no {AGENT_MODE_ENV} and no {DS_MARKER}")
    defaults = dict(DS_MODE_PATHS)
    # Koordinator's metric cache is the DaemonSet's metric-data volume; a pod without it (our
    # chart mounts /var/lib/koordlet) keeps Config's folder rather than an unmounted one
    if is_dir(DS_METRIC_DATA):
        defaults["tsdb-path"] = DS_METRIC_DATA
    return HostLayout(DS_MODE, why, defaults)
