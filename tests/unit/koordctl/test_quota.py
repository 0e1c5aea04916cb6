"""``koordctl quota``: the ElasticQuota tree and why a pod of a quota or a gang waits."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

import koordctl as ctl
from koordctl import client
from koordctl import quota as quota_cmd
from koordctl.quota import quota_row, quota_rows, render_tree, render_why, why_report

PARENT = "quota.scheduling.koordinator.sh/parent"
TREE_ID = "quota.scheduling.koordinator.sh/tree-id"
RUNTIME = "quota.scheduling.koordinator.sh/runtime"
REQUEST = "quota.scheduling.koordinator.sh/request"
GATE = "scheduling.koordinator.sh/gang"


def eq(
    name: str,
    namespace: str = "teams",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    min_: dict[str, str] | None = None,
    max_: dict[str, str] | None = None,
    used: dict[str, str] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {},
    }
    if min_ is not None:
        obj["spec"]["min"] = min_
    if max_ is not None:
        obj["spec"]["max"] = max_
    if used is not None:
        obj["status"] = {"used": used}
    return obj


# Two trees. The default one has three levels (team-a > team-a-batch > team-a-batch-spark) and
# team-b, whose parent "ghost" does not exist (so it starts the block). The gpu-pool tree is a
# root and one child.
QUOTAS = [
    eq(
        "team-b",
        labels={PARENT: "ghost"},
        min_={"cpu": "1", "memory": "1Gi"},
        max_={"cpu": "2", "memory": "3Gi"},
    ),  # no status, no annotations: "-"
    eq(
        "team-a-batch-spark",
        "spark",
        labels={PARENT: "team-a-batch"},
        min_={"cpu": "300m", "memory": "512Mi"},
        max_={"cpu": "7", "memory": "12Gi"},
        used={"cpu": "0", "memory": "0"},
        annotations={RUNTIME: '{"cpu":"0","memory":"0"}', REQUEST: "{}"},
    ),
    eq(
        "team-a",
        min_={"cpu": "3500m", "memory": "6Gi"},
        max_={"cpu": "7", "memory": "12Gi"},
        used={"cpu": "2300m", "memory": "3Gi"},
        annotations={
            RUNTIME: '{"cpu":"3500m","memory":"6Gi"}',
            REQUEST: '{"cpu":"2300m","memory":"3Gi"}',
        },
    ),
    # used 2300m over a runtime of 1700m: the other teams took their min back, so team-a-batch
    # is being reclaimed; memory (3Gi of 4Gi) is within.
    eq(
        "team-a-batch",
        labels={PARENT: "team-a"},
        min_={"cpu": "1500m", "memory": "2Gi"},
        max_={"cpu": "7", "memory": "12Gi"},
        used={"cpu": "2300m", "memory": "3Gi"},
        annotations={
            RUNTIME: '{"cpu":"1700m","memory":"4Gi"}',
            REQUEST: '{"cpu":"2300m","memory":"3Gi"}',
        },
    ),
    # asks for 9 GPUs with a max of 6: over max by request; used 5 is within runtime 5.
    eq(
        "gpu-train",
        "ml",
        labels={PARENT: "gpu-root", TREE_ID: "gpu-pool"},
        min_={"cpu": "8", "nvidia.com/gpu": "2"},
        max_={"cpu": "16", "nvidia.com/gpu": "6"},
        used={"cpu": "10", "nvidia.com/gpu": "5"},
        annotations={
            RUNTIME: '{"cpu":"10","nvidia.com/gpu":"5"}',
            REQUEST: '{"cpu":"12","nvidia.com/gpu":"9"}',
        },
    ),
    eq(
        "gpu-root",
        "ml",
        labels={TREE_ID: "gpu-pool", "quota.scheduling.koordinator.sh/is-root": "true"},
        min_={"cpu": "16", "nvidia.com/gpu": "6"},
        max_={"cpu": "16", "nvidia.com/gpu": "6"},
    ),
]

TREE = """\
default tree
  NAME                          MIN                 MAX             USED               RUNTIME            REQUEST
  teams/team-a                  cpu 3500m mem 6Gi   cpu 7 mem 12Gi  cpu 2300m mem 3Gi  cpu 3500m mem 6Gi  cpu 2300m mem 3Gi
    teams/team-a-batch          cpu 1500m mem 2Gi   cpu 7 mem 12Gi  cpu 2300m mem 3Gi  cpu 1700m mem 4Gi  cpu 2300m mem 3Gi  ! used > runtime (cpu): being reclaimed
      spark/team-a-batch-spark  cpu 300m mem 512Mi  cpu 7 mem 12Gi  cpu 0 mem 0        cpu 0 mem 0        <empty>
  teams/team-b                  cpu 1 mem 1Gi       cpu 2 mem 3Gi   -                  -                  -                  ! parent ghost is no quota of this tree

tree gpu-pool
  NAME            MIN                      MAX                      USED                     RUNTIME                  REQUEST
  ml/gpu-root     cpu 16 nvidia.com/gpu 6  cpu 16 nvidia.com/gpu 6  -                        -                        -
    ml/gpu-train  cpu 8 nvidia.com/gpu 2   cpu 16 nvidia.com/gpu 6  cpu 10 nvidia.com/gpu 5  cpu 10 nvidia.com/gpu 5  cpu 12 nvidia.com/gpu 9  ! request > max (nvidia.com/gpu)"""  # noqa: E501


def test_the_tree_puts_children_under_parents_one_block_per_tree() -> None:
    rows = quota_rows(QUOTAS)

    assert [(row.tree, row.depth, row.name) for row in rows] == [
        ("", 0, "teams/team-a"),
        ("", 1, "teams/team-a-batch"),
        ("", 2, "spark/team-a-batch-spark"),
        ("", 0, "teams/team-b"),  # its parent "ghost" is no quota: under the root
        ("gpu-pool", 0, "ml/gpu-root"),
        ("gpu-pool", 1, "ml/gpu-train"),
    ]
    assert rows[3].parent == "ghost"
    assert rows[0].parent == "koordinator-root-quota"  # no parent label


def test_the_tree_renders_amounts_marks_and_missing_annotations() -> None:
    # team-a-batch's used cpu 2300m is over its runtime 1700m; gpu-train asks 9 GPUs of max 6;
    # team-b has no status and no annotations yet; spark's request annotation names nothing.
    assert render_tree(quota_rows(QUOTAS)) == TREE


def test_the_json_rows_carry_the_shown_amounts() -> None:
    (batch,) = [row for row in quota_rows(QUOTAS) if row.name == "teams/team-a-batch"]

    assert batch.used == {"cpu": "2300m", "memory": "3Gi"}
    assert batch.runtime == {"cpu": "1700m", "memory": "4Gi"}
    assert batch.marks == ["used > runtime (cpu): being reclaimed"]


def test_used_over_max_and_an_unreadable_annotation_are_marked() -> None:
    # used 5Gi over a max of 4Gi; the runtime annotation is not JSON: shown as absent.
    row = quota_row(
        eq(
            "over",
            max_={"cpu": "2", "memory": "4Gi"},
            used={"cpu": "1", "memory": "5Gi"},
            annotations={RUNTIME: "{cpu:1"},
        )
    )

    assert row.runtime is None
    assert row.marks[0].startswith("runtime unreadable: ")
    assert row.marks[1:] == ["used > max (memory)"]


def test_a_cycle_of_parents_is_shown_not_lost() -> None:
    # x's parent is y and y's is x: neither is reachable from the top.
    rows = quota_rows([eq("y", labels={PARENT: "x"}), eq("x", labels={PARENT: "y"})])

    assert [(row.depth, row.name) for row in rows] == [(0, "teams/x"), (1, "teams/y")]
    assert rows[0].marks == ["parent y is in a cycle of parents"]
    assert rows[1].marks == []


def test_a_chain_deeper_than_the_recursion_limit_is_walked() -> None:
    chain = [eq("q0")] + [eq(f"q{i}", labels={PARENT: f"q{i - 1}"}) for i in range(1, 3001)]

    rows = quota_rows(chain[::-1])

    assert [row.depth for row in rows] == list(range(3001))
    assert rows[-1].name == "teams/q3000"


def test_no_quota_at_all() -> None:
    assert render_tree([]) == "no ElasticQuota in the cluster"


# -- why -----------------------------------------------------------------------------------


def member(
    name: str, *, node: str = "", gated: bool = False, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "teams",
            "uid": f"uid-{name}",
            "labels": {"quota.scheduling.koordinator.sh/name": "team-a-batch"},
            "annotations": {
                "gang.scheduling.koordinator.sh/name": "trainer",
                "gang.scheduling.koordinator.sh/min-available": "4",
                "gang.scheduling.koordinator.sh/total-number": "5",
                "gang.scheduling.koordinator.sh/waiting-time": "90s",
                **(extra or {}),
            },
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Running" if node else "Pending"},
    }
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
        pod["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }
        ]
    return pod


def event(reason: str, when: str, message: str, component: str, count: int = 1) -> dict[str, Any]:
    return {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": when,
        "source": {"component": component},
    }


GANG_WAIT = (
    "gangGroup [teams/trainer] waiting at Permit: memberGangs [teams/trainer] have not enough "
    "assumed pods, current gang: teams/trainer"
)
# kube-scheduler's message around the extender's quota reason (koordapi.quota.runtime)
QUOTA_WAIT = (
    "0/1 nodes are available: 1 Insufficient quotas, quotaName: team-a-batch, runtime: "
    "cpu:1700m,memory:4Gi, used: cpu:2300m,memory:3Gi, pod's request: cpu:900m,memory:1Gi, "
    "exceedDimensions: [cpu]."
)
EVENTS = [
    # listed newest first: the report puts them oldest first
    event("Pulled", "2026-12-06T17:40:00Z", "image pulled", "kubelet"),  # not about waiting
    event("FailedScheduling", "2026-12-06T17:31:07Z", GANG_WAIT, "koord-manager", 4),
    event("FailedScheduling", "2026-12-06T17:20:41Z", QUOTA_WAIT, "default-scheduler", 3),
]


def test_a_gated_gang_member_says_its_quota_gang_gate_and_events() -> None:
    pod = member("trainer-2", gated=True)
    pods = [
        member("trainer-0", node="node-3"),
        member("trainer-1", gated=True),
        pod,
        {"metadata": {"name": "web", "namespace": "teams"}},  # in no gang
    ]

    report = why_report(pod, QUOTAS, None, pods, EVENTS)
    text = render_why(report).splitlines()

    assert text == [
        "pod teams/trainer-2: phase Pending, node -",
        "quota team-a-batch (its label quota.scheduling.koordinator.sh/name)",
        "  min [cpu 1500m mem 2Gi] max [cpu 7 mem 12Gi] used [cpu 2300m mem 3Gi] "
        "runtime [cpu 1700m mem 4Gi] request [cpu 2300m mem 3Gi]",
        "  ! used > runtime (cpu): being reclaimed",
        "gang teams/trainer (from its annotations): min-available 4, total-number 5, "
        "mode Strict, waiting-time 1m30s",
        "  members: 3 pod(s), 1 bound, 2 gated",
        "  PodGroup: none",
        "scheduling gate scheduling.koordinator.sh/gang: present (koord-manager removes it "
        "when the whole gang fits)",
        "PodScheduled: False, SchedulingGated: Scheduling is blocked due to non-empty "
        "scheduling gates",
        f"event 2026-12-06T17:20:41Z FailedScheduling x3 (default-scheduler): {QUOTA_WAIT}",
        f"event 2026-12-06T17:31:07Z FailedScheduling x4 (koord-manager): {GANG_WAIT}",
        f"waiting because: {GANG_WAIT}",
    ]
    assert report["gated"] is True and report["waiting"] == GANG_WAIT
    json.dumps(report)  # --json prints it


@pytest.mark.parametrize(
    ("reason", "kept"),
    [
        ("FailedScheduling", True),
        ("GangTimeout", True),
        ("QuotaOverUsed", True),
        ("Scheduled", False),
        ("Pulled", False),
        ("failedscheduling", False),
    ],
)
def test_only_scheduling_gang_and_quota_events_are_kept(reason: str, kept: bool) -> None:
    assert quota_cmd.relevant({"reason": reason}) is kept


def test_an_events_api_event_is_read_by_its_series_and_reporting_component() -> None:
    # kube-scheduler writes events.k8s.io/v1 Events: through the core API they carry
    # eventTime, series and reportingComponent, with no lastTimestamp, count or source.
    newer = {
        "reason": "FailedScheduling",
        "message": "0/5 nodes are available: 5 Insufficient cpu.",
        "eventTime": "2026-12-06T16:02:11.417203Z",
        "series": {"count": 17, "lastObservedTime": "2026-12-06T16:44:58.000001Z"},
        "reportingComponent": "default-scheduler",
        "source": {},
    }
    older = event("QuotaOverUsed", "2026-12-06T16:30:00Z", "runtime lowered", "koord-manager")

    report = why_report(member("p", gated=False), QUOTAS, None, [], [newer, older])

    assert [(e["reason"], e["time"], e["count"], e["source"]) for e in report["events"]] == [
        ("QuotaOverUsed", "2026-12-06T16:30:00Z", 1, "koord-manager"),
        ("FailedScheduling", "2026-12-06T16:44:58Z", 17, "default-scheduler"),
    ]
    assert report["waiting"] == "0/5 nodes are available: 5 Insufficient cpu."


def test_a_gated_member_without_events_is_held_by_the_gate() -> None:
    report = why_report(member("trainer-1", gated=True), QUOTAS)

    assert report["waiting"] == (
        "held by the scheduling gate scheduling.koordinator.sh/gang until the whole gang fits"
    )
    assert report["gang"]["members"] == 1  # the namespace's pods not given: the pod alone


def test_a_podgroup_gang_takes_its_spec_and_status_from_the_podgroup() -> None:
    pod = member("pg-0", extra={})
    pod["metadata"]["annotations"] = {}
    pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "pg"
    podgroup = {
        "metadata": {"name": "pg", "namespace": "teams"},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 130},
        "status": {"phase": "PreScheduling", "scheduled": 1, "running": 0},
    }
    pending = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pod["status"]["conditions"] = [{**pending, "message": "0/3 nodes are available"}]

    text = render_why(why_report(pod, QUOTAS, podgroup, [pod], [])).splitlines()

    assert text[4:7] == [
        "gang teams/pg (from its PodGroup): min-available 3, total-number 3, mode Strict, "
        "waiting-time 2m10s",
        "  members: 1 pod(s), 0 bound, 0 gated",
        "  PodGroup: phase PreScheduling, scheduled 1, running 0",
    ]
    assert text[-4:] == [
        "scheduling gate scheduling.koordinator.sh/gang: no",
        "PodScheduled: False, Unschedulable: 0/3 nodes are available",
        "events: none about scheduling, quotas or gangs",
        "waiting because: 0/3 nodes are available",
    ]


def test_a_running_pod_of_a_namespace_quota_is_not_waiting() -> None:
    web = eq(
        "web-quota",
        "web",
        annotations={"quota.scheduling.koordinator.sh/namespaces": '["shop"]'},
        min_={"cpu": "2"},
        max_={"cpu": "6"},
    )
    pod = {
        "metadata": {"name": "cart-7", "namespace": "shop"},
        "spec": {"nodeName": "node-7"},
        "status": {"phase": "Running"},
    }

    report = why_report(pod, [*QUOTAS, web], None, [], EVENTS[2:])
    text = render_why(report).splitlines()

    assert text[0] == "pod shop/cart-7: phase Running, node node-7"
    assert text[1] == (
        "quota web-quota (namespace shop is in its quota.scheduling.koordinator.sh/namespaces "
        "annotation)"
    )
    assert text[2] == "  min [cpu 2] max [cpu 6] used [-] runtime [-] request [-]"
    assert text[3] == "gang: none"
    assert text[-1] == "not waiting (bound to node-7, phase Running)"
    assert report["waiting"] is None


def test_a_pod_of_no_quota_and_of_a_missing_quota_count_in_the_default_quota() -> None:
    alone = {"metadata": {"name": "a", "namespace": "misc"}, "status": {"phase": "Pending"}}
    lost = {
        "metadata": {
            "name": "b",
            "namespace": "misc",
            "labels": {"quota.scheduling.koordinator.sh/name": "gone"},
        }
    }

    first = render_why(why_report(alone, QUOTAS)).splitlines()
    second = why_report(lost, QUOTAS)

    assert first[1:3] == [
        "quota koordinator-default-quota (no quota.scheduling.koordinator.sh/name label and no "
        "quota for namespace misc: the default)",
        "  no such ElasticQuota in the cluster",
    ]
    assert (
        first[-1] == "waiting because: nothing says why yet (no event, no PodScheduled condition)"
    )
    assert second["quota"]["name"] == "koordinator-default-quota"
    assert second["quota"]["how"].endswith(
        "names gone, which does not exist: counted in koordinator-default-quota"
    )


# -- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["quota"], {"quota_command": None, "json": False, "kubeconfig": None}),
        (["quota", "--json", "--kubeconfig", "/k"], {"json": True, "kubeconfig": "/k"}),
        (["quota", "why", "ns/p"], {"quota_command": "why", "pod": "ns/p", "json": False}),
        (["quota", "why", "ns/p", "--json"], {"json": True}),
        (
            ["quota", "--json", "--kubeconfig", "/k", "why", "ns/p"],
            {"json": True, "kubeconfig": "/k"},
        ),
    ],
)
def test_the_command_and_its_flags(argv: list[str], expected: dict[str, Any]) -> None:
    args = vars(ctl.build_parser().parse_args(argv))

    assert args["command"] == "quota"
    assert {key: args[key] for key in expected} == expected


def test_run_prints_the_tree_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(client, "read_quotas", lambda kubeconfig: QUOTAS)

    assert ctl.main(["quota", "--json"]) == 0

    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows][:2] == ["teams/team-a", "teams/team-a-batch"]


def test_run_why_reads_the_scene_of_the_pod(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = []

    def scene(namespace: str, name: str, kubeconfig: str | None) -> dict[str, Any]:
        asked.append((namespace, name, kubeconfig))
        pod = member(name, gated=True)
        return {"pod": pod, "quotas": QUOTAS, "podGroup": None, "pods": [pod], "events": EVENTS}

    monkeypatch.setattr(client, "read_pod_scene", scene)

    assert ctl.main(["quota", "why", "teams/trainer-2", "--kubeconfig", "/k"]) == 0

    assert asked == [("teams", "trainer-2", "/k")]
    assert capsys.readouterr().out.splitlines()[-1] == f"waiting because: {GANG_WAIT}"


def test_run_why_wants_namespace_and_name(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(command="quota", quota_command="why", pod="trainer-2",
                              kubeconfig=None, json=False)  # fmt: skip

    assert quota_cmd.run(args) == 2
    assert "give the pod as NAMESPACE/NAME" in capsys.readouterr().err


def test_run_says_when_the_api_server_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(kubeconfig: str | None) -> list[dict[str, Any]]:
        raise OSError("connection refused")

    monkeypatch.setattr(client, "read_quotas", refuse)

    assert ctl.main(["quota"]) == 1
    assert capsys.readouterr().err.strip() == (
        "koordctl quota: cannot list ElasticQuotas: connection refused"
    )


# -- what `quota why` reads from the API server --------------------------------------------


def kind_of(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, **obj}


def pod_event(name: str, uid: str, reason: str, namespace: str = "teams") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": "teams", "name": "trainer-2", "uid": uid},
        "reason": reason,
        "message": name,
    }


def test_read_pod_scene_reads_the_pod_its_quotas_podgroup_members_and_own_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from koordkube import client as kube_client  # noqa: PLC0415
    from tests.fakekube import FakeKubeAPI  # noqa: PLC0415

    api = FakeKubeAPI()
    pod = member("trainer-2", gated=True)
    pod["metadata"]["uid"] = "uid-now"
    pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "trainer"
    api.seed(
        kind_of(pod, "v1", "Pod"),
        kind_of(member("trainer-1"), "v1", "Pod"),
        kind_of({"metadata": {"name": "elsewhere", "namespace": "web"}}, "v1", "Pod"),
        *QUOTAS,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "trainer", "namespace": "teams"},
            "spec": {"minMember": 4},
        },
        pod_event("mine", "uid-now", "FailedScheduling"),
        pod_event("an-earlier-pod-of-that-name", "uid-before", "FailedScheduling"),
    )
    monkeypatch.setattr(kube_client, "build_client", lambda kubeconfig: api.client())

    scene = client.read_pod_scene("teams", "trainer-2", "/k")

    assert scene["pod"]["metadata"]["uid"] == "uid-now"
    assert len(scene["quotas"]) == len(QUOTAS)
    assert scene["podGroup"]["spec"] == {"minMember": 4}
    assert sorted(p["metadata"]["name"] for p in scene["pods"]) == ["trainer-1", "trainer-2"]
    assert [e["metadata"]["name"] for e in scene["events"]] == ["mine"]  # by uid too
    assert len(api.calls("get", "podgroups")) == 1


def test_read_pod_scene_of_a_pod_in_no_gang_asks_no_podgroup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from koordkube import client as kube_client  # noqa: PLC0415
    from koordkube.errors import NotFound  # noqa: PLC0415
    from tests.fakekube import FakeKubeAPI  # noqa: PLC0415

    api = FakeKubeAPI()
    api.seed(kind_of({"metadata": {"name": "solo", "namespace": "teams"}}, "v1", "Pod"))
    monkeypatch.setattr(kube_client, "build_client", lambda kubeconfig: api.client())

    scene = client.read_pod_scene("teams", "solo", None)

    assert (scene["podGroup"], scene["pods"], scene["quotas"], scene["events"]) == (
        None, [], [], []
    )  # fmt: skip
    assert not api.calls(path="podgroups")
    with pytest.raises(NotFound):
        client.read_pod_scene("teams", "gone", None)
