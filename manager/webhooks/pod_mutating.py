"""The pod mutating webhook (/mutate-pod), as a pure function over one AdmissionRequest.

CREATE only (upstream's UPDATE path does nothing either). Four steps on a copy of the pod:
ClusterColocationProfiles (profiles.py); then, only when a profile matched, cpu/memory renamed
to batch or mid resources by the pod's priority class; then the extended-resource-spec
annotation that lets node-side hooks size cgroups without the original cpu/memory; last, a
gang member's scheduling gate (koordapi.gang.gate, ours: the gang controller removes it when
the whole gang fits, where Koordinator's scheduler holds members at Permit). The answer
is the JSON Patch from the original to the copy. No I/O here; the caller passes the state.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from koordapi import keys, qos
from koordapi.gang.gate import add_gate
from koordapi.quantity import milli_value
from koordapi.reservation.model import is_reserve_pod
from manager.errors import ConfigError
from manager.webhooks import pods
from manager.webhooks.admission import (
    AdmissionRequest,
    AdmissionResponse,
    ObjectError,
    allowed,
    denied,
    json_patch,
    patched,
)
from manager.webhooks.profiles import ProfileOutcome, RandIntn, apply_profiles

# Priority class → {cpu/memory: extended resource}; prod, free and none keep cpu/memory.
RESOURCE_NAMES = {
    qos.BATCH.name: {"cpu": keys.BATCH_CPU, "memory": keys.BATCH_MEMORY},
    qos.MID.name: {"cpu": keys.MID_CPU, "memory": keys.MID_MEMORY},
}
SPEC_RESOURCES = (keys.BATCH_CPU, keys.BATCH_MEMORY)


def mutate_pod(
    request: AdmissionRequest,
    *,
    profiles: Sequence[Mapping[str, Any]],
    priority_classes: Mapping[str, Mapping[str, Any]],
    namespace_labels: Mapping[str, str],
    rand_intn: RandIntn = random.randrange,
    schedulers: Collection[str] = (),
) -> AdmissionResponse:
    """Allowed with a patch, allowed unchanged, or denied for a malformed pod or profile.

    ``schedulers``: the scheduler names known to run in the cluster; a profile that gives the
    pod another one gets the pod admitted with a warning (it would stay Pending without a word).
    Empty: not checked.
    """
    if request.operation != "CREATE" or request.sub_resource:
        return allowed()  # pods/binding and pods/eviction are CREATEs of other kinds
    if request.object is None:
        return denied("request.object: a pod is required on CREATE", 400)
    original = request.object
    pod = copy.deepcopy(dict(original))
    try:
        pods.check_resources(pod)
        outcome = apply_profiles(
            pod,
            profiles=profiles,
            namespace_labels=namespace_labels,
            priority_classes=priority_classes,
            rand_intn=rand_intn,
        )
        if outcome.matched and not outcome.skip_resources:
            convert_resources(pod)
        set_extended_resource_spec(pod)
        if not is_reserve_pod(pod):  # a reserve pod is placed alone, for its Reservation
            add_gate(pod)  # a gang member waits for its gang (manager.controllers.gang)
    except ObjectError as err:
        return denied(f"malformed pod: {err}", 400)
    except ConfigError as err:
        # upstream answers 500 too: the cluster's configuration, not the pod, is at fault
        return denied(str(err), 500)
    response = patched(json_patch(original, pod), *_scheduler_warning(original, pod, schedulers))
    return dataclasses.replace(response, decided_by=decided_by(outcome))


def decided_by(outcome: ProfileOutcome) -> str:
    """The profiles behind a patch, for the audit line: a matched profile skipped by its
    probability still decides the resource conversion, so it is named too."""
    if not outcome.matched:
        return "no ClusterColocationProfile matched (extended-resource-spec annotation only)"
    names = [
        name if name in outcome.applied else f"{name} (matched, skipped by probability)"
        for name in outcome.matched
    ]
    return "ClusterColocationProfile " + ", ".join(names)


def _scheduler_warning(
    original: Mapping[str, Any], pod: Mapping[str, Any], schedulers: Collection[str]
) -> list[str]:
    name = (pod.get("spec") or {}).get("schedulerName")
    if not schedulers or not name or name in schedulers:
        return []
    if name == (original.get("spec") or {}).get("schedulerName"):
        return []  # the pod's own choice, not a profile's
    return [
        f"a ClusterColocationProfile set schedulerName {name!r}, which no scheduler known to "
        f"this cluster's koordinator-py runs ({', '.join(sorted(schedulers))}): the pod stays "
        "Pending until one does (chart: scheduler.kubeScheduler, manager.knownSchedulers)"
    ]


def _rename(resource_list: dict[str, Any], names: Mapping[str, str], where: str) -> None:
    for base, extended in names.items():
        if base not in resource_list:
            continue
        value = resource_list.pop(base)
        if base == "cpu":  # batch-cpu and mid-cpu count milli-cores, as an integer
            value = str(milli_value(pods.quantity(value, f"{where}.cpu")))
        resource_list[extended] = value


def convert_resources(pod: dict[str, Any]) -> None:
    """Rename cpu/memory to batch-* (koord-batch) or mid-* (koord-mid) in place, in the
    requests and limits of every container and in spec.overhead; a request missing next to
    a limit is set equal to it (upstream's restrictResourceRequestAndLimit)."""
    names = RESOURCE_NAMES.get(pods.priority_class_with_default(pod).name)
    if names is None:
        return
    for where, container in pods.containers(pod):
        resources = container.get("resources")
        if not isinstance(resources, dict):
            continue
        for section in pods.SECTIONS:
            if isinstance(resources.get(section), dict):
                _rename(resources[section], names, f"{where}.resources.{section}")
        limits = resources.get("limits")
        if not isinstance(limits, dict):
            continue
        for extended in names.values():
            if extended in limits and extended not in (resources.get("requests") or {}):
                resources["requests"] = resources.get("requests") or {}
                resources["requests"][extended] = limits[extended]
    overhead = pods.spec(pod).get("overhead")
    if isinstance(overhead, dict):
        _rename(overhead, names, "spec.overhead")


def extended_resource_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    """{containers: {name: {limits, requests}}} of the batch resources of the app containers,
    empty parts omitted (Go's omitempty), as upstream's ExtendedResourceSpec marshals."""
    spec: dict[str, Any] = {}
    for _, container in pods.containers(pod, ("containers",)):
        resources = container.get("resources")
        if not isinstance(resources, dict):
            continue
        entry = {}
        for section in ("limits", "requests"):
            values = resources.get(section)
            picked = {
                name: str(values[name])
                for name in SPEC_RESOURCES
                if isinstance(values, dict) and name in values
            }
            if picked:
                entry[section] = picked
        if entry:
            spec[str(container.get("name", ""))] = entry
    return {"containers": spec} if spec else {}


def set_extended_resource_spec(pod: dict[str, Any]) -> None:
    """Write the annotation when it differs from the pod's batch resources. An unreadable
    annotation is overwritten: this webhook owns it (upstream fails the pod instead)."""
    desired = extended_resource_spec(pod)
    current_annotations = pods.annotations_of(pod)
    current = current_annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if current is None and not desired:
        return
    try:
        if current is not None and json.loads(current) == desired:
            return
    except ValueError:
        pass
    text = json.dumps(desired, separators=(",", ":"), sort_keys=True)
    pod["metadata"] = pods.metadata(pod)
    pod["metadata"]["annotations"] = {
        **current_annotations,
        keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: text,
    }
