from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.webhooks import admission
from manager.webhooks.admission import ReviewError, parse_review, review_response
from tests.unit.manager.webhooks import builders


def _envelope(**changes: Any) -> dict[str, Any]:
    body = builders.review(builders.pod())
    for key, value in changes.items():
        if key.startswith("request_"):
            field = key.removeprefix("request_")
            if value is None:
                body["request"].pop(field, None)
            else:
                body["request"][field] = value
        elif value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def test_parse_review_reads_the_request() -> None:
    pod = builders.pod()
    req = parse_review(json.dumps(builders.review(pod, "UPDATE", old=pod)).encode())
    assert req.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert (req.operation, req.kind, req.group, req.resource) == ("UPDATE", "Pod", "", "pods")
    assert (req.name, req.namespace, req.sub_resource) == ("web", builders.NAMESPACE, "")
    assert req.object == pod
    assert req.old_object == pod


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(b"{not json", "not JSON", id="malformed-json"),
        pytest.param(b"\xff\xfe", "not JSON", id="not-utf8"),
        pytest.param(b"[]", "JSON object", id="array"),
        pytest.param(_envelope(apiVersion="admission.k8s.io/v1beta1"), "apiVersion", id="v1beta1"),
        pytest.param(_envelope(apiVersion=None), "apiVersion", id="no-api-version"),
        pytest.param(_envelope(kind="Pod"), "kind must be AdmissionReview", id="wrong-kind"),
        pytest.param(_envelope(request=None), "request is missing", id="no-request"),
        pytest.param(_envelope(request="x"), "request is missing", id="request-not-object"),
        pytest.param(_envelope(request_uid=None), "uid is missing", id="no-uid"),
        pytest.param(_envelope(request_uid=""), "uid is missing", id="empty-uid"),
        pytest.param(_envelope(request_uid=7), "uid must be a string", id="uid-not-string"),
        pytest.param(_envelope(request_operation="PATCH"), "operation", id="bad-operation"),
        pytest.param(_envelope(request_object=[1]), "object must be an object", id="object-list"),
        pytest.param(_envelope(request_kind="Pod"), "request.kind", id="kind-not-gvk"),
    ],
)
def test_parse_review_rejects_malformed_envelopes(body: Any, reason: str) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body)
    with pytest.raises(ReviewError, match=reason):
        parse_review(raw)


def test_allowed_answer_echoes_uid_and_envelope() -> None:
    answer = review_response("u-1", admission.allowed())
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True},
    }


def test_denied_answer_carries_code_and_message() -> None:
    answer = review_response("u-2", admission.denied("no BE label", 400))
    assert answer["response"] == {
        "uid": "u-2",
        "allowed": False,
        "status": {"code": 400, "message": "no BE label"},
    }


def test_patched_answer_is_base64_json_patch_with_warnings() -> None:
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    answer = review_response("u-3", admission.patched(ops, "careful"))
    response = answer["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == ops
    assert response["warnings"] == ["careful"]
    assert response["allowed"] is True


def test_empty_patch_is_sent_as_no_patch() -> None:
    response = review_response("u-4", admission.patched([]))["response"]
    assert "patch" not in response
    assert "patchType" not in response


DIFF_CASES = [
    pytest.param({}, {"metadata": {"labels": {"a": "1"}}}, id="missing-map-added-whole"),
    pytest.param({"a": 1, "b": 2}, {"a": 1}, id="remove-key"),
    pytest.param({"a": 1}, {"a": "1"}, id="type-change"),
    pytest.param({"a": 1}, {"a": True}, id="int-to-bool"),
    pytest.param({"a": 0}, {"a": False}, id="zero-to-false"),
    pytest.param({"a": 1.0}, {"a": 1}, id="float-to-int"),
    pytest.param({"a": {"b": 1}}, {"a": [1]}, id="map-to-list"),
    pytest.param({"l": [1, 2, 3]}, {"l": [1]}, id="list-shrinks"),
    pytest.param({"l": [1]}, {"l": [1, 2, 3]}, id="list-grows"),
    pytest.param({"l": [{"x": 1}, {"y": 2}]}, {"l": [{"x": 2}]}, id="list-nested"),
    pytest.param({"a/b": 1, "c~d": 2}, {"a/b": 2, "c~d": 3, "~/": 4}, id="escaped-keys"),
    pytest.param({"~1": 1}, {"~1": 2, "/": 3}, id="tilde-one-literal"),
    pytest.param(
        {"metadata": {"labels": {"koordinator.sh/qosClass": "LS"}}},
        {"metadata": {"labels": {"koordinator.sh/qosClass": "BE"}}},
        id="label-with-slash",
    ),
    pytest.param({"a": None}, {"a": {"b": None}}, id="null-to-map"),
    pytest.param([1, 2], {"a": 1}, id="root-type-change"),
]


@pytest.mark.parametrize(("original", "mutated"), DIFF_CASES)
def test_json_patch_applies_to_the_mutated_object(original: Any, mutated: Any) -> None:
    ops = admission.json_patch(original, mutated)
    assert jsonpatch.apply_patch(copy.deepcopy(original), ops) == mutated
    # equality in Python treats True == 1; the JSON text must match too
    result = jsonpatch.apply_patch(copy.deepcopy(original), ops)
    assert json.dumps(result, sort_keys=True) == json.dumps(mutated, sort_keys=True)


def test_json_patch_escapes_tilde_before_slash() -> None:
    ops = admission.json_patch({}, {"a~/b": 1})
    assert ops == [{"op": "add", "path": "/a~0~1b", "value": 1}]


def test_json_patch_of_equal_objects_is_empty() -> None:
    obj = builders.pod(builders.container(requests={"cpu": "1"}))
    assert admission.json_patch(obj, copy.deepcopy(obj)) == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab~/", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text("ab~/", max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_json_patch_turns_any_document_into_any_other(original: Any, mutated: Any) -> None:
    ops = admission.json_patch(original, mutated)
    result = jsonpatch.apply_patch(copy.deepcopy(original), ops)
    assert json.dumps(result, sort_keys=True) == json.dumps(mutated, sort_keys=True)
