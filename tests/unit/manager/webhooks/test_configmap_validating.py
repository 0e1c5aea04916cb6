from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from typing import Any

import pytest

from manager.webhooks import configmap_validating
from manager.webhooks.admission import AdmissionResponse
from tests.unit.manager.webhooks import builders

NAMESPACE = "koordinator-system"
NAME = "slo-controller-config"


def configmap(data: Any, name: str = NAME, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _validate(
    obj: dict[str, Any] | None, operation: str = "CREATE", **kwargs: Any
) -> AdmissionResponse:
    namespace = (obj or {}).get("metadata", {}).get("namespace", NAMESPACE)
    req = builders.request(
        obj, operation, kind="ConfigMap", namespace=namespace, old=kwargs.pop("old", None)
    )
    return configmap_validating.validate_configmap(req, namespace=NAMESPACE, name=NAME, **kwargs)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[str, str]]:
    """Replace manager.sloconfig with a checker that rejects any value containing "bad"."""
    seen: list[Mapping[str, str]] = []

    def validate_slo_configmap(data: Mapping[str, str]) -> list[str]:
        seen.append(data)
        return [f"{key}: bad value" for key, value in sorted(data.items()) if "bad" in value]

    module = types.ModuleType("manager.sloconfig")
    module.validate_slo_configmap = validate_slo_configmap  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "manager.sloconfig", module)
    return seen


def test_valid_slo_config_is_allowed(stand_in: list[Mapping[str, str]]) -> None:
    data = {"colocation-config": '{"enable": true}'}
    assert _validate(configmap(data)).allowed
    assert stand_in == [data]


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_invalid_slo_config_is_denied_with_every_problem(
    stand_in: list[Mapping[str, str]], operation: str
) -> None:
    data = {"colocation-config": "bad", "resource-threshold-config": "also bad"}
    old = configmap({}) if operation == "UPDATE" else None
    response = _validate(configmap(data), operation, old=old)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message == (
        f"configmap {NAMESPACE}/{NAME}: "
        "colocation-config: bad value; resource-threshold-config: bad value"
    )


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(configmap({"x": "bad"}, name="other"), id="other-name"),
        pytest.param(configmap({"x": "bad"}, namespace="default"), id="other-namespace"),
    ],
)
def test_other_configmaps_are_allowed_unchecked(
    stand_in: list[Mapping[str, str]], obj: dict[str, Any]
) -> None:
    assert _validate(obj).allowed
    assert stand_in == []


def test_delete_is_allowed(stand_in: list[Mapping[str, str]]) -> None:
    assert _validate(None, "DELETE", old=configmap({"x": "bad"})).allowed
    assert stand_in == []


def test_empty_data_is_checked_as_empty(stand_in: list[Mapping[str, str]]) -> None:
    assert _validate(configmap(None)).allowed
    assert stand_in == [{}]


@pytest.mark.parametrize("data", [["a"], {"a": 1}, "text"])
def test_non_string_data_is_denied(stand_in: list[Mapping[str, str]], data: Any) -> None:
    response = _validate(configmap(data))
    assert (response.allowed, response.code) == (False, 400)
    assert "data must map strings to strings" in response.message


def test_name_taken_from_request_when_metadata_lacks_it(stand_in: list[Mapping[str, str]]) -> None:
    obj = configmap({"k": "bad"})
    del obj["metadata"]["namespace"]
    req = builders.request(obj, kind="ConfigMap", namespace=NAMESPACE)
    assert not configmap_validating.validate_configmap(req, namespace=NAMESPACE, name=NAME).allowed


def test_injected_validator_overrides_the_module() -> None:
    response = _validate(configmap({"a": "b"}), validator=lambda data: ["nope"])
    assert not response.allowed
    assert response.message.endswith("nope")


def test_real_slo_validator_checks_the_configmap() -> None:
    """Uses manager.sloconfig.validate_slo_configmap itself, no stand-in."""
    bad = {
        "colocation-config": "{not json",
        "resource-threshold-config": '{"clusterStrategy": {"cpuSuppressThresholdPercent": 165}}',
    }
    response = _validate(configmap(bad))
    assert not response.allowed
    assert "colocation-config" in response.message
    assert "resource-threshold-config" in response.message
    good = {"resource-threshold-config": '{"clusterStrategy": {"enable": true}}'}
    assert _validate(configmap(good)).allowed
