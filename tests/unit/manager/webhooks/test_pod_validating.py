from __future__ import annotations

import copy
from typing import Any

import pytest

from koordapi import keys
from manager.webhooks import pod_validating
from manager.webhooks.admission import AdmissionResponse
from tests.unit.manager.webhooks import builders
from tests.unit.manager.webhooks.builders import container, pod, qos_pod

PROD = {keys.LABEL_PRIORITY_CLASS: "koord-prod"}
BATCH = {keys.LABEL_PRIORITY_CLASS: "koord-batch"}


def _validate(
    obj: dict[str, Any] | None, operation: str = "CREATE", **kwargs: Any
) -> AdmissionResponse:
    return pod_validating.validate_pod(builders.request(obj, operation, **kwargs))


def _denied(response: AdmissionResponse, *fragments: str) -> None:
    assert not response.allowed
    assert response.code == 400
    for fragment in fragments:
        assert fragment in response.message


# -- webhook cases -----------------------------------------------------------------------------


def test_batch_resources_without_be_label_are_rejected() -> None:
    """A pod with batch-cpu but without koordinator.sh/qosClass=BE → rejected."""
    response = _validate(pod(container(requests={keys.BATCH_CPU: "1000"}), labels=BATCH))
    _denied(
        response, f"metadata.labels[{keys.LABEL_QOS_CLASS}]", "must be BE", "spec.containers[main]"
    )


def test_lsr_pod_with_fractional_cpu_is_rejected() -> None:
    """An LSR pod with cpu 1500m → rejected."""
    response = _validate(qos_pod("LSR", container(requests={"cpu": "1500m"}), labels=PROD))
    _denied(response, "integer number of CPUs", "1500m", "spec.containers[main]=1500m")


def test_changing_qos_class_on_update_is_rejected() -> None:
    """Changing qosClass on update → rejected."""
    old = qos_pod("LS", container(requests={"cpu": "1"}), labels=PROD)
    new = qos_pod("BE", container(requests={"cpu": "1"}), labels=PROD)
    response = _validate(new, "UPDATE", old=old)
    _denied(
        response, f"metadata.labels[{keys.LABEL_QOS_CLASS}]: field is immutable", "was LS, now BE"
    )


# -- the rest of the rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "allowed"),
    [
        pytest.param(
            qos_pod("BE", container(requests={keys.BATCH_CPU: "1000"}), labels=BATCH),
            True,
            id="be-batch",
        ),
        pytest.param(
            qos_pod("BE", container(limits={keys.BATCH_MEMORY: "1Gi"}), labels=BATCH),
            True,
            id="be-batch-memory-limit",
        ),
        pytest.param(
            pod(container(requests={keys.BATCH_MEMORY: "1Gi"})), False, id="no-qos-batch-memory"
        ),
        pytest.param(
            qos_pod("LS", container(requests={keys.BATCH_CPU: "1"})), False, id="ls-batch-cpu"
        ),
        pytest.param(
            pod(
                container(),
                initContainers=[container("init", requests={keys.BATCH_CPU: "5"})],
                labels=BATCH,
            ),
            False,
            id="init-container-batch",
        ),
        pytest.param(pod(container(requests={keys.BATCH_CPU: "0"})), True, id="zero-batch-is-none"),
    ],
)
def test_batch_resources_need_be(obj: dict[str, Any], allowed: bool) -> None:
    assert _validate(obj).allowed is allowed


@pytest.mark.parametrize(
    ("qos", "priority", "allowed"),
    [
        pytest.param("BE", {}, False, id="be-none"),
        pytest.param("BE", PROD, False, id="be-prod-label"),
        pytest.param("BE", {"_priority": 9100}, False, id="be-prod-range"),
        pytest.param("BE", BATCH, True, id="be-batch"),
        pytest.param("BE", {keys.LABEL_PRIORITY_CLASS: "koord-mid"}, True, id="be-mid"),
        pytest.param("BE", {keys.LABEL_PRIORITY_CLASS: "koord-free"}, True, id="be-free"),
        pytest.param("BE", {"_priority": 5000}, True, id="be-batch-range"),
        pytest.param(
            "BE", {keys.LABEL_PRIORITY_CLASS: "gold"}, False, id="be-unknown-label-is-none"
        ),
        pytest.param("LSR", PROD, True, id="lsr-prod"),
        pytest.param("LSR", {"_priority": 9500}, True, id="lsr-prod-range"),
        pytest.param("LSR", {}, False, id="lsr-none"),
        pytest.param("LSR", {keys.LABEL_PRIORITY_CLASS: "koord-mid"}, False, id="lsr-mid"),
        pytest.param("LSR", BATCH, False, id="lsr-batch"),
        pytest.param("LSR", {"_priority": 3000}, False, id="lsr-free-range"),
        # the label wins over spec.priority (raw priority class)
        pytest.param("LSR", {**BATCH, "_priority": 9500}, False, id="lsr-label-beats-priority"),
        pytest.param("LS", {}, True, id="ls-anything"),
        pytest.param("LSE", {}, True, id="lse-none"),
    ],
)
def test_forbidden_qos_and_priority_combinations(
    qos: str, priority: dict[str, Any], allowed: bool
) -> None:
    labels = {k: v for k, v in priority.items() if not k.startswith("_")}
    spec: dict[str, Any] = {"priority": priority["_priority"]} if "_priority" in priority else {}
    resources = {keys.BATCH_CPU: "1000"} if qos == "BE" else {"cpu": "2"}
    response = _validate(qos_pod(qos, container(requests=resources), labels=labels, **spec))
    assert response.allowed is allowed, response.message
    if not allowed:
        assert f"{keys.LABEL_QOS_CLASS}={qos} and priority class" in response.message


@pytest.mark.parametrize(
    ("qos", "containers", "fragment"),
    [
        pytest.param("LSR", [container(requests={"cpu": "2"})], None, id="lsr-2-cpus"),
        pytest.param(
            "LSE", [container(limits={"cpu": "4"})], None, id="lse-limit-only-defaults-request"
        ),
        pytest.param(
            "LSR",
            [container("a", requests={"cpu": "500m"}), container("b", requests={"cpu": "500m"})],
            None,
            id="sum-integer",
        ),
        pytest.param(
            "LSR", [container(requests={"memory": "1Gi"})], "must request CPUs", id="lsr-no-cpu"
        ),
        pytest.param(
            "LSE", [container(requests={"cpu": "0"})], "must request CPUs", id="lse-zero-cpu"
        ),
        pytest.param("LSE", [container(requests={"cpu": "2.5"})], "2500m", id="lse-fraction"),
        pytest.param(
            "LSR",
            [container("a", requests={"cpu": "1"}), container("b", requests={"cpu": "200m"})],
            "spec.containers[a]=1000m, spec.containers[b]=200m",
            id="names-each-container",
        ),
    ],
)
def test_pinned_pods_need_an_integer_number_of_cpus(
    qos: str, containers: list[dict[str, Any]], fragment: str | None
) -> None:
    response = _validate(qos_pod(qos, *containers, labels=PROD))
    if fragment is None:
        assert response.allowed, response.message
    else:
        _denied(response, fragment)


def test_pod_request_follows_kubernetes_init_container_rules() -> None:
    obj = qos_pod(
        "LSR",
        container(requests={"cpu": "1"}),
        labels=PROD,
        initContainers=[
            container("sidecar", requests={"cpu": "1"}, restartPolicy="Always"),
            container("init", requests={"cpu": "2500m"}),
        ],
    )
    # max(app 1 + sidecar 1, sidecar 1 + init 2.5) = 3.5 CPUs: not an integer
    _denied(_validate(obj), "3500m")


def test_overhead_counts_in_the_pod_request() -> None:
    obj = qos_pod("LSR", container(requests={"cpu": "2"}), labels=PROD, overhead={"cpu": "250m"})
    _denied(_validate(obj), "2250m")


def test_pod_level_requests_replace_the_containers_total() -> None:
    fractional_containers = qos_pod(
        "LSR",
        container("a", requests={"cpu": "1500m"}),
        labels=PROD,
        resources={"requests": {"cpu": "2"}},
    )
    assert _validate(fractional_containers).allowed
    fractional_pod = qos_pod(
        "LSE", container(requests={"cpu": "2"}), labels=PROD, resources={"requests": {"cpu": "1.5"}}
    )
    _denied(_validate(fractional_pod), "requests total 1500m")


def test_malformed_pod_level_resources_are_denied_with_the_field() -> None:
    obj = qos_pod("LS", container(), labels=PROD, resources={"limits": {"memory": "4GB"}})
    _denied(_validate(obj), "spec.resources.limits.memory")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        pytest.param(
            lambda p: p["metadata"]["labels"].update(PROD),
            "priority class is immutable",
            id="priority-label",
        ),
        pytest.param(
            lambda p: p["spec"].update(priority=9000),
            "was koord-batch, now koord-prod",
            id="priority-range",
        ),
        pytest.param(
            lambda p: p["metadata"]["labels"].update({keys.LABEL_PRIORITY: "5"}),
            f"metadata.labels[{keys.LABEL_PRIORITY}]: field is immutable",
            id="sub-priority",
        ),
        pytest.param(
            lambda p: p["metadata"]["labels"].pop(keys.LABEL_QOS_CLASS),
            "was BE, now <none>",
            id="qos-removed",
        ),
    ],
)
def test_priority_and_qos_are_immutable_on_update(change: Any, fragment: str) -> None:
    old = qos_pod(
        "BE",
        container(requests={keys.BATCH_CPU: "1000"}),
        labels={keys.LABEL_PRIORITY: "1"},
        priority=5000,
    )
    new = copy.deepcopy(old)
    change(new)
    _denied(_validate(new, "UPDATE", old=old), fragment)


def test_update_keeping_qos_and_priority_is_allowed() -> None:
    old = qos_pod("BE", container(requests={keys.BATCH_CPU: "1000"}), labels=BATCH)
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["other"] = "changed"
    assert _validate(new, "UPDATE", old=old).allowed


def test_several_violations_are_reported_together() -> None:
    old = qos_pod("LS", container(requests={"cpu": "1"}), labels=PROD)
    new = qos_pod("LSR", container(requests={"cpu": "1500m"}), labels=BATCH)
    response = _validate(new, "UPDATE", old=old)
    _denied(
        response,
        "field is immutable",
        "priority class is immutable",
        "cannot be used together",
        "1500m",
    )


@pytest.mark.parametrize(
    ("operation", "kwargs"),
    [
        pytest.param("DELETE", {}, id="delete"),
        pytest.param("CONNECT", {}, id="connect"),
        pytest.param("UPDATE", {"sub_resource": "status"}, id="status-subresource"),
    ],
)
def test_other_operations_and_subresources_are_allowed(
    operation: str, kwargs: dict[str, Any]
) -> None:
    bad = pod(container(requests={keys.BATCH_CPU: "1000"}))
    assert _validate(bad, operation, old=bad, **kwargs).allowed


def test_update_without_old_object_is_denied() -> None:
    _denied(_validate(pod(), "UPDATE"), "oldObject")


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        pytest.param(
            pod(container(requests={"cpu": "1.5.5"})),
            "spec.containers[main].resources.requests.cpu",
            id="cpu",
        ),
        pytest.param(pod(container(limits={"memory": "1 Gi"})), "limits.memory", id="memory-space"),
        pytest.param(
            {"metadata": {"labels": "x"}, "spec": {}}, "metadata.labels", id="labels-not-map"
        ),
        pytest.param(
            {"metadata": {}, "spec": {"initContainers": {}}},
            "spec.initContainers",
            id="init-not-list",
        ),
    ],
)
def test_malformed_pods_are_denied_not_crashed(obj: dict[str, Any], fragment: str) -> None:
    _denied(_validate(obj), "malformed pod", fragment)
