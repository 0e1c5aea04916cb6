"""Admission decisions audited over the real WebhookServer (HTTPS on localhost): one
"admission ..." line per decision that mutates or denies, with who asked, the object, the
profile or the reason, and the patch; every decision counted; none logged for a request allowed
unchanged. The recorded decisions are served for one pod at GET /explain/pods/{ns}/{name}."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from koordapi import keys
from koordkube.probes import serve_probes
from manager.metrics import ManagerMetrics
from manager.webhooks.admission import AdmissionResponse, ReviewError, parse_review
from manager.webhooks.audit import AdmissionAudit
from manager.webhooks.pod_mutating import mutate_pod
from tests.unit.manager.webhooks import builders
from tests.unit.manager.webhooks.builders import container, pod, qos_pod
from tests.unit.manager.webhooks.test_server import CPU2_MEM4, Harness, run

NOW = 1700000000.0
REVIEW_UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
WHO = f"operation='CREATE' user='admin' groups='system:authenticated' request='{REVIEW_UID}'"
TOTAL = "koord_manager_webhook_decisions_total"


def audited() -> AdmissionAudit:
    return AdmissionAudit(ManagerMetrics(), clock=lambda: NOW)


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "manager.webhooks.audit" and r.getMessage().startswith("admission ")
    ]


def count(audit: AdmissionAudit, webhook: str, obj: str, operation: str, decision: str) -> float:
    assert audit.metrics is not None
    labels = {
        "webhook_type": webhook,
        "object_type": obj,
        "operation": operation,
        "decision": decision,
    }
    return audit.metrics.registry.get_sample_value(TOTAL, labels) or 0.0


def test_a_mutation_is_one_line_with_the_profile_the_patch_and_who_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    audit = audited()
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels={"app": "spark"})
    answers: list[Any] = []

    async def scenario(h: Harness) -> None:
        answers.append(await h.post("/mutate-pod", builders.review(original)))

    run(tmp_path, scenario, audit=audit)

    (status, answer) = answers[0]
    assert status == 200
    patch = json.dumps(builders.decode_patch(answer), separators=(",", ":"), sort_keys=True)
    assert audit_lines(caplog) == [
        "admission strategy=mutate-pod kind=mutated target=Pod/team-a/web "
        f"value={patch} reason='ClusterColocationProfile colocation-batch' {WHO}"
    ]
    assert count(audit, "mutate", "pod", "CREATE", "mutated") == 1
    (action,) = audit.for_pod("team-a", "web")
    assert action["ts"] == NOW and action["byGenerateName"] is False


def test_a_denial_is_one_line_with_the_rule_that_denied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    audit = audited()
    be_less = pod(container(requests={keys.BATCH_CPU: "1000"}))
    answers: list[Any] = []

    async def scenario(h: Harness) -> None:
        answers.append(await h.post("/validate-pod", builders.review(be_less)))

    run(tmp_path, scenario, audit=audit)

    message = answers[0][1]["response"]["status"]["message"]
    assert "must be BE" in message
    assert audit_lines(caplog) == [
        "admission strategy=validate-pod kind=denied target=Pod/team-a/web value=400 "
        f"reason={message!r} {WHO}"
    ]
    assert count(audit, "validate", "pod", "CREATE", "denied") == 1
    assert count(audit, "validate", "pod", "CREATE", "allowed") == 0


def test_allowed_unchanged_is_counted_but_not_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    audit = audited()
    plain = pod(container(requests=CPU2_MEM4), labels={"app": "web"})  # no profile matches
    answers: list[Any] = []

    async def scenario(h: Harness) -> None:
        answers.append(await h.post("/mutate-pod", builders.review(plain)))
        answers.append(await h.post("/validate-pod", builders.review(plain)))

    run(tmp_path, scenario, audit=audit)

    assert [a[1]["response"] for a in answers] == [{"uid": REVIEW_UID, "allowed": True}] * 2
    assert audit_lines(caplog) == []
    assert count(audit, "mutate", "pod", "CREATE", "allowed") == 1
    assert count(audit, "validate", "pod", "CREATE", "allowed") == 1
    assert audit.for_pod("team-a", "web") == []


def test_a_configmap_denial_and_an_update_denial_name_their_object_and_operation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    audit = audited()
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {"colocation-config": "{}"},
    }
    review = builders.review(config, kind="ConfigMap", namespace="koordinator-system")
    upgrade = builders.review(qos_pod("BE", container()), "UPDATE", old=qos_pod("LS", container()))

    async def scenario(h: Harness) -> None:
        await h.post("/validate-configmap", review)
        await h.post("/validate-pod", upgrade)

    run(tmp_path, scenario, audit=audit, slo_validator=lambda data: ["colocation-config: bad"])

    configmap_line, pod_line = audit_lines(caplog)
    assert configmap_line.startswith(
        "admission strategy=validate-configmap kind=denied "
        "target=ConfigMap/koordinator-system/slo-controller-config value=400 "
        "reason='configmap koordinator-system/slo-controller-config: colocation-config: bad'"
    )
    assert "field is immutable" in pod_line and "operation='UPDATE'" in pod_line
    assert count(audit, "validate", "configmap", "CREATE", "denied") == 1
    assert count(audit, "validate", "pod", "UPDATE", "denied") == 1
    assert audit.for_pod("koordinator-system", "slo-controller-config") == []  # pods only


def _generated_pod_review(dry_run: bool = False) -> dict[str, Any]:
    original = pod(container(requests=CPU2_MEM4, limits=CPU2_MEM4), labels={"app": "spark"})
    del original["metadata"]["name"]
    original["metadata"]["generateName"] = "spark-7d9f-"
    review = builders.review(original)
    review["request"]["dryRun"] = dry_run
    return review


def test_a_pod_named_by_generate_name_is_found_by_its_prefix_and_marked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    audit = audited()
    request = parse_review(json.dumps(_generated_pod_review(dry_run=True)))
    response = AdmissionResponse(True, patch=[{"op": "add", "path": "/x", "value": 1}])

    audit.decide("/mutate-pod", request, response, "team-a")

    (line,) = audit_lines(caplog)
    assert "target=Pod/team-a/spark-7d9f-* " in line
    assert 'reason="the webhook\'s defaults"' in line  # %r: double quotes around a '
    assert line.endswith("dry_run='true'")
    (found,) = audit.for_pod("team-a", "spark-7d9f-x2k4q")
    assert found["byGenerateName"] is True
    assert audit.for_pod("team-a", "web") == []
    assert audit.for_pod("team-b", "spark-7d9f-x2k4q") == []


def test_a_pod_is_found_by_its_uid_when_its_name_differs() -> None:
    audit = audited()
    denied_pod = pod(container(requests={keys.BATCH_CPU: "1000"}))
    denied_pod["metadata"]["uid"] = "uid-1"
    request = parse_review(json.dumps(builders.review(denied_pod)))

    audit.decide("/validate-pod", request, AdmissionResponse(False, 400, "no"), "team-a")

    assert [a["pod_uid"] for a in audit.for_pod("team-a", "renamed", uid="uid-1")] == ["uid-1"]
    assert audit.for_pod("team-a", "renamed", uid="uid-2") == []


def test_the_explain_route_serves_the_pods_decisions_as_json() -> None:
    audit = audited()
    denied_pod = pod(container(requests={keys.BATCH_CPU: "1000"}))
    request = parse_review(json.dumps(builders.review(denied_pod)))
    audit.decide("/validate-pod", request, AdmissionResponse(False, 400, "must be BE"), "team-a")

    async def scenario() -> tuple[int, Any, int, Any]:
        runner = await serve_probes(
            "127.0.0.1:0", lambda: True, lambda: (b"", "text/plain"), audit.routes()
        )
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{base}/explain/pods/team-a/web") as reply:
                    found = (reply.status, await reply.json())
                async with session.post(f"{base}/explain/pods/team-a/web") as reply:
                    refused = (reply.status, await reply.text())
        finally:
            await runner.cleanup()
        return (*found, *refused)

    status, body, post_status, _ = asyncio.run(asyncio.wait_for(scenario(), 10))

    assert status == 200
    assert body["component"] == "koord-manager" and body["pod"] == "team-a/web"
    (action,) = body["actions"]
    assert (action["strategy"], action["kind"], action["reason"]) == (
        "validate-pod",
        "denied",
        "must be BE",
    )
    assert action["inputs"]["user"] == "admin"
    assert post_status == 405  # read-only


# -- what the audit reads from the webhooks ---------------------------------------------------


def test_mutate_pod_says_which_profiles_decided_even_one_skipped_by_probability() -> None:
    labels = {"app": "spark"}
    selector = {"matchLabels": labels}
    profiles = [
        builders.profile("a-batch", selector=selector, priorityClassName="koord-batch"),
        builders.profile("b-label", selector=selector, labels={"x": "y"}, probability=10),
    ]
    request = builders.request(pod(container(requests=CPU2_MEM4), labels=labels))

    response = mutate_pod(
        request,
        profiles=profiles,
        priority_classes=builders.PRIORITY_CLASSES,
        namespace_labels={},
        rand_intn=lambda n: n - 1,  # the highest roll: a 10% profile is skipped
    )

    assert response.patch
    assert response.decided_by == (
        "ClusterColocationProfile a-batch, b-label (matched, skipped by probability)"
    )


def test_user_info_is_read_from_the_review_and_optional() -> None:
    review = builders.review(pod())
    review["request"]["userInfo"] = {"username": "u", "uid": "1", "groups": ["g1", "g2"]}
    user = parse_review(json.dumps(review)).user_info
    assert (user.username, user.uid, user.groups) == ("u", "1", ("g1", "g2"))

    del review["request"]["userInfo"]
    assert parse_review(json.dumps(review)).user_info.username == ""


@pytest.mark.parametrize(
    "user_info",
    [[], {"username": 7}, {"groups": "system:masters"}, {"groups": [1]}],
)
def test_a_malformed_user_info_is_a_bad_review(user_info: Any) -> None:
    review = builders.review(pod())
    review["request"]["userInfo"] = user_info
    with pytest.raises(ReviewError, match="userInfo"):
        parse_review(json.dumps(review))
