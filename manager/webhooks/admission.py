"""AdmissionReview v1 in and out, and the JSON Patch a mutating webhook answers with.

``parse_review`` turns a request body into an ``AdmissionRequest`` or raises ``ReviewError``
(the server answers HTTP 400: without a valid envelope there is no uid to answer to).
``allowed``/``denied``/``patched`` build an ``AdmissionResponse``; ``review_response`` wraps it
in the envelope the apiserver checks (apiVersion/kind echoed, uid echoed, base64 patch).
No I/O here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")

JsonPatch = list[dict[str, Any]]


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request; the message says why."""


class ObjectError(ValueError):
    """The object under review is malformed (wrong types, bad quantities); names the field."""


@dataclass(frozen=True)
class UserInfo:
    """``request.userInfo``: who asked the API server (for the audit line, not for decisions)."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` the webhooks read."""

    uid: str
    operation: str
    kind: str  # request.kind.kind, e.g. "Pod"
    group: str = ""
    resource: str = ""
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False
    user_info: UserInfo = field(default_factory=UserInfo)


@dataclass(frozen=True)
class AdmissionResponse:
    """A decision: allowed or not, with an optional patch (mutating only) and warnings."""

    allowed: bool
    code: int = 200
    message: str = ""
    patch: JsonPatch | None = None
    warnings: tuple[str, ...] = field(default=())
    # what decided, for the audit line (never sent): e.g. the ClusterColocationProfiles applied
    decided_by: str = ""


def allowed(*warnings: str) -> AdmissionResponse:
    return AdmissionResponse(True, warnings=warnings)


def denied(message: str, code: int = 403, warnings: Sequence[str] = ()) -> AdmissionResponse:
    return AdmissionResponse(False, code=code, message=message, warnings=tuple(warnings))


def patched(patch: JsonPatch, *warnings: str) -> AdmissionResponse:
    """Allowed with ``patch``; an empty patch is sent as none (the apiserver accepts both)."""
    return AdmissionResponse(True, patch=patch or None, warnings=warnings)


def _str(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"request.{key} must be a string, got {type(value).__name__}")
    return value


def _object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{key} must be an object, got {type(value).__name__}")
    return value


def _gvk(request: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = request.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ReviewError(f"request.{key} must be an object of strings")
    return value


def _user_info(request: Mapping[str, Any]) -> UserInfo:
    value = request.get("userInfo")
    if value is None:
        return UserInfo()
    if not isinstance(value, dict):
        raise ReviewError(f"request.userInfo must be an object, got {type(value).__name__}")
    username, uid = value.get("username") or "", value.get("uid") or ""
    if not isinstance(username, str) or not isinstance(uid, str):
        raise ReviewError("request.userInfo.username and .uid must be strings")
    groups = value.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ReviewError("request.userInfo.groups must be a list of strings")
    return UserInfo(username, uid, tuple(groups))


def parse_review(body: bytes | str) -> AdmissionRequest:
    """Decode and check an AdmissionReview v1 request; raise ReviewError naming the problem."""
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise ReviewError(f"body is not JSON: {err}") from None
    if not isinstance(review, dict):
        raise ReviewError("body must be a JSON object")
    if review.get("apiVersion") != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION}, got {review.get('apiVersion')!r}")
    if review.get("kind") != KIND:
        raise ReviewError(f"kind must be {KIND}, got {review.get('kind')!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("request is missing or not an object")
    uid = _str(request, "uid")
    if not uid:
        raise ReviewError("request.uid is missing")
    operation = _str(request, "operation")
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}")
    kind = _gvk(request, "kind")
    resource = _gvk(request, "resource")
    dry_run = request.get("dryRun", False)
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        kind=kind.get("kind", ""),
        group=kind.get("group", ""),
        resource=resource.get("resource", ""),
        sub_resource=_str(request, "subResource"),
        name=_str(request, "name"),
        namespace=_str(request, "namespace"),
        object=_object(request, "object"),
        old_object=_object(request, "oldObject"),
        dry_run=dry_run is True,
        user_info=_user_info(request),
    )


def review_response(uid: str, response: AdmissionResponse) -> dict[str, Any]:
    """The AdmissionReview v1 answer to the request ``uid``."""
    out: dict[str, Any] = {"uid": uid, "allowed": response.allowed}
    if not response.allowed:
        out["status"] = {"code": response.code, "message": response.message}
    if response.patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(response.patch).encode()).decode()
    if response.warnings:
        out["warnings"] = list(response.warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": out}


# -- JSON Patch (RFC 6902) -------------------------------------------------------------------


def escape(token: str) -> str:
    """A JSON Pointer reference token: "~" → "~0" first, then "/" → "~1" (RFC 6901 §3)."""
    return token.replace("~", "~0").replace("/", "~1")


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python but not in JSON: a changed type must yield a replace.
    return type(a) is type(b) and a == b


def json_patch(original: Any, mutated: Any, path: str = "") -> JsonPatch:
    """RFC 6902 ops turning ``original`` into ``mutated`` (both JSON-like values).

    Maps are diffed key by key and a missing map is added whole (an ``add`` below a missing
    parent fails). Lists are diffed index by index over their common prefix; the rest is
    removed from the end backwards (so indices stay valid) or appended with "/-".
    """
    if isinstance(original, dict) and isinstance(mutated, dict):
        ops: JsonPatch = []
        for key in original:
            if key not in mutated:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in mutated.items():
            child = f"{path}/{escape(key)}"
            if key not in original:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                ops.extend(json_patch(original[key], value, child))
        return ops
    if isinstance(original, list) and isinstance(mutated, list):
        ops = []
        common = min(len(original), len(mutated))
        for i in range(common):
            ops.extend(json_patch(original[i], mutated[i], f"{path}/{i}"))
        for i in range(len(original) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        ops.extend({"op": "add", "path": f"{path}/-", "value": v} for v in mutated[common:])
        return ops
    if _same(original, mutated):
        return []
    return [{"op": "replace", "path": path, "value": mutated}]


def warn_unexpected_kind(request: AdmissionRequest, expected: str, route: str) -> AdmissionResponse:
    """Allow an object this route does not handle; the warning tells who misconfigured it."""
    got = f"{request.group}/{request.kind}" if request.group else request.kind or "<none>"
    return allowed(f"koord-manager {route} handles {expected} only, ignored kind {got}")
