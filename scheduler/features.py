"""koord-scheduler's feature gates: Koordinator v1.8's names and defaults, accepted.

Koordinator's koord-scheduler registers pkg/features/scheduler_features.go's
defaultSchedulerFeatureGates (23) and the transformers' gates of pkg/features/features.go (3)
into the scheduler's feature gate, so its Deployment's ``--feature-gates`` (e.g. the chart's
``CompatibleCSIStorageCapacity=true`` for Kubernetes 1.22) may name any of them. None of them
changes what this extender does: each belongs to a part of Koordinator's whole scheduler that
the stock kube-scheduler or nothing here does (informers, Reservation, ...), or an ElasticQuota
behaviour other than Koordinator's default. They are accepted so that the Deployment starts
unchanged, and those that are on are said at start-up (one WARNING line), by
koord_scheduler_feature_gate_unimplemented{gate} and in --help.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koordapi.features import ALL_ALPHA, parse_gates

_INFORMERS = "kube-scheduler's own informers are the stock kube-scheduler's business"
_QUOTA = "the extender's ElasticQuota check does not read it: Koordinator's default behaviour"
_RESERVATION = "no Reservation plugin here"
_TRANSFORMER = "no scheduler transformers here"

# name → (Koordinator's default, why it changes nothing here)
GATES: Mapping[str, tuple[bool, str]] = {
    "CompatibleCSIStorageCapacity": (False, _INFORMERS),
    "DisableCSIStorageCapacityInformer": (False, _INFORMERS),
    "CompatiblePodDisruptionBudget": (False, _INFORMERS),
    "DisablePodDisruptionBudgetInformer": (False, _INFORMERS),
    "DisableDynamicResourceAllocationInformer": (False, _INFORMERS),
    "ResizePod": (False, "no in-place pod resize here"),
    "MultiQuotaTree": (False, _QUOTA),
    "ElasticQuotaIgnorePodOverhead": (False, _QUOTA),
    "ElasticQuotaIgnoreTerminatingPod": (False, _QUOTA),
    "ElasticQuotaImmediateIgnoreTerminatingPod": (False, _QUOTA),
    "ElasticQuotaGuaranteeUsage": (False, _QUOTA),
    "DisableDefaultQuota": (False, _QUOTA),
    "SupportParentQuotaSubmitPod": (False, _QUOTA),
    "LazyReservationRestore": (False, _RESERVATION),
    "OmitNodeLabelsForReservation": (False, _RESERVATION),
    "SkipReservationFitsNode": (False, _RESERVATION),
    "DevicePluginAdaption": (False, "DeviceShare here reads only Koordinator's Device objects"),
    "CleanExpiredReservationAllocated": (False, _RESERVATION),
    "DynamicSchedulerCheck": (
        True,
        "kube-scheduler calls the extender only for its own profile's pods",
    ),
    "CSIStorageCapacity": (True, _INFORMERS),
    "GenericEphemeralVolume": (True, _INFORMERS),
    "PodDisruptionBudget": (True, _INFORMERS),
    "SyncBarrier": (False, "no leader election: each replica answers from its own caches"),
    "PriorityTransformer": (False, _TRANSFORMER),
    "PreemptionPolicyTransformer": (False, _TRANSFORMER),
    "ReplaceResourcesTransformer": (False, _TRANSFORMER),
}
# Koordinator's GA gates (the rest are alpha): AllAlpha and AllBeta leave them alone.
GA = frozenset({"CSIStorageCapacity", "GenericEphemeralVolume", "PodDisruptionBudget"})


@dataclass(frozen=True)
class SchedulerGates:
    """--feature-gates as given; unknown names and bad values are refused by ``parse``."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> SchedulerGates:
        return cls(parse_gates(text, GATES))

    def enabled(self, name: str) -> bool:
        default, _ = GATES[name]
        if name in self.overrides:
            return self.overrides[name]
        if name in GA:
            return default
        # Koordinator's other gates are all alpha: AllBeta sets none of them
        return self.overrides.get(ALL_ALPHA, default)

    def unimplemented(self) -> dict[str, str]:
        """The gates that are on (by default or as given) and change nothing here, and why."""
        return {name: why for name, (_, why) in GATES.items() if self.enabled(name)}

    def __str__(self) -> str:
        return ",".join(f"{k}={str(v).lower()}" for k, v in self.overrides.items())


def help_text() -> str:
    """--feature-gates' --help: every gate with its default; none changes anything here."""
    gates = ", ".join(f"{name}={str(default).lower()}" for name, (default, _) in GATES.items())
    return (
        "A=true,B=false: Koordinator's koord-scheduler gates, accepted so that its Deployment "
        f"starts unchanged, none of which changes anything here (AllAlpha, AllBeta; defaults: "
        f"{gates}); those on are said at start-up and by "
        "koord_scheduler_feature_gate_unimplemented"
    )
