"""The Koordinator kinds' identities and the dict conversions."""

from __future__ import annotations

import pytest
from lightkube.core import resource as lkres
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod

from koordkube import resources


@pytest.mark.parametrize(
    ("res", "api_version", "kind", "plural"),
    [
        pytest.param(
            resources.NodeMetric,
            "slo.koordinator.sh/v1alpha1",
            "NodeMetric",
            "nodemetrics",
            id="nm",
        ),
        pytest.param(
            resources.NodeSLO, "slo.koordinator.sh/v1alpha1", "NodeSLO", "nodeslos", id="slo"
        ),
        pytest.param(
            resources.ClusterColocationProfile,
            "config.koordinator.sh/v1alpha1",
            "ClusterColocationProfile",
            "clustercolocationprofiles",
            id="profile",
        ),
    ],
)
def test_the_crds_are_cluster_scoped_with_their_plurals(
    res: type[lkres.Resource], api_version: str, kind: str, plural: str
) -> None:
    assert resources.api_version(res) == api_version
    assert resources.kind(res) == kind
    assert lkres.api_info(res).plural == plural
    assert not resources.is_namespaced(res)


def test_typed_and_generic_objects_convert_to_plain_dicts_and_back() -> None:
    typed = Node(metadata=ObjectMeta(name="n1", labels={"a": "b"}))
    assert resources.to_dict(typed) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"a": "b"}},
    }
    back = resources.from_dict(Node, {"metadata": {"name": "n1"}})
    assert isinstance(back, Node) and back.metadata is not None and back.metadata.name == "n1"
    slo = resources.from_dict(resources.NodeSLO, {"metadata": {"name": "n1"}, "spec": {"x": 1}})
    assert slo["kind"] == "NodeSLO" and slo["apiVersion"] == "slo.koordinator.sh/v1alpha1"
    plain = resources.to_dict(slo)
    plain["spec"]["x"] = 2
    assert slo["spec"] == {"x": 1}  # the dict is a detached copy
    with pytest.raises(TypeError):
        resources.to_dict(42)


def test_keys_are_namespace_slash_name_or_just_the_name() -> None:
    assert resources.object_key({"metadata": {"name": "p", "namespace": "ns"}}) == "ns/p"
    assert resources.object_key({"metadata": {"name": "n1"}}) == "n1"
    assert resources.split_key("ns/p") == ("ns", "p")
    assert resources.split_key("n1") == (None, "n1")
    assert resources.is_namespaced(Pod) and resources.kind(Pod.Status) == "Pod"
