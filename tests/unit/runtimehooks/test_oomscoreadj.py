"""OOMScoreAdj: a container's oom_score_adj from the pod's annotations."""

from __future__ import annotations

import pytest

from koordapi import features, keys
from koordapi.errors import AnnotationError
from runtimehooks.hooks import oomscoreadj
from runtimehooks.patch import ContainerPatch
from runtimehooks.request import Stage
from runtimehooks.rules import Rules
from tests.unit.runtimehooks.builders import container, pod

STAGE = Stage.PRE_CREATE_CONTAINER
DEFAULT = keys.ANNOTATION_OOM_SCORE_ADJ
SPEC = keys.ANNOTATION_OOM_SCORE_ADJ_SPEC


@pytest.mark.parametrize(
    ("annotations", "name", "expected"),
    [
        pytest.param({DEFAULT: "-500", SPEC: '{"c1": 100}'}, "c1", 100, id="case-27-spec-wins"),
        pytest.param(
            {DEFAULT: "-500", SPEC: '{"c1": 100}'}, "c2", -500, id="case-27-default-for-others"
        ),
        pytest.param({SPEC: '{"c2": 100}'}, "c1", None, id="case-27-not-in-spec-no-default"),
        pytest.param({DEFAULT: "-500"}, "c1", -500, id="default-only"),
        pytest.param({}, "c1", None, id="no-annotations"),
        pytest.param({DEFAULT: " 1000 "}, "c1", 1000, id="upper-bound-with-spaces"),
        pytest.param({SPEC: '{"c1": -1000}'}, "c1", -1000, id="lower-bound-in-spec"),
    ],
)
def test_spec_takes_precedence_over_pod_default(
    annotations: dict[str, str], name: str, expected: int | None
) -> None:
    req = container(pod("LS", annotations=annotations), name)
    assert oomscoreadj.value(req) == expected
    patch = oomscoreadj.container(req, Rules(), STAGE)
    assert patch == (None if expected is None else ContainerPatch(oom_score_adj=expected))


@pytest.mark.parametrize(
    ("annotations", "key", "reason"),
    [
        pytest.param({SPEC: "{invalid}"}, SPEC, "not valid JSON", id="case-27-bad-json"),
        pytest.param({DEFAULT: "not-a-number"}, DEFAULT, "not an integer", id="bad-default"),
        pytest.param({DEFAULT: "1001"}, DEFAULT, "outside [-1000, 1000]", id="default-too-big"),
        pytest.param(
            {SPEC: '{"c1": -1001}'}, SPEC, "outside [-1000, 1000]", id="spec-value-too-small"
        ),
        pytest.param({SPEC: '{"c1": "100"}'}, SPEC, "must be an integer", id="spec-value-string"),
        pytest.param({SPEC: "[100]"}, SPEC, "expected a JSON dict", id="spec-not-an-object"),
    ],
)
def test_malformed_or_out_of_range_values_raise(
    annotations: dict[str, str], key: str, reason: str
) -> None:
    req = container(pod("LS", annotations=annotations), "c1")
    with pytest.raises(AnnotationError) as err:
        oomscoreadj.container(req, Rules(), STAGE)
    assert err.value.key == key
    assert reason in err.value.reason


def test_sandbox_container_is_skipped() -> None:
    req = container(pod("LS", annotations={DEFAULT: "-500"}), "pause", sandbox=True)
    assert oomscoreadj.container(req, Rules(), Stage.RECONCILE_CONTAINER) is None


def test_every_qos_class_gets_its_value() -> None:
    for qos in ("LSE", "LSR", "LS", "BE", "SYSTEM", None):
        req = container(pod(qos, annotations={DEFAULT: "-500"}), "c1")
        assert oomscoreadj.container(req, Rules(), STAGE) == ContainerPatch(oom_score_adj=-500)


def test_hook_registers_container_stages_only() -> None:
    hook = oomscoreadj.HOOK
    assert (hook.name, hook.gate) == ("OOMScoreAdj", features.OOM_SCORE_ADJ)
    assert hook.stages == {Stage.PRE_CREATE_CONTAINER, Stage.RECONCILE_CONTAINER}
    assert hook.pod is None
