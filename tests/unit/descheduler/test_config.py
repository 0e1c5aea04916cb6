"""The DeschedulerConfiguration file: Koordinator's defaults, and what is refused."""

from __future__ import annotations

import pytest

from descheduler.config import (
    DEFAULT_BIND_ADDRESS,
    ConfigError,
    bind_address,
    enabled_plugins,
    parse_config,
)

HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


def test_an_empty_configuration_takes_koordinators_defaults() -> None:
    config = parse_config(HEAD)
    assert config.descheduling_interval == 0.0
    assert config.leader_election.resource_name == "koord-descheduler"
    assert config.leader_election.resource_namespace == "koordinator-system"
    assert config.leader_election.leader_elect
    assert (config.healthz_bind_address, config.metrics_bind_address) == (
        DEFAULT_BIND_ADDRESS,
        DEFAULT_BIND_ADDRESS,
    )
    assert config.profile == "koord-descheduler"
    assert config.low_node_load is None  # LowNodeLoad is not enabled by default
    assert config.migration.default_job_mode == "ReservationFirst"
    assert not config.effective_dry_run


def test_koordinators_sample_configuration_is_read() -> None:
    text = (
        HEAD
        + """
enableContentionProfiling: true
enableProfiling: true
healthzBindAddress: 0.0.0.0:10251
metricsBindAddress: 0.0.0.0:10251
leaderElection:
  resourceLock: leases
  resourceName: koord-descheduler
  resourceNamespace: koordinator-system
deschedulingInterval: 10s
dryRun: false
profiles:
- name: koord-descheduler
  plugins:
    deschedule:
      disabled:
        - name: "*"
    balance:
      enabled:
        - name: LowNodeLoad
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
        exclude: [kube-system, koordinator-system]
      evictQPS: "10"
      evictBurst: 1
  - name: LowNodeLoad
    args:
      apiVersion: descheduler/v1alpha2
      kind: LowNodeLoadArgs
      evictableNamespaces:
        exclude: [kube-system, koordinator-system]
      useDeviationThresholds: false
      lowThresholds: {cpu: 45, memory: 55}
      highThresholds: {cpu: 75, memory: 80}
"""
    )
    config = parse_config(text)
    assert config.descheduling_interval == 10.0
    assert config.low_node_load is not None
    assert config.low_node_load.node_pools[0].high_thresholds == {"cpu": 75, "memory": 80}
    assert config.migration.namespaces_exclude == ("kube-system", "koordinator-system")
    assert any("enableProfiling" in note for note in config.notes)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        pytest.param(
            "profiles:\n- plugins:\n    balance:\n"
            "      enabled: [{name: RemovePodsViolatingNodeAffinity}]\n"
            "    deschedule:\n      enabled: [{name: RemoveDuplicates}]\n",
            "unsupported plugin(s): RemoveDuplicates (deschedule), "
            "RemovePodsViolatingNodeAffinity (balance); koord-descheduler here has only "
            "LowNodeLoad (balance) and MigrationController (evict, filter)",
            id="unknown plugins",
        ),
        pytest.param(
            "profiles:\n- pluginConfig:\n  - name: HighNodeUtilization\n    args: {}\n",
            "unsupported plugin(s): HighNodeUtilization (pluginConfig)",
            id="unknown plugin config",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    balance:\n      enabled: [{name: MigrationController}]\n",
            "unsupported plugin(s): MigrationController (balance)",
            id="a plugin at the wrong extension point",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    evict:\n      disabled: [{name: '*'}]\n",
            "MigrationController cannot be disabled",
            id="no evictor",
        ),
        pytest.param("profiles: [{}, {}]\n", "only one profile is supported", id="profiles"),
        pytest.param("dryrun: true\n", "unknown field(s) dryrun", id="a misspelt field"),
        pytest.param("deschedulingInterval: soon\n", "not a duration", id="interval"),
        pytest.param(
            "leaderElection: {resourceLock: endpoints}\n",
            "only leases is supported",
            id="resource lock",
        ),
        pytest.param(
            "profiles:\n- pluginConfig:\n  - name: MigrationController\n"
            "    args: {evictionPolicy: Delete}\n",
            "evictionPolicy Delete is not supported here",
            id="eviction policy",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    balance:\n      enabled: [{name: LowNodeLoad}]\n"
            "  pluginConfig:\n  - name: LowNodeLoad\n    args: {lowThresholds: {cpu: 90}, "
            "highThresholds: {cpu: 50}}\n",
            "profiles[0] LowNodeLoad args:",
            id="bad LowNodeLoad args",
        ),
    ],
)
def test_bad_configurations_are_refused_with_one_clear_message(body: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(HEAD + body, "/etc/koord-descheduler.yaml")
    assert str(err.value).startswith("/etc/koord-descheduler.yaml: ")
    assert said in str(err.value)


def test_the_version_and_kind_are_checked() -> None:
    with pytest.raises(ConfigError, match="apiVersion: must be descheduler/v1alpha2"):
        parse_config("apiVersion: descheduler/v1alpha1\nkind: DeschedulerConfiguration\n")
    with pytest.raises(ConfigError, match="kind: must be DeschedulerConfiguration"):
        parse_config("apiVersion: descheduler/v1alpha2\nkind: KubeSchedulerConfiguration\n")
    with pytest.raises(ConfigError, match="not YAML"):
        parse_config("a: [")


def test_plugin_sets_merge_into_the_defaults() -> None:
    assert enabled_plugins(None, "plugins")["evict"] == ["MigrationController"]
    merged = enabled_plugins({"filter": {"disabled": [{"name": "MigrationController"}]}}, "plugins")
    assert merged["filter"] == [] and merged["evict"] == ["MigrationController"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [(":10251", "0.0.0.0:10251"), ("127.0.0.1", "127.0.0.1:10251"), ("", ""), ("h:9", "h:9")],
)
def test_bind_addresses_are_normalised_as_upstream(given: str, expected: str) -> None:
    assert bind_address(given) == expected
