"""The chart rendered and linted once per scenario, with Helm's engine (see helm.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import trustme
import yaml

from tests.unit.charts import helm

CUSTOM_TOLERATIONS = [
    {"key": "dedicated", "operator": "Equal", "value": "colocation", "effect": "NoSchedule"}
]
CUSTOM_NODE_SELECTOR = {"node-role.example.com/colocation": "true"}
CUSTOM_RESOURCES = {
    "requests": {"cpu": "250m", "memory": "200Mi"},
    "limits": {"cpu": "2", "memory": "1Gi"},
}
CUSTOM_UPDATE_STRATEGY = {"type": "OnDelete"}
CUSTOM_MANAGER_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}
                    ]
                }
            ]
        }
    }
}
CUSTOM_SCHEDULER_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "topologyKey": "topology.kubernetes.io/zone",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "scheduler"}},
            }
        ]
    }
}
# The CA of a serving certificate made outside the chart (manager.webhook.certificates,
# scheduler.certificates).
EXISTING_CA_PEM = trustme.CA().cert_pem.bytes().decode()

# Koordinator v1.8.0's values.yaml, every key with its default (tests/data, written out from
# its chart): what a Koordinator user's values file holds, its image keys naming Koordinator's
# images.
KOORDINATOR_VALUES_FILE = helm.ROOT / "tests" / "data" / "koordinator-v1.8-values.yaml"
KOORDINATOR_VALUES: Mapping[str, Any] = yaml.safe_load(KOORDINATOR_VALUES_FILE.read_text())

# Values per scenario, merged by Helm over the chart's values.yaml.
SCENARIOS: Mapping[str, Mapping[str, Any]] = {
    "default": {},
    "monitoring": {
        "koordlet": {"metrics": {"port": 9400}},
        "manager": {"metrics": {"port": 9090}},
        "monitoring": {
            "serviceMonitor": {
                "enabled": True,
                "interval": "15s",
                "labels": {"release": "prometheus"},
                "relabelings": [
                    {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "host"}
                ],
            },
            "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "QoS"}},
            "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
        },
    },
    "custom": {
        "fullnameOverride": "qos",
        "imagePullSecrets": [{"name": "registry"}],
        "koordlet": {
            "image": {
                "repository": "registry.example.com/koordlet",
                "tag": "dev",
                "pullPolicy": "Always",
            },
            "featureGates": {"BECPUEvict": False, "PSICollector": True, "CPICollector": True},
            "flags": {"log-level": "debug", "tsdb-max-bytes": 209715200, "node-metric-file": None},
            "extraArgs": ["--cpu-suppress-min-cpus=4", "--only-evict-by-api=true"],
            "extraEnv": [{"name": "PYTHONFAULTHANDLER", "value": "1"}],
            "tolerations": CUSTOM_TOLERATIONS,
            "nodeSelector": CUSTOM_NODE_SELECTOR,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/arch",
                                        "operator": "In",
                                        "values": ["amd64"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
            "resources": CUSTOM_RESOURCES,
            "updateStrategy": CUSTOM_UPDATE_STRATEGY,
            "hostNetwork": False,
            "ebpf": {"enabled": False},
            "podAnnotations": {"example.com/team": "sre"},
            "podLabels": {"example.com/tier": "node"},
        },
        "manager": {
            "image": {"repository": "registry.example.com/koord-manager", "tag": "dev"},
            "replicas": 3,
            "leaderElection": {"id": "qos-manager"},
            "workers": 8,
            "logLevel": "debug",
            "extraArgs": ["--kubeconfig=/etc/kube/config"],
            "extraEnv": [{"name": "PYTHONFAULTHANDLER", "value": "1"}],
            "webhook": {
                "port": 10250,
                "timeoutSeconds": 10,
                "pods": {"failurePolicy": "Fail"},
                "configMap": {"failurePolicy": "Ignore"},
                "excludedNamespaces": ["kube-system", "monitoring"],
                "annotations": {"example.com/owner": "sre"},
                "certificates": {
                    "validityDays": 365,
                    "clusterDomain": "example.internal",
                    "autoRenew": False,  # the chart's pair, mounted and never renewed
                },
            },
            "resources": CUSTOM_RESOURCES,
            "priorityClassName": "system-cluster-critical",
            "tolerations": CUSTOM_TOLERATIONS,
            "nodeSelector": CUSTOM_NODE_SELECTOR,
            "affinity": CUSTOM_MANAGER_AFFINITY,
            "podAnnotations": {"example.com/team": "sre"},
            "podLabels": {"example.com/tier": "control"},
        },
        "scheduler": {
            "image": {"repository": "registry.example.com/koord-scheduler", "tag": "dev"},
            "replicas": 3,
            "port": 9443,
            "urlPrefix": "koord/extender/",
            "logLevel": "debug",
            "extraArgs": ["--kubeconfig=/etc/kube/config"],
            "extraEnv": [{"name": "PYTHONFAULTHANDLER", "value": "1"}],
            "metrics": {"port": 9091},
            "certificates": {
                "validityDays": 365,
                "clusterDomain": "example.internal",
                "autoRenew": False,
            },
            "loadAware": {
                "usageThresholds": {"cpu": 70, "memory": None},
                "filterExpiredNodeMetrics": False,
            },
            "extender": {"weight": 3, "httpTimeout": "2s", "ignorable": True, "bind": False},
            "resources": CUSTOM_RESOURCES,
            "priorityClassName": "system-cluster-critical",
            "tolerations": CUSTOM_TOLERATIONS,
            "nodeSelector": CUSTOM_NODE_SELECTOR,
            "affinity": CUSTOM_SCHEDULER_AFFINITY,
            "podAnnotations": {"example.com/team": "sre"},
            "podLabels": {"example.com/tier": "control"},
        },
        "sloConfig": {
            "data": {
                "system-config": None,
                "host-application-config": {"applications": []},
                "resource-threshold-config": {
                    "clusterStrategy": {"cpuSuppressThresholdPercent": 50}
                },
            }
        },
    },
    "bring-your-own": {
        "rbac": {"create": False},
        "sloConfig": {"create": False},
        "koordlet": {"serviceAccount": {"create": False, "name": "koordlet"}, "featureGates": None},
        "manager": {"serviceAccount": {"create": False, "name": "koord-manager"}},
        "scheduler": {
            "serviceAccount": {"create": False, "name": "koord-scheduler"},
            "kubeScheduler": {"serviceAccount": {"create": False, "name": "kube-scheduler"}},
        },
        "descheduler": {"serviceAccount": {"create": False, "name": "koord-descheduler"}},
    },
    "manager-disabled": {"manager": {"enabled": False}},
    "no-webhooks": {
        "manager": {
            "webhook": {"enabled": False},
            "replicas": 1,
            "leaderElection": {"enabled": False},
        }
    },
    # Both serving certificates brought along (e.g. cert-manager's).
    "existing-secret": {
        "manager": {
            "webhook": {
                "certificates": {"existingSecret": "koord-manager-tls", "caBundle": EXISTING_CA_PEM}
            }
        },
        "scheduler": {
            "certificates": {"existingSecret": "koord-scheduler-tls", "caBundle": EXISTING_CA_PEM}
        },
    },
    "scheduler-disabled": {"scheduler": {"enabled": False}},
    # The extender merged into the cluster's own kube-scheduler, which runs another profile.
    "kube-scheduler-off": {
        "scheduler": {"kubeScheduler": {"enabled": False}},
        "manager": {"knownSchedulers": ["batch-scheduler", "default-scheduler"]},
    },
    # Only batch pods reach the extender (managedResources).
    "scheduler-batch-only": {"scheduler": {"extender": {"allPods": False}}},
}


@dataclass(frozen=True)
class Outcome:
    values: Mapping[str, Any]
    lint: helm.LintResult
    release: helm.Release


@pytest.fixture(scope="session")
def outcomes() -> dict[str, Outcome]:
    """Every scenario linted and rendered, in one child process (a few seconds per scenario:
    Helm's install, and the RSA keys of the generated certificates)."""
    if not helm.available():
        pytest.fail(helm.INSTALL_HINT, pytrace=False)
    requests: list[helm.Request] = []
    for values in SCENARIOS.values():
        requests += [helm.Lint(helm.CHART, values), helm.Render(helm.CHART, values)]
    results = helm.run(*requests)
    found = {}
    for i, (name, values) in enumerate(SCENARIOS.items()):
        lint, release = results[2 * i], results[2 * i + 1]
        assert isinstance(lint, helm.LintResult) and isinstance(release, helm.Release)
        found[name] = Outcome(values, lint, release)
    return found


@pytest.fixture(params=list(SCENARIOS))
def outcome(request: pytest.FixtureRequest, outcomes: dict[str, Outcome]) -> Outcome:
    """One scenario's outcome; tests using it run once per scenario."""
    found = outcomes[request.param]
    assert not found.release.error, f"helm install failed: {found.release.error}"
    return found


@pytest.fixture
def default(outcomes: dict[str, Outcome]) -> helm.Release:
    release = outcomes["default"].release
    assert not release.error, f"helm install failed: {release.error}"
    return release


# -- shared by the component tests ---------------------------------------------------------

CHART_VALUES: dict[str, Any] = yaml.safe_load((helm.CHART / "values.yaml").read_text())


def effective(values: Mapping[str, Any]) -> dict[str, Any]:
    """A scenario's values merged over the chart's, as Helm merges them."""
    return helm.merge_values(CHART_VALUES, values)


def scenarios_where(component: str, predicate: Callable[[dict[str, Any]], bool]) -> list[str]:
    """The scenarios whose effective ``component`` values satisfy ``predicate``."""
    return [n for n, values in SCENARIOS.items() if predicate(effective(values)[component])]


def release_of(outcomes: dict[str, Outcome], scenario: str) -> helm.Release:
    release = outcomes[scenario].release
    assert not release.error, f"helm install failed: {release.error}"
    return release


def component_objects(
    release: helm.Release, component: str, kind: str | None = None
) -> list[dict[str, Any]]:
    """One component's objects (of ``kind``), by app.kubernetes.io/component."""
    return [
        o
        for o in release.objects
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == component
        and kind in (None, o["kind"])
    ]
