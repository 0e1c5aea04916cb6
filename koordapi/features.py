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
    "AuditEventsHTTPHandler": False,
    "Libpfm4": False,
    "ColdPageCollector": False,
    "HugePageReport": False,
    "PodResourcesProxy": False,
    "HamiCoreVGPUMonitor": False,
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
    "AuditEventsHTTPHandler": "no audit HTTP handler; /api/v1/explain shows the QoS actions",
    "Libpfm4": "CPI is counted with perf_event_open directly, without libpfm4",
    "ColdPageCollector": "no cold page (kidled) metrics are collected",
    "HugePageReport": "no huge pages are reported",
    "PodResourcesProxy": "no kubelet pod-resources proxy is served",
    "HamiCoreVGPUMonitor": "no HAMi-core vGPU monitor",
    TERWAY_QOS: "no Terway network QoS; TCNetworkQoS shapes egress with tc",
}

# Kubernetes' special gates: AllAlpha=V (AllBeta=V) sets every alpha (beta) gate that is not
# named itself to V. Koordinator's beta gates, and ours that are on by default; the rest alpha.
ALL_ALPHA, ALL_BETA = "AllAlpha", "AllBeta"
BETA: frozenset[str] = frozenset(
    {
        GROUP_IDENTITY,
        CPUSET_ALLOCATOR,
        BATCH_RESOURCE,
        "BECPUSuppress",
        "CPUBurst",
        "RdtResctrl",
        "NodeTopologyReport",
        "SchedLatencyCollector",
    }
)


class FeatureGateError(ModelError):
    """A --feature-gates value names an unknown gate or is not NAME=true|false."""


def parse_gates(text: str, known: Mapping[str, object]) -> dict[str, bool]:
    """ "A=true,B=false" → {A: True, B: False}; a name not in ``known`` (AllAlpha and AllBeta
    aside) or a value not true or false is an error. The last value of a gate wins."""
    overrides: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or value.strip().lower() not in ("true", "false"):
            raise FeatureGateError(f"feature gate {item!r} is not NAME=true|false")
        if name not in known and name not in (ALL_ALPHA, ALL_BETA):
            raise FeatureGateError(
                f"unknown feature gate {name!r}; known: {', '.join(sorted(known))}"
            )
        overrides[name] = value.strip().lower() == "true"
    return overrides


_QUOTA = "no ElasticQuota here"
_WEBHOOKS = "the chart's webhook configurations decide which webhooks are called"
# koord-manager's gates in Koordinator v1.8 (pkg/features/features.go: its own, the
# descheduler's and the transformers'), each with why this manager does not follow it: the
# manager accepts them all so that its Deployment starts unchanged, and says at start-up which
# ones it was given.
MANAGER_GATES: Mapping[str, str] = {
    "PodMutatingWebhook": _WEBHOOKS,
    "PodValidatingWebhook": _WEBHOOKS,
    "ConfigMapValidatingWebhook": _WEBHOOKS,
    "WebhookFramework": _WEBHOOKS,
    "NodeMutatingWebhook": "no Node webhooks here",
    "NodeValidatingWebhook": "no Node webhooks here",
    "ReservationMutatingWebhook": "no Reservation here",
    "ElasticQuotaMutatingWebhook": _QUOTA,
    "ElasticQuotaValidatingWebhook": _QUOTA,
    "MultiQuotaTree": _QUOTA,
    "ElasticQuotaIgnorePodOverhead": _QUOTA,
    "ElasticQuotaGuaranteeUsage": _QUOTA,
    "ElasticQuotaEnableUpdateResourceKey": _QUOTA,
    "ElasticQuotaEvaluationTransformPod": _QUOTA,
    "DisableDefaultQuota": _QUOTA,
    "SupportParentQuotaSubmitPod": _QUOTA,
    "EnableQuotaAdmission": _QUOTA,
    "ColocationProfileSkipMutatingResources": "profiles always set batch resources",
    "ColocationProfileSkipValidatingPriority": "the priority is always validated",
    "ColocationProfileController": "profiles apply at admission only",
    "EnableSyncGPUSharedResource": "no GPU sharing here",
    "ValidatePodDeviceResource": "no device resources are validated",
    "EnablePodEnhancedValidator": "no pod enhanced validator",
    "DisablePVCReservation": "no descheduler here",
    "PriorityTransformer": "no scheduler transformers here",
    "PreemptionPolicyTransformer": "no scheduler transformers here",
    "ReplaceResourcesTransformer": "no scheduler transformers here",
}


def parse_manager_gates(text: str) -> dict[str, bool]:
    """koord-manager's --feature-gates (``MANAGER_GATES``' names)."""
    return parse_gates(text, MANAGER_GATES)


@dataclass(frozen=True)
class FeatureGates:
    overrides: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """ "A=true,B=false" → gates; unknown names and bad values are errors (a typo must not
        silently leave a feature in its default state)."""
        return cls(parse_gates(text, DEFAULTS))

    def enabled(self, name: str) -> bool:
        if name not in DEFAULTS:
            raise KeyError(f"unknown feature gate {name}")
        if name in self.overrides:
            return self.overrides[name]
        return self.overrides.get(ALL_BETA if name in BETA else ALL_ALPHA, DEFAULTS[name])

    def unimplemented(self) -> dict[str, str]:
        """The gates that are on but do nothing here, with what is missing."""
        return {name: why for name, why in NOT_IMPLEMENTED.items() if self.enabled(name)}

    def all(self) -> dict[str, bool]:
        return {name: self.enabled(name) for name in sorted(DEFAULTS)}
