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
OOM_SCORE_ADJ = "OOMScoreAdj"  # ours: Koordinator has no such gate
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


@dataclass(frozen=True)
class ManagerGate:
    """One of koord-manager's gates: Koordinator's default and stage, and what it does here.

    ``unfollowed`` says why setting the gate changes nothing here (None: it is followed);
    such a gate behaves as if it were ``here``, so it is said only when its state differs.
    """

    default: bool
    beta: bool  # Koordinator's PreRelease: Beta (AllBeta sets it) or Alpha (AllAlpha)
    unfollowed: str | None = None
    here: bool = False


_QUOTA = "no ElasticQuota here"
_NO_TRANSFORMERS = "no scheduler transformers here"


def _served(path: str) -> str:
    return (
        f"{path} is served whenever the webhook configuration names it (Koordinator's chart "
        "names it only while this gate is on)"
    )


# koord-manager's gates in Koordinator v1.8, names, defaults and stages: those its gate
# registers (pkg/features/features.go: defaultFeatureGates, defaultDeschedulerFeatureGates,
# transformerFeatureGates); the scheduler's own (scheduler_features.go, on Kubernetes' gate)
# are not among them and are refused as Koordinator's manager refuses them. The manager
# accepts them all so that its Deployment starts unchanged, and says which ones it was given
# that it does not follow (manager.cli).
MANAGER_GATES: Mapping[str, ManagerGate] = {
    "PodMutatingWebhook": ManagerGate(True, True, _served("/mutate-pod"), here=True),
    "PodValidatingWebhook": ManagerGate(True, True, _served("/validate-pod"), here=True),
    # followed: off, the manager serves no such path (404) and the chart leaves its entry out
    "ElasticMutatingWebhook": ManagerGate(True, True),
    "ElasticValidatingWebhook": ManagerGate(True, True),
    "NodeMutatingWebhook": ManagerGate(False, False, "no Node webhooks here"),
    "NodeValidatingWebhook": ManagerGate(False, False, "no Node webhooks here"),
    "ConfigMapValidatingWebhook": ManagerGate(
        False, False, _served("/validate-configmap"), here=True
    ),
    "ReservationMutatingWebhook": ManagerGate(False, False, "no Reservation here"),
    # followed: off, no webhook server and no certificate (as --disable-webhooks)
    "WebhookFramework": ManagerGate(True, True),
    "ColocationProfileSkipMutatingResources": ManagerGate(
        False, False, "profiles always set batch resources"
    ),
    "ColocationProfileSkipValidatingPriority": ManagerGate(
        False, False, "the priority is always validated"
    ),
    "MultiQuotaTree": ManagerGate(False, False, _QUOTA),
    "ElasticQuotaIgnorePodOverhead": ManagerGate(False, False, _QUOTA),
    # followed by the ElasticQuota validating webhook (koordapi.quota.topology.QuotaGates)
    "ElasticQuotaGuaranteeUsage": ManagerGate(False, False),
    "ElasticQuotaEnableUpdateResourceKey": ManagerGate(False, False),
    "ElasticQuotaEvaluationTransformPod": ManagerGate(False, False, _QUOTA),
    # followed by the pod validating webhook's quota checks
    "DisableDefaultQuota": ManagerGate(False, False),
    "SupportParentQuotaSubmitPod": ManagerGate(False, False),
    "EnableQuotaAdmission": ManagerGate(False, False, _QUOTA),
    "EnableSyncGPUSharedResource": ManagerGate(False, False, "no GPU sharing here"),
    "ColocationProfileController": ManagerGate(False, False, "profiles apply at admission only"),
    "ValidatePodDeviceResource": ManagerGate(False, False, "no device resources are validated"),
    "EnablePodEnhancedValidator": ManagerGate(False, False, "no pod enhanced validator"),
    "DisablePVCReservation": ManagerGate(False, True, "a descheduler gate; no descheduler here"),
    "PriorityTransformer": ManagerGate(False, False, _NO_TRANSFORMERS),
    "PreemptionPolicyTransformer": ManagerGate(False, False, _NO_TRANSFORMERS),
    "ReplaceResourcesTransformer": ManagerGate(False, False, _NO_TRANSFORMERS),
}


def parse_manager_gates(text: str) -> dict[str, bool]:
    """koord-manager's --feature-gates (``MANAGER_GATES``' names)."""
    return parse_gates(text, MANAGER_GATES)


def manager_gate_states(overrides: Mapping[str, bool]) -> dict[str, bool]:
    """Each manager gate's state under ``overrides`` (a gate named wins over AllAlpha and
    AllBeta, which set the gates of their stage, as Kubernetes' gates do)."""
    states = {}
    for name, gate in MANAGER_GATES.items():
        stage = ALL_BETA if gate.beta else ALL_ALPHA
        states[name] = overrides.get(name, overrides.get(stage, gate.default))
    return states


def manager_gates_unfollowed(overrides: Mapping[str, bool]) -> dict[str, str]:
    """The gates whose state under ``overrides`` is not what this manager does, and why."""
    return {
        name: f"{name}={str(state).lower()}: {gate.unfollowed}"
        for name, state in manager_gate_states(overrides).items()
        if (gate := MANAGER_GATES[name]).unfollowed is not None and state != gate.here
    }


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
