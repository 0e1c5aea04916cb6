"""What the API server's audit log says about the product's own requests.

The cluster's kube-apiserver writes an audit event (JSON lines) for every request made by one of
the release's ServiceAccounts: the whole request and the stored answer for writes, the request
line and the answer's status for reads. Two questions are asked of it at the end of a session:

- was any product component refused by the real authorizer (403) with the chart's RBAC?
- did every write read back as it was sent? A real server drops what a schema does not know
  (a CRD's pruning, a built-in's unknown fields) without an error, and ignores ``status`` sent
  to the main resource and everything but ``status`` sent to ``/status``.

Tests that take a permission away on purpose say so with ``expect_forbidden``; those refusals
are not counted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordapi.quantity import parse_quantity
from tests.cluster.helm import NAMESPACE

PRODUCT_GROUP = f"system:serviceaccounts:{NAMESPACE}"


def policy(node: str) -> str:
    """The audit policy: the product's requests, and the kubelet's authorization questions."""
    return f"""\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    userGroups: ["{PRODUCT_GROUP}"]
    verbs: [create, update, patch]
  - level: Metadata
    userGroups: ["{PRODUCT_GROUP}"]
  # the kubelet asking whether a caller of its own port may (koordlet's pod list)
  - level: RequestResponse
    users: ["system:node:{node}"]
    resources: [{{group: authorization.k8s.io, resources: [subjectaccessreviews]}}]
  - level: None
"""


# What a real server fills in or owns; never a difference.
SERVER_FIELDS = frozenset({"resourceVersion", "managedFields", "generation", "uid"})


@dataclass(frozen=True)
class Expected:
    """403s for ``user`` (a ServiceAccount name; None: any of the release's) on ``resource``
    (None: any) between ``start`` and ``end``."""

    user: str | None
    resource: str | None
    start: dt.datetime
    end: dt.datetime


EXPECTED: list[Expected] = []


@contextlib.contextmanager
def expect_forbidden(user: str | None, resource: str | None) -> Iterator[None]:
    """Refusals a test causes on purpose (it took ``user``'s right on ``resource`` away)."""
    start = dt.datetime.now(dt.UTC)
    try:
        yield
    finally:
        EXPECTED.append(Expected(user, resource, start, dt.datetime.now(dt.UTC)))


def expected_in(line: str) -> bool:
    """Whether a log line is about a refusal a test caused (it names the resource)."""
    lowered = line.lower()
    return any(e.resource is not None and e.resource in lowered for e in EXPECTED)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def product(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of requests by the release's ServiceAccounts."""
    return [e for e in events if PRODUCT_GROUP in e["user"].get("groups", [])]


def kubelet_reviews(events: list[dict[str, Any]], account: str) -> list[dict[str, Any]]:
    """The SubjectAccessReviews the kubelet asked about ServiceAccount ``account`` of the
    release (a caller of the kubelet's own port), with the API server's answers."""
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    return [
        e
        for e in events
        if e.get("objectRef", {}).get("resource") == "subjectaccessreviews"
        and (e.get("requestObject") or {}).get("spec", {}).get("user") == user
    ]


def _when(event: Mapping[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00"))


def _account(event: Mapping[str, Any]) -> str:
    return str(event["user"]["username"]).rsplit(":", 1)[-1]


def describe(event: Mapping[str, Any]) -> str:
    status = event.get("responseStatus", {})
    return (
        f"{event['stageTimestamp']} {_account(event)} {event['verb']} {event['requestURI']}"
        f" → {status.get('code')} "
        f"{status.get('message', '')[:200]}"
    )


def refusals(events: list[dict[str, Any]]) -> list[str]:
    """Every 403 a product ServiceAccount got that no test expected."""
    found = []
    for event in events:
        if event.get("responseStatus", {}).get("code") != 403:
            continue
        user, resource = _account(event), event.get("objectRef", {}).get("resource", "")
        if any(
            e.user in (None, user)
            and e.resource in (None, resource)
            and e.start <= _when(event) <= e.end
            for e in EXPECTED
        ):
            continue
        found.append(describe(event))
    return found


def _same_scalar(sent: Any, stored: Any) -> bool:
    if sent == stored:
        return True
    if isinstance(sent, str | int) and isinstance(stored, str | int):
        with contextlib.suppress(ValueError, TypeError):  # quantities the server normalised
            return parse_quantity(str(sent)) == parse_quantity(str(stored))
    if isinstance(sent, str) and isinstance(stored, str):
        with contextlib.suppress(ValueError):  # metav1.Time keeps whole seconds
            a = dt.datetime.fromisoformat(sent.replace("Z", "+00:00"))
            b = dt.datetime.fromisoformat(stored.replace("Z", "+00:00"))
            return a.replace(microsecond=0) == b.replace(microsecond=0)
    return False


def differences(sent: Any, stored: Any, where: str = "") -> list[str]:
    """Where ``stored`` lacks or changed something ``sent`` had (``None`` in a patch deletes;
    an empty map or list asks for nothing a server must keep; a list in a strategic merge
    patch is merged by key, so each sent element must be found in what is stored)."""
    if sent is None:
        return []
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [f"{where or '.'}: sent a map, stored {stored!r:.80}"] if sent else []
        out = []
        for key, value in sent.items():
            if key in SERVER_FIELDS or key.startswith("$"):
                continue
            if key not in stored:
                if value not in (None, {}, []):
                    out.append(f"{where}.{key}: sent {value!r:.120}, not stored")
                continue
            out += differences(value, stored[key], f"{where}.{key}")
        return out
    if isinstance(sent, list):
        if not isinstance(stored, list):
            return [f"{where}: sent a list, stored {stored!r:.80}"] if sent else []
        return [
            f"{where}[{i}]: sent {item!r:.120}, no stored element has it"
            for i, item in enumerate(sent)
            if not any(not differences(item, s) for s in stored)
        ]
    return (
        [] if _same_scalar(sent, stored) else [f"{where}: sent {sent!r:.80}, stored {stored!r:.80}"]
    )


def not_stored(events: list[dict[str, Any]]) -> list[str]:
    """Every successful product write whose answer lacks part of what was sent."""
    found = []
    for event in events:
        if event["verb"] not in ("create", "update", "patch"):
            continue
        code = event.get("responseStatus", {}).get("code", 0)
        sent, stored = event.get("requestObject"), event.get("responseObject")
        if not 200 <= code < 300 or not isinstance(sent, dict) or not isinstance(stored, dict):
            continue  # refused, or a JSON patch (a list of operations), or no object back
        if stored.get("kind") == "Status":
            continue  # a subresource that answers with a Status (an eviction)
        subresource = event.get("objectRef", {}).get("subresource", "")
        if subresource == "status":
            sent = {"status": sent.get("status")}
        elif subresource:
            continue  # eviction, binding, ...: not the object itself
        elif event["verb"] == "create":
            # A real server drops status on create where the kind has a status subresource.
            sent = {k: v for k, v in sent.items() if k != "status"}
        found += [f"{describe(event)}: {d}" for d in differences(sent, stored)]
    return found
