"""The ElasticQuota webhook's tree checks, table tests derived from Koordinator v1.8's
pkg/webhook/elasticquota quota_topology_test.go, quota_handler_test.go and
plugin_check_quota_meta_validate_test.go: the same shapes with other numbers, each refusal's
text asserted word for word."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi.errors import ModelError
from koordapi.quota import model
from koordapi.quota.model import ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS
from koordapi.quota.topology import (
    PodIndex,
    QuotaGates,
    QuotaInfo,
    QuotaTopology,
    quota_name_of_pod,
    quota_of_pod,
    validate_quota_self_item,
)

ROOT = model.ROOT_QUOTA
SHARED_WEIGHT = model.ANNOTATION_SHARED_WEIGHT


def res(cpu: int | str | None = None, mem: int | None = None) -> dict[str, str]:
    """MakeResourceList().CPU(n).Mem(m): whole cores and bytes, as quantity strings."""
    found: dict[str, str] = {}
    if cpu is not None:
        found["cpu"] = str(cpu)
    if mem is not None:
        found["memory"] = str(mem)
    return found


def quota(
    name: str,
    *,
    min: dict[str, str] | None = None,
    max: dict[str, str] | None = None,
    parent: str | None = None,
    is_parent: bool | None = None,
    tree_id: str | None = None,
    is_root: bool = False,
    force: bool = False,
    namespace: str = "",
    namespaces: list[str] | str | None = None,
    guaranteed: dict[str, str] | None = None,
    shared_weight: dict[str, str] | str | None = None,
    annotations: dict[str, str] | None = None,
    used: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Koordinator's MakeQuota wrapper as an object."""
    labels: dict[str, str] = {}
    notes: dict[str, str] = dict(annotations or {})
    if parent is not None:
        labels[model.LABEL_PARENT] = parent
    if is_parent is not None:
        labels[model.LABEL_IS_PARENT] = "true" if is_parent else "false"
    if tree_id is not None:
        labels[model.LABEL_TREE_ID] = tree_id
    if is_root:
        labels[model.LABEL_IS_ROOT] = "true"
    if force:
        labels[model.LABEL_ALLOW_FORCE_UPDATE] = "true"
    if namespaces is not None:
        notes[model.ANNOTATION_NAMESPACES] = (
            namespaces if isinstance(namespaces, str) else json.dumps(namespaces)
        )
    if guaranteed is not None:
        notes[model.ANNOTATION_GUARANTEED] = json.dumps(guaranteed)
    if shared_weight is not None:
        notes[SHARED_WEIGHT] = (
            shared_weight if isinstance(shared_weight, str) else json.dumps(shared_weight)
        )
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "labels": labels, "annotations": notes},
        "spec": {},
    }
    if namespace:
        obj["metadata"]["namespace"] = namespace
    if min is not None:
        obj["spec"]["min"] = min
    if max is not None:
        obj["spec"]["max"] = max
    if used is not None:
        obj["status"] = {"used": used}
    return obj


def pod(
    name: str, namespace: str = "", quota_name: str | None = None, **labels: str
) -> dict[str, Any]:
    all_labels = dict(labels)
    if quota_name is not None:
        all_labels[model.LABEL_QUOTA_NAME] = quota_name
    return {"metadata": {"name": name, "namespace": namespace, "labels": all_labels}}


def topology_of(*objs: dict[str, Any] | None, gates: QuotaGates | None = None) -> QuotaTopology:
    """A topology the informer filled (OnQuotaAdd, unchecked), as the Go tests build theirs."""
    topology = QuotaTopology(gates or QuotaGates())
    for obj in objs:
        if obj is not None:
            topology.on_add(obj)
    return topology


def relabel(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    """A deep copy with labels changed (label keys given by their model constant's value)."""
    changed: dict[str, Any] = json.loads(json.dumps(obj))
    changed["metadata"]["labels"].update(labels)
    return changed


def with_label(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    return relabel(obj, **{key: value})


def counts(topology: QuotaTopology) -> tuple[int, int]:
    """(len(quotaInfoMap), len(quotaHierarchyInfo))."""
    return len(topology.quotas), len(topology.children)


# -- validateQuotaSelfItem (TestQuotaTopology_basicItemCheck) ------------------------------

SW = f"temp quota.Annotation[{SHARED_WEIGHT}]"


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        pytest.param(quota("temp", max=res(83, 2097152)), None, id="admit"),
        pytest.param(
            quota("temp", max=res(-3, 4096)),
            "temp quota.Spec.Max's value < 0, in dimensions :[cpu]",
            id="max < 0",
        ),
        pytest.param(
            quota("temp", max=res(-1, -5)),
            "temp quota.Spec.Max's value < 0, in dimensions :[cpu memory]",
            id="max < 0 in two dimensions",
        ),
        pytest.param(
            quota("temp", min=res(-2, 4096), max=res(7, 4096)),
            "temp quota.Spec.Min's value < 0, in dimensions :[cpu]",
            id="min < 0",
        ),
        pytest.param(
            quota("temp", min=res(3, 777), max=res(11)),
            "resourceKey memory of quota temp is included in min, which is not included in max",
            id="min dimension not in max",
        ),
        pytest.param(
            quota("temp", min=res(17), max=res(13)),
            "resourceKey cpu of quota temp min 17 > max 13",
            id="min > max",
        ),
        pytest.param(
            # 1500 milli-cores against 1000
            quota("temp", min=res("1500m"), max=res(1)),
            "resourceKey cpu of quota temp min 1500m > max 1",
            id="min > max in milli-cores",
        ),
        pytest.param(quota("temp", min=res(13), max=res(13)), None, id="min == max"),
        pytest.param(quota("temp", min=res("1000m"), max=res(1)), None, id="1000m == 1"),
        pytest.param(
            quota("temp", shared_weight=res(-4, 4096), max=res(0, 4096)),
            f"{SW}'s value < 0, in dimension :[cpu]",
            id="shared weight < 0",
        ),
        pytest.param(
            quota(
                "temp",
                annotations={ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '["cpu","memory"]'},
                max=res(0, 3145728),
                used=res(0, 9437184),
            ),
            "resourceKey memory of quota temp max 3145728 < used 9437184",
            id="strict keys: max < used",
        ),
        pytest.param(
            quota(
                "temp",
                annotations={ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '["cpu"]'},
                max=res(0, 3145728),
                used=res(0, 9437184),
            ),
            None,
            id="strict keys: other resources ignored",
        ),
        pytest.param(
            quota(
                "temp",
                annotations={ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '["cpu","memory"]'},
                max=res(0, 3145728),
                used=res(0),
            ),
            None,
            id="strict keys: a resource never used is not checked",
        ),
        pytest.param(
            quota(
                "temp",
                annotations={ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '["cpu","memory"]'},
                max=res(0),
                used=res(0, 9437184),
            ),
            "resourceKey memory of quota temp is included in used, which is not included in "
            "max but should check max >= used",
            id="strict keys: used but not in max",
        ),
        pytest.param(
            quota(
                "temp",
                annotations={ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '["memory"]'},
                max=res(0, 9437184),
                used=res(0, 9437184),
            ),
            None,
            id="strict keys: max == used",
        ),
    ],
)
def test_self_item(obj: dict[str, Any], reason: str | None) -> None:
    assert validate_quota_self_item(obj) == reason


def test_self_item_malformed_annotations_are_reasons_not_crashes() -> None:
    weight = validate_quota_self_item(quota("temp", shared_weight="{cpu", max=res(1)))
    assert weight is not None
    assert weight.startswith(f"{SW}'s value is invalid: ")
    keys = validate_quota_self_item(
        quota("temp", annotations={ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '"cpu"'})
    )
    assert keys is not None
    strict = f"temp quota.Annotation[{ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS}]"
    assert keys.startswith(f"{strict}'s value is invalid: ")
    amount = validate_quota_self_item(quota("temp", max={"cpu": "lots"}))
    assert amount is not None
    assert amount.startswith("temp: ")


# -- fillQuotaDefaultInformation ------------------------------------------------------------


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param(
            [
                quota("temp2", max=res(97, 3145728)),
                quota("temp2-bu1", parent="temp2", max=res(97, 3145728)),
            ],
            [
                (ROOT, '{"cpu":"97","memory":"3145728"}', ""),
                ("temp2", '{"cpu":"97","memory":"3145728"}', ""),
            ],
            id="parent without tree id",
        ),
        pytest.param(
            [
                quota("temp2", max=res(97, 3145728), tree_id="tree-9"),
                quota("temp2-bu1", parent="temp2", max=res(97, 3145728)),
            ],
            [
                (ROOT, '{"cpu":"97","memory":"3145728"}', "tree-9"),
                ("temp2", '{"cpu":"97","memory":"3145728"}', "tree-9"),  # the parent's
            ],
            id="parent with tree id",
        ),
        pytest.param(
            [quota("temp2", shared_weight=res(0, 0), max=res(97, 3145728), tree_id="t")],
            [(ROOT, '{"cpu": "0", "memory": "0"}', "t")],  # same keys: left as written
            id="shared weight keys == max keys",
        ),
        pytest.param(
            [quota("temp2", shared_weight=res(0, 0), max=res(mem=3145728), tree_id="t")],
            [(ROOT, '{"memory":"0"}', "t")],
            id="shared weight keys > max keys",
        ),
        pytest.param(
            [quota("temp2", shared_weight=res(0), max=res(97, 3145728), tree_id="t")],
            [(ROOT, '{"cpu":"0","memory":"3145728"}', "t")],
            id="shared weight keys < max keys",
        ),
        pytest.param(
            [quota("temp2", shared_weight=res(0), max=res(mem=3145728), tree_id="t")],
            [(ROOT, '{"memory":"3145728"}', "t")],
            id="shared weight keys != max keys, as many",
        ),
    ],
)
def test_fill_defaults(objs: list[dict[str, Any]], expected: list[tuple[str, str, str]]) -> None:
    topology = QuotaTopology()
    for obj, (parent, weight, tree_id) in zip(objs, expected, strict=True):
        filled = topology.fill_defaults(obj)
        labels = filled["metadata"]["labels"]
        assert labels[model.LABEL_PARENT] == parent
        assert filled["metadata"]["annotations"][SHARED_WEIGHT] == weight
        assert labels.get(model.LABEL_TREE_ID, "") == tree_id
        topology.on_add(filled)


def test_fill_defaults_leaves_the_root_and_its_input_alone_and_refuses_what_it_cannot_fill() -> (
    None
):
    topology = QuotaTopology()
    root = quota(ROOT, max=res(5))
    assert topology.fill_defaults(root) == root
    child = quota("spark", max=res(5))
    topology.fill_defaults(child)
    assert child["metadata"]["labels"] == {}  # a copy was filled
    # a quota with its own tree id keeps it whatever its parent's
    topology.on_add(quota("data", is_parent=True, tree_id="tree-2", max=res(5)))
    own = topology.fill_defaults(quota("etl", parent="data", tree_id="tree-5", max=res(5)))
    assert own["metadata"]["labels"][model.LABEL_TREE_ID] == "tree-5"
    with pytest.raises(ModelError, match=r"^fill quota orphan failed, parent not exist$"):
        topology.fill_defaults(quota("orphan", parent="nowhere", max=res(5)))
    with pytest.raises(ModelError, match=r"^fillDefaultQuotaInfo unmarshal sharedWeight failed:"):
        topology.fill_defaults(quota("bad", shared_weight="[1,", max=res(5)))


# -- checkSubAndParentGroupQuotaKey ----------------------------------------------------------

KEY = "checkSubAndParentGroupQuotaKey failed: "


@pytest.mark.parametrize(
    ("parent", "this", "sub", "update_keys", "reason"),
    [
        pytest.param(
            None,
            quota("temp", max=res(53, 2097152), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53, 2097152), is_parent=False),
            False,
            None,
            id="no tree",
        ),
        pytest.param(
            None,
            quota("temp-bu1", parent=ROOT, max=res(53, 2097152), is_parent=False),
            None,
            False,
            None,
            id="parent is root",
        ),
        pytest.param(
            None,
            quota("temp", max=res(9, 77), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            False,
            f"{KEY}temp-bu1's max keys are not the same with temp's",
            id="child's max keys included, not the same",
        ),
        pytest.param(
            None,
            quota("temp", max=res(9), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            False,
            None,  # the child's max above its parent's: only keys are compared
            id="child's max keys the same",
        ),
        pytest.param(
            None,
            quota("temp", max=res(9, 77), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            True,
            None,
            id="child's max keys included, update allowed",
        ),
        pytest.param(
            None,
            quota("temp", max=res(mem=77), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            True,
            f"{KEY}temp-bu1's max keys are not all included in temp's",
            id="child's max keys not included, update allowed",
        ),
        pytest.param(
            quota("temp", max=res(9, 77), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            None,
            False,
            # against its parent Koordinator names the parent first
            f"{KEY}temp's max keys are not the same with temp-bu1's",
            id="max keys included in the parent's, not the same",
        ),
        pytest.param(
            quota("temp", max=res(9), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            None,
            False,
            None,
            id="max keys the parent's",
        ),
        pytest.param(
            quota("temp", max=res(9, 77), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            None,
            True,
            None,
            id="max keys included in the parent's, update allowed",
        ),
        pytest.param(
            quota("temp", max=res(mem=77), is_parent=True),
            quota("temp-bu1", parent="temp", max=res(53), is_parent=False),
            None,
            True,
            f"{KEY}temp-bu1's max keys are not all included in temp's",
            id="max keys not in the parent's, update allowed",
        ),
        pytest.param(
            quota("temp", min=res(9, 77), is_parent=True),
            quota("temp-bu1", parent="temp", min=res(53), is_parent=False),
            None,
            False,
            None,
            id="min keys included in the parent's",
        ),
        pytest.param(
            quota("temp", min=res(9), is_parent=True),
            quota("temp-bu1", parent="temp", min=res(53, 53), is_parent=False),
            None,
            False,
            f"{KEY}temp-bu1's min keys are not all included in temp's",
            id="min keys not all in the parent's",
        ),
        pytest.param(
            quota("temp", min=res(9), is_parent=True),
            quota("temp-bu1", parent="temp", min=res(53, 53), is_parent=False),
            None,
            True,
            f"{KEY}temp-bu1's min keys are not all included in temp's",
            id="min keys not all in the parent's, update allowed",
        ),
        pytest.param(
            None,
            quota("temp", min=res(9), max=res(9), is_parent=True),
            quota("temp-bu1", parent="temp", min=res(3, 3), max=res(9), is_parent=False),
            False,
            f"{KEY}temp-bu1's min keys are not all included in temp's",
            id="a child's min keys not all in its",
        ),
    ],
)
def test_sub_and_parent_group_quota_key(
    parent: dict[str, Any] | None,
    this: dict[str, Any],
    sub: dict[str, Any] | None,
    update_keys: bool,
    reason: str | None,
) -> None:
    topology = topology_of(parent, this, sub)
    info = QuotaInfo.from_object(this)
    assert topology.check_sub_and_parent_group_quota_key(info, update_keys) == reason


def test_sub_and_parent_group_quota_key_out_of_sync() -> None:
    this = quota("temp", max=res(53, 2097152), is_parent=True)
    topology = topology_of(this, quota("temp-bu1", parent="temp", max=res(53, 2097152)))
    del topology.quotas["temp-bu1"]
    assert topology.check_sub_and_parent_group_quota_key(QuotaInfo.from_object(this), False) == (
        "internal error: quotaInfoMap and quotaTree information out of sync, losed :temp-bu1"
    )


# -- checkTreeID -----------------------------------------------------------------------------


def _tree(parent_id: str | None, own_id: str | None, child_id: str | None) -> tuple[Any, ...]:
    both = res(7, 31)
    return (
        quota("parent", is_parent=True, tree_id=parent_id, min=both, max=both),
        quota("temp", parent="parent", is_parent=True, tree_id=own_id, min=both, max=both),
        quota("child", parent="temp", is_parent=False, tree_id=child_id, min=both, max=both),
    )


@pytest.mark.parametrize(
    ("ids", "reason"),
    [
        pytest.param((None, None, None), None, id="no tree id"),
        pytest.param(("tree-4", "tree-4", "tree-4"), None, id="one tree id"),
        pytest.param(
            (None, "tree-4", "tree-4"),
            "temp tree id is different from parent parent, [tree-4] vs []",
            id="parent without tree id",
        ),
        pytest.param(
            ("tree-4", None, "tree-4"),
            "temp tree id is different from parent parent, [] vs [tree-4]",
            id="self without tree id",
        ),
        pytest.param(
            ("tree-4", "tree-4", None),
            "temp tree id is different from child child, [tree-4] vs []",
            id="child without tree id",
        ),
    ],
)
def test_tree_id(ids: tuple[str | None, str | None, str | None], reason: str | None) -> None:
    parent, this, child = _tree(*ids)
    topology = topology_of(parent, this, child)
    assert topology.check_tree_id(None, QuotaInfo.from_object(this)) == reason


# -- checkMinQuotaValidate --------------------------------------------------------------------

BROTHERS = "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: "
CHILDREN = "checkMinQuotaSum all children's MinQuota > current MinQuota, current: "
BIG = res(97, 2097152)


@pytest.mark.parametrize(
    ("objs", "this", "reason"),
    [
        pytest.param(
            [quota("sub-1", parent="temp", max=BIG, min=res(11, 9000))],
            quota("temp", max=BIG, min=res(7, 40960), is_parent=True),
            f"{CHILDREN}temp",  # 11 cores under 7
            id="children over its min",
        ),
        pytest.param(
            [quota("temp", max=BIG, min=res(7, 40960), is_parent=True)],
            quota("sub-1", parent="temp", max=BIG, min=res(11, 9000)),
            f"{BROTHERS}temp",
            id="over the parent's min",
        ),
        pytest.param(
            [quota("sub-1", parent="temp", max=res(97, 9000), min=res(11, 9001))],
            quota("temp", max=BIG, min=res(11, 9000), is_parent=False),
            f"{CHILDREN}temp",  # one byte over
            id="a child one byte over",
        ),
        pytest.param(
            [quota("sub-1", parent="temp", max=BIG, min=res(11, 9000))],
            quota("temp", max=BIG, min=res(13, 40960), is_parent=True),
            None,
            id="children within",
        ),
        pytest.param(
            [
                quota("temp", max=BIG, min=res(20, 40960), is_parent=True),
                quota("sub-2", parent="temp", max=BIG, min=res(9, 0)),
            ],
            quota("sub-1", parent="temp", max=BIG, min=res(11, 40960)),
            None,  # 9 + 11 = 20 cores, 0 + 40960 bytes: exactly the parent's
            id="brothers exactly the parent's min",
        ),
        pytest.param(
            [
                quota("temp", max=BIG, min=res(20, 40960), is_parent=True),
                quota("sub-2", parent="temp", max=BIG, min=res(9, 0)),
            ],
            quota("sub-1", parent="temp", max=BIG, min=res(12, 40960)),
            f"{BROTHERS}temp",  # 9 + 12 = 21 cores
            id="brothers a core over",
        ),
        pytest.param(
            [
                quota("temp", max=BIG, min=res(20, 40960), is_parent=True),
                quota("sub-1", parent="temp", max=BIG, min=res(15, 0)),
            ],
            quota("sub-1", parent="temp", max=BIG, min=res(12, 40960)),
            None,  # its own recorded min (15) is replaced, not added
            id="an update replaces its own min",
        ),
        pytest.param(
            [quota("temp-no-min", is_parent=True)],
            quota("sub-1", parent="temp-no-min", max=BIG, min=res(19, 51200)),
            f"{BROTHERS}temp-no-min",
            id="parent without min",
        ),
        pytest.param(
            [quota("temp", max=BIG, min=res(7, 40960), is_parent=True)],
            quota("sub-1", parent="temp", max=BIG, min=res(11, 9000), force=True),
            None,
            id="allow-force-update",
        ),
        pytest.param(
            [quota("sub-1", parent="temp", max=BIG, min=res(11, 9000))],
            quota("temp", max=BIG, min=res(7, 40960), is_parent=True, is_root=True),
            None,
            id="a tree root",
        ),
    ],
)
def test_min_quota_sum(
    objs: list[dict[str, Any]], this: dict[str, Any], reason: str | None
) -> None:
    topology = topology_of(*objs)
    if this["metadata"]["name"] not in topology.quotas:
        topology.on_add(this)  # as the Go test records it; an update leaves the old one
    assert topology.check_min_quota_validate(QuotaInfo.from_object(this)) == reason


def test_min_quota_sum_out_of_sync() -> None:
    this = quota("temp", max=BIG, min=res(19, 51200), is_parent=True)
    topology = topology_of(this, quota("sub-1", parent="temp", max=BIG, min=res(16, 12800)))
    del topology.quotas["sub-1"]
    assert topology.check_min_quota_validate(QuotaInfo.from_object(this)) == (
        "checkMinQuotaSum failed:BUG quotaInfoMap and quotaTree information out of sync, "
        "losed :sub-1"
    )


# -- ValidAddQuota -----------------------------------------------------------------------------


def test_valid_add_quota() -> None:
    topology = QuotaTopology()
    temp = topology.fill_defaults(
        quota("temp", max=res(97, 2097152), min=res(41, 65536), is_parent=True)
    )
    assert topology.validate_add(temp) is None
    assert temp["metadata"]["labels"][model.LABEL_PARENT] == ROOT
    assert temp["metadata"]["annotations"][SHARED_WEIGHT] == '{"cpu":"97","memory":"2097152"}'
    assert counts(topology) == (1, 2)

    assert topology.validate_add(temp) == "AddQuota quota already exist:temp"

    sub1 = topology.fill_defaults(
        quota("sub-1", parent="temp", max=res(97, 2097152), min=res(20, 30000), is_parent=False)
    )
    assert topology.validate_add(sub1) is None
    assert counts(topology) == (2, 3)
    assert topology.children["temp"] == {"sub-1"}

    # 20 + 21 = 41 cores and 30000 + 35536 = 65536 bytes: exactly temp's min
    sub2 = topology.fill_defaults(
        quota("sub-2", parent="temp", max=res(97, 2097152), min=res(21, 35536), is_parent=False)
    )
    assert topology.validate_add(sub2) is None
    assert counts(topology) == (3, 4)
    assert topology.children["temp"] == {"sub-1", "sub-2"}

    # one core more than is left
    over = quota("sub-x", parent="temp", max=res(97, 2097152), min=res(1, 0), is_parent=False)
    assert topology.validate_add(over) == f"{BROTHERS}temp"
    assert counts(topology) == (3, 4)  # refused, not recorded

    temp2 = topology.fill_defaults(
        quota("temp2", max=res(97, 2097152), min=res(41, 65536), is_parent=True, tree_id="tree-1")
    )
    assert topology.validate_add(temp2) is None
    # a child without its parent's tree id (not filled by the mutating webhook)
    sub3 = quota("sub-3", parent="temp2", max=res(97, 2097152), min=res(41, 65536), is_parent=True)
    assert (
        topology.validate_add(sub3)
        == "sub-3 tree id is different from parent temp2, [] vs [tree-1]"
    )


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        pytest.param(
            quota("sub-x", parent="nowhere", max=res(5)),
            "sub-x has parentName nowhere but not find parentInfo in quotaInfoMap",
            id="unknown parent",
        ),
        pytest.param(
            quota("sub-x", parent="leaf", max=res(5)),
            "sub-x has parentName leaf but the parentQuotaInfo's IsParent is false",
            id="parent is a leaf",
        ),
        pytest.param(
            quota("sub-x", parent="temp", max=res(5), min=res(1)),
            f"failed to check sub and parent group quotaKey, err: {KEY}temp's max keys are not "
            "the same with sub-x's",
            id="max keys not the parent's",
        ),
        pytest.param(
            quota("sub-x", parent="temp", max=res(5, 9), min=res(1, 9)),
            None,
            id="fits",
        ),
        pytest.param(
            quota("temp2", namespaces=["ns-3"], max=res(5)),
            "AddQuota quota temp2's annotation namespace ns-3 is already bound to quota leaf",
            id="namespace taken",
        ),
        pytest.param(
            quota("sub-x", parent="temp", min=res(6, 9), max=res(5, 9)),
            "resourceKey cpu of quota sub-x min 6 > max 5",
            id="the quota's own checks first",
        ),
    ],
)
def test_valid_add_quota_refusals(obj: dict[str, Any], reason: str | None) -> None:
    topology = QuotaTopology()
    assert (
        topology.validate_add(quota("temp", is_parent=True, max=res(5, 9), min=res(3, 9))) is None
    )
    assert topology.validate_add(quota("leaf", namespaces=["ns-3"], max=res(5))) is None
    assert topology.validate_add(obj) == reason


# -- ValidUpdateQuota --------------------------------------------------------------------------


def test_valid_update_quota() -> None:
    topology = QuotaTopology()
    temp = topology.fill_defaults(
        quota("temp", max=res(97, 2097152), min=res(41, 65536), is_parent=True)
    )
    assert topology.validate_add(temp) is None
    assert topology.validate_update(json.loads(json.dumps(temp)), temp) is None

    # the shared weight is none of the fields an update is checked for
    weighted = json.loads(json.dumps(temp))
    weighted["metadata"]["annotations"][SHARED_WEIGHT] = '{"cpu":73, "memory":"524288"}'
    assert topology.validate_update(temp, weighted) is None

    temp2 = topology.fill_defaults(
        quota("temp2", max=res(97, 2097152), min=res(41, 65536), is_parent=True)
    )
    assert topology.validate_add(temp2) is None
    sub1 = topology.fill_defaults(
        quota("sub-1", parent="temp", max=res(97, 2097152), min=res(37, 16384), is_parent=False)
    )
    assert topology.validate_add(sub1) is None
    assert counts(topology) == (3, 4)
    assert topology.children["temp"] == {"sub-1"}
    assert topology.children["temp2"] == set()

    moved = with_label(sub1, model.LABEL_PARENT, "temp2")
    assert topology.validate_update(sub1, moved) is None
    assert counts(topology) == (3, 4)
    assert topology.children["temp"] == set()
    assert topology.children["temp2"] == {"sub-1"}

    back = with_label(moved, model.LABEL_PARENT, "temp")
    back["spec"]["min"] = res(98, 2097152)
    assert topology.validate_update(moved, back) == "resourceKey cpu of quota sub-1 min 98 > max 97"
    assert topology.children["temp2"] == {"sub-1"}  # refused, not recorded

    renamed = json.loads(json.dumps(back))
    renamed["metadata"]["name"] = "tmp"
    assert (
        topology.validate_update(moved, renamed)
        == "UpdateQuota quota not exist in quotaInfoMap:tmp"
    )
    for forbidden in (ROOT, model.SYSTEM_QUOTA):
        assert topology.validate_update(None, quota(forbidden)) == f"invalid quota {forbidden}"

    # temp has no children left: it may become a leaf; temp2 has sub-1: it may not
    assert topology.validate_update(temp, with_label(temp, model.LABEL_IS_PARENT, "false")) is None
    assert topology.validate_update(temp2, with_label(temp2, model.LABEL_IS_PARENT, "false")) == (
        "quota has children, isParent is forbidden to modify as false, quotaName:temp2"
    )

    # a leaf with pods may not become a parent: pods labelled with it, pods in the namespace
    # named as it, pods in a namespace its (old) annotation binds
    listed = json.loads(json.dumps(moved))
    listed["metadata"]["annotations"][model.ANNOTATION_NAMESPACES] = '["ns-a","ns-b"]'
    parent_now = with_label(listed, model.LABEL_IS_PARENT, "true")
    refused = "quota has bound pods, isParent is forbidden to modify as true, quotaName: sub-1"
    for pods in (
        [pod("pod1", "elsewhere", "sub-1")],
        [pod("pod2", "sub-1")],
        [pod("pod3", "ns-b")],
    ):
        assert topology.validate_update(listed, parent_now, PodIndex.from_pods(pods)) == refused
    others = PodIndex.from_pods([pod("pod4", "ns-c"), pod("pod5", "ns-d", "sub-2")])
    assert topology.validate_update(listed, parent_now, others) is None
    assert topology.quotas["sub-1"].is_parent

    # the tree id never changes
    with_tree = with_label(parent_now, model.LABEL_TREE_ID, "tree-1")
    assert topology.validate_update(parent_now, with_tree) == "sub-1 tree id changed [] vs [tree-1]"


def test_update_refuses_a_cycle() -> None:
    """Ours: Koordinator accepts these updates and loses the quotas from the tree."""
    topology = QuotaTopology()
    a = quota("a", is_parent=True, max=res(5), min=res(5))
    b = quota("b", parent="a", is_parent=True, max=res(5), min=res(5))
    c = quota("c", parent="b", is_parent=True, max=res(5), min=res(2))
    for obj in (a, b, c):
        assert topology.validate_add(obj) is None
    under_c = with_label(a, model.LABEL_PARENT, "c")
    assert topology.validate_update(a, under_c) == (
        "a has parentName c but c is a or one of its descendants, the quota tree would have a cycle"
    )
    under_itself = with_label(b, model.LABEL_PARENT, "b")
    assert topology.validate_update(b, under_itself) == (
        "b has parentName b but b is b or one of its descendants, the quota tree would have a cycle"
    )
    assert topology.quotas["a"].parent == ROOT
    assert topology.children[ROOT] == {"a"}


# -- namespaces annotation (TestQuotaTopology_AnnotationNamespaces) -----------------------------


def test_annotation_namespaces() -> None:
    topology = QuotaTopology()
    temp = quota("temp", namespaces=["ns-7", "ns-8"])
    assert topology.validate_add(temp) is None
    assert topology.namespace_quota == {"ns-7": "temp", "ns-8": "temp"}

    temp2 = json.loads(json.dumps(temp))
    temp2["metadata"]["name"] = "temp2"
    assert topology.validate_add(temp2) == (
        "AddQuota quota temp2's annotation namespace ns-7 is already bound to quota temp"
    )

    moved = quota("temp", namespaces=["ns-8", "ns-9"])
    assert topology.validate_update(temp, moved) is None
    assert topology.namespace_quota == {"ns-8": "temp", "ns-9": "temp"}

    temp5 = quota("temp5", namespaces="")
    assert topology.validate_add(temp5) is None
    assert topology.validate_update(temp5, quota("temp5", namespaces=["ns-8"])) == (
        "UpdadteQuota, quota temp5 update namespaces, but namespace ns-8 is already bound to "
        "quota temp"
    )
    assert topology.validate_delete(moved) is None
    assert topology.namespace_quota == {}

    # a list that does not parse as names binds no namespace (GetAnnotationQuotaNamespaces)
    for text in ('["ns-1", 7]', "ns-1", '{"ns-1": true}'):
        odd = quota("odd", namespaces=text)
        topology.on_add(odd)
        assert topology.namespace_quota == {}
        assert topology.quotas["odd"].namespaces == ()
        topology.on_delete(odd)


# -- ValidDeleteQuota -------------------------------------------------------------------------


def test_valid_delete_quota() -> None:
    topology = QuotaTopology()
    temp = quota("temp", max=res(97, 2097152), min=res(41, 65536), is_parent=True)
    temp2 = quota("temp2", max=res(97, 2097152), min=res(41, 65536), is_parent=True)
    sub1 = quota("sub-1", parent="temp", max=res(97, 2097152), min=res(37, 16384))
    for obj in (temp, temp2, sub1):
        assert topology.validate_add(topology.fill_defaults(obj)) is None

    assert topology.validate_delete(temp) == "delete quota failed, quota temp has 1 child quotas"
    assert counts(topology) == (3, 4)
    assert topology.children["temp"] == {"sub-1"}

    assert topology.validate_delete(temp2) is None
    assert counts(topology) == (2, 3)

    for pods, listed in (
        (["pod1"], "1 child pods: pod1"),
        (["pod-a", "pod-b"], "2 child pods: pod-a, pod-b"),
        (["pod-a", "pod-b", "pod-c"], "3 child pods: pod-a, pod-b, ..."),
    ):
        index = PodIndex.from_pods(pod(name, "ns-x", "sub-1") for name in pods)
        assert (
            topology.validate_delete(sub1, index)
            == f"delete quota failed, quota sub-1 has {listed}"
        )
    # pods of other quotas, and pods in a namespace named as the quota, do not hold it
    unrelated = PodIndex.from_pods([pod("pod-z", "sub-1", "temp")])
    assert topology.validate_delete(sub1, unrelated) is None
    assert counts(topology) == (1, 2)
    assert topology.children["temp"] == set()

    assert topology.validate_delete(temp) is None
    assert counts(topology) == (0, 1)

    for builtin in (model.SYSTEM_QUOTA, ROOT, model.DEFAULT_QUOTA):
        assert topology.validate_delete(quota(builtin)) == f"can not delete quotaGroup :{builtin}"
    missing = quota("notFound", max=res(1))
    assert topology.validate_delete(missing) == "not found quota:notFound"
    topology.quotas["notFound"] = QuotaInfo.from_object(missing)
    assert topology.validate_delete(missing) == (
        "BUG quotaMap and quotaTree information out of sync, losed :notFound"
    )


# -- the informer's handlers (TestNewQuotaTopology_QuotaHandler, TestQuotaHandler) -------------


def test_informer_records_unchecked() -> None:
    topology = QuotaTopology()
    sub1 = quota("sub-1", parent="temp", max=res(97, 2097152), min=res(37, 16384))
    topology.on_add(sub1)  # before its parent: recorded all the same
    assert counts(topology) == (1, 3)  # root, temp (named as a parent), sub-1
    assert topology.children["temp"] == {"sub-1"}

    parent = quota("temp", parent="xxx", max=res(97, 2097152), min=res(37, 16384), is_parent=True)
    topology.on_add(parent)
    assert counts(topology) == (2, 4)
    assert topology.children["temp"] == {"sub-1"}

    sub2 = quota("sub-2", parent="temp", max=res(97, 2097152), min=res(37, 16384))
    topology.on_add(sub2)
    assert counts(topology) == (3, 5)
    assert topology.children["temp"] == {"sub-1", "sub-2"}

    moved = with_label(sub2, model.LABEL_PARENT, "xxx")
    topology.on_update(sub2, moved)
    assert counts(topology) == (3, 5)
    assert topology.children["temp"] == {"sub-1"}
    assert topology.children["xxx"] == {"temp", "sub-2"}

    topology.on_delete(moved)
    assert counts(topology) == (2, 4)
    assert topology.children["temp"] == {"sub-1"}
    assert topology.children["xxx"] == {"temp"}


def test_quota_info_by_name_or_annotation_namespace() -> None:
    topology = QuotaTopology()
    parent = quota(
        "parentQuota", namespace="kube-system", max=res(83, 2097152), min=res(83, 2097152)
    )
    parent["metadata"]["labels"][model.LABEL_IS_PARENT] = "true"
    assert topology.validate_add(parent) is None  # TestQuotaMetaChecker
    info = topology.quota_info("parentQuota", "kube-system")
    assert info is not None
    assert (info.name, info.parent, info.namespace) == ("parentQuota", ROOT, "kube-system")

    child = quota(
        "childQuota",
        parent="parentQuota",
        namespace="kube-system",
        namespaces=["namespace1"],
        max=res(83, 2097152),
        min=res(83, 2097152),
    )
    topology.on_add(child)
    found = topology.quota_info("", "namespace1")
    assert found is not None
    assert (found.name, found.parent) == ("childQuota", "parentQuota")

    renamed = quota(
        "childQuota",
        parent="parentQuota",
        namespace="kube-system",
        namespaces=["namespace2"],
        max=res(83, 2097152),
        min=res(83, 2097152),
    )
    topology.on_update(child, renamed)
    assert topology.quota_info("", "namespace1") is None
    moved = topology.quota_info("", "namespace2")
    assert moved is not None
    assert moved.name == "childQuota"

    topology.on_delete(renamed)
    assert topology.quota_info("childQuota", "kube-system") is None
    assert topology.quota_info("", "namespace2") is None


# -- pods (TestQuotaTopology_AddPod_UpdatePod, TestQuotaTopology_getQuotaNameFromPod) ----------


def test_pods_of_a_parent_quota_are_refused() -> None:
    topology = topology_of(
        quota("temp", max=res(97, 2097152), min=res(41, 65536), is_parent=True),
        quota("sub-1", parent="temp", max=res(97, 2097152), min=res(37, 16384)),
        quota("sub-2", parent="temp", max=res(97, 2097152), min=res(37, 16384)),
    )
    pod1 = pod("pod1", quota_name="sub-1")
    assert topology.validate_add_pod(pod1) is None
    assert topology.validate_update_pod(pod1, pod("pod1", quota_name="sub-2")) is None

    pod2 = pod("pod2", quota_name="temp")
    refused = "pod can not be linked to a parentQuotaGroup,quota:temp, pod:pod2"
    assert topology.validate_add_pod(pod2) == refused
    fixed = pod("pod2", quota_name="sub-2")
    assert topology.validate_update_pod(pod2, fixed) is None
    assert topology.validate_update_pod(fixed, pod2) == refused

    # a quota that does not exist means the default quota
    assert topology.validate_add_pod(pod("pod3", quota_name="default")) is None

    preemptible = {model.LABEL_PREEMPTIBLE: "false"}
    assert topology.validate_update_pod(fixed, pod("pod2", quota_name="sub-2", **preemptible)) == (
        "Preemptible label is forbidden modify now."
    )

    allowed = QuotaTopology(QuotaGates(support_parent_quota_submit_pod=True))
    allowed.quotas, allowed.children = topology.quotas, topology.children
    assert allowed.validate_update_pod(fixed, pod2) is None


@pytest.mark.parametrize(
    ("the_pod", "quotas", "named", "runs_in"),
    [
        pytest.param(
            pod("p", "team-x"), [], model.DEFAULT_QUOTA, model.DEFAULT_QUOTA, id="default"
        ),
        pytest.param(
            pod("p", "team-x", "spark"),
            [quota("spark", namespace="team-x", is_parent=False)],
            "spark",
            "spark",
            id="label",
        ),
        pytest.param(
            pod("p", "team-x"),
            [
                quota("parent-quota", namespace="team-x", is_parent=True),
                quota("team-x", namespace="team-x", is_parent=False),
            ],
            "team-x",
            "team-x",
            id="the quota named as the namespace",
        ),
        pytest.param(
            pod("p", "team-x"),
            [quota("team-x", namespace="team-y"), quota("etl", namespaces=["team-x"])],
            "etl",
            "etl",
            id="a quota of that name elsewhere: the annotation's",
        ),
        pytest.param(
            pod("p", "team-x", "spark"),
            [quota("team-x", namespace="team-x")],
            "spark",
            model.DEFAULT_QUOTA,
            id="label naming no quota",
        ),
    ],
)
def test_quota_of_pod(
    the_pod: dict[str, Any], quotas: list[dict[str, Any]], named: str, runs_in: str
) -> None:
    topology = topology_of(*quotas)
    assert quota_name_of_pod(the_pod, topology) == named
    assert quota_of_pod(the_pod, topology) == runs_in


def test_without_default_quota_only_the_label_names_a_quota() -> None:
    topology = topology_of(
        quota("team-x", namespace="team-x"), gates=QuotaGates(disable_default_quota=True)
    )
    assert quota_name_of_pod(pod("p", "team-x"), topology) == ""
    assert quota_name_of_pod(pod("p", "team-x", "spark"), topology) == "spark"


def test_pod_index_from_pods() -> None:
    index = PodIndex.from_pods(
        [pod("a", "ns-1", "q"), pod("b", "ns-2"), pod("c", "ns-1", "q"), pod("d", "ns-1", "r")]
    )
    assert index.labelled == {"q": ["a", "c"], "r": ["d"]}
    assert index.in_namespace == {"ns-1": ["a", "c", "d"], "ns-2": ["b"]}


def test_the_pods_are_walked_only_when_a_check_asks_and_then_once() -> None:
    walks: list[int] = []

    def listed() -> list[dict[str, Any]]:
        walks.append(1)
        return [pod("a", "ns-1", "sub-1")]

    before = quota("sub-1", max=res(97), min=res(41))
    topology = topology_of(before)
    wider = quota("sub-1", max=res(97), min=res(53))
    assert topology.validate_update(before, wider, PodIndex(listed)) is None
    assert walks == []  # a new min: no check about pods
    index = PodIndex(listed)
    parent_now = with_label(wider, model.LABEL_IS_PARENT, "true")
    assert topology.validate_update(wider, parent_now, index) is not None  # has a pod
    assert index.labelled == {"sub-1": ["a"]} and index.in_namespace == {"ns-1": ["a"]}
    assert walks == [1]


# -- checkParentQuotaInfo ----------------------------------------------------------------------


def test_parent_quota_info() -> None:
    topology = topology_of(quota("temp", max=res(97, 2097152), min=res(41, 65536), is_parent=False))
    assert topology.check_parent_quota_info("", "temp") == (
        " has parentName temp but the parentQuotaInfo's IsParent is false"
    )
    del topology.children["temp"]
    assert topology.check_parent_quota_info("", "temp") == (
        " has parentName temp but not find parentInfo in quotaHierarchyInfo"
    )
    del topology.quotas["temp"]
    assert topology.check_parent_quota_info("", "temp") == (
        " has parentName temp but not find parentInfo in quotaInfoMap"
    )


# -- checkGuaranteedForMin (gate ElasticQuotaGuaranteeUsage) -----------------------------------


def _guarantee_tree(min_cpu: int) -> tuple[dict[str, Any], ...]:
    big = res(97, 2097152)
    return (
        quota(
            "temp",
            max=big,
            min=res(13, 60000),
            is_parent=True,
            tree_id="tree1",
            is_root=True,
            guaranteed=res(13, 60000),
        ),
        quota(
            "test1",
            parent="temp",
            max=big,
            min=res(min_cpu, 25600),
            tree_id="tree1",
            guaranteed=res(6, 35600),
        ),
        quota(
            "test2",
            parent="temp",
            max=big,
            min=res(2, 10000),
            tree_id="tree1",
            guaranteed=res(4, 10000),
        ),
    )


@pytest.mark.parametrize(
    ("min_cpu", "reason"),
    [
        pytest.param(5, None, id="within its guaranteed"),
        # max(9 cores, 6 guaranteed) + test2's 4 = 13 cores: temp guarantees 13
        pytest.param(9, None, id="the parent guarantees it"),
        # 10 + 4 = 14 cores over temp's 13; temp's parent is the root
        pytest.param(10, "tree root quota temp can't guarantee for min", id="beyond the parent"),
    ],
)
def test_guaranteed_for_min(min_cpu: int, reason: str | None) -> None:
    parent, this, sibling = _guarantee_tree(min_cpu)
    topology = topology_of(parent, this, sibling)
    assert topology.check_guaranteed_for_min(QuotaInfo.from_object(this)) == reason


def test_guaranteed_for_min_only_with_its_gate() -> None:
    parent, this, sibling = _guarantee_tree(10)
    gated = topology_of(parent, sibling, gates=QuotaGates(guarantee_usage=True))
    assert gated.validate_add(this) == "tree root quota temp can't guarantee for min test1"
    assert topology_of(parent, sibling).validate_add(this) is None
