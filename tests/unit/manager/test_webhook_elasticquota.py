"""koord-manager's ElasticQuota webhooks (manager.webhooks.elasticquota), their routes and the
informer feeding their tree. Cases after Koordinator v1.8's validating_handler_test.go,
mutating_handle_test.go and quota_topology_test.go, numbers changed; expected texts are
Koordinator's error strings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch
import pytest
from aiohttp.test_utils import TestClient, TestServer

from koordapi.quota.topology import QuotaGates, QuotaTopology
from manager.app import Manager, ManagerOptions
from manager.webhooks import elasticquota, pod_validating
from manager.webhooks.admission import AdmissionRequest, AdmissionResponse, parse_review
from manager.webhooks.server import StaticStateProvider, WebhookServer
from tests.fakekube import FakeKubeAPI
from tests.unit.manager.test_controllers import until
from tests.unit.manager.test_koordinator_metrics import value
from tests.unit.manager.webhooks import builders

PARENT = "quota.scheduling.koordinator.sh/parent"
IS_PARENT = "quota.scheduling.koordinator.sh/is-parent"
TREE_ID = "quota.scheduling.koordinator.sh/tree-id"
QUOTA_NAME = "quota.scheduling.koordinator.sh/name"
SHARED_WEIGHT = "quota.scheduling.koordinator.sh/shared-weight"
NAMESPACES = "quota.scheduling.koordinator.sh/namespaces"
GROUP = "scheduling.sigs.k8s.io"


def quota(
    name: str,
    *,
    parent: str = "",
    is_parent: bool = False,
    min: Mapping[str, str] | None = None,  # the CRD's field names
    max: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str = "quotas",
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if parent:
        all_labels[PARENT] = parent
    if is_parent:
        all_labels[IS_PARENT] = "true"
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if all_labels:
        meta["labels"] = all_labels
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {}
    if min is not None:
        spec["min"] = dict(min)
    if max is not None:
        spec["max"] = dict(max)
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": meta,
        "spec": spec,
    }


# A two-level tree: org (a parent, min 37 CPUs and 45Gi) holds team-x and team-y.
MAX = {"cpu": "73", "memory": "90Gi"}
ORG = quota("org", is_parent=True, min={"cpu": "37", "memory": "45Gi"}, max=MAX)
TEAM_X = quota("team-x", parent="org", min={"cpu": "21", "memory": "20Gi"}, max=MAX)
TEAM_Y = quota("team-y", parent="org", min={"cpu": "16", "memory": "25Gi"}, max=MAX)


def labelled_pod(name: str, quota_name: str) -> dict[str, Any]:
    return builders.pod(name=name, labels={QUOTA_NAME: quota_name})


class Tree:
    """A QuotaTree over a flag and a pod list the test changes."""

    def __init__(self, synced: bool = True, gates: QuotaGates | None = None) -> None:
        self.listed = synced
        self.pod_list: list[dict[str, Any]] = []
        self.tree = elasticquota.QuotaTree(
            QuotaTopology(gates or QuotaGates()),
            synced=lambda: self.listed,
            pods=lambda: self.pod_list,
        )


def req(
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    dry_run: bool = False,
) -> AdmissionRequest:
    review = builders.review(
        obj, operation, kind="ElasticQuota", group=GROUP, old=old, namespace="quotas"
    )
    review["request"]["dryRun"] = dry_run
    return parse_review(json.dumps(review))


def validate(tree: Tree, operation: str, obj: Any, old: Any = None, **kw: Any) -> AdmissionResponse:
    return elasticquota.validate_quota(req(operation, obj, old, **kw), tree.tree)


def admitted(tree: Tree, *quotas: dict[str, Any]) -> Tree:
    for obj in quotas:
        response = validate(tree, "CREATE", obj)
        assert response.allowed, response.message
    return tree


# -- validating ----------------------------------------------------------------------------


def test_a_valid_tree_is_admitted_and_recorded() -> None:
    tree = admitted(Tree(), ORG, TEAM_X, TEAM_Y)
    assert sorted(tree.tree.topology.quotas) == ["org", "team-x", "team-y"]
    assert tree.tree.topology.children["org"] == {"team-x", "team-y"}


def test_a_child_whose_min_does_not_fit_its_parents_is_refused() -> None:
    tree = admitted(Tree(), ORG, TEAM_X, TEAM_Y)
    # team-x 21 + team-y 16 = 37 CPUs, all of org's min: one milli-core more does not fit.
    team_z = quota("team-z", parent="org", min={"cpu": "1m"}, max=MAX)
    response = validate(tree, "CREATE", team_z)
    assert not response.allowed
    assert response.code == 400
    assert response.message == (
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: org"
    )
    assert "team-z" not in tree.tree.topology.quotas  # a refusal records nothing


def test_a_single_childs_min_over_its_parents_is_refused() -> None:
    tree = admitted(Tree(), ORG)
    greedy = quota("greedy", parent="org", min={"cpu": "38", "memory": "1Gi"}, max=MAX)
    assert validate(tree, "CREATE", greedy).message == (
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: org"
    )


def test_a_child_of_an_unknown_parent_is_refused() -> None:
    response = validate(Tree(), "CREATE", TEAM_X)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message == ("team-x has parentName org but not find parentInfo in quotaInfoMap")


def test_a_quota_created_twice_is_refused() -> None:
    tree = admitted(Tree(), ORG)
    assert validate(tree, "CREATE", ORG).message == "AddQuota quota already exist:org"


def test_delete_of_a_quota_with_children_is_refused() -> None:
    tree = admitted(Tree(), ORG, TEAM_X, TEAM_Y)
    response = validate(tree, "DELETE", None, old=ORG)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message == "delete quota failed, quota org has 2 child quotas"


def test_delete_of_a_quota_pods_are_labelled_with_is_refused_naming_two() -> None:
    tree = admitted(Tree(), ORG, TEAM_X)
    tree.pod_list = [labelled_pod(n, "team-x") for n in ("p-7", "p-3", "p-9")]
    tree.pod_list.append(labelled_pod("elsewhere", "team-y"))
    response = validate(tree, "DELETE", None, old=TEAM_X)
    assert response.message == "delete quota failed, quota team-x has 3 child pods: p-7, p-3, ..."
    tree.pod_list = []
    assert validate(tree, "DELETE", None, old=TEAM_X).allowed
    assert "team-x" not in tree.tree.topology.quotas
    assert validate(tree, "DELETE", None, old=ORG).allowed  # no child left


def test_the_built_in_quotas_cannot_be_deleted() -> None:
    root = quota("koordinator-root-quota")
    assert validate(Tree(), "DELETE", None, old=root).message == (
        "can not delete quotaGroup :koordinator-root-quota"
    )


def test_a_leaf_with_pods_may_not_become_a_parent() -> None:
    tree = admitted(Tree(), ORG, TEAM_X)
    tree.pod_list = [labelled_pod("trainer", "team-x")]
    turned = quota("team-x", parent="org", is_parent=True, min=TEAM_X["spec"]["min"], max=MAX)
    assert validate(tree, "UPDATE", turned, old=TEAM_X).message == (
        "quota has bound pods, isParent is forbidden to modify as true, quotaName: team-x"
    )


def test_the_tree_id_may_not_change() -> None:
    # validating_handler_test.go: "elasticQuota change tree id" (tree-2 -> tree-1 there)
    tree = admitted(Tree(), quota("quota2", labels={TREE_ID: "tree-5"}))
    new = quota("quota2", labels={TREE_ID: "tree-8"})
    old = quota("quota2", labels={TREE_ID: "tree-5"})
    response = validate(tree, "UPDATE", new, old=old)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message == "quota2 tree id changed [tree-5] vs [tree-8]"


def test_an_update_of_an_unknown_quota_is_refused() -> None:
    # validating_handler_test.go: "elasticQuota add tree id" on a quota never admitted
    new = quota("quota1", labels={TREE_ID: "tree-1"})
    response = validate(Tree(), "UPDATE", new, old=quota("quota1"))
    assert response.message == "UpdateQuota quota not exist in quotaInfoMap:quota1"


def test_an_update_within_the_parent_is_recorded() -> None:
    tree = admitted(Tree(), ORG, TEAM_X)
    grown = quota("team-x", parent="org", min={"cpu": "29", "memory": "20Gi"}, max=MAX)
    assert validate(tree, "UPDATE", grown, old=TEAM_X).allowed
    # team-y's 16 CPUs no longer fit beside team-x's 29 (org: 37)
    assert validate(tree, "CREATE", TEAM_Y).message == (
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: org"
    )


def test_the_gate_enable_update_resource_key_is_followed() -> None:
    narrower = quota("team-x", parent="org", min={"cpu": "3"}, max={"cpu": "11"})
    plain = admitted(Tree(), ORG)
    assert validate(plain, "CREATE", narrower).message == (
        "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey "
        "failed: org's max keys are not the same with team-x's"
    )
    gated = admitted(Tree(gates=QuotaGates(enable_update_resource_key=True)), ORG)
    assert validate(gated, "CREATE", narrower).allowed


@pytest.mark.parametrize(
    ("operation", "obj", "old", "field"),
    [
        ("CREATE", None, None, "object"),  # Koordinator: "elasticQuota with empty object"
        ("UPDATE", TEAM_X, None, "oldObject"),
        ("DELETE", None, None, "oldObject"),
    ],
)
def test_a_review_without_the_quota_is_a_bad_request(
    operation: str, obj: Any, old: Any, field: str
) -> None:
    response = validate(Tree(), operation, obj, old)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message.startswith(f"request.{field}: ")


def test_a_dry_run_is_checked_but_not_recorded() -> None:
    tree = admitted(Tree(), ORG)
    assert validate(tree, "CREATE", TEAM_X, dry_run=True).allowed
    assert "team-x" not in tree.tree.topology.quotas
    refused = quota("team-z", parent="org", min={"cpu": "38"}, max=MAX)
    assert not validate(tree, "CREATE", refused, dry_run=True).allowed
    assert validate(tree, "CREATE", TEAM_X).allowed  # not "already exist"


def test_before_the_informer_lists_writes_are_allowed_with_a_warning_and_not_recorded() -> None:
    tree = Tree(synced=False)
    for operation, obj, old in (
        ("CREATE", TEAM_X, None),
        ("UPDATE", TEAM_Y, TEAM_X),
        ("DELETE", None, ORG),
    ):
        response = validate(tree, operation, obj, old)
        assert response.allowed
        assert response.warnings == (elasticquota.NOT_LISTED,)
    assert tree.tree.topology.quotas == {}


# -- the informer's feed -------------------------------------------------------------------


def test_what_other_replicas_admitted_arrives_through_the_informer() -> None:
    tree = Tree()
    tree.tree.on_event("ADDED", ORG)
    tree.tree.on_event("ADDED", TEAM_X)  # unchecked, as OnQuotaAdd
    assert validate(tree, "DELETE", None, old=ORG).message == (
        "delete quota failed, quota org has 1 child quotas"
    )
    # a namespace bound by a later MODIFIED event, then freed when it changes again
    bound = quota("team-x", parent="org", min=TEAM_X["spec"]["min"], max=MAX)
    bound["metadata"]["annotations"] = {NAMESPACES: '["ns-41"]'}
    tree.tree.on_event("MODIFIED", bound)
    assert tree.tree.topology.namespace_quota == {"ns-41": "team-x"}
    tree.tree.on_event("MODIFIED", TEAM_X)
    assert tree.tree.topology.namespace_quota == {}
    tree.tree.on_event("DELETED", TEAM_X)
    tree.tree.on_event("DELETED", ORG)
    assert validate(tree, "CREATE", TEAM_Y).message == (
        "team-y has parentName org but not find parentInfo in quotaInfoMap"
    )


def test_a_quota_that_does_not_parse_is_left_out_of_the_tree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tree = Tree()
    broken = quota("broken", max={"cpu": "many"})
    tree.tree.on_event("ADDED", broken)
    tree.tree.on_event("RESYNC", broken)
    assert tree.tree.topology.quotas == {}
    assert caplog.text.count("ElasticQuota quotas/broken left out") == 1  # said once
    # mended, then broken again: its good version stays, and the reason is said again
    tree.tree.on_event("MODIFIED", quota("broken", max={"cpu": "3"}))
    tree.tree.on_event("MODIFIED", broken)
    assert tree.tree.topology.quotas["broken"].max == {"cpu": 3000}
    assert caplog.text.count("ElasticQuota quotas/broken left out") == 2


# -- mutating ------------------------------------------------------------------------------


def mutate(tree: Tree, operation: str, obj: Any) -> AdmissionResponse:
    return elasticquota.mutate_quota(req(operation, obj), tree.tree)


def test_a_new_quota_gets_the_root_parent_and_its_max_as_shared_weight() -> None:
    obj = quota("solo", max={"memory": "12Gi", "cpu": "7500m"})
    response = mutate(Tree(), "CREATE", obj)
    assert response.allowed
    result = jsonpatch.apply_patch(obj, response.patch or [])
    assert result["metadata"]["labels"] == {PARENT: "koordinator-root-quota"}
    # keys sorted, amounts as given: Go's json.Marshal of a ResourceList
    assert result["metadata"]["annotations"] == {SHARED_WEIGHT: '{"cpu":"7500m","memory":"12Gi"}'}


def test_a_child_gets_its_parents_tree_id_and_a_shared_weight_of_maxs_keys() -> None:
    tree = Tree()
    tree.tree.on_event("ADDED", quota("org", is_parent=True, labels={TREE_ID: "tree-7"}, max=MAX))
    obj = quota(
        "team-x", parent="org", max=MAX, annotations={SHARED_WEIGHT: '{"cpu":"5","gpu":"2"}'}
    )
    result = jsonpatch.apply_patch(obj, mutate(tree, "CREATE", obj).patch or [])
    assert result["metadata"]["labels"] == {PARENT: "org", TREE_ID: "tree-7"}
    # cpu kept, gpu (not in max) dropped, memory (missing) taken from max
    assert json.loads(result["metadata"]["annotations"][SHARED_WEIGHT]) == {
        "cpu": "5",
        "memory": "90Gi",
    }


def test_the_root_quota_and_updates_are_not_mutated() -> None:
    # mutating_handle_test.go: "create root quota", "elasticQuota update"
    root = mutate(Tree(), "CREATE", quota("koordinator-root-quota"))
    assert (root.allowed, root.patch) == (True, None)
    update = mutate(Tree(), "UPDATE", quota("pod1"))
    assert (update.allowed, update.patch) == (True, None)


def test_a_create_without_object_is_a_bad_request() -> None:
    response = mutate(Tree(), "CREATE", None)
    assert (response.allowed, response.code) == (False, 400)


def test_an_unknown_parent_is_refused_once_listed_and_warned_about_before() -> None:
    obj = quota("team-q", parent="nowhere", max=MAX)
    response = mutate(Tree(), "CREATE", obj)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message == "fill quota team-q failed, parent not exist"
    early = mutate(Tree(synced=False), "CREATE", obj)
    assert (early.allowed, early.patch) == (True, None)
    assert early.warnings == (
        f"{elasticquota.NOT_LISTED}: fill quota team-q failed, parent not exist",
    )


def test_a_shared_weight_that_does_not_parse_is_refused() -> None:
    obj = quota("solo", max=MAX, annotations={SHARED_WEIGHT: "[1, 2]"})
    response = mutate(Tree(), "CREATE", obj)
    assert (response.allowed, response.code) == (False, 400)
    assert response.message.startswith("fillDefaultQuotaInfo unmarshal sharedWeight failed:")


# -- the routes ----------------------------------------------------------------------------


def post_all(server: WebhookServer, posts: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def scenario() -> list[Any]:
        answers = []
        async with TestClient(TestServer(server.application())) as client:
            for path, body in posts:
                response = await client.post(path, json=body)
                answers.append(
                    (response.status, await response.json())
                    if response.status == 200
                    else (response.status, None)
                )
        return answers

    return asyncio.run(scenario())


def quota_review(operation: str, obj: Any, old: Any = None) -> dict[str, Any]:
    return builders.review(obj, operation, kind="ElasticQuota", group=GROUP, old=old)


def server(tree: Tree | None, routes: frozenset[str] | None = None) -> WebhookServer:
    extra: dict[str, Any] = {} if routes is None else {"quota_routes": routes}
    return WebhookServer(
        "127.0.0.1",
        0,
        "/nonexistent",
        StaticStateProvider(),
        "koordinator-system",
        quota_tree=tree.tree if tree else None,
        **extra,
    )


def test_both_routes_answer_elastic_quota_reviews() -> None:
    tree = admitted(Tree(), ORG)
    greedy = quota("greedy", parent="org", min={"cpu": "38"}, max=MAX)
    (mutated, refused, other_kind) = post_all(
        server(tree),
        [
            (elasticquota.MUTATE_PATH, quota_review("CREATE", quota("solo", max=MAX))),
            (elasticquota.VALIDATE_PATH, quota_review("CREATE", greedy)),
            (elasticquota.VALIDATE_PATH, builders.review(builders.pod())),
        ],
    )
    assert mutated[0] == 200
    assert mutated[1]["response"]["allowed"] is True
    patch = builders.decode_patch(mutated[1])
    assert {
        "op": "add",
        "path": "/metadata/labels",
        "value": {PARENT: "koordinator-root-quota"},
    } in patch
    assert refused[1]["response"]["allowed"] is False
    assert refused[1]["response"]["status"] == {
        "code": 400,
        "message": "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: org",
    }
    # a Pod sent to the quota route: allowed, the warning names the misconfiguration
    assert other_kind[1]["response"]["allowed"] is True
    assert other_kind[1]["response"]["warnings"] == [
        f"koord-manager {elasticquota.VALIDATE_PATH} handles ElasticQuota only, ignored kind Pod"
    ]


def test_a_route_switched_off_is_not_found() -> None:
    body = quota_review("CREATE", ORG)
    only_mutating = server(Tree(), frozenset({elasticquota.MUTATE_PATH}))
    answers = post_all(
        only_mutating, [(elasticquota.VALIDATE_PATH, body), (elasticquota.MUTATE_PATH, body)]
    )
    assert [status for status, _ in answers] == [404, 200]
    answers = post_all(server(None), [(elasticquota.MUTATE_PATH, body)])
    assert [status for status, _ in answers] == [404]


# -- the manager: gates and the informer ---------------------------------------------------


@pytest.mark.parametrize(
    ("gates", "routes"),
    [
        ({}, {elasticquota.MUTATE_PATH, elasticquota.VALIDATE_PATH}),
        ({"ElasticValidatingWebhook": False}, {elasticquota.MUTATE_PATH}),
        ({"ElasticMutatingWebhook": False}, {elasticquota.VALIDATE_PATH}),
        ({"AllBeta": False}, set()),
    ],
)
def test_the_gates_pick_the_routes(gates: dict[str, bool], routes: set[str]) -> None:
    options = ManagerOptions(webhook_port=9876, metrics_addr="", feature_gates=gates)
    manager = Manager(FakeKubeAPI().kube_api(), options)
    assert manager.quota_routes == routes
    assert (manager.quota_tree is None) == (not routes)


def test_no_webhook_server_keeps_no_tree() -> None:
    manager = Manager(FakeKubeAPI().kube_api(), ManagerOptions(webhook_port=None))
    assert (manager.quota_tree, manager.quota_routes) == (None, frozenset())


def test_the_managers_quota_informer_feeds_the_tree() -> None:
    api = FakeKubeAPI()
    api.seed(ORG, TEAM_X)
    options = ManagerOptions(
        webhook_port=9876,  # not started: only the informer runs
        metrics_addr="",
        feature_gates={"ElasticQuotaGuaranteeUsage": True},
    )
    manager = Manager(api.kube_api(), options)
    tree = manager.quota_tree
    assert tree is not None
    assert tree.topology.gates == QuotaGates(guarantee_usage=True)
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        informer = manager.state.elastic_quotas
        task = asyncio.create_task(informer.run())
        try:
            seen["before"] = tree.synced()
            await until(informer.synced.is_set)
            seen["after"] = tree.synced()
            seen["quotas"] = sorted(tree.topology.quotas)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert seen == {"before": False, "after": True, "quotas": ["org", "team-x"]}


# -- the pod validating webhook's quota checks (pod_check.go) --------------------------------

PREEMPTIBLE = "quota.scheduling.koordinator.sh/preemptible"


def validate_pod(tree: Tree, pod: dict[str, Any], old: dict[str, Any] | None = None) -> Any:
    operation = "UPDATE" if old else "CREATE"
    request = builders.request(pod, operation, old=old)
    return pod_validating.validate_pod(request, tree.tree.topology)


def test_a_pod_of_a_parent_quota_is_refused() -> None:
    tree = admitted(Tree(), ORG, TEAM_X)
    response = validate_pod(tree, labelled_pod("trainer-3", "org"))
    assert (response.allowed, response.code) == (False, 400)
    assert (
        response.message == "pod can not be linked to a parentQuotaGroup,quota:org, pod:trainer-3"
    )
    assert validate_pod(tree, labelled_pod("trainer-3", "team-x")).allowed
    # a quota not in the tree is the default quota: no check
    assert validate_pod(tree, labelled_pod("trainer-3", "no-such-quota")).allowed
    gated = admitted(Tree(gates=QuotaGates(support_parent_quota_submit_pod=True)), ORG)
    assert validate_pod(gated, labelled_pod("trainer-3", "org")).allowed


def test_a_pod_of_a_namespace_bound_to_a_parent_quota_is_refused() -> None:
    bound = quota("org", is_parent=True, max=MAX, annotations={NAMESPACES: '["team-a"]'})
    tree = admitted(Tree(), bound)
    unlabelled = builders.pod(name="web")  # in builders.NAMESPACE, team-a
    assert validate_pod(tree, unlabelled).message == (
        "pod can not be linked to a parentQuotaGroup,quota:org, pod:web"
    )
    # DisableDefaultQuota: only the label says the quota
    gated = admitted(Tree(gates=QuotaGates(disable_default_quota=True)), bound)
    assert validate_pod(gated, unlabelled).allowed


def test_the_preemptible_label_may_not_change() -> None:
    tree = admitted(Tree(), ORG, TEAM_X)
    old = builders.pod(name="web", labels={QUOTA_NAME: "team-x", PREEMPTIBLE: "true"})
    new = builders.pod(name="web", labels={QUOTA_NAME: "team-x", PREEMPTIBLE: "false"})
    assert validate_pod(tree, new, old).message == "Preemptible label is forbidden modify now."
    assert validate_pod(tree, old, old).allowed


def test_the_pod_route_checks_quotas_once_the_tree_is_listed() -> None:
    tree = admitted(Tree(), ORG)
    body = builders.review(labelled_pod("trainer-3", "org"))
    tree.listed = False
    ((_, early),) = post_all(server(tree), [("/validate-pod", body)])
    assert early["response"]["allowed"] is True
    tree.listed = True
    ((_, listed),) = post_all(server(tree), [("/validate-pod", body)])
    assert listed["response"]["status"]["message"] == (
        "pod can not be linked to a parentQuotaGroup,quota:org, pod:trainer-3"
    )


# -- koord_manager_webhook_quota_shared_weight ----------------------------------------------


def test_a_shared_weight_filled_as_max_is_recorded_rounded_up() -> None:
    recorded: list[tuple[str, str, float]] = []
    tree = Tree()
    tree.tree.on_shared_weight = lambda *sample: recorded.append(sample)
    mutate(tree, "CREATE", quota("solo", max={"cpu": "7500m", "memory": "3Gi"}))
    assert sorted(recorded) == [("solo", "cpu", 8.0), ("solo", "memory", 3 * 2.0**30)]
    recorded.clear()
    # given (even with keys to fix) or the root quota: Koordinator records nothing
    given = quota("other", max=MAX, annotations={SHARED_WEIGHT: '{"cpu":"2"}'})
    mutate(tree, "CREATE", given)
    mutate(tree, "CREATE", quota("koordinator-root-quota", max=MAX))
    assert recorded == []


def test_the_manager_exports_the_shared_weight() -> None:
    manager = Manager(FakeKubeAPI().kube_api(), ManagerOptions(metrics_addr=""))
    assert manager.quota_tree is not None
    elasticquota.mutate_quota(req("CREATE", quota("solo", max=MAX)), manager.quota_tree)
    name = "koord_manager_webhook_quota_shared_weight"
    labels = {"elasticquota_name": "solo"}
    assert value(manager.metrics, name, **labels, resource_name="cpu") == 73.0
    assert value(manager.metrics, name, **labels, resource_name="memory") == 90 * 2.0**30
