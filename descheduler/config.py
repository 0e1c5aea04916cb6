"""DeschedulerConfiguration: koord-descheduler's configuration file (``--config``), read,
defaulted and checked (ConfigError, one message naming every offending field or plugin).

It follows Koordinator v1.8.0's pkg/descheduler/apis/config/v1alpha2/types.go (the fields of
``apiVersion: descheduler/v1alpha2``, ``kind: DeschedulerConfiguration``), defaults.go
(SetDefaults_DeschedulerConfiguration: the profile name, the Lease and the bind addresses)
and default_plugins.go (MigrationController enabled at evict and filter by default; a
profile's enabled/disabled lists merged into the defaults, ``"*"`` disabling them all).

Only two plugins exist here: LowNodeLoad (balance) and MigrationController (evict and
filter). A file enabling or configuring any other plugin is refused, naming it. Pure: no I/O
beyond what the caller passes in (``parse_config`` takes the file's text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from descheduler.args import LowNodeLoadArgs
from descheduler.fields import ArgsError, check_keys, json_list, json_object
from descheduler.migration.args import DEFAULT_EVICTION_POLICY, MigrationControllerArgs
from descheduler.migration.job import JobError, format_duration, parse_duration
from descheduler.selectors import LabelSelector

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerConfiguration"
DEFAULT_PROFILE = "koord-descheduler"
DEFAULT_LEASE_NAME = "koord-descheduler"
DEFAULT_LEASE_NAMESPACE = "koordinator-system"
DEFAULT_INSECURE_PORT = 10251  # DefaultInsecureDeschedulerPort: /healthz and /metrics
DEFAULT_BIND_ADDRESS = f"0.0.0.0:{DEFAULT_INSECURE_PORT}"

LOW_NODE_LOAD = "LowNodeLoad"
MIGRATION_CONTROLLER = "MigrationController"
EXTENSION_POINTS = ("deschedule", "balance", "evict", "filter")
# what each extension point may enable here
SUPPORTED: Mapping[str, frozenset[str]] = {
    "deschedule": frozenset(),
    "balance": frozenset({LOW_NODE_LOAD}),
    "evict": frozenset({MIGRATION_CONTROLLER}),
    "filter": frozenset({MIGRATION_CONTROLLER}),
}
DEFAULT_PLUGINS: Mapping[str, tuple[str, ...]] = {
    "deschedule": (),
    "balance": (),
    "evict": (MIGRATION_CONTROLLER,),
    "filter": (MIGRATION_CONTROLLER,),
}

_TOP_KEYS = (
    "apiVersion",
    "kind",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "healthzBindAddress",
    "metricsBindAddress",
    "deschedulingInterval",
    "dryRun",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
)
_LEADER_KEYS = (
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
)
_CLIENT_KEYS = ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")
_PROFILE_KEYS = ("name", "plugins", "pluginConfig", "nodeSelector")


class ConfigError(ValueError):
    """A configuration file that koord-descheduler refuses; the message says why."""


@dataclass(frozen=True)
class LeaderElection:
    """leaderElection: component-base's LeaderElectionConfiguration with Koordinator's Lease."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = DEFAULT_LEASE_NAME
    resource_namespace: str = DEFAULT_LEASE_NAMESPACE


@dataclass(frozen=True)
class DeschedulerConfig:
    """A DeschedulerConfiguration after defaulting (one profile). ``low_node_load`` is None
    when LowNodeLoad is not enabled at balance: then no round creates jobs, and only the
    migration controller runs (on jobs others create)."""

    descheduling_interval: float = 0.0  # seconds; 0: one round, then only the controller
    dry_run: bool = False
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    kubeconfig: str = ""
    healthz_bind_address: str = DEFAULT_BIND_ADDRESS
    metrics_bind_address: str = DEFAULT_BIND_ADDRESS
    profile: str = DEFAULT_PROFILE
    node_selector: LabelSelector | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    low_node_load: LowNodeLoadArgs | None = None
    migration: MigrationControllerArgs = field(default_factory=MigrationControllerArgs)
    notes: tuple[str, ...] = ()  # fields accepted that change nothing here, to log
    # the profile's plugins after merging into the defaults, and its pluginConfig as given
    # (for --write-config-to)
    plugins: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {point: DEFAULT_PLUGINS[point] for point in EXTENSION_POINTS}
    )
    plugin_config: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    @property
    def effective_dry_run(self) -> bool:
        """Koordinator has three dryRun switches (the configuration's, LowNodeLoadArgs' and
        MigrationControllerArgs'); any of them makes the rounds create nothing."""
        lnl = self.low_node_load is not None and self.low_node_load.dry_run
        return self.dry_run or lnl or self.migration.dry_run


def bind_address(value: str) -> str:
    """SetDefaults' normalisation: ``:10251`` is on every address, a bare IP gets port 10251;
    "" serves nothing."""
    if not value:
        return ""
    host, sep, port = value.rpartition(":")
    if sep and port.isdigit() and not host.endswith(":"):
        return f"{host or '0.0.0.0'}:{port}"  # noqa: S104 - upstream's default
    return f"{value}:{DEFAULT_INSECURE_PORT}"


def _duration(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    try:
        seconds = parse_duration(value, where)
    except JobError as err:
        raise ConfigError(str(err)) from None
    if seconds < 0:
        raise ConfigError(f"{where}: must not be negative, got {value!r}")
    return seconds


def _bool(value: Any, where: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: must be true or false, got {value!r}")
    return value


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: must be a whole number of pods, got {value!r}")
    return value


def _string(value: Any, where: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string, got {value!r}")
    return value


def _leader_election(value: Any) -> LeaderElection:
    obj = json_object(value, "leaderElection")
    check_keys(obj, _LEADER_KEYS, "leaderElection")
    lock = obj.get("resourceLock")
    if lock not in (None, "", "leases"):
        raise ConfigError(f"leaderElection.resourceLock: only leases is supported, got {lock!r}")
    base = LeaderElection()
    return LeaderElection(
        leader_elect=_bool(obj.get("leaderElect"), "leaderElection.leaderElect", True),
        lease_duration=_duration(
            obj.get("leaseDuration"), "leaderElection.leaseDuration", base.lease_duration
        ),
        renew_deadline=_duration(
            obj.get("renewDeadline"), "leaderElection.renewDeadline", base.renew_deadline
        ),
        retry_period=_duration(
            obj.get("retryPeriod"), "leaderElection.retryPeriod", base.retry_period
        ),
        resource_name=_string(obj.get("resourceName"), "leaderElection.resourceName", "")
        or DEFAULT_LEASE_NAME,
        resource_namespace=_string(
            obj.get("resourceNamespace"), "leaderElection.resourceNamespace", ""
        )
        or DEFAULT_LEASE_NAMESPACE,
    )


def _plugin_names(value: Any, where: str) -> list[str]:
    names = []
    for i, item in enumerate(json_list(value, where)):
        entry = json_object(item, f"{where}[{i}]")
        check_keys(entry, ("name",), f"{where}[{i}]")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}[{i}].name: must be a plugin name, got {name!r}")
        names.append(name)
    return names


def enabled_plugins(plugins: Any, where: str) -> dict[str, list[str]]:
    """mergePlugins: each extension point's defaults less the disabled ones (all with
    ``"*"``), then the enabled ones, in order."""
    obj = json_object(plugins, where)
    check_keys(obj, EXTENSION_POINTS, where)
    result = {}
    for point in EXTENSION_POINTS:
        at = f"{where}.{point}"
        plugin_set = json_object(obj.get(point), at)
        check_keys(plugin_set, ("enabled", "disabled"), at)
        disabled = set(_plugin_names(plugin_set.get("disabled"), f"{at}.disabled"))
        enabled = _plugin_names(plugin_set.get("enabled"), f"{at}.enabled")
        kept = [] if "*" in disabled else [p for p in DEFAULT_PLUGINS[point] if p not in disabled]
        result[point] = list(dict.fromkeys([*kept, *enabled]))
    return result


def _refuse_unsupported(enabled: Mapping[str, Sequence[str]], configured: Sequence[str]) -> None:
    unknown = [
        f"{name} ({point})"
        for point in EXTENSION_POINTS
        for name in enabled[point]
        if name not in SUPPORTED[point]
    ]
    unknown += [
        f"{name} (pluginConfig)"
        for name in configured
        if name not in (LOW_NODE_LOAD, MIGRATION_CONTROLLER)
    ]
    if unknown:
        raise ConfigError(
            f"unsupported plugin(s): {', '.join(unknown)}; koord-descheduler here has only "
            f"{LOW_NODE_LOAD} (balance) and {MIGRATION_CONTROLLER} (evict, filter)"
        )
    if MIGRATION_CONTROLLER not in enabled["evict"]:
        raise ConfigError(
            f"plugins.evict: {MIGRATION_CONTROLLER} cannot be disabled: it is the only "
            "evictor here (every migration is a PodMigrationJob)"
        )


def _plugin_args(profile: Mapping[str, Any], where: str) -> dict[str, Mapping[str, Any]]:
    args: dict[str, Mapping[str, Any]] = {}
    for i, item in enumerate(json_list(profile.get("pluginConfig"), f"{where}.pluginConfig")):
        at = f"{where}.pluginConfig[{i}]"
        entry = json_object(item, at)
        check_keys(entry, ("name", "args"), at)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{at}.name: must be a plugin name, got {name!r}")
        if name in args:
            raise ConfigError(f"{at}: plugin {name} is configured twice")
        plugin_args = json_object(entry.get("args"), f"{at}.args")
        version = plugin_args.get("apiVersion")
        if version not in (None, API_VERSION):
            raise ConfigError(f"{at}.args.apiVersion: must be {API_VERSION}, got {version!r}")
        args[name] = plugin_args
    return args


@dataclass(frozen=True)
class _Profile:
    name: str
    low_node_load: LowNodeLoadArgs | None
    migration: MigrationControllerArgs
    plugins: Mapping[str, tuple[str, ...]]
    plugin_config: tuple[tuple[str, Mapping[str, Any]], ...]


def _profile(profiles: list[Any]) -> _Profile:
    if len(profiles) > 1:
        raise ConfigError(
            f"profiles: {len(profiles)} profiles given; only one profile is supported here"
        )
    profile = json_object(profiles[0] if profiles else None, "profiles[0]")
    where = "profiles[0]"
    check_keys(profile, _PROFILE_KEYS, where)
    if profile.get("nodeSelector") is not None:
        raise ConfigError(
            f"{where}.nodeSelector: a profile's node selector is not supported here; use the "
            "top-level nodeSelector (or LowNodeLoad's nodePools)"
        )
    name = _string(profile.get("name"), f"{where}.name", "") or DEFAULT_PROFILE
    configured = _plugin_args(profile, where)
    enabled = enabled_plugins(profile.get("plugins"), f"{where}.plugins")
    _refuse_unsupported(enabled, list(configured))
    try:
        migration = MigrationControllerArgs.from_dict(configured.get(MIGRATION_CONTROLLER, {}))
    except ArgsError as err:
        raise ConfigError(f"{where} {MIGRATION_CONTROLLER} args: {err}") from None
    if migration.eviction_policy != DEFAULT_EVICTION_POLICY:
        raise ConfigError(
            f"{where} {MIGRATION_CONTROLLER} args: evictionPolicy "
            f"{migration.eviction_policy} is not supported here; only "
            f"{DEFAULT_EVICTION_POLICY} (the Eviction API) is"
        )
    low_node_load = None
    if LOW_NODE_LOAD in enabled["balance"]:
        try:
            low_node_load = LowNodeLoadArgs.from_dict(configured.get(LOW_NODE_LOAD, {}))
        except ArgsError as err:
            raise ConfigError(f"{where} {LOW_NODE_LOAD} args: {err}") from None
    return _Profile(
        name,
        low_node_load,
        migration,
        {point: tuple(names) for point, names in enabled.items()},
        tuple(configured.items()),
    )


def config_from_dict(data: Any) -> DeschedulerConfig:
    """A DeschedulerConfiguration object (as YAML loads it) defaulted; ConfigError if refused."""
    try:
        return _config(data)
    except ArgsError as err:
        raise ConfigError(str(err)) from None


def _config(data: Any) -> DeschedulerConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(f"must be a {KIND} object, got {type(data).__name__}")
    check_keys(data, _TOP_KEYS, "")
    if data.get("apiVersion") != API_VERSION:
        raise ConfigError(f"apiVersion: must be {API_VERSION}, got {data.get('apiVersion')!r}")
    if data.get("kind") != KIND:
        raise ConfigError(f"kind: must be {KIND}, got {data.get('kind')!r}")
    notes = []
    for key in ("enableProfiling", "enableContentionProfiling"):
        if data.get(key):
            notes.append(f"{key} accepted, not followed: no profiling endpoints here")
    client = json_object(data.get("clientConnection"), "clientConnection")
    check_keys(client, _CLIENT_KEYS, "clientConnection")
    ignored = sorted(k for k in client if k != "kubeconfig")
    if ignored:
        notes.append(
            f"clientConnection {', '.join(ignored)} accepted, not followed: the client has "
            "no rate limits and speaks JSON"
        )
    selector = data.get("nodeSelector")
    profile = _profile(json_list(data.get("profiles"), "profiles"))
    return DeschedulerConfig(
        descheduling_interval=_duration(
            data.get("deschedulingInterval"), "deschedulingInterval", 0.0
        ),
        dry_run=_bool(data.get("dryRun"), "dryRun", False),
        leader_election=_leader_election(data.get("leaderElection")),
        kubeconfig=_string(client.get("kubeconfig"), "clientConnection.kubeconfig", ""),
        healthz_bind_address=bind_address(
            _string(data.get("healthzBindAddress"), "healthzBindAddress", DEFAULT_BIND_ADDRESS)
        ),
        metrics_bind_address=bind_address(
            _string(data.get("metricsBindAddress"), "metricsBindAddress", DEFAULT_BIND_ADDRESS)
        ),
        profile=profile.name,
        node_selector=None if selector is None else LabelSelector.parse(selector, "nodeSelector"),
        max_pods_per_node=_count(
            data.get("maxNoOfPodsToEvictPerNode"), "maxNoOfPodsToEvictPerNode"
        ),
        max_pods_per_namespace=_count(
            data.get("maxNoOfPodsToEvictPerNamespace"), "maxNoOfPodsToEvictPerNamespace"
        ),
        max_pods_total=_count(data.get("maxNoOfPodsToEvictTotal"), "maxNoOfPodsToEvictTotal"),
        low_node_load=profile.low_node_load,
        migration=profile.migration,
        notes=tuple(notes),
        plugins=profile.plugins,
        plugin_config=profile.plugin_config,
    )


def parse_config(text: str, where: str = "config") -> DeschedulerConfig:
    """The configuration file's text; ConfigError naming ``where`` when it is refused."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not YAML: {err}") from None
    try:
        return config_from_dict(data)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def _selector_document(selector: LabelSelector) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if selector.match_labels:
        doc["matchLabels"] = dict(selector.match_labels)
    if selector.expressions:
        doc["matchExpressions"] = [
            {"key": key, "operator": operator, **({"values": sorted(values)} if values else {})}
            for key, operator, values in selector.expressions
        ]
    return doc


def to_document(config: DeschedulerConfig) -> dict[str, Any]:
    """The effective configuration as a DeschedulerConfiguration (descheduler/v1alpha2), as
    Koordinator's --write-config-to writes it: defaults filled in, the flags applied, the
    profile's plugins merged into the defaults. The pluginConfig args are written as given:
    their defaults are applied on reading them back. ``parse_config`` of its YAML gives
    ``config`` again."""
    election = config.leader_election
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "leaderElection": {
            "leaderElect": election.leader_elect,
            "leaseDuration": format_duration(election.lease_duration),
            "renewDeadline": format_duration(election.renew_deadline),
            "retryPeriod": format_duration(election.retry_period),
            "resourceLock": "leases",
            "resourceName": election.resource_name,
            "resourceNamespace": election.resource_namespace,
        },
        "clientConnection": {"kubeconfig": config.kubeconfig},
        "healthzBindAddress": config.healthz_bind_address,
        "metricsBindAddress": config.metrics_bind_address,
        "deschedulingInterval": format_duration(config.descheduling_interval),
        "dryRun": config.dry_run,
        "profiles": [
            {
                "name": config.profile,
                "plugins": {
                    point: {"enabled": [{"name": name} for name in config.plugins[point]]}
                    for point in EXTENSION_POINTS
                },
                "pluginConfig": [
                    {"name": name, "args": dict(args)} for name, args in config.plugin_config
                ],
            }
        ],
    }
    if config.node_selector is not None:
        doc["nodeSelector"] = _selector_document(config.node_selector)
    for key, value in (
        ("maxNoOfPodsToEvictPerNode", config.max_pods_per_node),
        ("maxNoOfPodsToEvictPerNamespace", config.max_pods_per_namespace),
        ("maxNoOfPodsToEvictTotal", config.max_pods_total),
    ):
        if value is not None:
            doc[key] = value
    return doc


def dump_config(config: DeschedulerConfig) -> str:
    """``to_document`` as YAML."""
    return yaml.safe_dump(to_document(config), sort_keys=False)
