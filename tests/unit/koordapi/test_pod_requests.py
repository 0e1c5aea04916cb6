"""A pod's effective requests and limits by Kubernetes' resourcehelper.PodRequests/PodLimits:
app containers and sidecars summed, at least the largest init step, pod-level resources,
overhead, a request defaulted from its limit; cpu in milli-cores, the rest in whole units."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordapi import keys
from koordapi.errors import ModelError, QuantityError
from koordapi.pod import container_request, pod_limits, pod_requests

GI = 1 << 30
MI = 1 << 20


def container(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    limits: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"resources": resources, **extra}


def sidecar(cpu: str | None = None, memory: str | None = None, **kw: Any) -> dict[str, Any]:
    return container(cpu, memory, restartPolicy="Always", **kw)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [container("1", "1Gi"), container("500m")]}, (1500, GI), id="sum"
        ),
        pytest.param(
            {"containers": [container("1"), container("1000m")]}, (2000, 0), id="1-and-1000m"
        ),
        pytest.param(
            {"containers": [container("1", "1Gi")], "initContainers": [container("4", "512Mi")]},
            (4000, GI),
            id="init-container-larger-cpu-only",
        ),
        pytest.param(
            {
                "containers": [container("250m", "64Mi"), container("250m", "64Mi")],
                "initContainers": [container("3", "2Gi")],
            },
            (3000, 2 * GI),
            id="init-container-larger-than-all-app-containers",
        ),
        pytest.param(
            {
                "containers": [container("1", "1Gi")],
                "initContainers": [container("500m", "2Gi"), container("2", "256Mi")],
            },
            (2000, 2 * GI),
            id="each-init-step-alone-max-per-resource",
        ),
        pytest.param(
            {
                "containers": [container("1", "1Gi")],
                "initContainers": [sidecar("1", "1Gi"), container("1")],
            },
            (2000, 2 * GI),
            id="sidecar-adds",
        ),
        pytest.param(
            {
                "containers": [container("1")],
                "initContainers": [sidecar("1"), container("2500m")],
            },
            (3500, 0),
            id="init-step-runs-next-to-earlier-sidecars",
        ),
        pytest.param(
            {
                "containers": [container("1")],
                "initContainers": [container("2500m"), sidecar("1")],
            },
            (2500, 0),
            id="init-step-before-the-sidecar-runs-alone",
        ),
        pytest.param(
            {
                "containers": [container("100m")],
                "initContainers": [sidecar("200m"), sidecar("300m"), container("400m")],
            },
            (900, 0),
            id="two-sidecars-then-init",
        ),
        pytest.param(
            {"containers": [container("1", "1Gi")], "overhead": {"cpu": "250m", "memory": "64Mi"}},
            (1250, GI + 64 * MI),
            id="overhead",
        ),
        pytest.param(
            {"containers": [{}], "overhead": {"cpu": "120m"}}, (120, 0), id="overhead-alone"
        ),
        pytest.param(
            {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "2Gi"}}}]},
            (2000, 2 * GI),
            id="request-defaults-to-limit",
        ),
        pytest.param(
            {"containers": [container("500m", limits={"cpu": "2", "memory": "2Gi"})]},
            (500, 2 * GI),
            id="request-set-limit-ignored-memory-defaulted",
        ),
        pytest.param(
            {"containers": [container("1", "1Gi")], "resources": {"requests": {"cpu": "3"}}},
            (3000, GI),
            id="pod-level-requests-cpu-only",
        ),
        pytest.param(
            {
                "containers": [container("1", "1Gi")],
                "initContainers": [container("8", "8Gi")],
                "resources": {"requests": {"cpu": "2", "memory": "3Gi"}},
                "overhead": {"cpu": "100m"},
            },
            (2100, 3 * GI),
            id="pod-level-wins-over-init-then-overhead",
        ),
        pytest.param(
            {"containers": [container("1")], "resources": {"limits": {"cpu": "4"}}},
            (4000, 0),
            id="pod-level-request-defaults-to-pod-level-limit",
        ),
        pytest.param(
            {
                "containers": [container("1")],
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4", "memory": "1Gi"}},
            },
            (2000, GI),
            id="pod-level-request-wins-over-its-limit",
        ),
        pytest.param({"containers": [{}]}, (0, 0), id="no-resources"),
        pytest.param({}, (0, 0), id="no-containers"),
        pytest.param(
            {"containers": [container("0.0001", "1.5")]}, (1, 2), id="rounded-up-per-container"
        ),
        pytest.param({"containers": [container("1e3m", "1k")]}, (1000, 1000), id="exponent"),
    ],
)
def test_pod_requests(spec: dict[str, Any], expected: tuple[int, int]) -> None:
    assert pod_requests(spec) == expected
    assert pod_requests(spec) == expected  # the second time from the memo


def test_requests_of_other_resources_count_whole_units() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: "2Gi"}}},
            {"resources": {"limits": {keys.BATCH_CPU: "500"}}},
        ],
        "initContainers": [{"resources": {"requests": {keys.BATCH_CPU: "4000"}}}],
    }
    assert pod_requests(spec, (keys.BATCH_CPU, keys.BATCH_MEMORY)) == (4000, 2 * GI)
    assert pod_requests(spec) == (0, 0)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [container("1", limits={"cpu": "2"}), container("1")]},
            (2000, 0),
            id="limits-only-no-defaulting-from-requests",
        ),
        pytest.param(
            {
                "containers": [container(limits={"cpu": "1", "memory": "1Gi"})],
                "initContainers": [
                    sidecar(limits={"cpu": "500m"}),
                    container(limits={"cpu": "3", "memory": "512Mi"}),
                ],
            },
            (3500, GI),
            id="sidecars-and-init-steps",
        ),
        pytest.param(
            {
                "containers": [container(limits={"cpu": "1"})],
                "overhead": {"cpu": "100m", "memory": "64Mi"},
            },
            (1100, 0),
            id="overhead-only-on-a-set-limit",
        ),
        pytest.param(
            {
                "containers": [container(limits={"cpu": "1", "memory": "1Gi"})],
                "resources": {"limits": {"memory": "4Gi"}},
            },
            (1000, 4 * GI),
            id="pod-level-limits",
        ),
    ],
)
def test_pod_limits(spec: dict[str, Any], expected: tuple[int, int]) -> None:
    assert pod_limits(spec) == expected


def test_container_request_is_the_request_else_the_limit() -> None:
    assert container_request(container("250m"), "cpu") == 250
    assert container_request(container(limits={"memory": "1Gi"}), "memory") == GI
    assert container_request(container("1", limits={"cpu": "2"}), "cpu") == 1000
    assert container_request({}, "cpu") == 0
    assert container_request(container(limits={keys.BATCH_CPU: "700"}), keys.BATCH_CPU) == 700


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"containers": [container("-1")]}, id="negative-container"),
        pytest.param(
            {"containers": [container("1")], "overhead": {"cpu": "-2"}}, id="negative-total"
        ),
        pytest.param({"initContainers": [container(memory="-1Gi")]}, id="negative-init"),
    ],
)
def test_negative_requests_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(ModelError, match="negative"):
        pod_requests(spec)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        pytest.param({"containers": [container("lots")]}, QuantityError, id="malformed"),
        pytest.param({"containers": [container(memory="1Qi")]}, QuantityError, id="suffix"),
        pytest.param({"containers": ["app"]}, AttributeError, id="container-not-an-object"),
        pytest.param({"containers": [{"resources": ["cpu"]}]}, AttributeError, id="resources-list"),
    ],
)
def test_unreadable_pods_raise(spec: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        pod_requests(spec)


@given(
    st.lists(
        st.tuples(st.integers(0, 64_000), st.integers(0, 1 << 40), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(0, 64_000), max_size=3),
)
def test_requests_follow_the_kubernetes_formula(
    init: list[tuple[int, int, bool]], app: list[int]
) -> None:
    """max(app + all sidecars, each init step + the sidecars before it), per resource."""
    spec = {
        "containers": [container(f"{c}m") for c in app],
        "initContainers": [
            (sidecar if always else container)(f"{c}m", str(m)) for c, m, always in init
        ],
    }
    sidecars = [(c, m) for c, m, always in init if always]
    steps_cpu, steps_memory, before_cpu, before_memory = [0], [0], 0, 0
    for c, m, always in init:
        if always:
            before_cpu, before_memory = before_cpu + c, before_memory + m
            steps_cpu.append(before_cpu)
            steps_memory.append(before_memory)
        else:
            steps_cpu.append(before_cpu + c)
            steps_memory.append(before_memory + m)
    cpu = max(sum(app) + sum(c for c, _ in sidecars), *steps_cpu)
    memory = max(sum(m for _, m in sidecars), *steps_memory)
    assert pod_requests(spec) == (cpu, memory)
