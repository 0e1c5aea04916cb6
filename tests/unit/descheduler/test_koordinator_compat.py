"""koord-descheduler started as Koordinator v1.8 starts it: every flag of its command, its
feature gates, its Deployment's args with its chart's configuration, --write-config-to, and
its metric series by Koordinator's name."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from descheduler import cli
from descheduler.config import DeschedulerConfig, parse_config
from descheduler.features import GATES, DeschedulerGates
from descheduler.metrics import CENSUS, PODS_EVICTED, DeschedulerMetrics
from koordapi.settings import settings
from tests.fakekube import KINDS, FakeKubeAPI
from tests.unit.descheduler.test_app import APPS

# Every flag of Koordinator v1.8.0's koord-descheduler, written from its sources:
# cmd/koord-descheduler/app/options/options.go (initFlags: --config, --write-config-to and the
# sets below), insecure_serving.go (--address, --port), component-base v0.35's
# config/options/leaderelectionconfig.go, featuregate (--feature-gates), metrics/options.go,
# logs/api/v1/options.go (no json format is registered, so no --log-json-*), apiserver v0.35's
# pkg/server/options/serving.go (SecureServingOptions.AddFlags), and server.go's
# verflag.AddFlags and globalflag.AddGlobalFlags (--version, --help; the klog flags -v and
# -vmodule are the logs set's). Each with a value a Koordinator user could give.
KOORDINATOR_FLAGS: dict[str, str | None] = {
    "config": "CONFIG",  # replaced by the test's file
    "write-config-to": None,  # exits: tested on its own
    "address": "0.0.0.0",  # noqa: S104 - Koordinator's default
    "port": "10251",
    "bind-address": "0.0.0.0",  # noqa: S104 - Koordinator's default
    "secure-port": "10258",
    "disable-http2-serving": "true",
    "cert-dir": "/tmp/certs",
    "tls-cert-file": "/etc/tls/tls.crt",
    "tls-private-key-file": "/etc/tls/tls.key",
    "tls-cipher-suites": "TLS_AES_128_GCM_SHA256",
    "tls-min-version": "VersionTLS12",
    "tls-sni-cert-key": "a.crt,a.key:*.example.org",
    "http2-max-streams-per-connection": "250",
    "permit-port-sharing": "true",
    "permit-address-sharing": "false",
    "leader-elect": "true",
    "leader-elect-lease-duration": "17s",
    "leader-elect-renew-deadline": "11s",
    "leader-elect-retry-period": "3s",
    "leader-elect-resource-lock": "leases",
    "leader-elect-resource-name": "koord-descheduler",
    "leader-elect-resource-namespace": "koordinator-system",
    "feature-gates": "DisablePVCReservation=true",
    "show-hidden-metrics-for-version": "1.34",
    "disabled-metrics": "descheduler_pods_evicted",
    "allow-metric-labels": "descheduler_pods_evicted,result=success",
    "allow-metric-labels-manifest": "/etc/allow.yaml",
    "logging-format": "text",
    "log-flush-frequency": "7s",
    "v": "4",
    "vmodule": "descheduler*=5",
    "log-text-split-stream": "true",
    "log-text-info-buffer-size": "3Ki",
    "version": None,  # exits: tested in test_cli.py
    "help": None,  # exits
}
# Koordinator's koord-descheduler gates (pkg/features/features.go, v1.8.0: the gates its init
# adds to pkg/util/feature's DefaultMutableFeatureGate, which --feature-gates sets), with
# their defaults.
KOORDINATOR_GATES = {
    "PodMutatingWebhook": True,
    "PodValidatingWebhook": True,
    "ElasticMutatingWebhook": True,
    "ElasticValidatingWebhook": True,
    "NodeMutatingWebhook": False,
    "NodeValidatingWebhook": False,
    "ConfigMapValidatingWebhook": False,
    "ReservationMutatingWebhook": False,
    "WebhookFramework": True,
    "ColocationProfileSkipMutatingResources": False,
    "ColocationProfileSkipValidatingPriority": False,
    "MultiQuotaTree": False,
    "ElasticQuotaIgnorePodOverhead": False,
    "ElasticQuotaGuaranteeUsage": False,
    "ElasticQuotaEnableUpdateResourceKey": False,
    "ElasticQuotaEvaluationTransformPod": False,
    "DisableDefaultQuota": False,
    "SupportParentQuotaSubmitPod": False,
    "EnableQuotaAdmission": False,
    "EnableSyncGPUSharedResource": False,
    "ColocationProfileController": False,
    "ValidatePodDeviceResource": False,
    "EnablePodEnhancedValidator": False,
    "DisablePVCReservation": False,
    "PriorityTransformer": False,
    "PreemptionPolicyTransformer": False,
    "ReplaceResourcesTransformer": False,
}
# Koordinator v1.8.0's koord-descheduler Deployment (charts versions/v1.8.0/templates/
# koord-descheduler.yaml) with its chart's default values: command /koord-descheduler.
BOOLEANS = {
    "disable-http2-serving",
    "permit-port-sharing",
    "permit-address-sharing",
    "leader-elect",
    "log-text-split-stream",
}
DEPLOYMENT_ARGS = ["--v=4", "--config=/config/koord-descheduler.config"]


def koordinator_config(port: int, namespace: str = "koordinator-system") -> str:
    """templates/koord-descheduler-config.yaml of Koordinator v1.8.0's chart, rendered with
    ``port`` as descheduler.port and ``namespace`` as installation.namespace (data written
    here from that template, its comments left out)."""
    return f"""apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
enableContentionProfiling: true
enableProfiling: true
healthzBindAddress: 0.0.0.0:{port}
metricsBindAddress: 0.0.0.0:{port}
leaderElection:
  resourceLock: leases
  resourceName: koord-descheduler
  resourceNamespace: {namespace}
deschedulingInterval: 10s
dryRun: false
profiles:
- name: koord-descheduler
  plugins:
    deschedule:
      disabled:
        - name: "*"
    evict:
      disabled:
        - name: "*"
      enabled:
        - name: MigrationController
  pluginConfig:
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs
      evictionPolicy: Eviction
      namespaces:
        exclude:
          - kube-system
          - {namespace}
      evictQPS: "10"
      evictBurst: 1
  - name: LowNodeLoad
    args:
      apiVersion: descheduler/v1alpha2
      kind: LowNodeLoadArgs
      evictableNamespaces:
        exclude:
          - kube-system
          - {namespace}
      useDeviationThresholds: false
      lowThresholds:
        cpu: 45
        memory: 55
      highThresholds:
        cpu: 75
        memory: 80
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_flags_are_koordinators_each_honoured_or_named_as_without_effect() -> None:
    honoured = {
        s.flag.koordinator for table in cli.TABLES for s in settings(table) if s.flag.koordinator
    }
    # -v is goflags' (the log level), --version and --help argparse's
    accounted = honoured | set(cli.KOORDINATOR_ONLY) | {"v", "version", "help"}
    assert accounted == set(KOORDINATOR_FLAGS)
    assert not honoured & set(cli.KOORDINATOR_ONLY)


@pytest.mark.parametrize(
    "name", sorted(name for name, value in KOORDINATOR_FLAGS.items() if value is not None)
)
def test_each_koordinator_flag_is_accepted_with_its_value(name: str, tmp_path: Path) -> None:
    value = KOORDINATOR_FLAGS[name]
    if name == "config":
        (tmp_path / "c.yaml").write_text(koordinator_config(10251))
        value = str(tmp_path / "c.yaml")
    # pflag takes a bool bare or as --name=value, never with the value apart
    apart = [f"--{name}"] if name in BOOLEANS else [f"-{name}", str(value)]
    for argv in ([f"--{name}={value}"], apart):
        args, notes = cli.parse_args(argv)
        cli.config_from_options(cli.options_from_args(args))
        flags, _ = cli.unimplemented_flags(notes)
        assert flags == ([name] if name in cli.KOORDINATOR_ONLY else [])


def test_help_names_the_flags_and_gates_without_effect(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in cli.KOORDINATOR_ONLY:
        assert f"--{name}" in text.replace("- ", "-")  # argparse may break a name at "-"
    for gate in GATES:
        assert gate in text


def test_the_gate_table_is_koordinators() -> None:
    assert {name: gate.default for name, gate in GATES.items()} == KOORDINATOR_GATES


def test_gates_set_away_from_their_default_are_reported() -> None:
    gates = DeschedulerGates.parse("PriorityTransformer=true,PodMutatingWebhook=true")
    assert list(gates.changed()) == ["PriorityTransformer"]  # PodMutatingWebhook: its default
    beta = DeschedulerGates.parse("AllBeta=false")
    changed = beta.changed()
    assert sorted(changed) == sorted(
        [
            "PodMutatingWebhook",
            "PodValidatingWebhook",
            "ElasticMutatingWebhook",
            "ElasticValidatingWebhook",
            "WebhookFramework",
        ]
    )  # the beta gates on by default; DisablePVCReservation is beta but off already
    # followed here (a migration's Reservation leaves PVCs out): not reported as unimplemented
    disabled = DeschedulerGates.parse("DisablePVCReservation=true")
    assert disabled.enabled("DisablePVCReservation")
    assert disabled.changed() == {}


def test_an_unknown_gate_stops_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--feature-gates=NodeTopologyReport=true"])
    assert exit_.value.code == 2
    assert "unknown feature gate 'NodeTopologyReport'" in capsys.readouterr().err


def comparable(config: DeschedulerConfig) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in fields(config) if f.name != "notes"}


def test_write_config_to_writes_the_effective_configuration_and_exits_0(tmp_path: Path) -> None:
    source = tmp_path / "koord-descheduler.config"
    source.write_text(koordinator_config(10377, "koord-ns"))
    out = tmp_path / "effective.yaml"
    argv = [
        f"--config={source}",
        f"--write-config-to={out}",
        "--leader-elect-lease-duration=23s",
        "--secure-port=10258",
    ]
    assert cli.main(argv) == 0
    written = parse_config(out.read_text(), str(out))
    args, _ = cli.parse_args(argv)
    expected = cli.config_from_options(cli.options_from_args(args))
    assert comparable(written) == comparable(expected)
    # the flag won over the file, the file's values and Koordinator's defaults are there
    assert written.leader_election.lease_duration == 23.0
    assert written.leader_election.resource_namespace == "koord-ns"
    assert written.leader_election.renew_deadline == 10.0
    assert written.healthz_bind_address == "0.0.0.0:10377"
    assert written.descheduling_interval == 10.0
    assert written.plugins["evict"] == ("MigrationController",)
    assert written.plugins["filter"] == ("MigrationController",)
    assert written.low_node_load is None  # configured, not enabled: as in Koordinator's chart
    assert written.migration.namespaces_exclude == ("kube-system", "koord-ns")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - a local URL
            return answer.status, answer.read().decode()
    except OSError:
        return 0, ""


def wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_koordinators_deployment_args_and_chart_config_start_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    config = tmp_path / "koord-descheduler.config"  # the chart mounts /config
    config.write_text(koordinator_config(port))
    argv = [arg.replace("/config/koord-descheduler.config", str(config)) for arg in DEPLOYMENT_ARGS]
    argv += ["--secure-port=10258", "--tls-min-version=VersionTLS12", "--vmodule=x=2"]
    argv += ["--feature-gates=ReplaceResourcesTransformer=true"]
    api = FakeKubeAPI((*KINDS, *APPS))
    monkeypatch.setattr("koordkube.client.build_client", lambda *_a, **_k: api.client())
    seen: dict[str, Any] = {}

    def probe() -> None:
        base = f"http://127.0.0.1:{port}"
        try:
            seen["ready"] = wait_for(lambda: get(f"{base}/readyz")[0] == 200, 20)
            seen["healthz"] = get(f"{base}/healthz")
            seen["lease"] = wait_for(
                lambda: any(
                    (lease["spec"] or {}).get("holderIdentity")
                    for lease in api.objects("Lease", "koordinator-system")
                ),
                20,
            )
            seen["metrics"] = get(f"{base}/metrics")[1]
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # the descheduler's own handler: a clean stop

    prober = threading.Thread(target=probe)
    with caplog.at_level(logging.INFO):
        prober.start()
        code = cli.main(argv)
    prober.join(5)
    assert code == 0
    assert seen["ready"] and seen["healthz"][0] == 200
    assert seen["lease"]  # the file's leaderElection: koordinator-system/koord-descheduler
    (lease,) = api.objects("Lease", "koordinator-system")
    assert lease["metadata"]["name"] == "koord-descheduler"
    flags = {
        (sample.labels["flag"], sample.value)
        for family in text_string_to_metric_families(seen["metrics"])
        if family.name == "koord_descheduler_flag_unimplemented"
        for sample in family.samples
    }
    assert flags == {("secure-port", 1.0), ("tls-min-version", 1.0), ("vmodule", 1.0)}
    assert (
        'koord_descheduler_feature_gate_unimplemented{gate="ReplaceResourcesTransformer"} 1.0'
        in seen["metrics"]
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    (flag_line,) = [w for w in warnings if w.startswith("Koordinator's flags accepted")]
    assert "--secure-port, --tls-min-version: no HTTPS serving" in flag_line
    assert "--vmodule: no per-file verbosity" in flag_line
    assert any("ReplaceResourcesTransformer" in w for w in warnings)
    infos = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("enableProfiling accepted, not followed") for m in infos)


def test_pods_evicted_is_exported_by_koordinators_name_and_labels() -> None:
    metrics = DeschedulerMetrics()
    assert PODS_EVICTED.encode() not in metrics.exposition()  # no sample yet: no family
    metrics.pods_evicted.labels("success", "LowNodeLoad", "team-a", "node-7").inc()
    metrics.pods_evicted.labels("success", "LowNodeLoad", "team-a", "node-7").inc()
    metrics.pods_evicted.labels("error", 'odd"trigger', "team-b", "node-9").inc()
    text = metrics.exposition().decode()
    assert f"# TYPE {PODS_EVICTED} counter" in text
    assert f"{PODS_EVICTED}_total" not in text
    lines = text.splitlines()
    assert (
        f'{PODS_EVICTED}{{namespace="team-a",node="node-7",result="success",'
        'strategy="LowNodeLoad"} 2.0' in lines
    )
    assert (
        f'{PODS_EVICTED}{{namespace="team-b",node="node-9",result="error",'
        'strategy="odd\\"trigger"} 1.0' in lines
    )
    # a Prometheus text parser reads it back (this one names a counter's samples _total)
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == PODS_EVICTED]
    assert family.type == "counter"
    values = {(s.labels["result"], s.labels["strategy"]): s.value for s in family.samples}
    assert values == {("success", "LowNodeLoad"): 2.0, ("error", 'odd"trigger'): 1.0}


def test_the_census_is_koordinators_series_as_the_code_exports_them() -> None:
    # pkg/descheduler/metrics/metrics.go, v1.8.0: its one series, a counter, and its labels
    assert {name: (kind, labels) for name, (kind, labels, _) in CENSUS.items()} == {
        "descheduler_pods_evicted": ("counter", ("result", "strategy", "namespace", "node"))
    }
    metrics = DeschedulerMetrics()
    metrics.pods_evicted.labels("success", "LowNodeLoad", "ns-3", "node-5").inc()
    exported = {
        family.name: (family.type, tuple(sorted(family.samples[0].labels)))
        for family in text_string_to_metric_families(metrics.exposition().decode())
        if family.samples
    }
    for name, (kind, labels, said) in CENSUS.items():
        assert said.startswith("exported")
        assert exported[name] == (kind, tuple(sorted(labels)))


def test_the_docs_census_names_each_series_as_the_code_does() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "descheduler.md"
    section = docs.read_text().split("### Koordinator's series", 1)[1]
    rows = {
        cells[0].strip("` "): (cells[1].strip(), cells[3].strip())
        for line in section.splitlines()
        if line.startswith("| `")
        for cells in [line.strip("|").split("|")]
    }
    assert {name: kind for name, (kind, _) in rows.items()} == {
        name: kind for name, (kind, _, _) in CENSUS.items()
    }
    for name, (_, _, said) in CENSUS.items():
        assert rows[name][1].startswith(said.split(":")[0])  # exported / not measured
