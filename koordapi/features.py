"""koordlet feature gates: Koordinator's names and defaults, parsed from ``--feature-gates``.

Usage::

    gates = FeatureGates.parse("CPUNormalization=true,GroupIdentity=false")
    gates.enabled("CPUSetAllocator")      # True (default)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koordapi.errors import ModelError

# Runtime-hook gates (pkg/koordlet/runtimehooks/config.go).
GROUP_IDENTITY = "GroupIdentity"
CPUSET_ALLOCATOR = "CPUSetAllocator"
BATCH_RESOURCE = "BatchResource"
GPU_ENV_INJECT = "GPUEnvInject"
RDMA_DEVICE_INJECT = "RDMADeviceInject"
CPU_NORMALIZATION = "CPUNormalization"
CORE_SCHED = "CoreSched"
TERWAY_QOS = "TerwayQoS"
TC_NETWORK_QOS = "TCNetworkQoS"
RESCTRL = "Resctrl"
OOM_SCORE_ADJ = "OOMScoreAdj"
MEMORY_QOS = "MemoryQOS"  # ours: Koordinator delivers memory QoS only in CgroupReconcile

# koordlet core gates (pkg/features/koordlet_features.go) the hooks consult.
BE_CPU_MANAGER = "BECPUManager"

DEFAULTS: Mapping[str, bool] = {
    GROUP_IDENTITY: True,
    CPUSET_ALLOCATOR: True,
    BATCH_RESOURCE: True,
    GPU_ENV_INJECT: False,
    RDMA_DEVICE_INJECT: False,
    CPU_NORMALIZATION: False,
    CORE_SCHED: False,
    TERWAY_QOS: False,
    TC_NETWORK_QOS: False,
    RESCTRL: False,
    OOM_SCORE_ADJ: False,
    MEMORY_QOS: False,
    BE_CPU_MANAGER: False,
    "BECPUSuppress": True,
    "BECPUEvict": False,
    "BEMemoryEvict": False,
    "CPUEvict": False,
    "MemoryEvict": False,
    "CPUAllocatableEvict": False,
    "MemoryAllocatableEvict": False,
    "CPUBurst": True,
    "SystemConfig": False,
    "RdtResctrl": True,
    "CgroupReconcile": False,
    "NodeTopologyReport": True,
    "Accelerators": False,
    "RDMADevices": False,
    "CPICollector": False,
    "ResctrlCollector": False,
    "PSICollector": False,
    "BlkIOReconcile": False,
    "AuditEvents": False,
    "SchedLatencyCollector": True,  # ours: run-queue latency with eBPF, where the kernel allows
    "BESuppressBySchedLatency": False,  # ours: suppress BE harder while LS pods wait for CPU
}


# Koordinator's gates that koordlet accepts, so that its DaemonSets start unchanged, but that
# change nothing here: said at start-up (and koordlet_feature_gate_unimplemented), in --help
# and by koordctl doctor when one is on.
NOT_IMPLEMENTED: Mapping[str, str] = {
    "BlkIOReconcile": "no blkio/io QoS is reconciled",
    "ResctrlCollector": "no resctrl (LLC, memory bandwidth) metrics are collected",
    "AuditEvents": "no audit events beyond the QoS audit trail, which is always on",
    "NodeTopologyReport": "no NodeResourceTopology is reported",
}


class FeatureGateError(ModelError):
    """A --feature-gates value names an unknown gate or is not NAME=true|false."""


@dataclass(frozen=True)
class FeatureGates:
    overrides: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """ "A=true,B=false" → gates; unknown names and bad values are errors (a typo must not
        silently leave a feature in its default state)."""
        overrides: dict[str, bool] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or value.strip().lower() not in ("true", "false"):
                raise FeatureGateError(f"feature gate {item!r} is not NAME=true|false")
            if name not in DEFAULTS:
                raise FeatureGateError(
                    f"unknown feature gate {name!r}; known: {', '.join(sorted(DEFAULTS))}"
                )
            overrides[name] = value.strip().lower() == "true"
        return cls(overrides)

    def enabled(self, name: str) -> bool:
        if name not in DEFAULTS:
            raise KeyError(f"unknown feature gate {name}")
        return self.overrides.get(name, DEFAULTS[name])

    def unimplemented(self) -> dict[str, str]:
        """The gates that are on but do nothing here, with what is missing."""
        return {name: why for name, why in NOT_IMPLEMENTED.items() if self.enabled(name)}

    def all(self) -> dict[str, bool]:
        return {name: self.enabled(name) for name in sorted(DEFAULTS)}
