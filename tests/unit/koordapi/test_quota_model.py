"""ElasticQuota objects read as Koordinator's apis/extension/elastic_quota.go reads them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi.errors import ModelError
from koordapi.quota import model
from koordapi.quota.model import ElasticQuota


def quota(
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
    }


def test_amounts_are_milli_cores_for_cpu_and_whole_units_for_the_rest() -> None:
    q = ElasticQuota.from_object(
        quota(
            "spark",
            min={"cpu": "7300m", "memory": "37Gi"},
            max={"cpu": "11", "memory": "40Gi", "nvidia.com/gpu": "3"},
        )
    )
    assert q.min == {"cpu": 7300, "memory": 37 * 2**30}
    assert q.max == {"cpu": 11000, "memory": 40 * 2**30, "nvidia.com/gpu": 3}
    assert q.namespace == "team-a"


def test_a_quota_without_a_parent_label_hangs_under_the_root_and_the_root_under_nothing() -> None:
    assert ElasticQuota.from_object(quota("spark")).parent == model.ROOT_QUOTA
    assert ElasticQuota.from_object(quota(model.ROOT_QUOTA)).parent == ""
    child = ElasticQuota.from_object(quota("etl", {model.LABEL_PARENT: "data"}))
    assert child.parent == "data"


def test_the_tree_labels() -> None:
    q = ElasticQuota.from_object(
        quota(
            "data",
            {
                model.LABEL_IS_PARENT: "true",
                model.LABEL_TREE_ID: "tree-17",
                model.LABEL_ALLOW_LENT_RESOURCE: "false",
                model.LABEL_IS_ROOT: "true",
            },
        )
    )
    assert (q.is_parent, q.tree_id, q.allow_lent_resource, q.is_root) == (
        True,
        "tree-17",
        False,
        True,
    )
    # Koordinator: lending is allowed unless the label says "false"; is-parent only on "true"
    plain = ElasticQuota.from_object(
        quota("x", {model.LABEL_ALLOW_LENT_RESOURCE: "no", model.LABEL_IS_PARENT: "yes"})
    )
    assert plain.allow_lent_resource and not plain.is_parent


def test_the_shared_weight_is_the_annotation_where_set_and_not_all_zero_else_max() -> None:
    maximum = {"cpu": "13", "memory": "29Gi"}
    weighted = ElasticQuota.from_object(
        quota(
            "w",
            annotations={model.ANNOTATION_SHARED_WEIGHT: json.dumps({"cpu": "3", "memory": "5"})},
            max=maximum,
        )
    )
    assert weighted.shared_weight == {"cpu": 3000, "memory": 5}
    zero = ElasticQuota.from_object(
        quota("z", annotations={model.ANNOTATION_SHARED_WEIGHT: '{"cpu": "0"}'}, max=maximum)
    )
    assert zero.shared_weight == zero.max == {"cpu": 13000, "memory": 29 * 2**30}
    assert ElasticQuota.from_object(quota("n", max=maximum)).shared_weight == zero.max


def test_the_namespaces_annotation_and_an_unreadable_one_ignored() -> None:
    listed = quota("n", annotations={model.ANNOTATION_NAMESPACES: '["etl", "ml-17"]'})
    assert ElasticQuota.from_object(listed).namespaces == ("etl", "ml-17")
    broken = quota("b", annotations={model.ANNOTATION_NAMESPACES: "[etl"})
    assert ElasticQuota.from_object(broken).namespaces == ()


@pytest.mark.parametrize(
    "obj",
    [
        quota("bad-min", min={"cpu": "lots"}),
        quota("bad-weight", annotations={model.ANNOTATION_SHARED_WEIGHT: "{cpu"}),
        quota("list-weight", annotations={model.ANNOTATION_SHARED_WEIGHT: "[1]"}),
    ],
)
def test_malformed_amounts_are_model_errors(obj: dict[str, Any]) -> None:
    with pytest.raises(ModelError):
        ElasticQuota.from_object(obj)


def test_resource_arithmetic_counts_a_missing_resource_as_zero() -> None:
    a = {"cpu": 1700, "memory": 5}
    b = {"cpu": 300, "nvidia.com/gpu": 2}
    assert model.add(a, b) == {"cpu": 2000, "memory": 5, "nvidia.com/gpu": 2}
    assert model.subtract(a, b) == {"cpu": 1400, "memory": 5, "nvidia.com/gpu": -2}
    assert model.total([a, b, b]) == {"cpu": 2300, "memory": 5, "nvidia.com/gpu": 4}
    assert model.max_of(a, b) == {"cpu": 1700, "memory": 5, "nvidia.com/gpu": 2}


def test_a_pods_quota_label_and_its_preemptible_label() -> None:
    pod = {
        "metadata": {"labels": {model.LABEL_QUOTA_NAME: "spark", model.LABEL_PREEMPTIBLE: "false"}}
    }
    assert model.pod_quota_name(pod) == "spark"
    assert model.pod_non_preemptible(pod)
    assert model.pod_quota_name({"metadata": {}}) == ""
    assert not model.pod_non_preemptible(
        {"metadata": {"labels": {model.LABEL_PREEMPTIBLE: "true"}}}
    )
