from __future__ import annotations

from typing import Any

import pytest

from koordapi import keys
from manager.errors import ConfigError
from manager.webhooks import profiles
from manager.webhooks.admission import ObjectError
from tests.unit.manager.webhooks import builders
from tests.unit.manager.webhooks.builders import PRIORITY_CLASSES, profile


def _apply(pod: dict[str, Any], *items: dict[str, Any], **kwargs: Any) -> profiles.ProfileOutcome:
    kwargs.setdefault("namespace_labels", {})
    kwargs.setdefault("priority_classes", PRIORITY_CLASSES)
    return profiles.apply_profiles(pod, profiles=list(items), **kwargs)


# -- matching ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "pod_labels", "ns_labels", "expected"),
    [
        pytest.param({}, {}, {}, True, id="empty-selectors-match-all"),
        pytest.param(
            {"selector": {"matchLabels": {"app": "x"}}}, {"app": "x"}, {}, True, id="pod-label"
        ),
        pytest.param(
            {"selector": {"matchLabels": {"app": "x"}}},
            {"app": "y"},
            {},
            False,
            id="pod-label-differs",
        ),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"colocation": "on"}}},
            {},
            {"colocation": "on"},
            True,
            id="namespace-label",
        ),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"colocation": "on"}}},
            {},
            {},
            False,
            id="namespace-unlabelled",
        ),
        pytest.param(
            {
                "namespaceSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                "selector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]
                },
            },
            {"app": "b"},
            {"tier": "batch"},
            True,
            id="both-expressions",
        ),
    ],
)
def test_profiles_match_by_namespace_and_pod_labels(
    spec: dict[str, Any], pod_labels: dict[str, str], ns_labels: dict[str, str], expected: bool
) -> None:
    chosen = profiles.matching_profiles([profile("p", **spec)], pod_labels, ns_labels)
    assert bool(chosen) is expected


def test_profiles_apply_in_name_order_so_the_last_name_wins() -> None:
    pod = builders.pod()
    outcome = _apply(
        pod,
        profile("zz-late", labels={"tier": "late"}),
        profile("aa-early", labels={"tier": "early", "only-early": "1"}),
    )
    assert outcome.matched == ("aa-early", "zz-late")
    assert pod["metadata"]["labels"] == {"tier": "late", "only-early": "1"}


def test_malformed_selector_is_a_config_error_naming_the_profile() -> None:
    bad = profile("broken", selector={"matchExpressions": [{"key": "a", "operator": "Near"}]})
    with pytest.raises(ConfigError, match="broken"):
        _apply(builders.pod(), bad)


# -- probability -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("probability", "roll", "applies"),
    [
        pytest.param(None, 99, True, id="absent-always"),
        pytest.param(100, 99, True, id="int-100"),
        pytest.param("100%", 99, True, id="pct-100"),
        pytest.param(0, 0, False, id="int-0-never"),
        pytest.param("0%", 0, False, id="pct-0-never"),
        pytest.param(30, 29, True, id="int-30-low-roll"),
        pytest.param(30, 30, False, id="int-30-roll-30"),
        pytest.param("30%", 29, True, id="pct-30-low-roll"),
        pytest.param("30%", 75, False, id="pct-30-high-roll"),
        pytest.param(150, 99, True, id="over-100"),
        pytest.param(-5, 0, False, id="negative"),
    ],
)
def test_probability_skips_a_profile_by_the_injected_roll(
    probability: Any, roll: int, applies: bool
) -> None:
    spec: dict[str, Any] = {"labels": {"hit": "yes"}}
    if probability is not None:
        spec["probability"] = probability
    pod = builders.pod()
    outcome = _apply(pod, profile("p", **spec), rand_intn=lambda n: roll)
    assert outcome.matched == ("p",)
    assert (outcome.applied == ("p",)) is applies
    assert ("labels" in pod["metadata"]) is applies


@pytest.mark.parametrize("probability", ["30", "x%", "%", 1.5, True, [30]])
def test_malformed_probability_is_a_config_error(probability: Any) -> None:
    with pytest.raises(ConfigError, match="probability"):
        _apply(builders.pod(), profile("p", probability=probability))


# -- what a profile sets ---------------------------------------------------------------------


def test_profile_sets_labels_annotations_scheduler_qos_priority() -> None:
    pod = builders.pod(labels={"app": "web"})
    _apply(
        pod,
        profile(
            "colocation",
            labels={"team": "data"},
            annotations={"note": "batch"},
            schedulerName="koord-scheduler",
            qosClass="BE",
            priorityClassName="koord-batch",
            koordinatorPriority=1111,
        ),
    )
    assert pod["metadata"]["labels"] == {
        "app": "web",
        "team": "data",
        keys.LABEL_QOS_CLASS: "BE",
        keys.LABEL_PRIORITY: "1111",
    }
    assert pod["metadata"]["annotations"] == {"note": "batch"}
    assert pod["spec"]["schedulerName"] == "koord-scheduler"
    assert pod["spec"]["priorityClassName"] == "koord-batch"
    assert pod["spec"]["priority"] == 5000
    assert pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"


def test_priority_class_without_preemption_policy_clears_the_pod_field() -> None:
    pod = builders.pod(preemptionPolicy="Never")
    classes = {"plain": {"metadata": {"name": "plain"}, "value": 42}}
    _apply(pod, profile("p", priorityClassName="plain"), priority_classes=classes)
    assert pod["spec"]["priority"] == 42
    assert "preemptionPolicy" not in pod["spec"]


def test_missing_priority_class_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="PriorityClass koord-nope not found"):
        _apply(builders.pod(), profile("p", priorityClassName="koord-nope"))


def test_key_mappings_copy_present_keys_only() -> None:
    pod = builders.pod(labels={"old": "v"}, annotations={"a-old": "w"})
    _apply(
        pod,
        profile(
            "p",
            labelKeysMapping={"old": "new", "absent": "never"},
            annotationKeysMapping={"a-old": "a-new"},
        ),
    )
    assert pod["metadata"]["labels"] == {"old": "v", "new": "v"}
    assert pod["metadata"]["annotations"] == {"a-old": "w", "a-new": "w"}


def test_label_suffixes_extend_existing_labels_only() -> None:
    pod = builders.pod(labels={"quota": "team"})
    _apply(pod, profile("p", labelSuffixes={"quota": "-batch", "absent": "-x"}))
    assert pod["metadata"]["labels"] == {"quota": "team-batch"}


def test_empty_qos_and_priority_class_name_are_ignored() -> None:
    # the Go type lacks omitempty: profiles read back carry "" for both
    pod = builders.pod()
    _apply(pod, profile("p", qosClass="", priorityClassName=""))
    assert pod == builders.pod()


def test_profile_without_effect_adds_no_empty_maps() -> None:
    pod = builders.pod()
    _apply(pod, profile("p", labels={}, annotations={}))
    assert "labels" not in pod["metadata"]
    assert "annotations" not in pod["metadata"]


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        pytest.param({"labels": {"a": 1}}, "spec.labels", id="label-value-int"),
        pytest.param({"qosClass": 3}, "spec.qosClass", id="qos-not-string"),
        pytest.param({"koordinatorPriority": "high"}, "koordinatorPriority", id="priority-not-int"),
        pytest.param({"patch": ["x"]}, "spec.patch", id="patch-not-object"),
    ],
)
def test_malformed_profile_fields_are_config_errors(spec: dict[str, Any], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        _apply(builders.pod(), profile("bad", **spec))


def test_malformed_pod_labels_are_an_object_error() -> None:
    pod = builders.pod()
    pod["metadata"]["labels"] = {"a": 1}
    with pytest.raises(ObjectError, match=r"metadata\.labels"):
        _apply(pod, profile("p", labels={"b": "c"}))


def test_skip_update_resources_annotation_is_reported() -> None:
    outcome = _apply(
        builders.pod(), profile("p", annotations_={keys.ANNOTATION_SKIP_UPDATE_RESOURCES: ""})
    )
    assert outcome.skip_resources


# -- strategic merge patch -------------------------------------------------------------------


MERGE_CASES = [
    pytest.param(
        {"a": {"b": 1, "c": 2}},
        {"a": {"c": 3, "d": 4}},
        {"a": {"b": 1, "c": 3, "d": 4}},
        id="maps-merge",
    ),
    pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}, {"a": {"c": 2}}, id="null-deletes"),
    pytest.param(
        {"a": 1}, {"b": {"c": None, "d": 1}}, {"a": 1, "b": {"d": 1}}, id="null-in-new-map-dropped"
    ),
    pytest.param({"args": ["a", "b"]}, {"args": ["c"]}, {"args": ["c"]}, id="plain-list-replaced"),
    pytest.param(
        {"tolerations": [{"key": "a"}]},
        {"tolerations": [{"key": "b"}]},
        {"tolerations": [{"key": "b"}]},
        id="tolerations-replaced",
    ),
    pytest.param(
        {
            "containers": [
                {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}]},
                {"name": "b"},
            ]
        },
        {
            "containers": [
                {"name": "a", "env": [{"name": "B", "value": "2"}]},
                {"name": "c", "image": "z"},
            ]
        },
        {
            "containers": [
                {
                    "name": "a",
                    "image": "x",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                },
                {"name": "b"},
                {"name": "c", "image": "z"},
            ]
        },
        id="containers-and-env-merge-by-name",
    ),
    pytest.param(
        {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
        {"containers": [{"name": "a", "resources": {"limits": {"cpu": None}}}]},
        {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]},
        id="null-inside-merged-element",
    ),
]


@pytest.mark.parametrize(("target", "patch", "expected"), MERGE_CASES)
def test_strategic_merge_common_subset(target: Any, patch: Any, expected: Any) -> None:
    before = repr(target)
    assert profiles.strategic_merge(target, patch) == expected
    assert repr(target) == before  # the input is not modified


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param({"$patch": "replace"}, id="patch-directive"),
        pytest.param({"spec": {"$retainKeys": ["a"]}}, id="retain-keys"),
        pytest.param({"spec": {"containers": [{"image": "x"}]}}, id="element-without-key"),
    ],
)
def test_strategic_merge_rejects_what_it_does_not_support(patch: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        profiles.strategic_merge(builders.pod(), patch)


def test_profile_patch_merges_into_the_whole_pod() -> None:
    pod = builders.pod(
        builders.container("main", requests={"cpu": "1"}), builders.container("side")
    )
    patch = {
        "metadata": {"labels": {"patched": "yes"}},
        "spec": {
            "tolerations": [{"key": "batch", "operator": "Exists"}],
            "containers": [{"name": "side", "env": [{"name": "MODE", "value": "batch"}]}],
        },
    }
    _apply(pod, profile("p", patch=patch))
    assert pod["metadata"]["labels"] == {"patched": "yes"}
    assert pod["spec"]["tolerations"] == [{"key": "batch", "operator": "Exists"}]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    assert pod["spec"]["containers"][1]["env"] == [{"name": "MODE", "value": "batch"}]
