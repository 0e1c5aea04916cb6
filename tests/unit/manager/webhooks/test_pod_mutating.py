from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from koordapi import keys
from koordapi.annotation import parse_extended_resource_spec
from manager.webhooks import pod_mutating
from manager.webhooks.admission import AdmissionResponse
from tests.unit.manager.webhooks import builders
from tests.unit.manager.webhooks.builders import PRIORITY_CLASSES, container, pod, profile

BATCH_PROFILE = profile(
    "colocation-batch",
    selector={"matchLabels": {"colocation": "batch"}},
    qosClass="BE",
    priorityClassName="koord-batch",
)
MID_PROFILE = profile(
    "colocation-mid",
    selector={"matchLabels": {"colocation": "mid"}},
    qosClass="LS",
    priorityClassName="koord-mid",
)
BATCH_LABELS = {"colocation": "batch"}
CPU2_MEM4 = {"cpu": "2", "memory": "4Gi"}


def _mutate(
    obj: dict[str, Any] | None, *items: dict[str, Any], operation: str = "CREATE"
) -> AdmissionResponse:
    return pod_mutating.mutate_pod(
        builders.request(obj, operation),
        profiles=list(items) or [BATCH_PROFILE, MID_PROFILE],
        priority_classes=PRIORITY_CLASSES,
        namespace_labels={},
    )


def test_batch_profile_turns_cpu_memory_into_batch_resources() -> None:
    """A profile {qosClass: BE, priorityClassName: koord-batch}."""
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels=BATCH_LABELS)
    response = _mutate(original)
    assert response.allowed
    result = builders.applied(original, response)
    assert result["metadata"]["labels"][keys.LABEL_QOS_CLASS] == "BE"
    assert result["spec"]["priorityClassName"] == "koord-batch"
    assert result["spec"]["priority"] == 5000
    assert result["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    expected = {keys.BATCH_CPU: "2000", keys.BATCH_MEMORY: "4Gi"}
    assert builders.resources(result) == {"requests": expected, "limits": expected}
    spec = parse_extended_resource_spec(
        result["metadata"]["annotations"][keys.ANNOTATION_EXTENDED_RESOURCE_SPEC]
    )
    assert set(spec) == {"main"}
    assert spec["main"].requests == {
        keys.BATCH_CPU: Decimal(2000),
        keys.BATCH_MEMORY: Decimal(4 * 2**30),
    }
    assert spec["main"].limits == spec["main"].requests


def test_pod_matching_no_profile_is_left_unchanged() -> None:
    """The same pod without a matching profile."""
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels={"colocation": "none"})
    response = _mutate(original)
    assert response.allowed
    assert response.patch is None


def test_batch_priority_without_matching_profile_is_not_converted() -> None:
    original = pod(container(requests=CPU2_MEM4), labels={keys.LABEL_PRIORITY_CLASS: "koord-batch"})
    assert _mutate(original).patch is None


def test_mid_profile_converts_to_mid_resources_without_spec_annotation() -> None:
    original = pod(
        container(requests={"cpu": "500m", "memory": "1Gi"}), labels={"colocation": "mid"}
    )
    result = builders.applied(original, _mutate(original))
    assert builders.resources(result) == {"requests": {keys.MID_CPU: "500", keys.MID_MEMORY: "1Gi"}}
    assert keys.ANNOTATION_EXTENDED_RESOURCE_SPEC not in result["metadata"].get("annotations", {})


@pytest.mark.parametrize(
    ("cpu", "milli"),
    [
        ("2", "2000"),
        ("1500m", "1500"),
        ("0.25", "250"),
        (3, "3000"),
        ("1.0001", "1001"),
        ("100u", "1"),
    ],
)
def test_cpu_becomes_integer_milli_cores_rounded_up(cpu: Any, milli: str) -> None:
    original = pod(container(requests={"cpu": cpu}), labels=BATCH_LABELS)
    result = builders.applied(original, _mutate(original))
    assert builders.resources(result)["requests"] == {keys.BATCH_CPU: milli}


def test_only_limit_set_makes_the_request_equal_to_it() -> None:
    original = pod(container(limits={"cpu": "1", "memory": "2Gi"}), labels=BATCH_LABELS)
    result = builders.applied(original, _mutate(original))
    expected = {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: "2Gi"}
    assert builders.resources(result) == {"limits": expected, "requests": expected}


def test_init_containers_and_overhead_are_converted_too() -> None:
    original = pod(
        container(requests={"cpu": "1", "memory": "1Gi"}),
        labels=BATCH_LABELS,
        initContainers=[container("init", requests={"cpu": "250m"}, limits={"memory": "64Mi"})],
        overhead={"cpu": "100m", "memory": "32Mi"},
    )
    result = builders.applied(original, _mutate(original))
    assert builders.resources(result, field="initContainers") == {
        "requests": {keys.BATCH_CPU: "250", keys.BATCH_MEMORY: "64Mi"},
        "limits": {keys.BATCH_MEMORY: "64Mi"},
    }
    assert result["spec"]["overhead"] == {keys.BATCH_CPU: "100", keys.BATCH_MEMORY: "32Mi"}
    # the spec annotation covers app containers only (as upstream)
    spec = json.loads(result["metadata"]["annotations"][keys.ANNOTATION_EXTENDED_RESOURCE_SPEC])
    assert list(spec["containers"]) == ["main"]


@pytest.mark.parametrize(
    ("requests", "converted"),
    [
        pytest.param({"cpu": "0", "memory": "0"}, True, id="zero-requests-besteffort-batch"),
        pytest.param({"cpu": "100m"}, False, id="burstable-prod"),
    ],
)
def test_a_pod_without_classes_is_charged_by_its_kubernetes_qos(
    requests: dict[str, str], converted: bool
) -> None:
    plain = profile("plain", selector={"matchLabels": {"colocation": "plain"}})
    original = pod(container(requests=requests), labels={"colocation": "plain"})
    result = builders.applied(original, _mutate(original, plain))
    expected = {keys.BATCH_CPU, keys.BATCH_MEMORY} if converted else set(requests)
    assert set(builders.resources(result)["requests"]) == expected


def test_pod_level_resource_quantity_is_checked() -> None:
    original = pod(container(), labels=BATCH_LABELS, resources={"requests": {"cpu": "lots"}})
    response = _mutate(original)
    assert not response.allowed
    assert "spec.resources.requests.cpu" in response.message


def test_other_resources_are_kept() -> None:
    original = pod(
        container(
            requests={"cpu": "1", "ephemeral-storage": "1Gi"}, limits={"nvidia.com/gpu": "1"}
        ),
        labels=BATCH_LABELS,
    )
    result = builders.applied(original, _mutate(original))
    assert builders.resources(result) == {
        "requests": {"ephemeral-storage": "1Gi", keys.BATCH_CPU: "1000"},
        "limits": {"nvidia.com/gpu": "1"},
    }


def test_skip_update_resources_profile_keeps_cpu_memory() -> None:
    skipping = profile(
        "keep-resources",
        annotations_={keys.ANNOTATION_SKIP_UPDATE_RESOURCES: "true"},
        selector={"matchLabels": BATCH_LABELS},
        qosClass="BE",
        priorityClassName="koord-batch",
    )
    original = pod(container(requests=CPU2_MEM4), labels=BATCH_LABELS)
    result = builders.applied(original, _mutate(original, skipping))
    assert builders.resources(result) == {"requests": CPU2_MEM4}
    assert result["metadata"]["labels"][keys.LABEL_QOS_CLASS] == "BE"


def test_profile_skipped_by_probability_still_triggers_conversion() -> None:
    # upstream converts when a profile matched, even if probability skipped applying it
    skipped = profile("zero", selector={"matchLabels": BATCH_LABELS}, probability=0, qosClass="LS")
    original = pod(
        container(requests=CPU2_MEM4), labels={**BATCH_LABELS, keys.LABEL_QOS_CLASS: "BE"}
    )
    result = builders.applied(original, _mutate(original, skipped))
    assert builders.resources(result)["requests"] == {
        keys.BATCH_CPU: "2000",
        keys.BATCH_MEMORY: "4Gi",
    }


def test_existing_batch_resources_get_the_spec_annotation_without_profile() -> None:
    original = pod(container(requests={keys.BATCH_CPU: "1000"}, limits={keys.BATCH_CPU: "2000"}))
    result = builders.applied(original, _mutate(original))
    spec = parse_extended_resource_spec(
        result["metadata"]["annotations"][keys.ANNOTATION_EXTENDED_RESOURCE_SPEC]
    )
    assert spec["main"].requests == {keys.BATCH_CPU: Decimal(1000)}
    assert spec["main"].limits == {keys.BATCH_CPU: Decimal(2000)}


def test_stale_or_unreadable_spec_annotation_is_rewritten() -> None:
    stale = pod(
        container(requests={keys.BATCH_CPU: "1000"}),
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"},
    )
    result = builders.applied(stale, _mutate(stale))
    text = result["metadata"]["annotations"][keys.ANNOTATION_EXTENDED_RESOURCE_SPEC]
    assert json.loads(text) == {"containers": {"main": {"requests": {keys.BATCH_CPU: "1000"}}}}


def test_mutation_is_idempotent_for_reinvocation() -> None:
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels=BATCH_LABELS)
    once = builders.applied(original, _mutate(original))
    assert _mutate(once).patch is None


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_only_create_is_mutated(operation: str) -> None:
    original = pod(container(requests=CPU2_MEM4), labels=BATCH_LABELS)
    response = _mutate(original, operation=operation)
    assert response.allowed
    assert response.patch is None


def test_subresource_create_is_not_mutated() -> None:
    original = pod(container(requests=CPU2_MEM4), labels=BATCH_LABELS)
    req = builders.request(original, sub_resource="ephemeralcontainers")
    response = pod_mutating.mutate_pod(
        req, profiles=[BATCH_PROFILE], priority_classes=PRIORITY_CLASSES, namespace_labels={}
    )
    assert (response.allowed, response.patch) == (True, None)


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        pytest.param(
            {"requests": {"cpu": "two"}}, "spec.containers[main].resources.requests.cpu", id="word"
        ),
        pytest.param(
            {"limits": {"memory": "4GB"}},
            "spec.containers[main].resources.limits.memory",
            id="bad-suffix",
        ),
        pytest.param({"requests": {"cpu": "-1"}}, "negative", id="negative"),
        pytest.param({"requests": {"cpu": True}}, "not a quantity", id="bool"),
        pytest.param({"requests": {"cpu": None}}, "not a quantity", id="null"),
        pytest.param({"requests": "2"}, "must be an object", id="requests-not-map"),
        pytest.param("lots", "resources must be an object", id="resources-not-map"),
    ],
)
def test_malformed_quantities_are_denied_with_the_field(resources: Any, field: str) -> None:
    original = pod({"name": "main", "resources": resources}, labels=BATCH_LABELS)
    response = _mutate(original)
    assert not response.allowed
    assert response.code == 400
    assert field in response.message


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"containers": "main"}, id="containers-not-list"),
        pytest.param({"containers": ["main"]}, id="container-not-object"),
    ],
)
def test_malformed_pod_shapes_are_denied(spec: dict[str, Any]) -> None:
    original = {"metadata": {"name": "x", "labels": BATCH_LABELS}, "spec": spec}
    response = _mutate(original)
    assert (response.allowed, response.code) == (False, 400)
    assert "spec.containers" in response.message


def test_overhead_quantity_is_checked() -> None:
    original = pod(container(), overhead={"cpu": "lots"})
    response = _mutate(original)
    assert not response.allowed
    assert "spec.overhead.cpu" in response.message


def test_missing_priority_class_denies_with_500_naming_the_profile() -> None:
    broken = profile("needs-class", priorityClassName="koord-gone")
    response = _mutate(pod(), broken)
    assert (response.allowed, response.code) == (False, 500)
    assert "needs-class" in response.message


def test_create_without_object_is_denied() -> None:
    response = _mutate(None)
    assert (response.allowed, response.code) == (False, 400)


KOORD_SCHEDULER_PROFILE = profile(
    "koordinators-example",
    selector={"matchLabels": {"colocation": "batch"}},
    qosClass="BE",
    priorityClassName="koord-batch",
    schedulerName="koord-scheduler",
)


@pytest.mark.parametrize(
    ("schedulers", "own", "warned"),
    [
        pytest.param(("default-scheduler",), None, True, id="not-run-here"),
        pytest.param(("default-scheduler", "koord-scheduler"), None, False, id="run-here"),
        pytest.param((), None, False, id="not-checked"),
        pytest.param(("default-scheduler",), "koord-scheduler", False, id="the-pods-own-choice"),
    ],
)
def test_a_profiles_scheduler_that_does_not_run_here_is_a_warning(
    schedulers: tuple[str, ...], own: str | None, warned: bool
) -> None:
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels=BATCH_LABELS)
    if own is not None:
        original["spec"]["schedulerName"] = own
    response = pod_mutating.mutate_pod(
        builders.request(original, "CREATE"),
        profiles=[KOORD_SCHEDULER_PROFILE],
        priority_classes=PRIORITY_CLASSES,
        namespace_labels={},
        schedulers=schedulers,
    )
    assert response.allowed
    assert builders.applied(original, response)["spec"]["schedulerName"] == "koord-scheduler"
    assert bool(response.warnings) is warned
    if warned:
        (warning,) = response.warnings
        assert "'koord-scheduler'" in warning and "(default-scheduler)" in warning


@pytest.mark.parametrize(
    ("meta", "gated"),
    [
        ({"annotations": {"gang.scheduling.koordinator.sh/name": "train"}}, True),
        ({"labels": {"pod-group.scheduling.sigs.k8s.io": "train"}}, True),
        ({"labels": {"pod-group.scheduling.sigs.k8s.io/name": "train"}}, True),
        ({"labels": {"colocation": "none"}}, False),
    ],
)
def test_a_gang_member_gets_the_gangs_scheduling_gate(meta: dict[str, Any], gated: bool) -> None:
    """Ours: kube-scheduler does not try a member until koord-manager's gang controller
    removes the gate (Koordinator holds it at Permit instead); other gates are kept."""
    original = pod(container(requests=CPU2_MEM4), **meta)
    original["spec"]["schedulingGates"] = [{"name": "example.com/quota-check"}]
    result = builders.applied(original, _mutate(original))
    names = [gate["name"] for gate in result["spec"]["schedulingGates"]]
    want = ["example.com/quota-check", *(["scheduling.koordinator.sh/gang"] if gated else [])]
    assert names == want


def test_a_bound_gang_member_gets_no_gate() -> None:
    original = pod(container(), annotations={"gang.scheduling.koordinator.sh/name": "train"})
    original["spec"]["nodeName"] = "node-1"
    assert "schedulingGates" not in builders.applied(original, _mutate(original))["spec"]
