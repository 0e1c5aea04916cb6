"""NodeSLO fields that are accepted (Koordinator's schema, so its YAML applies) but that
koordlet does not act on, each with why.

A field is reported only when it is set to something other than its default or "off" value:
``blkioQOS: {enable: false}`` or ``systemClass.cpuQOS.groupIdentity: 0`` say nothing. Unknown
keys are not reported here (``koordapi.nodeslo.validate`` lists them). koordlet logs the
fields of a NodeSLO once per change of it and counts them; koord-manager does the same for the
``slo-controller-config`` keys that render these fields (with the ConfigMap's paths).

Usage::

    for found in unsupported_fields(spec):          # spec: a NodeSLO .spec (dict)
        log.warning("%s is set but not used: %s", found.path, found.why)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordapi.nodeslo import CLASS_KEYS, NET_POLICY_TERWAY, NONE_MEMORY_QOS
from koordapi.qos import QoSClass

# The NodeSLO extensions koordlet reads (koordlet.qosmanager.schedlatency's CONFIG_PATH).
READ_EXTENSIONS = frozenset({"schedLatency"})

BLKIO = "block I/O QoS is not implemented here (Koordinator's BlkIOReconcile)"
CGROUP_ROOT = "not read for the root cgroup: Koordinator reads only its blkioQOS"
SYSTEM_CPU = (
    "systemClass.cpuQOS is not read: SYSTEM pods take the CPU QoS of their Kubernetes QoS "
    "class (as in Koordinator)"
)
SYSTEM_RESCTRL = "no resctrl group for SYSTEM pods: LSR, LS and BE have one (as in Koordinator)"
NETWORK_CLASS = (
    "tc shapes only lsClass and beClass: LSR and LSE pods share the LS class, SYSTEM pods the "
    "system class (as Koordinator's tc)"
)
INGRESS = (
    "tc shapes egress only (as Koordinator's tc); ingress needs netQOSPolicy terway-qos, "
    "which is not implemented here"
)
TERWAY = "terway-qos is not implemented here: no network QoS is applied (tc is)"
PAGE_CACHE = (
    "memory.pagecache_limit.* is not written by koordlet (only the node-wide "
    "systemStrategy.pageCacheLimitEnabled is)"
)
HOST_APPLICATIONS = "host applications (processes outside Kubernetes) are not managed here"
EXTENSION = "no plugin here reads this extension (koordlet reads extensions.schedLatency only)"

# The value(s) of each leaf that mean "off" or the default: those are never reported.
_OFF: dict[str, dict[str, tuple[Any, ...]]] = {
    "cpuQOS": {
        "enable": (False,),
        "groupIdentity": (0,),
        "schedIdle": (0,),
        "coreExpeller": (False,),
    },
    "memoryQOS": {
        "enable": (False,),
        **{name: (value,) for name, value in NONE_MEMORY_QOS.items()},
        "pageCacheLimitEnable": (0,),
        "pageCacheLimitSync": (0,),
        "pageCacheLimitSize": (0,),
    },
    "resctrlQOS": {
        "enable": (False,),
        "catRangeStartPercent": (0,),
        "catRangeEndPercent": (100,),
        "mbaPercent": (100,),
    },
    "networkQOS": {
        "enable": (False,),
        "ingressRequest": (0,),
        "ingressLimit": (0, 100),  # Koordinator's "None" value and its CRD default
        "egressRequest": (0,),
        "egressLimit": (0, 100),
    },
    "blkioQOS": {"enable": (False,), "blocks": ([],)},
}
_PAGE_CACHE_FIELDS = ("pageCacheLimitEnable", "pageCacheLimitSync", "pageCacheLimitSize")
_INGRESS_FIELDS = ("ingressRequest", "ingressLimit")
_LSR, _SYSTEM = CLASS_KEYS[QoSClass.LSR], CLASS_KEYS[QoSClass.SYSTEM]
# (section, feature) → (the leaves not used, None for all; why). "*": every section.
_NOT_USED: dict[tuple[str, str], tuple[tuple[str, ...] | None, str]] = {
    ("*", "blkioQOS"): (None, BLKIO),
    ("*", "memoryQOS"): (_PAGE_CACHE_FIELDS, PAGE_CACHE),
    ("*", "networkQOS"): (_INGRESS_FIELDS, INGRESS),
    (_LSR, "networkQOS"): (None, NETWORK_CLASS),
    (_SYSTEM, "networkQOS"): (None, NETWORK_CLASS),
    (_SYSTEM, "cpuQOS"): (None, SYSTEM_CPU),
    (_SYSTEM, "resctrlQOS"): (None, SYSTEM_RESCTRL),
    ("cgroupRoot", "cpuQOS"): (None, CGROUP_ROOT),
    ("cgroupRoot", "memoryQOS"): (None, CGROUP_ROOT),
    ("cgroupRoot", "resctrlQOS"): (None, CGROUP_ROOT),
    ("cgroupRoot", "networkQOS"): (None, CGROUP_ROOT),
}
_SECTIONS = (*CLASS_KEYS.values(), "cgroupRoot")


@dataclass(frozen=True)
class UnsupportedField:
    """A field that is set, with its path (``spec.resourceQOSStrategy.beClass...``), and why
    it changes nothing here."""

    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def _is_off(value: Any, choices: tuple[Any, ...]) -> bool:
    # type-exact: True is not 1 and 0 is not False here
    return value is None or any(type(value) is type(c) and value == c for c in choices)


def _resource_qos(strategy: Any, where: str) -> list[UnsupportedField]:
    if not isinstance(strategy, Mapping):
        return []
    found = []
    policies = strategy.get("policies")
    if isinstance(policies, Mapping) and policies.get("netQOSPolicy") == NET_POLICY_TERWAY:
        found.append(UnsupportedField(f"{where}.policies.netQOSPolicy", TERWAY))
    for section in _SECTIONS:
        config = strategy.get(section)
        if not isinstance(config, Mapping):
            continue
        for feature, off in _OFF.items():
            values = config.get(feature)
            rule = _NOT_USED.get((section, feature)) or _NOT_USED.get(("*", feature))
            if rule is None or not isinstance(values, Mapping):
                continue
            leaves, why = rule
            for leaf, value in values.items():
                if leaf not in off or (leaves is not None and leaf not in leaves):
                    continue  # unknown (reported elsewhere) or used
                if not _is_off(value, off[leaf]):
                    found.append(UnsupportedField(f"{where}.{section}.{feature}.{leaf}", why))
    return found


def unsupported_in(spec_field: str, value: Any, where: str) -> list[UnsupportedField]:
    """The fields set in ``value``, one NodeSLO spec field (``resourceQOSStrategy``,
    ``hostApplications``, ...), that koordlet does not use; ``where`` prefixes the paths."""
    if spec_field == "resourceQOSStrategy":
        return _resource_qos(value, where)
    if spec_field == "hostApplications" and isinstance(value, list) and value:
        return [UnsupportedField(where, HOST_APPLICATIONS)]
    if spec_field == "extensions" and isinstance(value, Mapping):
        return [
            UnsupportedField(f"{where}.{name}", EXTENSION)
            for name, config in value.items()
            if name not in READ_EXTENSIONS and config is not None
        ]
    return []


def unsupported_fields(
    spec: Mapping[str, Any] | None, where: str = "spec"
) -> list[UnsupportedField]:
    """Every field of a NodeSLO spec that is set and that koordlet does not use, in order."""
    found: list[UnsupportedField] = []
    for key, value in (spec or {}).items():
        found += unsupported_in(key, value, f"{where}.{key}")
    return found
