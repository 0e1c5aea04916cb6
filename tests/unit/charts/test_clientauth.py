"""Client authentication in the chart (manager.webhook.clientAuth, scheduler.clientAuth): off
by default (no flags, no mounts, no client certificate in the extender's tlsConfig); on, the
flags the components accept, the user's ConfigMap or Secret mounted where the flags point, and
kube-scheduler's client certificate in the rendered tlsConfig and mounted into the chart's
kube-scheduler."""

from __future__ import annotations

from typing import Any, cast

import pytest
import yaml

from manager import cli as manager_cli
from scheduler import cli as scheduler_cli
from tests.unit.charts import helm

MANAGER_DIR = "/etc/koord-manager/webhook-client-auth"
SCHEDULER_DIR = "/etc/koord-scheduler/client-auth"
CLIENT_CERT_DIR = "/etc/kubernetes/koord-scheduler-client"
NO_MANAGER = {"manager": {"enabled": False}}

CASES: dict[str, dict[str, Any]] = {
    "default": {},
    "manager": {
        "manager": {
            "webhook": {
                "clientAuth": {
                    "caSecret": "apiserver-client-ca",
                    "caKey": "client-ca.pem",
                    "allowedNames": ["kube-apiserver", "apiserver-loopback-client"],
                    "tokenSecret": "webhook-tokens",
                }
            }
        }
    },
    "manager-configmap": {
        "manager": {"webhook": {"clientAuth": {"caConfigMap": "kube-root-ca.crt"}}}
    },
    "scheduler": {
        **NO_MANAGER,
        "scheduler": {
            "clientAuth": {
                "caConfigMap": "scheduler-client-ca",
                "allowedNames": ["system:kube-scheduler"],
                "clientCertSecret": "kube-scheduler-client",
            }
        },
    },
    "scheduler-own-kube-scheduler": {
        **NO_MANAGER,
        "scheduler": {
            "kubeScheduler": {"enabled": False},
            "clientAuth": {"caSecret": "scheduler-client-ca", "clientCertDir": "/etc/k/client"},
        },
    },
    "scheduler-tokens": {**NO_MANAGER, "scheduler": {"clientAuth": {"tokenSecret": "tok"}}},
    "no-client-cert": {**NO_MANAGER, "scheduler": {"clientAuth": {"caConfigMap": "ca"}}},
    "both-cas": {
        **NO_MANAGER,
        "scheduler": {
            "kubeScheduler": {"enabled": False},
            "clientAuth": {"caConfigMap": "ca", "caSecret": "ca"},
        },
    },
    "names-without-ca": {
        "manager": {"webhook": {"clientAuth": {"allowedNames": ["kube-apiserver"]}}}
    },
}


@pytest.fixture(scope="module")
def releases() -> dict[str, helm.Release]:
    results = helm.run(*(helm.Render(helm.CHART, values) for values in CASES.values()))
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(CASES, cast(list[helm.Release], results), strict=True))


def container(release: helm.Release, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the pod spec, the container) of the Deployment whose container is ``name``."""
    for deployment in release.all("Deployment"):
        spec = deployment["spec"]["template"]["spec"]
        for c in spec["containers"]:
            if c["name"] == name:
                return spec, c
    raise AssertionError(f"no container {name}")


def args(c: dict[str, Any]) -> list[str]:
    return [*c.get("command", []), *c.get("args", [])]


def client_flags(c: dict[str, Any], prefix: str) -> list[str]:
    return [a for a in args(c) if a.startswith(prefix)]


def mounts(spec: dict[str, Any], c: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Volume name → (its mount path, the volume) for the client authentication volumes."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    return {
        m["name"]: (m["mountPath"], volumes[m["name"]])
        for m in c.get("volumeMounts", [])
        if m["name"] in ("client-ca", "client-token", "extender-client-cert")
    }


def extenders(release: helm.Release) -> list[dict[str, Any]]:
    """The extender entries of every rendered KubeSchedulerConfiguration."""
    found = []
    for config_map in release.all("ConfigMap"):
        for text in config_map.get("data", {}).values():
            doc = yaml.safe_load(text) if "KubeSchedulerConfiguration" in text else None
            if isinstance(doc, dict):
                found += doc.get("extenders", [])
    return found


def test_off_by_default(releases: dict[str, helm.Release]) -> None:
    release = releases["default"]
    assert not release.error
    for name, prefix in (("manager", "--webhook-client-"), ("scheduler", "--client-")):
        spec, c = container(release, name)
        assert client_flags(c, prefix) == []
        assert mounts(spec, c) == {}
    spec, c = container(release, "kube-scheduler")
    assert mounts(spec, c) == {}
    tls_configs = [e["tlsConfig"] for e in extenders(release)]
    assert len(tls_configs) == 2  # the chart's kube-scheduler's, and the one to merge
    for tls in tls_configs:
        assert set(tls) == {"serverName", "caData"}


def test_manager_flags_and_mounts(releases: dict[str, helm.Release]) -> None:
    release = releases["manager"]
    assert not release.error
    spec, c = container(release, "manager")
    flags = client_flags(c, "--webhook-client-")
    assert flags == [
        f"--webhook-client-ca-file={MANAGER_DIR}/ca/ca.crt",
        "--webhook-client-allowed-names=kube-apiserver,apiserver-loopback-client",
        f"--webhook-client-token-file={MANAGER_DIR}/token/tokens",
    ]
    assert mounts(spec, c) == {
        "client-ca": (
            f"{MANAGER_DIR}/ca",
            {
                "name": "client-ca",
                "secret": {
                    "secretName": "apiserver-client-ca",
                    "defaultMode": 0o440,
                    "items": [{"key": "client-ca.pem", "path": "ca.crt"}],
                },
            },
        ),
        "client-token": (
            f"{MANAGER_DIR}/token",
            {
                "name": "client-token",
                "secret": {
                    "secretName": "webhook-tokens",
                    "defaultMode": 0o440,
                    "items": [{"key": "tokens", "path": "tokens"}],
                },
            },
        ),
    }
    # koord-manager takes them as the chart writes them
    parsed, _ = manager_cli.parse_args(args(c)[1:])
    assert manager_cli.options_from_args(parsed).webhook_client_auth().allowed_names == {
        "kube-apiserver",
        "apiserver-loopback-client",
    }


def test_manager_ca_from_a_configmap(releases: dict[str, helm.Release]) -> None:
    release = releases["manager-configmap"]
    assert not release.error
    spec, c = container(release, "manager")
    assert client_flags(c, "--webhook-client-") == [
        f"--webhook-client-ca-file={MANAGER_DIR}/ca/ca.crt"
    ]
    assert mounts(spec, c)["client-ca"][1]["configMap"] == {
        "name": "kube-root-ca.crt",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }


def test_scheduler_flags_mounts_and_tls_config(releases: dict[str, helm.Release]) -> None:
    release = releases["scheduler"]
    assert not release.error
    spec, c = container(release, "scheduler")
    assert client_flags(c, "--client-") == [
        f"--client-ca-file={SCHEDULER_DIR}/ca/ca.crt",
        "--client-allowed-names=system:kube-scheduler",
    ]
    assert mounts(spec, c)["client-ca"] == (
        f"{SCHEDULER_DIR}/ca",
        {
            "name": "client-ca",
            "configMap": {
                "name": "scheduler-client-ca",
                "items": [{"key": "ca.crt", "path": "ca.crt"}],
            },
        },
    )
    parsed = scheduler_cli.build_parser().parse_args(args(c)[1:])
    assert scheduler_cli.options_from_args(parsed).client_auth().ca_file is not None
    # kube-scheduler presents its client certificate: certFile/keyFile in both configurations
    for extender in extenders(release):
        assert extender["tlsConfig"]["certFile"] == f"{CLIENT_CERT_DIR}/tls.crt"
        assert extender["tlsConfig"]["keyFile"] == f"{CLIENT_CERT_DIR}/tls.key"
        assert "caData" in extender["tlsConfig"]
    spec, c = container(release, "kube-scheduler")
    assert mounts(spec, c) == {
        "extender-client-cert": (
            CLIENT_CERT_DIR,
            {"name": "extender-client-cert", "secret": {"secretName": "kube-scheduler-client"}},
        )
    }


def test_scheduler_for_a_kube_scheduler_of_your_own(releases: dict[str, helm.Release]) -> None:
    release = releases["scheduler-own-kube-scheduler"]
    assert not release.error
    (extender,) = extenders(release)
    assert extender["tlsConfig"]["certFile"] == "/etc/k/client/tls.crt"
    assert extender["tlsConfig"]["keyFile"] == "/etc/k/client/tls.key"
    spec, c = container(release, "scheduler")
    assert mounts(spec, c)["client-ca"][1]["secret"]["secretName"] == "scheduler-client-ca"


def test_scheduler_tokens_alone_need_no_client_certificate(
    releases: dict[str, helm.Release],
) -> None:
    release = releases["scheduler-tokens"]
    assert not release.error
    spec, c = container(release, "scheduler")
    assert client_flags(c, "--client-") == [f"--client-token-file={SCHEDULER_DIR}/token/tokens"]
    assert set(mounts(spec, c)) == {"client-token"}
    for extender in extenders(release):
        assert "certFile" not in extender["tlsConfig"]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no-client-cert", "scheduler.clientAuth.clientCertSecret is required"),
        ("both-cas", "give caConfigMap or caSecret, not both"),
        ("names-without-ca", "clientAuth.allowedNames needs caConfigMap or caSecret"),
    ],
)
def test_incomplete_settings_are_refused(
    releases: dict[str, helm.Release], case: str, message: str
) -> None:
    assert message in releases[case].error
