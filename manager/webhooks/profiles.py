"""ClusterColocationProfile matching and application (Koordinator's pod mutating step 1).

``apply_profiles`` picks the profiles whose ``namespaceSelector`` matches the namespace's
labels and whose ``selector`` matches the pod's labels, applies them in name order (each may
be skipped by ``probability``), and mutates the pod dict it is given. A malformed profile or
a missing PriorityClass raises ConfigError naming the profile: upstream fails the admission
too, since silently skipping it would run the pod in the wrong QoS class. No I/O here.

Strategic merge (``spec.patch``) covers the common subset of Kubernetes' semantics: maps
merge recursively, ``null`` deletes a key, lists of containers, volumes, env and a few more
(``MERGE_KEYS``) merge by their key, any other list is replaced whole. Not supported, and
rejected with ConfigError: ``$patch``, ``$retainKeys``, ``$setElementOrder`` and
``$deleteFromPrimitiveList`` directives. Primitive lists with a merge strategy (finalizers)
are replaced rather than unioned, and merged lists keep the original element order.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordapi import keys
from manager import selectors
from manager.errors import ConfigError
from manager.webhooks import pods
from manager.webhooks.admission import ObjectError

RandIntn = Callable[[int], int]  # Go's rand.Intn: uniform in [0, n)

# Pod list fields that strategic merge merges by a key (their patchMergeKey in core/v1).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "topologySpreadConstraints": "topologyKey",
    "ownerReferences": "uid",
}


@dataclass(frozen=True)
class ProfileOutcome:
    """What ``apply_profiles`` did, for the resource conversion step and for logs."""

    matched: tuple[str, ...] = ()  # matched the selectors, in name order
    applied: tuple[str, ...] = ()  # of those, not skipped by probability
    skip_resources: bool = False  # a matched profile carries skip-update-resources


def name_of(profile: Mapping[str, Any]) -> str:
    meta = profile.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _spec(profile: Mapping[str, Any]) -> dict[str, Any]:
    spec = profile.get("spec")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ConfigError(f"clustercolocationprofile {name_of(profile)}: spec must be an object")
    return spec


def _strings(profile: Mapping[str, Any], field: str) -> dict[str, str]:
    value = _spec(profile).get(field) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(
            f"clustercolocationprofile {name_of(profile)}: spec.{field} must map strings to strings"
        )
    return value


def probability_percent(profile: Mapping[str, Any]) -> int:
    """``spec.probability`` as a percent: an int is read as a percent, "N%" as N; absent → 100."""
    value = _spec(profile).get("probability")
    if value is None:
        return 100
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].strip().isdigit():
        return int(value[:-1])
    raise ConfigError(
        f"clustercolocationprofile {name_of(profile)}: spec.probability must be an int or "
        f'"N%", got {value!r}'
    )


def should_apply(percent: int, rand_intn: RandIntn) -> bool:
    # Upstream applies when Intn(100) <= percent, i.e. percent+1 times in 100; "<" makes
    # "30%" mean 30 in 100.
    if percent <= 0:
        return False
    return percent >= 100 or rand_intn(100) < percent


def _selects(profile: Mapping[str, Any], field: str, labels: Mapping[str, str]) -> bool:
    selector = _spec(profile).get(field)
    selectors.validate_selector(selector, f"clustercolocationprofile {name_of(profile)}.{field}")
    return selectors.matches(selector, labels)


def matching_profiles(
    profiles: Sequence[Mapping[str, Any]],
    pod_labels: Mapping[str, str],
    namespace_labels: Mapping[str, str],
) -> list[Mapping[str, Any]]:
    """The profiles selecting this pod, in name order (the order they are applied in)."""
    chosen = [
        p
        for p in profiles
        if _selects(p, "namespaceSelector", namespace_labels)
        and _selects(p, "selector", pod_labels)
    ]
    return sorted(chosen, key=name_of)


def _store(pod: dict[str, Any], field: str, value: dict[str, str]) -> None:
    """Write metadata.<field> only when it changed, so an idle profile adds no empty map."""
    meta = pods.metadata(pod)
    if meta.get(field, {}) != value:
        pod["metadata"] = meta
        meta[field] = value


def _set_priority_class(
    pod: dict[str, Any], name: str, profile: str, priority_classes: Mapping[str, Mapping[str, Any]]
) -> None:
    """Set priorityClassName and copy value and preemptionPolicy, as the Priority admission
    plugin would; the apiserver rejects a spec.priority that disagrees with the class."""
    klass = priority_classes.get(name)
    if klass is None:
        raise ConfigError(f"clustercolocationprofile {profile}: PriorityClass {name} not found")
    value = klass.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"PriorityClass {name}: value must be an integer, got {value!r}")
    spec = pods.spec(pod)
    pod["spec"] = spec
    spec["priorityClassName"] = name
    spec["priority"] = value
    policy = klass.get("preemptionPolicy")
    if policy is None:
        spec.pop("preemptionPolicy", None)
    else:
        spec["preemptionPolicy"] = policy


def apply_profile(
    pod: dict[str, Any],
    profile: Mapping[str, Any],
    priority_classes: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Apply one profile to ``pod`` (mutated in place) and return the pod; upstream's order."""
    name = name_of(profile)
    spec = _spec(profile)
    pod_labels = {**pods.labels_of(pod), **_strings(profile, "labels")}
    pod_annotations = {**pods.annotations_of(pod), **_strings(profile, "annotations")}
    # Upstream copies a missing source key as ""; copying only present keys avoids
    # inventing empty labels.
    for src, dst in _strings(profile, "labelKeysMapping").items():
        if src in pod_labels:
            pod_labels[dst] = pod_labels[src]
    for src, dst in _strings(profile, "annotationKeysMapping").items():
        if src in pod_annotations:
            pod_annotations[dst] = pod_annotations[src]
    for key, suffix in _strings(profile, "labelSuffixes").items():
        if key in pod_labels:
            pod_labels[key] += suffix
    scalars = {f: spec.get(f) for f in ("schedulerName", "qosClass", "priorityClassName")}
    for field, value in scalars.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"clustercolocationprofile {name}: spec.{field} must be a string")
    if scalars["qosClass"]:
        pod_labels[keys.LABEL_QOS_CLASS] = scalars["qosClass"]
    sub_priority = spec.get("koordinatorPriority")
    if sub_priority is not None:
        if not isinstance(sub_priority, int) or isinstance(sub_priority, bool):
            raise ConfigError(f"clustercolocationprofile {name}: koordinatorPriority: not an int")
        pod_labels[keys.LABEL_PRIORITY] = str(sub_priority)
    _store(pod, "labels", pod_labels)
    _store(pod, "annotations", pod_annotations)
    if scalars["schedulerName"]:
        pod["spec"] = pods.spec(pod)
        pod["spec"]["schedulerName"] = scalars["schedulerName"]
    if scalars["priorityClassName"]:
        _set_priority_class(pod, scalars["priorityClassName"], name, priority_classes)
    patch = spec.get("patch")
    if patch is not None:
        if not isinstance(patch, dict):
            raise ConfigError(f"clustercolocationprofile {name}: spec.patch must be an object")
        merged = strategic_merge(pod, patch, f"clustercolocationprofile {name}: spec.patch")
        pod.clear()
        pod.update(merged)
    return pod


def apply_profiles(
    pod: dict[str, Any],
    *,
    profiles: Sequence[Mapping[str, Any]],
    namespace_labels: Mapping[str, str],
    priority_classes: Mapping[str, Mapping[str, Any]],
    rand_intn: RandIntn = random.randrange,
) -> ProfileOutcome:
    """Apply every matching profile to ``pod`` (mutated in place), in name order."""
    matched = matching_profiles(profiles, pods.labels_of(pod), namespace_labels)
    applied = []
    skip_resources = False
    for profile in matched:
        meta = profile.get("metadata")
        profile_annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if isinstance(profile_annotations, dict):
            skip_resources |= keys.ANNOTATION_SKIP_UPDATE_RESOURCES in profile_annotations
        if not should_apply(probability_percent(profile), rand_intn):
            continue
        try:
            apply_profile(pod, profile, priority_classes)
        except ObjectError as err:  # the pod is malformed, not the profile
            raise ObjectError(
                f"applying clustercolocationprofile {name_of(profile)}: {err}"
            ) from None
        applied.append(name_of(profile))
    return ProfileOutcome(tuple(map(name_of, matched)), tuple(applied), skip_resources)


# -- strategic merge -------------------------------------------------------------------------


def strategic_merge(target: Any, patch: Any, where: str = "patch", field: str = "") -> Any:
    """``target`` with ``patch`` merged in (a new value; neither argument is modified)."""
    if isinstance(patch, dict):
        directives = [k for k in patch if k.startswith("$")]
        if directives:
            raise ConfigError(f"{where}: strategic merge directive {directives[0]} not supported")
        result = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            elif key in result:
                result[key] = strategic_merge(result[key], value, f"{where}.{key}", key)
            else:
                result[key] = strategic_merge(None, value, f"{where}.{key}", key)
        return result
    if isinstance(patch, list) and field in MERGE_KEYS and isinstance(target, list):
        return _merge_list(target, patch, MERGE_KEYS[field], where)
    if isinstance(patch, list):
        return [strategic_merge(None, item, f"{where}[{i}]") for i, item in enumerate(patch)]
    return patch


def _merge_list(target: list[Any], patch: list[Any], key: str, where: str) -> list[Any]:
    result = copy.deepcopy(target)
    for i, item in enumerate(patch):
        if not isinstance(item, dict) or key not in item:
            raise ConfigError(f"{where}[{i}]: a merged list element needs its key {key!r}")
        for j, existing in enumerate(result):
            if isinstance(existing, dict) and existing.get(key) == item[key]:
                result[j] = strategic_merge(existing, item, f"{where}[{item[key]}]")
                break
        else:
            result.append(strategic_merge(None, item, f"{where}[{item[key]}]"))
    return result
