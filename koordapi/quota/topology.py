"""The quota tree as koord-manager's ElasticQuota webhook keeps it, and the checks it makes on
each write (Koordinator v1.8 pkg/webhook/elasticquota: quota_topology.go,
quota_topology_check.go, quota_handler.go, pod_check.go).

``QuotaTopology`` holds every ElasticQuota of the cluster as the webhook sees it: a
``QuotaInfo`` per name, the children of each quota, and the namespace each
``quota.scheduling.koordinator.sh/namespaces`` annotation binds to its quota. Two ways in,
as in Koordinator:

* the admission checks ``validate_add`` / ``validate_update`` / ``validate_delete`` return
  None when the write is allowed (and then record it, as ValidAddQuota and its siblings do, so
  the next request in the same second already sees it) or Koordinator's refusal text;
* the informer handlers ``on_add`` / ``on_update`` / ``on_delete`` record what another replica
  admitted, unchecked (quota_handler.go: "no need to check, and if its parent doesn't exist,
  just create").

``fill_defaults`` is the mutating side (fillQuotaDefaultInformation); ``validate_add_pod`` and
``validate_update_pod`` refuse pods of a parent quota (pod_check.go); ``quota_of_pod`` is the
quota a pod runs in. Pods are not read here: the caller hands the pods it knows in a
``PodIndex`` (Koordinator lists them from the API server by its ``label.quotaName`` index and
by namespace).

The reasons are Koordinator's error texts, word for word, including their quirks ("UpdadteQuota",
a missing space after a comma); where Koordinator returns a Go library error (a JSON parse
error) or cannot fail (our cycle check), the text is ours and says so in the code. Where
Koordinator walks a Go map (random order) the checks walk names sorted, so the quota a refusal
names is the same each time. No I/O and no lock: callers serialise (one event loop).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi.errors import ModelError
from koordapi.quota.model import (
    ANNOTATION_ALLOCATED,
    ANNOTATION_GUARANTEED,
    ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS,
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    DEFAULT_QUOTA,
    LABEL_ALLOW_FORCE_UPDATE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_PREEMPTIBLE,
    LABEL_QUOTA_NAME,
    LABEL_TREE_ID,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuota,
    Resources,
    add,
    max_of,
    parse_resource_list,
    resources,
    subtract,
)

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True)
class QuotaGates:
    """The koord-manager feature gates these checks consult (pkg/features/features.go; all
    Alpha and off by default in v1.8)."""

    # ElasticQuotaEnableUpdateResourceKey: a child's max keys need only be among its
    # parent's, instead of the same keys.
    enable_update_resource_key: bool = False
    # ElasticQuotaGuaranteeUsage: a raised min must be guaranteed by some ancestor.
    guarantee_usage: bool = False
    # SupportParentQuotaSubmitPod: pods may run in a parent quota.
    support_parent_quota_submit_pod: bool = False
    # DisableDefaultQuota: a pod without the quota label runs in no quota.
    disable_default_quota: bool = False


@dataclass(frozen=True)
class QuotaInfo:
    """What the webhook keeps of one quota (quota_info.go NewQuotaInfoFromQuota)."""

    name: str
    parent: str
    is_parent: bool = False
    allow_lent_resource: bool = True
    allow_force_update: bool = False
    tree_id: str = ""
    is_tree_root: bool = False
    namespace: str = ""  # the object's own namespace
    namespaces: tuple[str, ...] = ()  # the namespaces annotation
    min: Resources = field(default_factory=dict)
    max: Resources = field(default_factory=dict)
    guaranteed: Resources = field(default_factory=dict)
    allocated: Resources = field(default_factory=dict)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> QuotaInfo:
        """Raises ModelError for a malformed min or max; a malformed guaranteed or allocated
        annotation reads as empty (Koordinator drops those errors)."""
        quota = ElasticQuota.from_object(_without_shared_weight(obj))
        meta = obj.get("metadata") or _EMPTY
        labels = meta.get("labels") or _EMPTY
        annotations = meta.get("annotations") or _EMPTY
        return cls(
            name=quota.name,
            parent=quota.parent,
            is_parent=quota.is_parent,
            allow_lent_resource=quota.allow_lent_resource,
            allow_force_update=labels.get(LABEL_ALLOW_FORCE_UPDATE) == "true",
            tree_id=quota.tree_id,
            is_tree_root=quota.is_root,
            namespace=quota.namespace,
            namespaces=_annotation_namespaces(obj),
            min=quota.min,
            max=quota.max,
            guaranteed=_lenient_resources(annotations.get(ANNOTATION_GUARANTEED)),
            allocated=_lenient_resources(annotations.get(ANNOTATION_ALLOCATED)),
        )


class PodIndex:
    """The pods the checks ask about, by name: those whose ``quota.scheduling.koordinator.sh/name``
    label names a quota (Koordinator's ``label.quotaName`` field index) and those of each
    namespace. Order is kept: a refusal names the first two.

    Built on first use from ``pods`` (called then): most writes never ask about pods, and the
    webhook would otherwise walk every pod on each quota update, koord-manager's own status
    writes among them."""

    def __init__(self, pods: Callable[[], Iterable[Mapping[str, Any]]] = tuple) -> None:
        self._pods = pods
        self._index: tuple[dict[str, list[str]], dict[str, list[str]]] | None = None

    @classmethod
    def from_pods(cls, pods: Iterable[Mapping[str, Any]]) -> PodIndex:
        listed = list(pods)
        return cls(lambda: listed)

    @property
    def labelled(self) -> Mapping[str, Sequence[str]]:
        return self._built()[0]

    @property
    def in_namespace(self) -> Mapping[str, Sequence[str]]:
        return self._built()[1]

    def _built(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        if self._index is None:
            labelled: dict[str, list[str]] = {}
            in_namespace: dict[str, list[str]] = {}
            for pod in self._pods():
                meta = pod.get("metadata") or _EMPTY
                name = str(meta.get("name") or "")
                quota = str((meta.get("labels") or _EMPTY).get(LABEL_QUOTA_NAME) or "")
                if quota:
                    labelled.setdefault(quota, []).append(name)
                in_namespace.setdefault(str(meta.get("namespace") or ""), []).append(name)
            self._index = labelled, in_namespace
        return self._index


_NO_PODS = PodIndex()


class QuotaTopology:
    """The quota tree of one koord-manager replica (quota_topology.go quotaTopology)."""

    def __init__(self, gates: QuotaGates = QuotaGates()) -> None:
        self.gates = gates
        self.quotas: dict[str, QuotaInfo] = {}
        # quotaHierarchyInfo: every quota's children, and the root's, and those of a parent an
        # informer event named before the parent itself arrived.
        self.children: dict[str, set[str]] = {ROOT_QUOTA: set()}
        # namespaceToQuotaMap: annotation namespace -> quota name.
        self.namespace_quota: dict[str, str] = {}

    # -- admission: check, and record what is allowed ---------------------------------------

    def validate_add(self, obj: Mapping[str, Any]) -> str | None:
        """ValidAddQuota: None and the quota recorded, or why it may not be created."""
        name = _name(obj)
        if name in self.quotas:
            return f"AddQuota quota already exist:{name}"
        namespaces = _annotation_namespaces(obj)
        for namespace in namespaces:
            bound = self.namespace_quota.get(namespace)
            if bound is not None:
                return (
                    f"AddQuota quota {name}'s annotation namespace {namespace} "
                    f"is already bound to quota {bound}"
                )
        reason = validate_quota_self_item(obj)
        if reason:
            return reason
        info = QuotaInfo.from_object(obj)
        reason = self._validate_topology(None, info, (), _NO_PODS)
        if reason:
            return reason
        self.quotas[name] = info
        self.children.setdefault(name, set())
        self.children.setdefault(info.parent, set()).add(name)
        for namespace in namespaces:
            self.namespace_quota[namespace] = name
        return None

    def validate_update(
        self,
        old: Mapping[str, Any] | None,
        new: Mapping[str, Any],
        pods: PodIndex = _NO_PODS,
    ) -> str | None:
        """ValidUpdateQuota: None and the change recorded, or why it may not be made. A change
        to none of the tree labels, the namespaces annotation or the spec is allowed as is.
        ``pods`` answers whether a leaf turned parent still has pods."""
        if old is not None and _tree_fields(old) == _tree_fields(new):
            return None
        name = _name(new)
        if name in (SYSTEM_QUOTA, ROOT_QUOTA):
            return f"invalid quota {name}"  # extension.IsForbiddenModify
        namespaces = _annotation_namespaces(new)
        for namespace in namespaces:
            bound = self.namespace_quota.get(namespace)
            if bound is not None and bound != name:
                return (
                    f"UpdadteQuota, quota {name} update namespaces, but namespace {namespace} "
                    f"is already bound to quota {bound}"
                )
        current = self.quotas.get(name)
        if current is None:
            return f"UpdateQuota quota not exist in quotaInfoMap:{name}"
        reason = validate_quota_self_item(new)
        if reason:
            return reason
        old_namespaces = _annotation_namespaces(old) if old is not None else ()
        info = QuotaInfo.from_object(new)
        reason = self._validate_topology(current, info, old_namespaces, pods)
        if reason:
            return reason
        self.quotas[name] = info
        if current.parent != info.parent:
            self.children.get(current.parent, set()).discard(name)
            self.children.setdefault(info.parent, set()).add(name)
        for namespace in old_namespaces:
            self.namespace_quota.pop(namespace, None)
        for namespace in namespaces:
            self.namespace_quota[namespace] = name
        return None

    def validate_delete(self, obj: Mapping[str, Any], pods: PodIndex = _NO_PODS) -> str | None:
        """ValidDeleteQuota: None and the quota forgotten, or why it may not be deleted (the
        three built-in quotas, a quota with children, a quota pods are labelled with)."""
        name = _name(obj)
        if name in (SYSTEM_QUOTA, ROOT_QUOTA, DEFAULT_QUOTA):
            return f"can not delete quotaGroup :{name}"
        info = self.quotas.get(name)
        if info is None:
            return f"not found quota:{name}"
        children = self.children.get(name)
        if children is None:
            return f"BUG quotaMap and quotaTree information out of sync, losed :{name}"
        if children:
            return f"delete quota failed, quota {name} has {len(children)} child quotas"
        bound = list(pods.labelled.get(name, ()))
        if bound:
            shown = bound if len(bound) <= 2 else [*bound[:2], "..."]
            return f"delete quota failed, quota {name} has {len(bound)} child pods: " + ", ".join(
                shown
            )
        self.children.get(info.parent, set()).discard(name)
        del self.children[name]
        del self.quotas[name]
        for namespace in _annotation_namespaces(obj):
            self.namespace_quota.pop(namespace, None)
        return None

    # -- informer: record, unchecked --------------------------------------------------------

    def on_add(self, obj: Mapping[str, Any]) -> None:
        """OnQuotaAdd; raises ModelError for a malformed min or max."""
        info = QuotaInfo.from_object(obj)
        self.quotas[info.name] = info
        self.children.setdefault(info.name, set())
        self.children.setdefault(info.parent, set()).add(info.name)
        for namespace in info.namespaces:
            self.namespace_quota[namespace] = info.name

    def on_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """OnQuotaUpdate; raises ModelError for a malformed min or max."""
        before = QuotaInfo.from_object(old)
        info = QuotaInfo.from_object(new)
        self.quotas[info.name] = info
        if before.parent != info.parent:
            self.children.get(before.parent, set()).discard(info.name)
            self.children.setdefault(info.parent, set()).add(info.name)
        if before.namespaces != info.namespaces:
            for namespace in before.namespaces:
                self.namespace_quota.pop(namespace, None)
            for namespace in info.namespaces:
                self.namespace_quota[namespace] = info.name

    def on_delete(self, obj: Mapping[str, Any]) -> None:
        """OnQuotaDelete."""
        name = _name(obj)
        parent = _parent_name(obj)
        self.children.get(parent, set()).discard(name)
        self.children.pop(name, None)
        self.quotas.pop(name, None)
        for namespace in _annotation_namespaces(obj):
            self.namespace_quota.pop(namespace, None)

    # -- reading ----------------------------------------------------------------------------

    def quota_info(self, name: str, namespace: str = "") -> QuotaInfo | None:
        """getQuotaInfo: the quota of that name, else the one whose namespaces annotation
        binds ``namespace``."""
        info = self.quotas.get(name)
        if info is not None:
            return info
        bound = self.namespace_quota.get(namespace)
        return self.quotas.get(bound) if bound is not None else None

    # -- mutating ---------------------------------------------------------------------------

    def fill_defaults(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """fillQuotaDefaultInformation, on create: a copy of ``obj`` with the parent label
        (the root quota when unset), the parent's tree id (when the quota names none and its
        parent has one) and the shared-weight annotation (max when unset; else given max's
        keys exactly: missing ones from max, extra ones dropped). Raises ModelError with
        Koordinator's text when the parent is unknown or the shared weight does not parse."""
        filled: dict[str, Any] = copy.deepcopy(dict(obj))
        name = _name(obj)
        if name == ROOT_QUOTA:
            return filled
        meta = filled.setdefault("metadata", {})
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        meta["labels"], meta["annotations"] = labels, annotations
        if not labels.get(LABEL_PARENT):
            labels[LABEL_PARENT] = ROOT_QUOTA
        if not labels.get(LABEL_TREE_ID) and labels[LABEL_PARENT] != ROOT_QUOTA:
            parent = self.quotas.get(labels[LABEL_PARENT])
            if parent is None:
                raise ModelError(f"fill quota {name} failed, parent not exist")
            if parent.tree_id:
                labels[LABEL_TREE_ID] = parent.tree_id
        maximum = dict((filled.get("spec") or _EMPTY).get("max") or _EMPTY)
        weight_text = annotations.get(ANNOTATION_SHARED_WEIGHT)
        if not weight_text:
            annotations[ANNOTATION_SHARED_WEIGHT] = _resource_list_json(maximum)
            return filled
        try:
            weight = json.loads(weight_text)
        except ValueError as exc:
            raise ModelError(f"fillDefaultQuotaInfo unmarshal sharedWeight failed:{exc}") from exc
        if not isinstance(weight, dict):
            raise ModelError(
                f"fillDefaultQuotaInfo unmarshal sharedWeight failed:not a resource list: "
                f"{weight_text}"
            )
        # fixedSharedWeight: the weight's keys are max's keys.
        fixed = {key: weight.get(key, amount) for key, amount in maximum.items()}
        if fixed.keys() != weight.keys():
            annotations[ANNOTATION_SHARED_WEIGHT] = _resource_list_json(fixed)
        return filled

    # -- pods -------------------------------------------------------------------------------

    def validate_add_pod(self, pod: Mapping[str, Any]) -> str | None:
        """ValidateAddPod: a pod may not run in a parent quota (unless the
        SupportParentQuotaSubmitPod gate allows it)."""
        if self.gates.support_parent_quota_submit_pod:
            return None
        name = quota_of_pod(pod, self)
        if name in ("", DEFAULT_QUOTA):
            return None
        info = self.quotas.get(name)
        if info is not None and info.is_parent:
            pod_name = (pod.get("metadata") or _EMPTY).get("name") or ""
            return f"pod can not be linked to a parentQuotaGroup,quota:{name}, pod:{pod_name}"
        return None

    def validate_update_pod(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
        """ValidateUpdatePod: the preemptible label is fixed once set; then ValidateAddPod."""
        if _labels(old).get(LABEL_PREEMPTIBLE) != _labels(new).get(LABEL_PREEMPTIBLE):
            return "Preemptible label is forbidden modify now."
        return self.validate_add_pod(new)

    # -- the tree checks --------------------------------------------------------------------

    def _validate_topology(
        self,
        old: QuotaInfo | None,
        new: QuotaInfo,
        old_namespaces: Sequence[str],
        pods: PodIndex,
    ) -> str | None:
        """validateQuotaTopology: ``old`` is None on create, the recorded quota on update."""
        if new.name == ROOT_QUOTA:
            return None
        reason = self.check_is_parent_change(old, new, old_namespaces, pods)
        if reason:
            return reason
        reason = self.check_tree_id(old, new)
        if reason:
            return reason
        # A leaf right under the root has no parent to fit in and no children to hold.
        if new.parent == ROOT_QUOTA and not new.is_parent:
            return None
        reason = self.check_parent_quota_info(new.name, new.parent)
        if reason:
            return reason
        reason = self.check_no_cycle(new.name, new.parent)
        if reason:
            return reason
        reason = self.check_sub_and_parent_group_quota_key(
            new, self.gates.enable_update_resource_key
        )
        if reason:
            return f"failed to check sub and parent group quotaKey, err: {reason}"
        reason = self.check_min_quota_validate(new)
        if reason:
            return reason
        if self.gates.guarantee_usage:
            reason = self.check_guaranteed_for_min(new)
            if reason:
                return f"{reason} {new.name}"
        return None

    def check_tree_id(self, old: QuotaInfo | None, info: QuotaInfo) -> str | None:
        """checkTreeID: the tree id never changes, and equals the parent's and the children's."""
        if old is not None and old.tree_id != info.tree_id:
            return f"{info.name} tree id changed [{old.tree_id}] vs [{info.tree_id}]"
        if info.parent != ROOT_QUOTA:
            parent = self.quotas.get(info.parent)
            if parent is not None and parent.tree_id != info.tree_id:
                return (
                    f"{info.name} tree id is different from parent {parent.name}, "
                    f"[{info.tree_id}] vs [{parent.tree_id}]"
                )
        for name in sorted(self.children.get(info.name, ())):
            child = self.quotas.get(name)
            if child is not None and child.tree_id != info.tree_id:
                return (
                    f"{info.name} tree id is different from child {child.name}, "
                    f"[{info.tree_id}] vs [{child.tree_id}]"
                )
        return None

    def check_is_parent_change(
        self,
        old: QuotaInfo | None,
        info: QuotaInfo,
        old_namespaces: Sequence[str],
        pods: PodIndex,
    ) -> str | None:
        """checkIsParentChange: a quota with children stays a parent; a quota with pods
        (labelled with it, in the namespace named as it, or in its old annotation namespaces:
        hasQuotaBoundedPods) does not become one."""
        if old is None or old.is_parent == info.is_parent:
            return None
        if self.children.get(old.name) and not info.is_parent:
            return (
                "quota has children, isParent is forbidden to modify as false, "
                f"quotaName:{old.name}"
            )
        if info.is_parent and _has_bound_pods(pods, old.name, old_namespaces):
            return (
                "quota has bound pods, isParent is forbidden to modify as true, "
                f"quotaName: {old.name}"
            )
        return None

    def check_parent_quota_info(self, name: str, parent_name: str) -> str | None:
        """checkParentQuotaInfo: the parent is known and is a parent."""
        if parent_name == ROOT_QUOTA:
            return None
        parent = self.quotas.get(parent_name)
        if parent is None:
            return f"{name} has parentName {parent_name} but not find parentInfo in quotaInfoMap"
        if parent_name not in self.children:
            return (
                f"{name} has parentName {parent_name} but not find parentInfo in quotaHierarchyInfo"
            )
        if not parent.is_parent:
            return (
                f"{name} has parentName {parent_name} but the parentQuotaInfo's IsParent is false"
            )
        return None

    def check_no_cycle(self, name: str, parent_name: str) -> str | None:
        """Ours: Koordinator lets an update hang a quota under its own descendant (or itself),
        which leaves a loop no quota of it reaches the root from. Refused here."""
        seen: set[str] = set()
        current = parent_name
        while current and current != ROOT_QUOTA and current not in seen:
            if current == name:
                return (
                    f"{name} has parentName {parent_name} but {parent_name} is {name} or one "
                    f"of its descendants, the quota tree would have a cycle"
                )
            seen.add(current)
            info = self.quotas.get(current)
            current = info.parent if info is not None else ""
        return None

    def check_sub_and_parent_group_quota_key(
        self, info: QuotaInfo, enable_update_resource_key: bool
    ) -> str | None:
        """checkSubAndParentGroupQuotaKey: max names the same resources as the parent's and
        each child's (with ElasticQuotaEnableUpdateResourceKey: only resources the parent
        names); min names only resources the parent's min names."""
        if info.name == ROOT_QUOTA:
            return None
        if info.parent != ROOT_QUOTA:
            parent = self.quotas.get(info.parent)
            if parent is None:  # Go dereferences nil here; checkParentQuotaInfo ran first
                return f"{info.name} has parentName {info.parent} but not find parentInfo"
            reason = _max_keys_reason(
                parent.max,
                info.max,
                info.name,
                info.parent,
                included_only=enable_update_resource_key,
                parent_first=True,
            )
            if reason:
                return reason
            if not info.min.keys() <= parent.min.keys():
                return (
                    f"checkSubAndParentGroupQuotaKey failed: {info.name}'s min keys are not all "
                    f"included in {info.parent}'s"
                )
        for name in sorted(self.children.get(info.name, ())):
            child = self.quotas.get(name)
            if child is None:
                return (
                    "internal error: quotaInfoMap and quotaTree information out of sync, "
                    f"losed :{name}"
                )
            reason = _max_keys_reason(
                info.max,
                child.max,
                name,
                info.name,
                included_only=enable_update_resource_key,
                parent_first=False,
            )
            if reason:
                return reason
            if not child.min.keys() <= info.min.keys():
                return (
                    f"checkSubAndParentGroupQuotaKey failed: {name}'s min keys are not all "
                    f"included in {info.name}'s"
                )
        return None

    def check_min_quota_validate(self, info: QuotaInfo) -> str | None:
        """checkMinQuotaValidate: the min of the quota and its siblings together within the
        parent's min, and its children's min together within its own, per resource (a
        resource one side does not name counts as zero). Skipped for a quota labelled
        allow-force-update and for a tree root."""
        if info.allow_force_update or info.is_tree_root:
            return None
        if info.parent != ROOT_QUOTA:
            siblings = self._child_min_sum(info.parent, skip=info.name)
            if isinstance(siblings, str):
                return f"checkMinQuotaSum failed: {siblings}"
            parent = self.quotas[info.parent]
            if not _within(add(siblings, info.min), parent.min):
                return (
                    "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, "
                    f"parent: {info.parent}"
                )
        if not self.children.get(info.name):
            return None
        children = self._child_min_sum(info.name, skip="")
        if isinstance(children, str):
            return f"checkMinQuotaSum failed:{children}"
        if not _within(children, info.min):
            return (
                f"checkMinQuotaSum all children's MinQuota > current MinQuota, current: {info.name}"
            )
        return None

    def check_guaranteed_for_min(self, info: QuotaInfo) -> str | None:
        """checkGuaranteedForMin (gate ElasticQuotaGuaranteeUsage): a min raised above what
        the quota has guaranteed must be guaranteed by an ancestor below the tree's top."""
        if info.allow_force_update or not info.tree_id or info.is_tree_root:
            return None
        if _within(info.min, info.guaranteed):
            return None
        return self._check_parent_guaranteed(
            max_of(info.min, info.guaranteed), info.name, info.parent
        )

    def _check_parent_guaranteed(
        self, guarantee: Resources, name: str, parent_name: str
    ) -> str | None:
        """checkParentGuaranteed, walked as a loop (a cycle in a broken tree ends it)."""
        seen: set[str] = set()
        while True:
            if parent_name == ROOT_QUOTA:
                return f"tree root quota {name} can't guarantee for min"
            if parent_name in seen:
                return f"parent {parent_name} not found"  # a loop: no top to guarantee it
            seen.add(parent_name)
            parent = self.quotas.get(parent_name)
            if parent is None:
                return f"parent {parent_name} not found"
            siblings = self.children.get(parent_name)
            if siblings is None:
                return f"child quota list not found, parent: {parent_name}"
            wanted = dict(guarantee)
            for sibling in sorted(siblings):
                if sibling == name:
                    continue
                other = self.quotas.get(sibling)
                if other is None:
                    return (
                        f"BUG quotaInfoMap and quotaTree information out of sync, losed :{sibling}"
                    )
                wanted = add(wanted, other.guaranteed)
            needed = max_of(parent.min, wanted)
            if _within(needed, parent.guaranteed):
                return None
            guarantee, name, parent_name = needed, parent.name, parent.parent

    def _child_min_sum(self, parent_name: str, skip: str) -> Resources | str:
        """getChildMinQuotaSumExceptSpecificChild: the children's min added up (nothing under
        the root), or the error text."""
        if parent_name == ROOT_QUOTA:
            return {}
        children = self.children.get(parent_name)
        if children is None:
            return f"not found child quota list, parent: {parent_name}"
        found: Resources = {}
        for name in sorted(children):
            if name == skip:
                continue
            child = self.quotas.get(name)
            if child is None:
                return f"BUG quotaInfoMap and quotaTree information out of sync, losed :{name}"
            found = add(found, child.min)
        return found


# -- the quota a pod runs in --------------------------------------------------------------


def quota_name_of_pod(pod: Mapping[str, Any], topology: QuotaTopology) -> str:
    """GetQuotaName (pod_check.go; the scheduler plugin's is the same): the pod's
    ``quota.scheduling.koordinator.sh/name`` label; else the quota named as the pod's
    namespace in that namespace; else the quota whose namespaces annotation lists the
    namespace; else the default quota. With DisableDefaultQuota, only the label (maybe empty).
    The label is returned even when no such quota exists."""
    meta = pod.get("metadata") or _EMPTY
    labelled = str((meta.get("labels") or _EMPTY).get(LABEL_QUOTA_NAME) or "")
    if topology.gates.disable_default_quota or labelled:
        return labelled
    namespace = str(meta.get("namespace") or "")
    own = topology.quotas.get(namespace)
    if own is not None and own.namespace == namespace:
        return own.name
    return topology.namespace_quota.get(namespace, DEFAULT_QUOTA)


def quota_of_pod(pod: Mapping[str, Any], topology: QuotaTopology) -> str:
    """getQuotaNameFromPodNoLock: ``quota_name_of_pod``, and the default quota where that
    quota is not in the tree."""
    name = quota_name_of_pod(pod, topology)
    return name if name in topology.quotas else DEFAULT_QUOTA


# -- one quota on its own ------------------------------------------------------------------


def validate_quota_self_item(obj: Mapping[str, Any]) -> str | None:
    """validateQuotaSelfItem: min, max and shared weight not negative; min names only
    resources max names, each at most max's; max at least status.used for the resources the
    max-strict-check-resource-keys annotation lists."""
    name = _name(obj)
    spec = obj.get("spec") or _EMPTY
    meta = obj.get("metadata") or _EMPTY
    annotations = meta.get("annotations") or _EMPTY
    try:
        maximum = resources(spec.get("max"))
        minimum = resources(spec.get("min"))
        used = resources((obj.get("status") or _EMPTY).get("used"))
    except ModelError as exc:
        return f"{name}: {exc}"  # ours: the API server refuses malformed quantities first
    negative = _negative(maximum)
    if negative:
        return f"{name} quota.Spec.Max's value < 0, in dimensions :{negative}"
    negative = _negative(minimum)
    if negative:
        return f"{name} quota.Spec.Min's value < 0, in dimensions :{negative}"
    weight_text = annotations.get(ANNOTATION_SHARED_WEIGHT)
    if weight_text:
        try:
            weight = parse_resource_list(weight_text)
        except ModelError as exc:
            # ours: Koordinator returns the bare JSON error
            return f"{name} quota.Annotation[{ANNOTATION_SHARED_WEIGHT}]'s value is invalid: {exc}"
        negative = _negative(weight)
        if negative:
            return (
                f"{name} quota.Annotation[{ANNOTATION_SHARED_WEIGHT}]'s value < 0, "
                f"in dimension :{negative}"
            )
    raw_max = spec.get("max") or _EMPTY
    raw_min = spec.get("min") or _EMPTY
    for key, amount in minimum.items():
        if key not in maximum:
            return (
                f"resourceKey {key} of quota {name} is included in min, which is not "
                "included in max"
            )
        if maximum[key] < amount:
            return (
                f"resourceKey {key} of quota {name} min {_text(raw_min[key])} > "
                f"max {_text(raw_max[key])}"
            )
    keys_text = annotations.get(ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS)
    if keys_text:
        try:
            keys = json.loads(keys_text)
        except ValueError as exc:
            keys = exc
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            return (
                f"{name} quota.Annotation[{ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS}]'s value "
                f"is invalid: not a list of resource names: {keys_text}"  # ours after the colon
            )
        raw_used = (obj.get("status") or _EMPTY).get("used") or _EMPTY
        for key in keys:
            if key not in used:
                continue  # a resource never counted yet is not checked
            if key not in maximum:
                return (
                    f"resourceKey {key} of quota {name} is included in used, which is not "
                    "included in max but should check max >= used"
                )
            if maximum[key] < used[key]:
                return (
                    f"resourceKey {key} of quota {name} max {_text(raw_max[key])} < "
                    f"used {_text(raw_used[key])}"
                )
    return None


# -- helpers -------------------------------------------------------------------------------


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or _EMPTY).get("name") or "")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels: Mapping[str, Any] = (obj.get("metadata") or _EMPTY).get("labels") or _EMPTY
    return labels


def _parent_name(obj: Mapping[str, Any]) -> str:
    """extension.GetParentQuotaName."""
    name = _name(obj)
    parent = str(_labels(obj).get(LABEL_PARENT) or "")
    return parent or ("" if name == ROOT_QUOTA else ROOT_QUOTA)


def _annotation_namespaces(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """extension.GetAnnotationQuotaNamespaces: the JSON list, or none where it does not
    parse."""
    text = ((obj.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(ANNOTATION_NAMESPACES)
    if not text:
        return ()
    try:
        listed = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        return ()
    return tuple(listed)


def _tree_fields(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """quotaFieldsCopy: what an update must change to be checked at all."""
    labels = _labels(obj)
    annotations = (obj.get("metadata") or _EMPTY).get("annotations") or _EMPTY
    return (
        labels.get(LABEL_PARENT, ""),
        labels.get(LABEL_IS_PARENT, ""),
        labels.get(LABEL_TREE_ID, ""),
        annotations.get(ANNOTATION_NAMESPACES, ""),
        obj.get("spec") or {},
    )


def _has_bound_pods(pods: PodIndex, quota: str, namespaces: Sequence[str]) -> bool:
    """hasQuotaBoundedPods."""
    if pods.labelled.get(quota) or pods.in_namespace.get(quota):
        return True
    return any(pods.in_namespace.get(namespace) for namespace in namespaces)


def _max_keys_reason(
    parent: Resources,
    child: Resources,
    child_name: str,
    parent_name: str,
    *,
    included_only: bool,
    parent_first: bool,
) -> str | None:
    if included_only:
        if not child.keys() <= parent.keys():
            return (
                f"checkSubAndParentGroupQuotaKey failed: {child_name}'s max keys are not all "
                f"included in {parent_name}'s"
            )
    elif child.keys() != parent.keys():
        # Koordinator names the parent first when checking against the parent, the child
        # first when checking the children.
        first, second = (parent_name, child_name) if parent_first else (child_name, parent_name)
        return (
            f"checkSubAndParentGroupQuotaKey failed: {first}'s max keys are not the same "
            f"with {second}'s"
        )
    return None


def _within(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """util.LessThanOrEqualCompletely: a - b is nowhere positive, over both lists' keys."""
    return all(delta <= 0 for delta in subtract(a, b).values())


def _negative(amounts: Mapping[str, int]) -> str:
    """quotav1.IsNegative printed as Go prints a []ResourceName ("[cpu memory]"), sorted;
    empty where none is negative."""
    names = sorted(key for key, amount in amounts.items() if amount < 0)
    return f"[{' '.join(names)}]" if names else ""


def _lenient_resources(text: str | None) -> Resources:
    if not text:
        return {}
    try:
        return parse_resource_list(text)
    except ModelError:
        return {}


def _without_shared_weight(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object without its shared-weight annotation: QuotaInfo does not keep the weight,
    and a malformed one is validate_quota_self_item's to report, not a reason to fail here."""
    meta = obj.get("metadata") or _EMPTY
    annotations = meta.get("annotations") or _EMPTY
    if ANNOTATION_SHARED_WEIGHT not in annotations:
        return obj
    rest = {k: v for k, v in annotations.items() if k != ANNOTATION_SHARED_WEIGHT}
    return {**obj, "metadata": {**meta, "annotations": rest}}


def _text(amount: Any) -> str:
    """A quantity as the object gave it (Go prints its canonical form, the same text for the
    usual "12", "500m", "2Gi")."""
    return str(amount).strip()


def _resource_list_json(amounts: Mapping[str, Any]) -> str:
    """A ResourceList as Go's json.Marshal writes it: keys sorted, amounts as strings."""
    return json.dumps({key: _text(amounts[key]) for key in sorted(amounts)}, separators=(",", ":"))
