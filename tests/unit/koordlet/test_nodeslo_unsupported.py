"""koordlet names the NodeSLO fields it accepts but does not use: once per change of the spec,
in its log and on /metrics, and koordctl doctor repeats them."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from koordapi import unsupported
from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from koordapi.unsupported import READ_EXTENSIONS
from koordctl import doctor
from koordlet.config import Config
from koordlet.daemon import Koordlet
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager import schedlatency
from koordlet.states.nodeconfig import build_node_config
from koordlet.states.unsupported import UnsupportedFieldsReport

BLKIO = "spec.resourceQOSStrategy.beClass.blkioQOS.enable"
INGRESS = "spec.resourceQOSStrategy.lsClass.networkQOS.ingressLimit"
SPEC = {
    "resourceQOSStrategy": {
        "beClass": {"blkioQOS": {"enable": True}, "cpuQOS": {"enable": True}},
        "lsClass": {"networkQOS": {"enable": True, "ingressLimit": 37, "egressLimit": 63}},
    }
}


def scrape(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def field_series(report: UnsupportedFieldsReport) -> list[str]:
    registry = CollectorRegistry()
    registry.register(report)
    return doctor.unsupported_slo_fields(scrape(registry))


def reported_total(report: UnsupportedFieldsReport) -> float:
    registry = CollectorRegistry()
    registry.register(report)
    value = registry.get_sample_value("koordlet_node_slo_unsupported_fields_total", {"node": "n1"})
    assert value is not None
    return value


def test_each_set_but_unused_field_is_logged_with_why_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    report = UnsupportedFieldsReport("n1")
    with caplog.at_level(logging.WARNING, logger="koordlet.states.unsupported"):
        found = report.note(NodeSLOSpec.parse(SPEC))

    assert found is not None and [f.path for f in found] == [INGRESS, BLKIO]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"NodeSLO n1: {INGRESS} is set but not used here: {unsupported.INGRESS} (the rest of "
        "the NodeSLO applies)",
        f"NodeSLO n1: {BLKIO} is set but not used here: {unsupported.BLKIO} (the rest of the "
        "NodeSLO applies)",
    ]
    assert field_series(report) == [BLKIO, INGRESS]
    assert reported_total(report) == 2


def test_the_same_spec_again_says_nothing_and_a_change_says_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    report = UnsupportedFieldsReport("n1")
    report.note(NodeSLOSpec.parse(SPEC))
    caplog.clear()
    # the Node changed (allocatable, annotations), the NodeSLO did not: a new, equal spec
    ratio = {"node.koordinator.sh/cpu-normalization-ratio": "1.2"}
    config = build_node_config(SPEC, ratio, None, {"cpu": "7"})
    with caplog.at_level(logging.WARNING, logger="koordlet.states.unsupported"):
        assert report.note(config.spec) is None
        assert report.note(NodeSLOSpec.parse(SPEC)) is None
    assert caplog.records == []
    assert reported_total(report) == 2

    changed = {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True}}}}
    with caplog.at_level(logging.WARNING, logger="koordlet.states.unsupported"):
        found = report.note(NodeSLOSpec.parse(changed))
    assert found is not None and [f.path for f in found] == [BLKIO]
    assert len(caplog.records) == 1 and BLKIO in caplog.records[0].getMessage()
    assert reported_total(report) == 3
    assert field_series(report) == [BLKIO]  # the ingress series is gone


def test_an_unset_or_default_field_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    report = UnsupportedFieldsReport("n1")
    quiet = {  # a change (BE cpuQOS on), and unused fields at their default or off values
        "resourceQOSStrategy": {
            "beClass": {"cpuQOS": {"enable": True}, "blkioQOS": {"enable": False}},
            "systemClass": {"cpuQOS": {"groupIdentity": 0}},
        }
    }
    with caplog.at_level(logging.WARNING, logger="koordlet.states.unsupported"):
        assert report.note(NodeSLOSpec()) == ()
        assert report.note(NodeSLOSpec.parse(quiet)) == ()
    assert caplog.records == []
    assert field_series(report) == []
    assert reported_total(report) == 0


def test_removing_the_fields_clears_the_gauge_but_not_the_counter() -> None:
    report = UnsupportedFieldsReport("n1")
    report.note(NodeSLOSpec.parse(SPEC))
    assert report.note(NodeSLOSpec()) == ()
    assert field_series(report) == []
    assert reported_total(report) == 2


def test_the_extension_koordlet_reads_is_the_one_the_report_knows() -> None:
    assert schedlatency.CONFIG_PATH.rsplit(".", 1)[-1] in READ_EXTENSIONS


def test_koordlet_reports_its_nodeslo_file_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "cgroup").mkdir()
    slo = tmp_path / "nodeslo.yaml"
    slo.write_text(
        "kind: NodeSLO\nspec:\n  resourceQOSStrategy:\n    beClass:\n"
        "      blkioQOS: {enable: true}\n"
    )
    config = Config(
        node_name="unit-node",
        cgroup_root=tmp_path / "cgroup",
        cgroup_driver="cgroupfs",
        var_run_root=tmp_path / "run",
        resctrl_root=tmp_path / "resctrl",
        node_slo_file=slo,
        metrics_addr="",
        tsdb_path=None,
        node_metric_file=None,
        feature_gates=FeatureGates.parse("SchedLatencyCollector=false"),
    )
    with caplog.at_level(logging.WARNING, logger="koordlet.states.unsupported"):
        daemon = Koordlet(config)

    assert any(BLKIO in r.getMessage() for r in caplog.records)
    text = scrape(daemon.metrics.registry)
    assert doctor.unsupported_slo_fields(text) == [BLKIO]


# -- koordctl doctor -------------------------------------------------------------------------


def koordlet_scrape(*, gates: tuple[str, ...] = (), spec: Mapping[str, Any] | None) -> str:
    metrics = KoordletMetrics("node-1")
    metrics.nri_connected.labels("node-1").set(1)
    for gate in gates:
        metrics.unimplemented_gates.labels("node-1", gate).set(1)
    report = UnsupportedFieldsReport("node-1")
    report.note(NodeSLOSpec.parse(spec))
    metrics.registry.register(report)
    return scrape(metrics.registry)


@pytest.fixture
def doctor_config(tmp_path: Path) -> doctor.DoctorConfig:
    return doctor.DoctorConfig(
        proc_root=tmp_path,
        sys_root=tmp_path,
        cgroup_root=tmp_path,
        containerd_config=tmp_path / "config.toml",
        containerd_bin="containerd",
        addr="127.0.0.1:1",
        modules_root=tmp_path,
        timeout=1.0,
    )


def test_doctor_names_the_unused_nodeslo_fields(
    doctor_config: doctor.DoctorConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "scrape_koordlet", lambda _config: koordlet_scrape(spec=SPEC))

    check = doctor.check_koordlet(doctor_config)

    assert check.status is doctor.Status.WARN
    assert check.finding.endswith(f"NodeSLO fields set that are not used here: {BLKIO}, {INGRESS}")
    assert "slo-controller-config" in check.fix and "koordlet's log" in check.fix


def test_doctor_names_gates_and_fields_together(
    doctor_config: doctor.DoctorConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = koordlet_scrape(gates=("BlkIOReconcile",), spec=SPEC)
    monkeypatch.setattr(doctor, "scrape_koordlet", lambda _config: text)

    check = doctor.check_koordlet(doctor_config)

    assert check.status is doctor.Status.WARN
    assert "change nothing: BlkIOReconcile; NodeSLO fields set" in check.finding
    assert "--feature-gates" in check.fix and "slo-controller-config" in check.fix


def test_doctor_is_quiet_about_a_nodeslo_without_unused_fields(
    doctor_config: doctor.DoctorConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = koordlet_scrape(spec={"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}}})
    monkeypatch.setattr(doctor, "scrape_koordlet", lambda _config: text)

    check = doctor.check_koordlet(replace(doctor_config, addr="127.0.0.1:2"))

    assert check == doctor.Check(
        "koordlet", doctor.Status.OK, "running at 127.0.0.1:2, registered over NRI"
    )
