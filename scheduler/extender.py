"""The extender's three verbs as pure functions on decoded JSON (k8s.io/kube-scheduler
extender/v1): ``filter`` answers an ExtenderArgs with an ExtenderFilterResult, ``prioritize``
with a HostPriorityList, ``bind_decision`` says which annotation to write before the Binding.
No HTTP and no Kubernetes I/O: cluster state comes from a ClusterView, the clock as ``now``.

    cache = DecisionCache()                               # one per extender process
    result = filter(args, view, now, cache=cache)         # {"NodeNames": [...], ...}
    scores = prioritize(args, view, now, cache=cache)     # [{"Host": ..., "Score": 0..10}]
    plan = bind_decision(pod, node_name, view, cache=cache)

Replies use the Go field names (PascalCase; the structs have no json tags). Requests are
read case-insensitively at the ExtenderArgs level, as Go's decoder does, because extenders
written for the old lowercase tags still talk to kube-scheduler that way.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from koordapi import keys
from koordapi.cpuset import format_cpuset
from koordapi.errors import ModelError
from scheduler import cpubind, cputopology, deviceshare, loadaware, reservation

REASON_NODE_NOT_FOUND = "node not found"
_EMPTY: Mapping[str, Any] = {}


class ExtenderArgsError(ValueError):
    """An ExtenderArgs the verbs cannot answer (no pod, both or neither node forms, ...)."""


def ci_get(mapping: Mapping[str, Any], key: str) -> Any:
    """mapping[key] matched as Go's encoding/json matches field names: the exact key first,
    else any key equal under case folding; None when absent."""
    if key in mapping:
        return mapping[key]
    folded = key.casefold()
    for name, value in mapping.items():
        if isinstance(name, str) and name.casefold() == folded:
            return value
    return None


class ClusterView(Protocol):
    """The cluster state the verbs read; every method answers from memory (informers), fast.
    Objects are Kubernetes JSON dicts that must not be edited in place: a change is a new
    object (the caches compare by identity)."""

    def node(self, name: str) -> Mapping[str, Any] | None: ...

    def node_metric(self, name: str) -> Mapping[str, Any] | None:
        """The NodeMetric of that node (same name), or None if there is none."""

    def pods_on(self, name: str) -> Sequence[Mapping[str, Any]]:
        """The pods bound or assumed to the node, including those this extender decided
        whose Binding is not yet visible, carrying the resource-status annotation planned
        for them (else two LSR pods could be given the same CPUs)."""

    def assigned_since_report(self, name: str) -> Sequence[tuple[Mapping[str, Any], float]]:
        """Every active pod on the node, each with when it was assigned (seconds since the
        epoch: its PodScheduled condition's lastTransitionTime, else when this extender
        bound it). LoadAware adds what the NodeMetric may not reflect yet of the recent
        ones, and sums them all for its prod usage and where an aggregate is missing
        (loadaware.assigned_sums)."""


class DeviceView(Protocol):
    """What a ClusterView offers when it knows the nodes' Device objects (DeviceShare). A view
    without ``device`` is a cluster without Devices: GPU pods pass every node and score 0 there,
    as in Koordinator for a node it has no Device for."""

    def device(self, name: str) -> Mapping[str, Any] | None:
        """The Device of that node (same name), or None if there is none."""


def view_device(view: ClusterView, name: str) -> Mapping[str, Any] | None:
    device = getattr(view, "device", None)
    return None if device is None else device(name)


class QuotaView(Protocol):
    """What a ClusterView offers when it keeps the ElasticQuotas (scheduler.quota). A view
    without ``quota_reason`` is a cluster without quotas: no pod is refused for its quota."""

    def quota_reason(self, pod: Mapping[str, Any]) -> str | None:
        """Why the pod's quota has no room for it now (Koordinator's reason), else None."""


def view_quota_reason(view: ClusterView, pod: Mapping[str, Any]) -> str | None:
    check = getattr(view, "quota_reason", None)
    return None if check is None else check(pod)


class ChangeFeed(Protocol):
    """What a ClusterView may also offer so that the verbs re-check only the nodes that
    changed rather than every node of every request (three view calls per node otherwise)."""

    def changes_since(self, token: int) -> tuple[int, Collection[str] | None]:
        """(a new token, the names of the nodes whose Node, NodeMetric, Device, pods or assigned
        pods changed after ``token``); None instead of the names when the view cannot tell (an
        unknown or too old token, such as the first call's -1): every node is then
        re-checked. Record a change after it is visible through the view, never before: a
        verb that read the old state is then told about the change on its next call."""


@dataclass(frozen=True)
class ExtenderConfig:
    loadaware: loadaware.LoadAwareArgs = field(default_factory=loadaware.LoadAwareArgs)
    cpubind: cpubind.CPUBindArgs = field(default_factory=cpubind.CPUBindArgs)
    deviceshare: deviceshare.DeviceShareArgs = field(default_factory=deviceshare.DeviceShareArgs)


DEFAULT_CONFIG = ExtenderConfig()


class DecisionCache:
    """Per-node results kept between calls (parsed NodeMetrics, node loads, free CPUs, pod
    estimates). Without one every call starts cold, which is correct but slow. With a view
    that is a ChangeFeed, a node's results are trusted until the feed names the node. Not
    thread-safe: kube-scheduler may bind one pod while filtering the next, so the caller
    serialises the verbs that share a cache."""

    def __init__(self) -> None:
        self.load = loadaware.LoadCache()
        self.cpus = cputopology.CPUCache()
        self._view: object | None = None
        self._token = -1
        # checked since the token, for self._args: the node objects and their loads and
        # free CPUs, by node name
        self._args: loadaware.LoadAwareArgs | None = None
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._loads: dict[str, loadaware.NodeLoad] = {}
        self._cpus: dict[str, cputopology.NodeCPUs | str] = {}
        self._gpus: dict[str, deviceshare.NodeGPUs | None] = {}
        # a reserved node's free room and reservations' holds (scheduler.reservation)
        self.holds: dict[str, Any] = {}

    def _sync(self, view: ClusterView, args: loadaware.LoadAwareArgs) -> bool:
        """Forget what the view says changed; False when it cannot say (no ChangeFeed)."""
        feed = getattr(view, "changes_since", None)
        if feed is None:
            return False
        if view is not self._view or args is not self._args:
            self._view, self._args, self._token = view, args, -1
        self._token, changed = feed(self._token)
        if changed is None:
            self._nodes.clear()
            self._loads.clear()
            self._cpus.clear()
            self._gpus.clear()
            self.holds.clear()
        else:
            for name in changed:
                self._nodes.pop(name, None)
                self._loads.pop(name, None)
                self._cpus.pop(name, None)
                self._gpus.pop(name, None)
                self.holds.pop(name, None)
        return True

    def node_loads(
        self,
        view: ClusterView,
        names: Sequence[str],
        sent: Sequence[Mapping[str, Any]] | None,
        args: loadaware.LoadAwareArgs,
    ) -> list[loadaware.NodeLoad | None]:
        """Each candidate's load, None for a node the view does not know; ``sent`` are the
        Node objects of a request that carried them. This runs for every node of every
        request: what a ChangeFeed says is unchanged costs a dict lookup."""
        trusted = self._sync(view, args)
        loads: list[loadaware.NodeLoad | None]
        loads = list(map(self._loads.get, names)) if trusted else [None] * len(names)
        if sent is not None:  # trusted only for the very node object the request carries
            known = self._nodes.get
            loads = [
                load if load is not None and known(name) is node else None
                for load, name, node in zip(loads, names, sent, strict=True)
            ]
        if None in loads:
            metric_of, assigned_of = view.node_metric, view.assigned_since_report
            for i, load in enumerate(loads):
                if load is not None:
                    continue
                name = names[i]
                node = view.node(name) if sent is None else sent[i]
                if node is None:
                    continue
                fresh = self.load.node_load(name, node, metric_of(name), assigned_of(name), args)
                if trusted:
                    self._nodes[name], self._loads[name] = node, fresh
                loads[i] = fresh
        return loads

    def node_cpus(
        self, view: ClusterView, name: str, sent: Mapping[str, Any] | None = None
    ) -> cputopology.NodeCPUs | str:
        """The node's free CPUs (``sent``: the Node object the request carried), trusted
        like its load; call after node_loads has synced."""
        trusted = self._cpus.get(name) if self._view is view and sent is None else None
        if trusted is None:
            node = view.node(name) if sent is None else sent
            if node is None:
                return REASON_NODE_NOT_FOUND
            trusted = self.cpus.node_cpus(name, node, view.pods_on(name))
            if self._view is view and sent is None:
                self._cpus[name] = trusted
        return trusted

    def trusts(self, view: ClusterView) -> bool:
        """Whether per-node results kept for ``view`` hold until its ChangeFeed names the node
        (call after node_loads has synced)."""
        return self._view is view

    def node_gpus(self, view: ClusterView, name: str) -> deviceshare.NodeGPUs | None:
        """The node's GPUs and what its pods hold of them (None: no Device), trusted like its
        free CPUs; call after node_loads has synced."""
        trusted = self._view is view
        if trusted and name in self._gpus:
            return self._gpus[name]
        gpus = deviceshare.node_gpus(view_device(view, name), view.pods_on(name))
        if trusted:
            self._gpus[name] = gpus
        return gpus


# -- reading ExtenderArgs --------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidates:
    names: list[str]
    nodes: list[Mapping[str, Any]] | None  # the Node objects when sent (not nodeCacheCapable)
    node_list: Mapping[str, Any] | None


def _read_args(args: Any) -> tuple[Mapping[str, Any], _Candidates]:
    if not isinstance(args, Mapping):
        raise ExtenderArgsError("ExtenderArgs must be a JSON object")
    pod = ci_get(args, "Pod")
    if not isinstance(pod, Mapping):
        raise ExtenderArgsError("ExtenderArgs.Pod is missing or not an object")
    node_list = ci_get(args, "Nodes")
    node_names = ci_get(args, "NodeNames")
    if node_list is not None and node_names is not None:
        raise ExtenderArgsError("ExtenderArgs has both Nodes and NodeNames; send one")
    if node_names is not None:
        if not isinstance(node_names, list) or not set(map(type, node_names)) <= {str}:
            raise ExtenderArgsError("ExtenderArgs.NodeNames must be a list of strings")
        return pod, _Candidates(node_names, None, None)
    if node_list is None:
        raise ExtenderArgsError("ExtenderArgs has neither Nodes nor NodeNames")
    items = ci_get(node_list, "items") if isinstance(node_list, Mapping) else None
    if items is None and isinstance(node_list, Mapping):
        items = []
    if not isinstance(items, list):
        raise ExtenderArgsError("ExtenderArgs.Nodes must be a NodeList with items")
    names = []
    for i, item in enumerate(items):
        name = (item.get("metadata") or _EMPTY).get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ExtenderArgsError(f"ExtenderArgs.Nodes.items[{i}] has no metadata.name")
        names.append(name)
    return pod, _Candidates(names, items, node_list)


@dataclass(frozen=True)
class _Pod:
    """What every node is checked against, worked out once per call."""

    estimate: tuple[int, int]
    daemonset: bool
    bind: cpubind.CPUBindRequest | str | None
    gpu: deviceshare.GPURequest | str | None = None
    prod: bool = False  # koord-prod: LoadAware's prod thresholds and prod score apply


def _read_pod(pod: Mapping[str, Any], config: ExtenderConfig) -> _Pod:
    try:
        return _Pod(
            loadaware.estimate_pod(pod, config.loadaware),
            loadaware.is_daemonset_pod(pod),
            cpubind.cpu_bind_request(pod, config.cpubind),
            deviceshare.gpu_request(pod),
            loadaware.is_prod_pod(pod),
        )
    except loadaware.PodReadError as err:  # already names the pod
        raise ExtenderArgsError(str(err)) from None
    except (ModelError, TypeError, AttributeError) as err:
        raise ExtenderArgsError(f"pod {loadaware.pod_key(pod)}: {err}") from None


# -- the verbs -------------------------------------------------------------------------------


def filter(  # the verb's name; shadows the builtin inside this module only
    args: Any,
    view: ClusterView,
    now: float,
    *,
    config: ExtenderConfig = DEFAULT_CONFIG,
    cache: DecisionCache | None = None,
) -> dict[str, Any]:
    """The ExtenderFilterResult for an ExtenderArgs: the nodes that pass, in the form they
    came in (NodeNames, or a NodeList echoing the received Nodes), and a reason for each that
    does not. Unresolvable reasons (preemption cannot help) go to FailedAndUnresolvableNodes.
    A request that cannot be answered yields a result whose Error says why."""
    try:
        pod, candidates = _read_args(args)
        facts = _read_pod(pod, config)
    except ExtenderArgsError as err:
        return _filter_result(None, None, {}, {}, str(err))
    over_quota = view_quota_reason(view, pod)
    if over_quota is not None:  # no node helps, and preempting on a node would not either
        everywhere = dict.fromkeys(candidates.names, over_quota)
        if candidates.nodes is None:
            return _filter_result(None, [], {}, everywhere)
        return _filter_result({**(candidates.node_list or {}), "items": []}, None, {}, everywhere)
    cache = cache or DecisionCache()
    la_args, bind, names, sent = config.loadaware, facts.bind, candidates.names, candidates.nodes
    loads = cache.node_loads(view, names, sent, la_args)
    reasons = loadaware.filter_nodes(
        facts.estimate, loads, la_args, now, facts.daemonset, facts.prod
    )
    if None in loads:  # nodes the view does not know
        reasons = [
            REASON_NODE_NOT_FOUND if load is None else reason
            for load, reason in zip(loads, reasons, strict=True)
        ]
    failed = {name: reason for name, reason in zip(names, reasons, strict=True) if reason}
    # a pod with reservation affinity is refused where no reservation takes it, held or not
    held = bool(reservation.held_nodes(view)) or reservation.requires_reservation(pod)
    if bind is None and facts.gpu is None and not held:  # the common case, in one pass
        if sent is None:
            passed_names = [name for name, r in zip(names, reasons, strict=True) if r is None]
            return _filter_result(None, passed_names, failed, {})
        items = [node for node, reason in zip(sent, reasons, strict=True) if reason is None]
        return _filter_result({**(candidates.node_list or {}), "items": items}, None, failed, {})
    passed = [i for i, reason in enumerate(reasons) if reason is None]
    unresolvable: dict[str, str] = {}
    if bind is None:
        pass
    elif isinstance(bind, str):  # a fractional CPU request: no node can pin it
        failed = {name: r for name, r in failed.items() if r == REASON_NODE_NOT_FOUND}
        unresolvable = {name: bind for name in names if name not in failed}
        passed = []
    else:
        pinnable = []
        for i in passed:
            name = names[i]
            node_cpus = cache.node_cpus(view, name, None if sent is None else sent[i])
            reason = cpubind.fits_cpus(bind, node_cpus)
            if reason is None:
                pinnable.append(i)
            elif reason in cpubind.UNRESOLVABLE:
                unresolvable[name] = reason
            else:
                failed[name] = reason
        passed = pinnable
    if facts.gpu is not None:
        passed, refused = _filter_gpus(
            facts.gpu, passed, candidates, view=view, cache=cache, config=config
        )
        for name, (reason, final) in refused.items():
            (unresolvable if final else failed)[name] = reason
    if held:
        passed = reservation.filter_held(
            pod, passed, names, sent, view, failed=failed, unresolvable=unresolvable, cache=cache
        )
    if sent is None:
        return _filter_result(None, [names[i] for i in passed], failed, unresolvable)
    items = [sent[i] for i in passed]
    return _filter_result(
        {**(candidates.node_list or {}), "items": items}, None, failed, unresolvable
    )


def _filter_gpus(
    gpu: deviceshare.GPURequest | str,
    passed: list[int],
    candidates: _Candidates,
    *,
    view: ClusterView,
    cache: DecisionCache,
    config: ExtenderConfig,
) -> tuple[list[int], dict[str, tuple[str, bool]]]:
    """DeviceShare's filter over the candidates still passing: (those that can give the pod
    its GPUs, {name: (reason, unresolvable)} for the others). An invalid request fails every
    node, unresolvably."""
    names, sent = candidates.names, candidates.nodes
    if isinstance(gpu, str):
        return [], {names[i]: (gpu, True) for i in passed}
    fitting: list[int] = []
    refused: dict[str, tuple[str, bool]] = {}
    for i in passed:
        name = names[i]
        node = view.node(name) if sent is None else sent[i]
        if node is None:
            refused[name] = (REASON_NODE_NOT_FOUND, False)
            continue
        gpus = cache.node_gpus(view, name)
        verdict = deviceshare.filter_gpus(gpu, gpus, node, config.deviceshare)
        if verdict is None:
            fitting.append(i)
        else:
            refused[name] = verdict
    return fitting, refused


def _filter_result(
    nodes: Mapping[str, Any] | None,
    names: list[str] | None,
    failed: dict[str, str],
    unresolvable: dict[str, str],
    error: str = "",
) -> dict[str, Any]:
    return {
        "Nodes": nodes,
        "NodeNames": names,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }


def prioritize(
    args: Any,
    view: ClusterView,
    now: float,
    *,
    config: ExtenderConfig = DEFAULT_CONFIG,
    cache: DecisionCache | None = None,
) -> list[dict[str, Any]]:
    """The HostPriorityList: every candidate with LoadAware's score on the 0..10 scale
    (loadaware.extender_score), 0 for a node the view does not know. Raises
    ExtenderArgsError for a request it cannot answer (kube-scheduler ignores prioritize
    errors: the nodes then get nothing from this extender)."""
    pod, candidates = _read_args(args)
    facts = _read_pod(pod, config)
    cache = cache or DecisionCache()
    la_args = config.loadaware
    loads = cache.node_loads(view, candidates.names, candidates.nodes, la_args)
    scores = loadaware.score_nodes(facts.estimate, loads, la_args, now, facts.prod)
    if isinstance(facts.gpu, deviceshare.GPURequest):
        # DeviceShare's 0..100, normalised over the candidates, averaged with LoadAware's
        gpu, args = facts.gpu, config.deviceshare
        raw = [
            deviceshare.score_gpus(gpu, cache.node_gpus(view, name), args)
            for name in candidates.names
        ]
        device_scores = deviceshare.normalize_scores(raw)
        scores = [(a + b) // 2 for a, b in zip(scores, device_scores, strict=True)]
    # loadaware.extender_score written out (scores are 0..100): this runs for every node
    return [
        {"Host": name, "Score": (score + 5) // 10}
        for name, score in zip(candidates.names, scores, strict=True)
    ]


@dataclass(frozen=True)
class BindPlan:
    """What to do before creating the Binding: annotations to set on the pod (empty: none),
    or an error to answer in ExtenderBindingResult.Error instead of binding."""

    annotations: Mapping[str, str] = field(default_factory=dict)
    cpuset: str = ""
    error: str = ""
    gpus: str = ""  # the GPU minors given, "0,1", for the log


def bind_decision(
    pod: Mapping[str, Any],
    node_name: str,
    view: ClusterView,
    *,
    config: ExtenderConfig = DEFAULT_CONFIG,
    cache: DecisionCache | None = None,
) -> BindPlan:
    """The resource-status cpuset (and, if the pod named no policy, the resource-spec
    recording the one used) for an LSE/LSR prod pod with whole CPUs, and the device-allocated
    GPUs for a pod asking for GPUs on a node with a Device; an empty plan for any other pod.
    CPUs and GPUs are chosen from the node's state now, not at filter time: the pod's own
    earlier pinning or allocation, if the view already holds one, counts as free. An owner
    going into a Reservation on the node also gets the reservation-allocated annotation."""
    held, error = reservation.bind_annotations(pod, node_name, view)
    if error:
        return BindPlan(error=error)
    plan = _bind_devices(pod, node_name, view, config=config, cache=cache)
    if not held or plan.error:
        return plan
    return BindPlan({**plan.annotations, **held}, plan.cpuset, gpus=plan.gpus)


def _bind_devices(
    pod: Mapping[str, Any],
    node_name: str,
    view: ClusterView,
    *,
    config: ExtenderConfig,
    cache: DecisionCache | None,
) -> BindPlan:
    try:
        request = cpubind.cpu_bind_request(pod, config.cpubind)
        gpu = deviceshare.gpu_request(pod)
    except (ModelError, TypeError, AttributeError) as err:
        return BindPlan(error=f"pod {loadaware.pod_key(pod)}: {err}")
    if gpu is None:
        return _bind_cpus(pod, request, node_name, view, config=config, cache=cache)
    if isinstance(gpu, str):
        return BindPlan(error=gpu)
    node = view.node(node_name)
    if node is None:
        return BindPlan(error=REASON_NODE_NOT_FOUND)
    plan = _bind_cpus(pod, request, node_name, view, config=config, cache=cache)
    if plan.error:
        return plan
    gpus = deviceshare.node_gpus(view_device(view, node_name), view.pods_on(node_name))
    if gpus is None:  # no Device: nothing to choose, the device plugin does (as Koordinator)
        return plan
    refused = deviceshare.filter_gpus(gpu, None, node, config.deviceshare)
    if refused is not None:
        return BindPlan(error=refused[0])
    chosen = deviceshare.allocate(gpu, gpus.without(cputopology.pod_key(pod)), config.deviceshare)
    if isinstance(chosen, tuple):
        return BindPlan(error=chosen[0])
    annotations = {
        **plan.annotations,
        keys.ANNOTATION_DEVICE_ALLOCATED: deviceshare.device_allocated(chosen),
    }
    return BindPlan(annotations, plan.cpuset, gpus=",".join(str(a.minor) for a in chosen))


def _bind_cpus(
    pod: Mapping[str, Any],
    request: cpubind.CPUBindRequest | str | None,
    node_name: str,
    view: ClusterView,
    *,
    config: ExtenderConfig,
    cache: DecisionCache | None,
) -> BindPlan:
    if request is None:
        return BindPlan()
    if isinstance(request, str):
        return BindPlan(error=request)
    node = view.node(node_name)
    if node is None:
        return BindPlan(error=REASON_NODE_NOT_FOUND)
    cache = cache or DecisionCache()
    node_cpus = cache.cpus.node_cpus(node_name, node, view.pods_on(node_name))
    if isinstance(node_cpus, str):
        return BindPlan(error=f"{cpubind.REASON_INVALID_CPU_TOPOLOGY}: {node_cpus}")
    node_cpus = node_cpus.without(cputopology.pod_key(pod))
    cpus = cpubind.choose_cpus(request, node_cpus, config.cpubind)
    if isinstance(cpus, str):
        return BindPlan(error=cpus)
    status = cpubind.resource_status(cpus)
    annotations = {keys.ANNOTATION_RESOURCE_STATUS: status}
    spec = cpubind.resource_spec_write_back(request, node_cpus)
    if spec is not None:
        annotations[keys.ANNOTATION_RESOURCE_SPEC] = spec
    return BindPlan(annotations, format_cpuset(cpus))


# -- an in-memory view -----------------------------------------------------------------------


def scheduled_at(pod: Mapping[str, Any]) -> float:
    """The PodScheduled condition's lastTransitionTime; 0 (long ago) without one."""
    for condition in (pod.get("status") or _EMPTY).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            try:
                moment = datetime.datetime.fromisoformat(condition.get("lastTransitionTime"))
            except (TypeError, ValueError):
                return 0.0
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            return moment.timestamp()
    return 0.0


class StaticClusterView:
    """A ClusterView (and ChangeFeed) over objects held in memory, for tests and benchmarks.
    Change it only through its methods: they record which node changed.

    view = StaticClusterView(nodes=[node], node_metrics=[metric], pods=[running_pod],
                             devices=[device])
    bound = view.bind(pod, "node-a", at=now, annotations=plan.annotations)
    """

    def __init__(
        self,
        nodes: Iterable[Mapping[str, Any]] = (),
        node_metrics: Iterable[Mapping[str, Any]] = (),
        pods: Iterable[Mapping[str, Any]] = (),
        devices: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._metrics: dict[str, Mapping[str, Any]] = {}
        self._devices: dict[str, Mapping[str, Any]] = {}
        self._pods: dict[str, list[Mapping[str, Any]]] = {}
        self._assigned: dict[str, list[tuple[Mapping[str, Any], float]]] = {}
        self._changes: list[str] = []  # node names, one per change; token = its length
        for node in nodes:
            self.put_node(node)
        for metric in node_metrics:
            self.put_node_metric(metric)
        for pod in pods:
            self.add_pod(pod)
        for device in devices:
            self.put_device(device)

    def node(self, name: str) -> Mapping[str, Any] | None:
        return self._nodes.get(name)

    def node_metric(self, name: str) -> Mapping[str, Any] | None:
        return self._metrics.get(name)

    def device(self, name: str) -> Mapping[str, Any] | None:
        return self._devices.get(name)

    def pods_on(self, name: str) -> Sequence[Mapping[str, Any]]:
        return self._pods.get(name, ())

    def assigned_since_report(self, name: str) -> Sequence[tuple[Mapping[str, Any], float]]:
        return self._assigned.get(name, ())

    def changes_since(self, token: int) -> tuple[int, Collection[str] | None]:
        if not 0 <= token <= len(self._changes):
            return len(self._changes), None
        return len(self._changes), set(self._changes[token:])

    # each change is recorded once visible (ChangeFeed.changes_since)

    def put_node(self, node: Mapping[str, Any]) -> None:
        self._nodes[node["metadata"]["name"]] = node
        self._changes.append(node["metadata"]["name"])

    def remove_node(self, name: str) -> None:
        self._nodes.pop(name, None)
        self._changes.append(name)

    def put_node_metric(self, metric: Mapping[str, Any]) -> None:
        self._metrics[metric["metadata"]["name"]] = metric
        self._changes.append(metric["metadata"]["name"])

    def put_device(self, device: Mapping[str, Any]) -> None:
        self._devices[device["metadata"]["name"]] = device
        self._changes.append(device["metadata"]["name"])

    def add_pod(self, pod: Mapping[str, Any], assigned_at: float | None = None) -> None:
        """A pod already on its node (spec.nodeName), assigned at ``assigned_at``, else at its
        PodScheduled time, else long ago."""
        name = (pod.get("spec") or _EMPTY).get("nodeName")
        if not name:
            raise ValueError(f"pod {loadaware.pod_key(pod)} has no spec.nodeName")
        self._pods.setdefault(name, []).append(pod)
        if not loadaware.is_terminated(pod):
            at = scheduled_at(pod) if assigned_at is None else assigned_at
            self._assigned.setdefault(name, []).append((pod, at))
        self._changes.append(name)

    def bind(
        self,
        pod: Mapping[str, Any],
        node_name: str,
        at: float,
        annotations: Mapping[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """Record ``pod`` as bound to the node at ``at`` with ``annotations`` added, as the
        Binding plus the annotation patch would; returns the bound copy."""
        metadata = dict(pod.get("metadata") or _EMPTY)
        if annotations:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
        bound = {
            **pod,
            "metadata": metadata,
            "spec": {**(pod.get("spec") or {}), "nodeName": node_name},
        }
        self.add_pod(bound, assigned_at=at)
        return bound
