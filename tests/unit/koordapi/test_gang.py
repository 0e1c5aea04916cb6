"""Gang scheduling decisions, table tests derived from Koordinator v1.8's coscheduling tests
(core/gang_cache_test.go, core/core_test.go, coscheduling_test.go, controller/podgroup_test.go)
with their numbers changed: min-available 7 of total 11, waiting-time 317 s, and so on."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from koordapi.gang import reasons
from koordapi.gang.spec import (
    ANNOTATION_ALIAS_MATCH_POLICY,
    ANNOTATION_GROUPS,
    ANNOTATION_MATCH_POLICY,
    ANNOTATION_MIN_AVAILABLE,
    ANNOTATION_MODE,
    ANNOTATION_NAME,
    ANNOTATION_TOTAL_NUMBER,
    FROM_ANNOTATION,
    FROM_POD_GROUP,
    LABEL_LIGHTWEIGHT_MIN_AVAILABLE,
    LABEL_LIGHTWEIGHT_NAME,
    LABEL_POD_GROUP,
    CoschedulingArgs,
    GangSpec,
    gang_id,
    gang_name,
    parse_duration,
    parse_groups,
    parse_int32,
    resolve_spec,
    spec_from_pod,
    spec_from_podgroup,
)
from koordapi.gang.state import (
    admission_reason,
    bind_annotations,
    decide,
    gang_states,
    group_ready,
    reject_unschedulable,
    waiting_reason,
)
from koordapi.gang.status import podgroup_status, podgroup_status_step, sync_wanted

T0 = 1_780_000_000.0  # an arbitrary epoch second: 2026-05-28T20:26:40Z
T0_TEXT = "2026-05-28T20:26:40Z"


def at(offset: int) -> str:
    """An RFC 3339 creationTimestamp ``offset`` seconds after T0 (within the same minute
    when offset < 20)."""
    minute, second = divmod(40 + offset, 60)
    return f"2026-05-28T20:{26 + minute:02d}:{second:02d}Z"


def pod(
    name: str,
    namespace: str = "team-a",
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node: str = "",
    phase: str = "Pending",
    created: int = 0,
    owners: tuple[str, ...] = (),
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "creationTimestamp": at(created),
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owners:
        meta["ownerReferences"] = [{"name": owner, "kind": "Job"} for owner in owners]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def gang_pod(gang: str, name: str, namespace: str = "team-a", **kw: Any) -> dict[str, Any]:
    """A member by the PodGroup label (its spec comes from the PodGroup object)."""
    return pod(name, namespace, labels={LABEL_POD_GROUP: gang}, **kw)


def annotated(gang: str, name: str, minimum: str = "7", **extra: str) -> dict[str, Any]:
    """A member by Koordinator's annotations; ``extra`` keys are annotation suffixes."""
    annotations = {ANNOTATION_NAME: gang, ANNOTATION_MIN_AVAILABLE: minimum}
    annotations.update({f"gang.scheduling.koordinator.sh/{k}": v for k, v in extra.items()})
    return pod(name, annotations=annotations)


def podgroup(
    name: str,
    namespace: str = "team-a",
    *,
    minimum: int = 7,
    timeout: int | None = 317,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    created: str = T0_TEXT,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": minimum}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": created,
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": status or {},
    }


# -- identity ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "want"),
    [
        ({}, {}, ""),
        ({"test": "gang"}, {"test": "gang"}, ""),
        ({}, {ANNOTATION_NAME: "by-annotation"}, "by-annotation"),
        ({LABEL_LIGHTWEIGHT_NAME: "lightweight"}, {ANNOTATION_NAME: "x"}, "lightweight"),
        ({LABEL_POD_GROUP: "crd", LABEL_LIGHTWEIGHT_NAME: "y"}, {ANNOTATION_NAME: "x"}, "crd"),
    ],
)
def test_gang_name_prefers_the_podgroup_label_then_lightweight_then_annotation(
    labels: dict[str, str], annotations: dict[str, str], want: str
) -> None:
    member = pod("p", "ns-q", labels=labels, annotations=annotations)
    assert gang_name(member) == want
    assert gang_id(member) == (f"ns-q/{want}" if want else "")


# -- parsing as Go does ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("7", 7),
        ("+7", 7),
        ("-3", -3),
        ("0", 0),
        ("2147483647", 2147483647),
        ("2147483648", None),  # beyond int32
        ("7.0", None),
        (" 7", None),
        ("1_1", None),  # Python's int() would take it, Go's ParseInt does not
        ("xxx", None),
        ("", None),
    ],
)
def test_parse_int32_is_strconv_parseint_32(text: str, want: int | None) -> None:
    assert parse_int32(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("317s", 317.0),
        ("5m17s", 317.0),
        ("+317s", 317.0),
        ("-20s", -20.0),
        ("1.5h", 5400.0),
        ("0", 0.0),
        ("317", None),  # Go requires a unit
        ("WenShiqi222", None),
        (" 317s", None),
        ("", None),
        ("-", None),
    ],
)
def test_parse_duration_is_time_parseduration(text: str, want: float | None) -> None:
    assert parse_duration(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('["team-b/gq","team-a/gp"]', ("team-b/gq", "team-a/gp")),
        ("[]", ()),
        ("null", ()),
        ("", ()),
        ("gq,gp", ()),  # not JSON
        ("[a,b]", ()),  # not JSON either
        ('{"team-a/gp": 1}', ()),
        ('["team-a/gp", 5]', ()),
        ("[" * 5000 + "]" * 5000, ()),  # too deep for the decoder: malformed, no crash
    ],
)
def test_parse_groups(text: str, want: tuple[str, ...]) -> None:
    assert parse_groups(text) == want


# -- spec from annotations (gang_cache_test TestGangCache_OnPodAdd) ------------------------------


def test_first_member_sets_the_gang_up_later_annotations_are_ignored() -> None:
    first = annotated(
        "ganga",
        "pod1",
        "7",
        **{
            "total-number": "11",
            "waiting-time": "317s",
            "mode": "NonStrict",
            "groups": '["team-a/gangq","team-a/ganga"]',
        },
    )
    first["metadata"]["creationTimestamp"] = at(1)
    second = annotated("ganga", "pod2", "3", **{"waiting-time": "3000s", "groups": "[]"})
    second["metadata"]["creationTimestamp"] = at(9)
    # given newest first: creation order still makes pod1 the one that sets the gang up
    spec = resolve_spec("team-a/ganga", [second, first])
    assert spec == GangSpec(
        gang_id="team-a/ganga",
        min_member=7,
        total_member=11,
        wait_time=317.0,
        mode="NonStrict",
        match_policy="once-satisfied",
        group=("team-a/ganga", "team-a/gangq"),  # sorted, as GetGangGroupId sorts in place
        source=FROM_ANNOTATION,
        create_time=T0 + 1,
    )
    assert spec.group_id == "team-a/ganga,team-a/gangq"
    assert not spec.strict


def test_unreadable_min_available_leaves_the_gang_to_the_next_member() -> None:
    bad = annotated("gangb", "pod3", "xxx")
    good = annotated(
        "gangb",
        "pod4",
        "7",
        **{
            "total-number": "4",  # below min-available: min-available
            "mode": "WenShiqi222",  # unknown: Strict
            "waiting-time": "WenShiqi222",  # unreadable: the default
            "groups": "gangq,gangx",  # not JSON: the gang alone
        },
    )
    good["metadata"]["creationTimestamp"] = at(5)
    assert spec_from_pod(bad) is None
    spec = resolve_spec("team-a/gangb", [bad, good])
    assert spec is not None
    assert (spec.min_member, spec.total_member, spec.wait_time) == (7, 7, 600.0)
    assert (spec.mode, spec.group, spec.create_time) == ("Strict", ("team-a/gangb",), T0 + 5)


@pytest.mark.parametrize(
    ("minimum", "waiting", "want_min", "want_total", "want_wait"),
    [
        ("0", "0", 0, 0, 600.0),  # min 0 is taken as is; a 0 wait is the default
        ("0", "-20s", 0, 0, 600.0),  # negative wait: the default
        ("-4", "317s", -4, -4, 317.0),  # negative min parses: every member passes at once
        ("7", "5m17s", 7, 7, 317.0),
        ("7", "317", 7, 7, 600.0),  # no unit: unreadable
    ],
)
def test_min_and_waiting_time_edge_values(
    minimum: str, waiting: str, want_min: int, want_total: int, want_wait: float
) -> None:
    spec = spec_from_pod(annotated("gangc", "pod5", minimum, **{"waiting-time": waiting}))
    assert spec is not None
    assert (spec.min_member, spec.total_member, spec.wait_time) == (
        want_min,
        want_total,
        want_wait,
    )


@pytest.mark.parametrize(
    ("total", "want"),
    [("11", 11), ("7", 7), ("4", 7), ("0", 7), ("-11", 7), ("abc", 7), (None, 7)],
)
def test_total_number_falls_back_to_min_available(total: str | None, want: int) -> None:
    extra = {"total-number": total} if total is not None else {}
    spec = spec_from_pod(annotated("gangd", "pod6", "7", **extra))
    assert spec is not None
    assert spec.total_member == want


def test_missing_min_available_or_name_sets_nothing_up() -> None:
    no_min = pod("p", annotations={ANNOTATION_NAME: "ganga"})
    assert spec_from_pod(no_min) is None
    assert spec_from_pod(pod("p", annotations={ANNOTATION_MIN_AVAILABLE: "7"})) is None
    assert resolve_spec("team-a/ganga", [no_min]) is None


def test_lightweight_labels_name_the_gang_and_its_min() -> None:
    member = pod(
        "pod1",
        labels={LABEL_LIGHTWEIGHT_NAME: "ganga", LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "7"},
        annotations={ANNOTATION_MIN_AVAILABLE: "3"},  # the label is read first
    )
    spec = spec_from_pod(member)
    assert spec is not None
    assert (spec.gang_id, spec.min_member, spec.wait_time) == ("team-a/ganga", 7, 600.0)
    unreadable = pod(
        "pod2",
        labels={LABEL_LIGHTWEIGHT_NAME: "ganga", LABEL_LIGHTWEIGHT_MIN_AVAILABLE: "x"},
        annotations={ANNOTATION_MIN_AVAILABLE: "3"},  # not consulted once the label is set
    )
    assert spec_from_pod(unreadable) is None


@pytest.mark.parametrize(
    ("annotations", "args", "want"),
    [
        ({}, CoschedulingArgs(), "once-satisfied"),
        ({ANNOTATION_MATCH_POLICY: "only-waiting"}, CoschedulingArgs(), "only-waiting"),
        (
            {ANNOTATION_ALIAS_MATCH_POLICY: "waiting-and-running"},
            CoschedulingArgs(),
            ("waiting-and-running"),
        ),
        (
            {ANNOTATION_MATCH_POLICY: "only-waiting", ANNOTATION_ALIAS_MATCH_POLICY: "x"},
            CoschedulingArgs(),
            "only-waiting",
        ),
        ({ANNOTATION_MATCH_POLICY: "bogus"}, CoschedulingArgs(), "once-satisfied"),
        (
            {ANNOTATION_MATCH_POLICY: "bogus"},
            CoschedulingArgs(default_match_policy="waiting-and-running"),
            "waiting-and-running",
        ),
    ],
)
def test_match_policy(annotations: dict[str, str], args: CoschedulingArgs, want: str) -> None:
    member = pod(
        "p", annotations={ANNOTATION_NAME: "g", ANNOTATION_MIN_AVAILABLE: "7", **annotations}
    )
    spec = spec_from_pod(member, args)
    assert spec is not None
    assert spec.match_policy == want


def test_plugin_default_timeout_is_an_argument() -> None:
    spec = spec_from_pod(annotated("g", "p", "7"), CoschedulingArgs(default_timeout=317.0))
    assert spec is not None
    assert spec.wait_time == 317.0


# -- spec from a PodGroup (TestGangCache_OnPodGroupAdd) ------------------------------------------


def test_podgroup_spec_and_its_annotations() -> None:
    group = podgroup(
        "gangA",
        minimum=7,
        timeout=317,
        annotations={
            ANNOTATION_MODE: "NonStrict",
            ANNOTATION_GROUPS: '["team-b/gangB","team-a/gangA"]',
            ANNOTATION_TOTAL_NUMBER: "11",
        },
    )
    assert spec_from_podgroup(group) == GangSpec(
        gang_id="team-a/gangA",
        min_member=7,
        total_member=11,
        wait_time=317.0,
        mode="NonStrict",
        group=("team-a/gangA", "team-b/gangB"),
        source=FROM_POD_GROUP,
        create_time=T0,
    )


def test_podgroup_with_illegal_annotations() -> None:
    group = podgroup(
        "gangA",
        minimum=7,
        annotations={
            ANNOTATION_MODE: "WenShiqi222",
            ANNOTATION_GROUPS: "a,b",
            ANNOTATION_TOTAL_NUMBER: "2",
        },
    )
    spec = spec_from_podgroup(group)
    assert (spec.mode, spec.group, spec.total_member) == ("Strict", ("team-a/gangA",), 7)


@pytest.mark.parametrize(("timeout", "want"), [(317, 317.0), (0, 43.0), (-5, 43.0), (None, 43.0)])
def test_podgroup_timeout_falls_back_to_the_plugin_default(
    timeout: int | None, want: float
) -> None:
    spec = spec_from_podgroup(podgroup("g", timeout=timeout), CoschedulingArgs(43.0))
    assert spec.wait_time == want


def test_podgroup_wins_and_a_podgroup_label_pod_alone_sets_nothing_up() -> None:
    labelled = gang_pod("gangA", "pod1")
    labelled["metadata"]["annotations"] = {ANNOTATION_MIN_AVAILABLE: "3"}  # not consulted
    assert resolve_spec("team-a/gangA", [labelled]) is None
    by_annotation = annotated("gangA", "pod2", "3")
    spec = resolve_spec("team-a/gangA", [labelled, by_annotation], podgroup("gangA", minimum=7))
    assert spec is not None
    assert (spec.source, spec.min_member) == (FROM_POD_GROUP, 7)
    # without the PodGroup the annotated member sets the same gang id up
    spec = resolve_spec("team-a/gangA", [labelled, by_annotation])
    assert spec is not None
    assert (spec.source, spec.min_member) == (FROM_ANNOTATION, 3)


def test_malformed_podgroup_fields_do_not_crash() -> None:
    bad = {"metadata": {"name": "g", "namespace": "n"}, "spec": {"minMember": "7"}}
    spec = spec_from_podgroup(bad)
    assert (spec.min_member, spec.wait_time, spec.create_time) == (0, 600.0, None)
    assert spec_from_podgroup({"metadata": None, "spec": []}).gang_id == "/"


# -- gang state (TestGangCache_OnPodAdd: children, pending, bound, once satisfied) ---------------


def test_members_are_pending_held_or_bound_and_a_bound_one_satisfies_the_group() -> None:
    group = '["team-a/ganga","team-a/gangb"]'
    pods = [
        annotated("ganga", "pod1", "7", groups=group),
        annotated("ganga", "pod2", "7", groups=group),
        annotated("ganga", "pod3", "7", groups=group),
        annotated("gangb", "pod9", "1", groups=group),
    ]
    pods[0]["spec"]["nodeName"] = "nba"
    states = gang_states(pods, held={"team-a/pod2": T0, "team-a/pod9": T0, "team-x/other": T0})
    a, b = states["team-a/ganga"], states["team-a/gangb"]
    assert a.children == ("team-a/pod1", "team-a/pod2", "team-a/pod3")
    assert (a.bound, dict(a.held), a.pending) == (
        ("team-a/pod1",),
        {"team-a/pod2": T0},
        ("team-a/pod3",),
    )
    # one bound member of ganga makes the whole group once satisfied, gangb included
    assert a.once_satisfied and b.once_satisfied
    assert not a.collected  # 3 members of min 7
    assert b.collected  # 1 of min 1


def test_bound_member_of_an_uninitialised_gang_satisfies_nothing() -> None:
    pods = [gang_pod("gangq", "pod1", node="n1")]  # its PodGroup is missing
    state = gang_states(pods)["team-a/gangq"]
    assert (state.initialized, state.once_satisfied, state.bound) == (
        False,
        False,
        ("team-a/pod1",),
    )


def test_remembered_once_satisfied_groups() -> None:
    states = gang_states([gang_pod("g", "p1")], [podgroup("g")], once_satisfied={"team-a/g"})
    assert states["team-a/g"].once_satisfied
    assert not gang_states([gang_pod("g", "p1")], [podgroup("g")])["team-a/g"].once_satisfied


def test_a_podgroup_without_pods_is_a_gang() -> None:
    state = gang_states([], [podgroup("lonely")])["team-a/lonely"]
    assert (state.initialized, state.children, state.collected) == (True, (), False)


# -- admission (core_test TestPlugin_PreEnqueue) -----------------------------------------------


def _members(gang: str, count: int, namespace: str = "team-a", prefix: str = "p") -> list[Any]:
    return [gang_pod(gang, f"{prefix}{i}", namespace) for i in range(count)]


def test_admission_reasons() -> None:
    outsider = pod("pod1", "ns1")
    orphan = gang_pod("wenshiqi222", "pod2", "gangA_ns")
    short = _members("ganga", 6)  # 6 of min-available 7
    full = _members("gangb", 7, prefix="b")
    states = gang_states(
        [orphan, *short, *full], [podgroup("ganga"), podgroup("gangb", timeout=None)]
    )
    assert admission_reason(outsider, states) == ""
    assert admission_reason(orphan, states) == (
        "gang has not init, gangName: gangA_ns/wenshiqi222, podName: gangA_ns/pod2"
    )
    assert admission_reason(orphan, {}) == (
        "can't find gang, gangName: gangA_ns/wenshiqi222, podName: gangA_ns/pod2"
    )
    assert admission_reason(short[0], states) == (
        "gangGroup [team-a/ganga] basic check: memberGangs [team-a/ganga] child pod not "
        "collect enough, current gang: team-a/ganga, podName: team-a/p0"
    )
    assert admission_reason(full[3], states) == ""


def test_once_satisfied_gang_skips_the_basic_check() -> None:
    members = _members("gangq", 2)
    members[0]["spec"]["nodeName"] = "n1"  # 2 members of min 7, one bound
    states = gang_states(members, [podgroup("gangq")])
    assert admission_reason(members[1], states) == ""
    only_waiting = podgroup("gangq", annotations={ANNOTATION_MATCH_POLICY: "only-waiting"})
    states = gang_states(members, [only_waiting])
    assert "child pod not collect enough" in admission_reason(members[1], states)


def test_basic_check_names_missing_and_uninitialised_gangs_of_the_group() -> None:
    group = {ANNOTATION_GROUPS: '["team-a/gx","team-a/gy","team-a/gz"]'}
    gx = _members("gx", 7)
    gz = [pod("z0", annotations={ANNOTATION_NAME: "gz"})]  # no min-available: not set up
    states = gang_states([*gx, *gz], [podgroup("gx", annotations=group)])
    assert admission_reason(gx[0], states) == (
        "gangGroup [team-a/gx team-a/gy team-a/gz] basic check: memberGangs [team-a/gy] "
        "doesn't exists, memberGangs [team-a/gz] has not init, current gang: team-a/gx, "
        "podName: team-a/p0"
    )


# -- readiness (core_test TestPermit) --------------------------------------------------------


def _held(pods: list[Any], since: float = T0) -> dict[str, float]:
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": since for p in pods}


@pytest.mark.parametrize(
    ("policy", "held", "bound", "once", "want"),
    [
        ("once-satisfied", 4, 0, False, False),  # 4 held of 5
        ("once-satisfied", 5, 0, False, True),
        ("once-satisfied", 1, 0, True, True),  # once satisfied: no waiting
        ("only-waiting", 1, 0, True, False),
        ("only-waiting", 3, 2, False, False),  # bound members do not count
        ("waiting-and-running", 3, 2, False, True),
        ("waiting-and-running", 2, 2, False, False),
    ],
)
def test_group_ready_by_match_policy(
    policy: str, held: int, bound: int, once: bool, want: bool
) -> None:
    members = _members("gangA", held + bound + 1)
    for member in members[held : held + bound]:
        member["spec"]["nodeName"] = "n1"
    pg = podgroup("gangA", minimum=5, annotations={ANNOTATION_MATCH_POLICY: policy})
    # bound members would make the group once satisfied: forget it unless the case wants it
    states = gang_states(members, [pg], held=_held(members[:held]))
    states = {k: dataclasses.replace(v, once_satisfied=once) for k, v in states.items()}
    assert group_ready("team-a/gangA", states) is want


def test_a_group_is_ready_only_when_every_gang_is() -> None:
    group = {ANNOTATION_GROUPS: '["gangC_ns/gangC","gangD_ns/gangD"]'}
    c = _members("gangC", 4, "gangC_ns")
    d = _members("gangD", 3, "gangD_ns")
    pgs = [
        podgroup("gangC", "gangC_ns", minimum=4, annotations=group),
        podgroup("gangD", "gangD_ns", minimum=2, annotations=group),
    ]
    states = gang_states([*c, *d], pgs, held=_held([*c, d[0]]))
    assert not group_ready("gangC_ns/gangC", states)  # gangD holds 1 of 2
    assert not group_ready("gangD_ns/gangD", states)
    states = gang_states([*c, *d], pgs, held=_held([*c, *d[:2]]))
    assert group_ready("gangC_ns/gangC", states)
    verdict = decide("gangD_ns/gangD", states, T0)
    assert verdict.ready
    assert verdict.allow == tuple(sorted(_held([*c, *d[:2]])))  # both gangs go together


def test_group_membership_is_each_gangs_own_view() -> None:
    # gangA bundles gangB with it; gangB names no group and goes alone
    a = _members("gangA", 2, prefix="a")
    b = _members("gangB", 2, prefix="b")
    pgs = [
        podgroup(
            "gangA", minimum=2, annotations={ANNOTATION_GROUPS: '["team-a/gangA","team-a/gangB"]'}
        ),
        podgroup("gangB", minimum=2),
    ]
    states = gang_states([*a, *b], pgs, held=_held([*a, *b[:1]]))
    assert not group_ready("team-a/gangA", states)
    states = gang_states([*a, *b], pgs, held=_held(b))
    assert group_ready("team-a/gangB", states)
    assert not group_ready("team-a/gangA", states)  # gangA holds none of its 2


def test_missing_or_uninitialised_gang_is_never_ready() -> None:
    assert not group_ready("team-a/none", {})
    states = gang_states([gang_pod("gangnonexist", "pod2")], held={"team-a/pod2": T0})
    assert not group_ready("team-a/gangnonexist", states)
    assert decide("team-a/gangnonexist", states, T0).reason == (
        "gang has not init, gangName: team-a/gangnonexist"
    )


# -- the wait, with a fake clock (TestUnreserve: timeout rejects the gang) ---------------------


def _strict_gang(mode: str = "Strict", policy: str = "once-satisfied") -> tuple[list[Any], Any]:
    members = _members("gangT", 11)
    pg = podgroup(
        "gangT",
        minimum=7,
        timeout=317,
        annotations={ANNOTATION_MODE: mode, ANNOTATION_MATCH_POLICY: policy},
    )
    return members, pg


def _held_at(members: list[Any], *offsets: int) -> dict[str, float]:
    return {f"team-a/p{i}": T0 + offset for i, offset in enumerate(offsets)}


def test_strict_gang_waits_then_gives_back_everything_when_the_first_hold_expires() -> None:
    members, pg = _strict_gang()
    held = _held_at(members, 0, 1, 2, 3)  # 4 held of min 7, the first since T0
    states = gang_states(members, [pg], held=held)
    waiting = decide("team-a/gangT", states, T0 + 316)
    assert (waiting.ready, waiting.allow, waiting.give_back) == (False, (), ())
    assert waiting.deadline == T0 + 317
    assert waiting.reason == (
        "gangGroup [team-a/gangT] waiting at Permit: memberGangs [team-a/gangT] have not "
        "enough assumed pods, current gang: team-a/gangT"
    )
    expired = decide("team-a/gangT", states, T0 + 317)
    assert expired.give_back == ("team-a/p0", "team-a/p1", "team-a/p2", "team-a/p3")
    assert expired.reason == 'Gang "team-a/gangT" gets rejected due to Pod "p0" in Unreserve'
    assert not expired.ready


def test_non_strict_gang_gives_back_only_the_expired_holds() -> None:
    members, pg = _strict_gang(mode="NonStrict")
    states = gang_states(members, [pg], held=_held_at(members, 0, 1, 2, 3))
    verdict = decide("team-a/gangT", states, T0 + 318)  # p0 (T0+317) and p1 (T0+318) ran out
    assert verdict.give_back == ("team-a/p0", "team-a/p1")
    assert verdict.reason == "rejected due to timeout after waiting 5m17s at plugin Coscheduling"


def test_once_satisfied_strict_gang_gives_back_only_the_expired_hold() -> None:
    members, pg = _strict_gang()
    members[10]["spec"]["nodeName"] = "n1"  # one member runs: once satisfied
    states = gang_states(members, [pg], held=_held_at(members, 0, 50))
    verdict = decide("team-a/gangT", states, T0 + 317)
    # a once-satisfied group is valid for Permit: but p0's hold ran out first
    assert verdict.give_back == ("team-a/p0",)
    assert decide("team-a/gangT", states, T0 + 316).allow == ("team-a/p0", "team-a/p1")


def test_expiry_comes_before_readiness() -> None:
    members, pg = _strict_gang()
    held = _held_at(members, 0, 1, 2, 3, 4, 5, 400)  # 7 held, but p0 ran out at T0+317
    states = gang_states(members, [pg], held=held)
    assert decide("team-a/gangT", states, T0 + 400).give_back == tuple(sorted(held))
    ready = decide("team-a/gangT", states, T0 + 316)
    assert (ready.ready, ready.allow, ready.give_back) == (True, tuple(sorted(held)), ())


def test_expiry_in_one_gang_gives_back_the_whole_group() -> None:
    group = {ANNOTATION_GROUPS: '["team-a/gx","team-a/gy"]'}
    x = _members("gx", 3, prefix="x")
    y = _members("gy", 3, prefix="y")
    pgs = [
        podgroup("gx", minimum=3, timeout=317, annotations=group),
        podgroup("gy", minimum=3, timeout=1000, annotations=group),
    ]
    held = {"team-a/x0": T0, "team-a/y0": T0, "team-a/y1": T0 + 10}
    states = gang_states([*x, *y], pgs, held=held)
    # gy's own holds last 1000 s, but gx's x0 runs out at T0+317 and rejects the group
    verdict = decide("team-a/gy", states, T0 + 317)
    assert verdict.give_back == ("team-a/x0", "team-a/y0", "team-a/y1")
    assert decide("team-a/gy", states, T0 + 300).deadline == T0 + 317


# -- rejection when a member finds no node (coscheduling_test TestPostFilter) -------------------


@pytest.mark.parametrize(
    ("mode", "policy", "bound", "rejects"),
    [
        ("Strict", "once-satisfied", False, True),
        ("NonStrict", "once-satisfied", False, False),
        ("Strict", "once-satisfied", True, False),  # once satisfied: members go one by one
        ("Strict", "only-waiting", True, True),
    ],
)
def test_reject_unschedulable(mode: str, policy: str, bound: bool, rejects: bool) -> None:
    members, pg = _strict_gang(mode, policy)
    if bound:
        members[10]["spec"]["nodeName"] = "n1"
    states = gang_states(members, [pg], held=_held_at(members, 0, 1))
    verdict = reject_unschedulable("team-a/gangT", states)
    if rejects:
        assert verdict.give_back == ("team-a/p0", "team-a/p1")
        assert verdict.reason == 'Gang "team-a/gangT" gets rejected due to pod is unschedulable'
    else:
        assert (verdict.give_back, verdict.reason) == ((), "")


def test_reject_unschedulable_of_unknown_gang_changes_nothing() -> None:
    assert reject_unschedulable("team-a/none", {}).give_back == ()


# -- what a member carries to binding (core_test TestGetGangBindingInfo) ----------------------


def test_bind_annotations() -> None:
    group = {ANNOTATION_GROUPS: '["gangB_ns/gangB","gangC_ns/gangC"]'}
    a = _members("gangA", 2, "gangA_ns")
    b = _members("gangB", 3, "gangB_ns")
    c = _members("gangC", 1, "gangC_ns")
    pgs = [
        podgroup("gangA", "gangA_ns", minimum=2),
        podgroup("gangB", "gangB_ns", minimum=2, annotations=group),
        podgroup("gangC", "gangC_ns", minimum=1, annotations=group),
    ]
    states = gang_states([*a, *b, *c], pgs, held=_held([*a, *b[:2], *c]))
    verdict = decide("gangB_ns/gangB", states, T0)
    assert verdict.allow == ("gangB_ns/p0", "gangB_ns/p1", "gangC_ns/p0")
    assert bind_annotations(b[1], states, verdict.allow) == {
        "internal.scheduling.koordinator.sh/bind-gang-group-id": "gangB_ns/gangB,gangC_ns/gangC",
        "internal.scheduling.koordinator.sh/bind-gang-member-count": "3",
        "scheduling.koordinator.sh/bind-gang-group-id": "gangB_ns/gangB,gangC_ns/gangC",
        "scheduling.koordinator.sh/bind-gang-member-count": "3",
    }
    together = decide("gangA_ns/gangA", states, T0).allow
    assert (
        bind_annotations(a[0], states, together)[
            "internal.scheduling.koordinator.sh/bind-gang-member-count"
        ]
        == "2"
    )
    cleared = bind_annotations(b[2], states, verdict.allow)  # not among those allowed
    assert set(cleared.values()) == {None} and len(cleared) == 4
    assert set(bind_annotations(c[0], states, ("gangC_ns/p0",)).values()) == {None}  # alone
    assert set(bind_annotations(pod("plain"), states, verdict.allow).values()) == {None}


# -- the reason a waiting member shows ---------------------------------------------------------


def test_waiting_reason() -> None:
    members, pg = _strict_gang()
    states = gang_states(members[:6], [pg])  # 6 of 7 exist
    assert waiting_reason(members[0], states, T0).startswith(
        "gangGroup [team-a/gangT] basic check: memberGangs [team-a/gangT] child pod not "
        "collect enough"
    )
    states = gang_states(members, [pg], held=_held_at(members, 0, 1))
    assert waiting_reason(members[5], states, T0 + 5) == (
        "gangGroup [team-a/gangT] waiting at Permit: memberGangs [team-a/gangT] have not "
        "enough assumed pods, current gang: team-a/gangT, podName: team-a/p5"
    )
    assert waiting_reason(members[5], states, T0 + 317) == (
        'Gang "team-a/gangT" gets rejected due to Pod "p0" in Unreserve'
    )
    ready = gang_states(members, [pg], held=_held_at(members, *range(7)))
    assert waiting_reason(members[8], ready, T0 + 5) == ""
    assert waiting_reason(pod("plain"), ready, T0) == ""


def test_summary_is_koordinators_gang_summary() -> None:
    members, pg = _strict_gang()
    members[9]["spec"]["nodeName"] = "n1"
    state = gang_states(members[8:], [pg], held={"team-a/p8": T0})["team-a/gangT"]
    assert state.summary() == {
        "name": "team-a/gangT",
        "waitTime": 317_000_000_000,
        "createTime": T0,
        "mode": "Strict",
        "gangMatchPolicy": "once-satisfied",
        "minRequiredNumber": 7,
        "totalChildrenNum": 7,
        "gangGroup": ["team-a/gangT"],
        "children": ["team-a/p10", "team-a/p8", "team-a/p9"],
        "pendingChildren": ["team-a/p10"],
        "waitingForBindChildren": ["team-a/p8"],
        "boundChildren": ["team-a/p9"],
        "onceResourceSatisfied": True,
        "gangFrom": FROM_POD_GROUP,
        "hasGangInit": True,
    }


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        (317, "5m17s"),
        (600, "10m0s"),
        (3600, "1h0m0s"),
        (5400.25, "1h30m0.25s"),
        (1.5, "1.5s"),
        (0.75, "750ms"),
        (0.0000031, "3.1µs"),
        (0, "0s"),
        (-317, "-5m17s"),
    ],
)
def test_go_duration(seconds: float, want: str) -> None:
    assert reasons.go_duration(seconds) == want


def test_group_rejected_message() -> None:
    assert reasons.group_rejected("a/g1,a/g2", "a/p3", "0/3 nodes are available:", 4) == (
        'GangGroup "a/g1,a/g2" gets rejected due to member Pod "a/p3" is unschedulable with '
        'reason "0/3 nodes are available:", alreadyWaitForBound: 4'
    )


# -- PodGroup status (controller/podgroup_test Test_Run, TestFillGroupStatusOccupied) ----------


def _status_case(
    minimum: int, count: int, phase: str, previous: str, node: str = "n1", **status: Any
) -> tuple[dict[str, Any], list[Any]]:
    members = [gang_pod("pg", f"pod{i}", node=node, phase=phase, created=i) for i in range(count)]
    group = podgroup(
        "pg",
        minimum=minimum,
        status={"phase": previous, "occupiedBy": "test", "scheduled": minimum, **status},
    )
    return group, members


@pytest.mark.parametrize(
    ("minimum", "count", "pod_phase", "previous", "want"),
    [
        (3, 3, "Running", "Scheduled", "Running"),
        (3, 5, "Running", "Scheduled", "Running"),
        (3, 3, "Failed", "Scheduled", "Failed"),
        (3, 3, "Succeeded", "Scheduled", "Finished"),
        (3, 3, "Pending", "Scheduling", "Scheduled"),  # bound but not started
        (3, 3, "Succeeded", "Pending", "Finished"),  # steps through PreScheduling
        (4, 3, "Pending", "Pending", "Pending"),  # fewer members than minMember
        (3, 0, "Pending", "Running", "Pending"),  # every member gone
        (5, 5, "Running", "Scheduling", "Running"),
        (3, 2, "Running", "Scheduled", "Scheduling"),  # a member deleted: 2 bound of 3
    ],
)
def test_podgroup_phase(minimum: int, count: int, pod_phase: str, previous: str, want: str) -> None:
    group, members = _status_case(minimum, count, pod_phase, previous)
    assert podgroup_status(group, members, T0)["phase"] == want


def test_podgroup_counts_and_schedule_start_time() -> None:
    group, members = _status_case(7, 11, "Pending", "Scheduling", node="")
    for member in members[:4]:
        member["spec"]["nodeName"] = "n1"
        member["status"]["phase"] = "Running"
    members[4]["spec"]["nodeName"] = "n2"
    members[4]["status"]["phase"] = "Failed"
    status = podgroup_status(group, members, T0 + 5)
    # 5 bound of 7: Scheduling; 4 running + 1 failed < 7: not Failed yet
    assert status == {
        "phase": "Scheduling",
        "occupiedBy": "test",
        "scheduled": 5,
        "running": 4,
        "succeeded": 0,
        "failed": 1,
        "scheduleStartTime": at(5),
    }
    kept = podgroup_status(
        {**group, "status": {**group["status"], "scheduleStartTime": T0_TEXT}}, members, T0 + 9
    )
    assert kept["scheduleStartTime"] == T0_TEXT  # set once


def test_failed_once_enough_members_ended_or_run() -> None:
    group, members = _status_case(7, 7, "Running", "Scheduled")
    members[2]["status"]["phase"] = "Failed"
    assert podgroup_status(group, members, T0)["phase"] == "Failed"  # 6 running + 1 failed


def test_podgroup_counts_only_its_own_members() -> None:
    group, members = _status_case(3, 3, "Running", "Scheduled")
    strangers = [
        gang_pod("other", "s1", node="n1", phase="Running"),
        gang_pod("pg", "s2", "team-b", node="n1", phase="Running"),
    ]
    status = podgroup_status(group, [*members[:2], *strangers], T0)
    assert (status["phase"], status["scheduled"], status["running"]) == ("Scheduling", 2, 2)


def test_a_member_by_annotation_counts_for_the_podgroup_of_its_name() -> None:
    group, _ = _status_case(1, 0, "Running", "Scheduled")
    member = pod("a1", annotations={ANNOTATION_NAME: "pg"}, node="n1", phase="Running")
    assert podgroup_status(group, [member], T0)["phase"] == "Running"


def test_step_by_step_from_a_new_podgroup() -> None:
    group = podgroup("pg", minimum=3)
    members = [
        gang_pod("pg", f"pod{i}", created=i, owners=(f"job-{9 - i}", "job-z")) for i in range(3)
    ]
    first = podgroup_status_step(group, members, T0)
    assert first == {"phase": "Pending"}
    second = podgroup_status_step({**group, "status": first}, members, T0)
    # occupiedBy from the first member's owners, sorted
    assert second == {"phase": "PreScheduling", "occupiedBy": "team-a/job-9,team-a/job-z"}
    third = podgroup_status_step({**group, "status": second}, members, T0)
    assert third["phase"] == "Scheduling"  # none bound yet
    assert third["scheduleStartTime"] == T0_TEXT
    assert podgroup_status(group, members, T0) == third


@pytest.mark.parametrize(
    ("owners", "want"),
    [((), "test"), (("new-occupied",), "team-a/new-occupied"), (("b", "a"), "team-a/a,team-a/b")],
)
def test_occupied_by(owners: tuple[str, ...], want: str) -> None:
    group, _ = _status_case(2, 0, "Pending", "Pending")
    members = [gang_pod("pg", f"pod{i}", owners=owners, created=i) for i in range(2)]
    assert podgroup_status_step(group, members, T0)["occupiedBy"] == want


def test_zero_min_member_never_leaves_pending() -> None:
    group, members = _status_case(0, 0, "Pending", "Pending")
    assert podgroup_status(group, members, T0) == group["status"]


def test_finished_failed_and_long_forgotten_groups_are_left_alone() -> None:
    for phase in ("Finished", "Failed"):
        group, members = _status_case(3, 0, "Pending", phase)
        assert not sync_wanted(group)
        assert podgroup_status(group, members, T0)["phase"] == phase
    # scheduled == minMember, nothing running, schedule started 72 h after creation
    group, members = _status_case(
        3, 3, "Running", "Pending", scheduleStartTime="2026-05-31T20:26:40Z"
    )
    assert not sync_wanted(group)
    assert podgroup_status(group, members, T0)["phase"] == "Pending"
    # 47 h after creation: still synced
    group["status"]["scheduleStartTime"] = "2026-05-30T19:26:40Z"
    assert sync_wanted(group)
    assert podgroup_status(group, members, T0)["phase"] == "Running"
