"""The cluster tier's reading of the API server's audit log (tests/cluster/audit.py), on events
shaped as kube-apiserver v1.37 writes them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.cluster import audit
from tests.cluster.helm import NAMESPACE

ACCOUNT = f"system:serviceaccount:{NAMESPACE}:koordlet"


def event(verb: str, sent: Any, stored: Any, *, subresource: str = "", code: int = 200) -> Any:
    return {
        "verb": verb,
        "requestURI": "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/n1",
        "user": {"username": ACCOUNT, "groups": [audit.PRODUCT_GROUP]},
        "objectRef": {"resource": "nodemetrics", "subresource": subresource},
        "responseStatus": {"code": code},
        "stageTimestamp": "2026-12-06T08:00:00.123456Z",
        "requestObject": sent,
        "responseObject": stored,
    }


def test_a_field_the_schema_pruned_is_reported_with_its_path() -> None:
    sent = {"status": {"nodeMetric": {"nodeUsage": {"cpu": "1250m"}}, "hostApps": [{"n": 3}]}}
    stored = {"status": {"nodeMetric": {"nodeUsage": {"cpu": "1250m"}}}}
    (found,) = audit.not_stored([event("patch", sent, stored, subresource="status")])
    assert ".status.hostApps: sent [{'n': 3}], not stored" in found
    assert "koordlet patch" in found


def test_quantities_and_times_the_server_normalised_are_the_same_values() -> None:
    sent = {"status": {"allocatable": {"batch-cpu": "1500m", "memory": 3 * 2**30}}}
    stored = {"status": {"allocatable": {"batch-cpu": "1500m", "memory": "3Gi"}}}
    assert not audit.differences(sent, stored)
    assert audit.differences({"a": "1501m"}, {"a": "1500m"}) == [".a: sent '1501m', stored '1500m'"]
    assert not audit.differences({"t": "2026-12-06T08:00:00.75Z"}, {"t": "2026-12-06T08:00:00Z"})


def test_status_sent_to_the_main_resource_is_reported_unless_it_is_a_create() -> None:
    sent = {"spec": {"x": 7}, "status": {"phase": "Running"}}
    stored = {"spec": {"x": 7}, "status": {"phase": "Pending"}}
    assert not audit.not_stored([event("create", sent, stored)])
    (found,) = audit.not_stored([event("update", sent, stored)])
    assert ".status.phase: sent 'Running', stored 'Pending'" in found


def test_a_list_element_must_be_found_whole_and_deletions_ask_nothing() -> None:
    stored = {"c": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}
    assert not audit.differences({"c": [{"type": "Other", "status": "False"}], "d": None}, stored)
    assert audit.differences({"c": [{"type": "Other", "status": "True"}]}, stored)


def test_only_refusals_no_test_expected_count() -> None:
    refused = event("get", None, None, code=403)
    assert len(audit.refusals([refused])) == 1
    with audit.expect_forbidden("koordlet", "nodemetrics"):
        refused["stageTimestamp"] = dt.datetime.now(dt.UTC).isoformat()
    try:
        assert audit.refusals([refused]) == []
        assert len(audit.refusals([{**refused, "objectRef": {"resource": "nodes"}}])) == 1
        with audit.expect_forbidden(None, None):  # any account, any resource: an uninstall
            for_nodes = {**refused, "objectRef": {"resource": "nodes"}}
            for_nodes["stageTimestamp"] = dt.datetime.now(dt.UTC).isoformat()
        assert audit.refusals([for_nodes]) == []
    finally:
        audit.EXPECTED.clear()
