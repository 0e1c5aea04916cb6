"""koord-descheduler's ``--feature-gates``: Koordinator v1.8's names and defaults; of them
only DisablePVCReservation changes what this descheduler does.

Koordinator's koord-descheduler binds ``--feature-gates`` to its own gate
(pkg/util/feature's DefaultMutableFeatureGate, cmd/koord-descheduler/app/options/options.go),
which pkg/features/features.go fills with koord-manager's gates, the descheduler's one
(DisablePVCReservation) and the transformers'. A Koordinator command line naming any of them
must start here too, so all are accepted; unknown names and values other than true/false are
refused, as Koordinator's gate does. Of these, Koordinator's descheduler reads only
DisablePVCReservation (a ReservationFirst migration's Reservation leaves the pod's PVC and
ephemeral volumes out: followed here) and the three transformers (its pod and node informers);
the rest are koord-manager's and change nothing in either descheduler.

A gate that changes nothing here and whose value differs from Koordinator's default is said at
start-up (one WARNING line) and by ``koord_descheduler_feature_gate_unimplemented{gate}``; at
their defaults the gates ask for what this descheduler does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koordapi.features import ALL_ALPHA, ALL_BETA, parse_gates

_MANAGER = "koord-manager's gate: Koordinator's descheduler does not read it either"
_FOLLOWED = ""  # the gate is followed here: nothing to say
_TRANSFORMER = (
    "no informer transformers here: pods and nodes are read as the API server returns them"
)


@dataclass(frozen=True)
class Gate:
    default: bool
    beta: bool  # AllBeta sets it (else AllAlpha)
    why: str  # why it changes nothing here ("" for a gate this descheduler follows)


# pkg/features/features.go in Koordinator v1.8.0: defaultFeatureGates,
# defaultDeschedulerFeatureGates and transformerFeatureGates, with their defaults and stages.
GATES: Mapping[str, Gate] = {
    "PodMutatingWebhook": Gate(True, True, _MANAGER),
    "PodValidatingWebhook": Gate(True, True, _MANAGER),
    "ElasticMutatingWebhook": Gate(True, True, _MANAGER),
    "ElasticValidatingWebhook": Gate(True, True, _MANAGER),
    "NodeMutatingWebhook": Gate(False, False, _MANAGER),
    "NodeValidatingWebhook": Gate(False, False, _MANAGER),
    "ConfigMapValidatingWebhook": Gate(False, False, _MANAGER),
    "ReservationMutatingWebhook": Gate(False, False, _MANAGER),
    "WebhookFramework": Gate(True, True, _MANAGER),
    "ColocationProfileSkipMutatingResources": Gate(False, False, _MANAGER),
    "ColocationProfileSkipValidatingPriority": Gate(False, False, _MANAGER),
    "MultiQuotaTree": Gate(False, False, _MANAGER),
    "ElasticQuotaIgnorePodOverhead": Gate(False, False, _MANAGER),
    "ElasticQuotaGuaranteeUsage": Gate(False, False, _MANAGER),
    "ElasticQuotaEnableUpdateResourceKey": Gate(False, False, _MANAGER),
    "ElasticQuotaEvaluationTransformPod": Gate(False, False, _MANAGER),
    "DisableDefaultQuota": Gate(False, False, _MANAGER),
    "SupportParentQuotaSubmitPod": Gate(False, False, _MANAGER),
    "EnableQuotaAdmission": Gate(False, False, _MANAGER),
    "EnableSyncGPUSharedResource": Gate(False, False, _MANAGER),
    "ColocationProfileController": Gate(False, False, _MANAGER),
    "ValidatePodDeviceResource": Gate(False, False, _MANAGER),
    "EnablePodEnhancedValidator": Gate(False, False, _MANAGER),
    "DisablePVCReservation": Gate(False, True, _FOLLOWED),
    "PriorityTransformer": Gate(False, False, _TRANSFORMER),
    "PreemptionPolicyTransformer": Gate(False, False, _TRANSFORMER),
    "ReplaceResourcesTransformer": Gate(False, False, _TRANSFORMER),
}


@dataclass(frozen=True)
class DeschedulerGates:
    """The gates as given by ``--feature-gates`` (only what was named)."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> DeschedulerGates:
        """ "A=true,B=false" → gates; an unknown name or a value not true/false is an error
        (FeatureGateError), as in Koordinator."""
        return cls(parse_gates(text, GATES))

    def enabled(self, name: str) -> bool:
        gate = GATES[name]
        if name in self.overrides:
            return self.overrides[name]
        return self.overrides.get(ALL_BETA if gate.beta else ALL_ALPHA, gate.default)

    def changed(self) -> dict[str, str]:
        """The gates that change nothing here whose value is not Koordinator's default, each
        with why, by name."""
        return {
            name: gate.why
            for name, gate in sorted(GATES.items())
            if gate.why and self.enabled(name) != gate.default
        }


def help_text() -> str:
    """--help's words on the gates."""
    reasons: dict[str, list[str]] = {}
    for name, gate in sorted(GATES.items()):
        if gate.why:
            reasons.setdefault(gate.why, []).append(name)
    said = "; ".join(f"{', '.join(names)}: {why}" for why, names in reasons.items())
    return (
        "Koordinator's gates, accepted (an unknown one is refused). DisablePVCReservation: a "
        "migration's Reservation leaves the pod's PVC and ephemeral volumes out. The others "
        f"change nothing here; one set away from its default is said at start-up. {said}"
    )
