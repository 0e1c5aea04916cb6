"""Resctrl: pod-level LLC/MBA groups; the L3 mask arithmetic."""

from __future__ import annotations

import json

import pytest

from koordapi import features, keys
from koordapi.annotation import ResctrlConfig
from koordapi.errors import AnnotationError, ModelError
from runtimehooks.hooks import resctrl
from runtimehooks.patch import ContainerPatch, PodPatch, ResctrlGroup
from runtimehooks.request import Stage
from runtimehooks.rules import KernelFeatures, Rules
from tests.unit.runtimehooks.builders import POD_UID, container, pod

KERNEL = KernelFeatures(resctrl=True, l3_cbm_mask=0x7FF, l3_cache_ids=(0, 1))
GROUP = f"koordlet-{POD_UID}"


@pytest.mark.parametrize(
    ("cbm", "start", "end", "mask"),
    [
        pytest.param(0xFF, 0, 100, "ff", id="case-25-full-range"),
        pytest.param(0x3FF, 10, 80, "fe", id="case-25-10-80"),
        pytest.param(0x7FF, 10, 50, "3c", id="case-25-10-50"),
        pytest.param(0x3FF, 0, 30, "7", id="case-25-0-30"),
        pytest.param(0x3FF, 10, 85, "1fe", id="case-25-10-85"),
        pytest.param(0x1, 0, 100, "1", id="single-way"),
    ],
)
def test_l3_mask_covers_the_ceiled_way_range(cbm: int, start: int, end: int, mask: str) -> None:
    assert resctrl.l3_mask(cbm, start, end) == mask


@pytest.mark.parametrize(
    ("cbm", "start", "end", "message"),
    [
        pytest.param(0x101, 0, 100, "not contiguous", id="case-25-holey-cbm"),
        pytest.param(0x4, 0, 100, "not contiguous", id="case-25-cbm-not-from-bit-0"),
        pytest.param(0, 0, 100, "no L3 cbm mask", id="no-cbm"),
        pytest.param(0xFF, 50, 50, "is invalid", id="case-25-start-equals-end"),
        pytest.param(0xFF, 60, 40, "is invalid", id="case-25-start-after-end"),
        pytest.param(0xFF, 0, 101, "is invalid", id="end-above-100"),
        pytest.param(0xFF, -1, 50, "is invalid", id="negative-start"),
    ],
)
def test_invalid_cbm_or_range_is_an_error(cbm: int, start: int, end: int, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        resctrl.l3_mask(cbm, start, end)


@pytest.mark.parametrize(
    ("percent", "vendor", "value"),
    [
        pytest.param(100, "intel", 100, id="intel-100"),
        pytest.param(25, "intel", 30, id="intel-rounds-up-to-10"),
        pytest.param(1, "intel", 10, id="intel-1"),
        pytest.param(100, "amd", 2048, id="amd-100-unlimited"),
        pytest.param(50, "amd", 80, id="amd-50"),
        pytest.param(10, "amd", 16, id="amd-10"),
    ],
)
def test_mba_value_follows_the_vendor_formula(percent: int, vendor: str, value: int) -> None:
    assert resctrl.mba_value(percent, vendor) == value


@pytest.mark.parametrize("percent", [0, 101, -5])
def test_mba_percent_outside_1_to_100_is_an_error(percent: int) -> None:
    with pytest.raises(ModelError, match="outside"):
        resctrl.mba_value(percent, "intel")


@pytest.mark.parametrize(
    ("config", "lines"),
    [
        pytest.param(ResctrlConfig(llc_range=(10, 50)), ("L3:0=3c;1=3c",), id="llc-all-caches"),
        pytest.param(
            ResctrlConfig(llc_range=(10, 50), llc_per_cache={1: (0, 30)}),
            ("L3:0=3c;1=f",),
            id="llc-per-cache-override",
        ),
        pytest.param(
            ResctrlConfig(llc_per_cache={0: (0, 30)}),
            ("L3:0=f;1=7ff",),
            id="llc-per-cache-only-others-full",
        ),
        pytest.param(ResctrlConfig(mb_percent=25), ("MB:0=30;1=30",), id="mb-all-caches"),
        pytest.param(
            ResctrlConfig(llc_range=(0, 100), mb_per_cache={1: 50}),
            ("L3:0=7ff;1=7ff", "MB:0=100;1=50"),
            id="llc-and-mb-per-cache",
        ),
        pytest.param(ResctrlConfig(), (), id="empty-config"),
    ],
)
def test_schemata_has_one_line_per_resource_for_every_cache_id(
    config: ResctrlConfig, lines: tuple[str, ...]
) -> None:
    assert resctrl.schemata(config, KERNEL) == lines


def test_amd_schemata_uses_the_amd_mba_value() -> None:
    kernel = KernelFeatures(resctrl=True, l3_cbm_mask=0xFF, mba_vendor="amd")
    assert resctrl.schemata(ResctrlConfig(mb_percent=100), kernel) == ("MB:0=2048",)


def resctrl_annotation(value: object) -> dict[str, str]:
    return {keys.ANNOTATION_RESCTRL: json.dumps(value)}


def test_pod_start_creates_the_pod_group_with_its_schemata() -> None:
    owner = pod(
        "LS",
        annotations=resctrl_annotation(
            {"llc": {"schemata": {"range": [10, 50]}}, "mb": {"schemata": {"percent": 25}}}
        ),
    )
    patch = resctrl.pod(owner, Rules(kernel=KERNEL), Stage.PRE_RUN_POD_SANDBOX)
    assert patch == PodPatch(resctrl=ResctrlGroup(GROUP, ("L3:0=3c;1=3c", "MB:0=30;1=30")))


def test_pod_removal_deletes_the_pod_group() -> None:
    owner = pod("LS", annotations=resctrl_annotation({"llc": {"schemata": {"range": [0, 50]}}}))
    patch = resctrl.pod(owner, Rules(kernel=KERNEL), Stage.PRE_REMOVE_POD_SANDBOX)
    assert patch == PodPatch(remove_resctrl=GROUP)


def test_containers_join_the_pod_group_as_rdt_class() -> None:
    owner = pod("BE", annotations=resctrl_annotation({"mb": {"schemata": {"percent": 50}}}))
    patch = resctrl.container(container(owner), Rules(kernel=KERNEL), Stage.PRE_CREATE_CONTAINER)
    assert patch == ContainerPatch(rdt_class=GROUP)


def test_pods_without_the_annotation_or_hosts_without_rdt_are_left_alone() -> None:
    plain = pod("LS")
    assert resctrl.pod(plain, Rules(kernel=KERNEL), Stage.PRE_RUN_POD_SANDBOX) is None
    assert (
        resctrl.container(container(plain), Rules(kernel=KERNEL), Stage.PRE_CREATE_CONTAINER)
        is None
    )
    owner = pod("LS", annotations=resctrl_annotation({"mb": {"schemata": {"percent": 50}}}))
    no_rdt = Rules(kernel=KernelFeatures())
    assert resctrl.pod(owner, no_rdt, Stage.PRE_RUN_POD_SANDBOX) is None
    assert resctrl.container(container(owner), no_rdt, Stage.PRE_CREATE_CONTAINER) is None


def test_pod_uid_that_cannot_name_a_directory_is_refused() -> None:
    owner = pod("LS", uid="../../etc", annotations=resctrl_annotation({}))
    with pytest.raises(AnnotationError, match="cannot name a group"):
        resctrl.pod(owner, Rules(kernel=KERNEL), Stage.PRE_RUN_POD_SANDBOX)


def test_malformed_resctrl_annotation_raises_with_its_key() -> None:
    owner = pod("LS", annotations=resctrl_annotation({"llc": {"schemata": {"range": [50, 10]}}}))
    with pytest.raises(AnnotationError) as err:
        resctrl.pod(owner, Rules(kernel=KERNEL), Stage.PRE_RUN_POD_SANDBOX)
    assert err.value.key == keys.ANNOTATION_RESCTRL
    assert "start 50% must be below end 10%" in err.value.reason


def test_hook_registers_sandbox_start_removal_and_container_create() -> None:
    hook = resctrl.HOOK
    assert (hook.name, hook.gate) == ("Resctrl", features.RESCTRL)
    assert {Stage.PRE_RUN_POD_SANDBOX, Stage.PRE_REMOVE_POD_SANDBOX} <= hook.stages
    assert Stage.PRE_CREATE_CONTAINER in hook.stages
