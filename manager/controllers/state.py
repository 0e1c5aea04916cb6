"""What the manager knows of the cluster: one informer per kind, and the views built on them.

Every controller and the webhooks read from here, never from the API: the informers keep a
cache each (LIST then WATCH), so a reconcile costs no reads. Handlers registered by the
controllers turn cache changes into work-queue keys.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod
from lightkube.resources.scheduling_v1 import PriorityClass

from koordkube.client import KubeApi
from koordkube.informer import Informer
from koordkube.podindex import PodsByNode
from koordkube.resources import (
    ClusterColocationProfile,
    Device,
    ElasticQuota,
    NodeMetric,
    NodeSLO,
    PodGroup,
    Reservation,
)
from manager.colocation import ColocationConfig, parse_colocation_config
from manager.errors import ConfigError
from manager.sloconfig import COLOCATION_CONFIG

log = logging.getLogger(__name__)

Object = dict[str, Any]


class ClusterState:
    """Informers for the kinds the manager reads, a pods-by-node index and the ConfigMap."""

    def __init__(
        self,
        api: KubeApi,
        config_namespace: str,
        slo_config_name: str,
        resync_period: float | None = None,
    ) -> None:
        """``resync_period``: every cached object is handed to the handlers again this often
        (--sync-period); None: only on changes."""
        self.config_namespace = config_namespace
        self.slo_config_name = slo_config_name
        resync = resync_period
        self.nodes = Informer(api, Node, resync_period=resync)
        self.pods = Informer(api, Pod, resync_period=resync)
        self.node_metrics = Informer(api, NodeMetric, resync_period=resync)
        self.node_slos = Informer(api, NodeSLO, resync_period=resync)
        self.config_maps = Informer(
            api,
            ConfigMap,
            namespace=config_namespace,
            fields=f"metadata.name={slo_config_name}",
            resync_period=resync,
        )
        self.profiles_informer = Informer(api, ClusterColocationProfile, resync_period=resync)
        self.priority_class_informer = Informer(api, PriorityClass, resync_period=resync)
        self.namespaces = Informer(api, Namespace, resync_period=resync)
        # Devices (koordlet's report of GPUs and RDMA NICs) are not waited for: a cluster
        # without the Device CRD still gets everything else (see optional_informers).
        self.devices = Informer(api, Device, resync_period=resync)
        # ElasticQuotas (the quota webhooks' tree and the status controller's counting),
        # optional as Devices: a cluster without the CRD runs, the quota webhooks answer "not
        # listed yet" (manager.webhooks.elasticquota) and no quota status is written.
        self.elastic_quotas = Informer(api, ElasticQuota, resync_period=resync)
        # PodGroups (the gang controller's gangs and their status), optional as well: without
        # the CRD, gangs named by annotations still work; a PodGroup-labelled pod waits.
        self.pod_groups = Informer(api, PodGroup, resync_period=resync)
        # Reservations (their reserve pods and status), optional as well: without the CRD
        # nothing is reserved and everything else runs.
        self.reservations = Informer(api, Reservation, resync_period=resync)
        self._by_node = PodsByNode()
        self.pods.add_handler(self._index_pod)
        self._colocation: tuple[str | None, ColocationConfig | None] = (None, None)
        self.colocation_error = ""  # why the current colocation-config text is not used

    @property
    def informers(self) -> list[Informer]:
        return [
            self.nodes,
            self.pods,
            self.node_metrics,
            self.node_slos,
            self.config_maps,
            self.profiles_informer,
            self.priority_class_informer,
            self.namespaces,
        ]

    @property
    def optional_informers(self) -> list[Informer]:
        """Run beside ``informers`` but never waited for (readiness, the first reconcile):
        their kind's CRD may be missing, and the informer then keeps retrying, logging why."""
        return [self.devices, self.elastic_quotas, self.pod_groups, self.reservations]

    # -- pods by node -------------------------------------------------------------------------

    def _index_pod(self, event: str, pod: Object) -> None:
        self._by_node.apply(event, pod)

    def pods_on(self, node: str) -> list[Mapping[str, Any]]:
        return list(self._by_node.on(node).values())

    def node_of_pod(self, key: str) -> str | None:
        return self._by_node.node_of(key)

    # -- the slo-controller-config ConfigMap ----------------------------------------------------

    def config_map(self) -> Object | None:
        return self.config_maps.get(f"{self.config_namespace}/{self.slo_config_name}")

    def slo_config_data(self) -> dict[str, str] | None:
        """The ConfigMap's data; None while it does not exist."""
        config_map = self.config_map()
        if config_map is None:
            return None
        data = config_map.get("data") or {}
        return {str(k): str(v) for k, v in data.items()}

    def colocation(self) -> ColocationConfig | None:
        """The colocation config, or None when it was never loaded (nothing to do yet).

        A key that fails to parse keeps the last good config (``colocation_error`` says why);
        a missing key is Koordinator's default: colocation off.
        """
        data = self.slo_config_data()
        if data is None:
            return self._colocation[1]
        text = data.get(COLOCATION_CONFIG, "{}")
        if text == self._colocation[0]:
            return self._colocation[1]
        try:
            config = parse_colocation_config(text)
        except ConfigError as err:
            if str(err) != self.colocation_error:
                log.warning("%s is invalid, keeping the last good one: %s", COLOCATION_CONFIG, err)
            self.colocation_error = str(err)
            return self._colocation[1]
        self.colocation_error = ""
        self._colocation = (text, config)
        return config

    # -- what the webhooks read (manager.webhooks.server.StateProvider) --------------------------

    def profiles(self) -> Sequence[Mapping[str, Any]]:
        return self.profiles_informer.list()

    def priority_classes(self) -> Mapping[str, Mapping[str, Any]]:
        return {
            str((pc.get("metadata") or {}).get("name")): pc
            for pc in self.priority_class_informer.list()
        }

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        namespace = self.namespaces.get(name)
        return ((namespace or {}).get("metadata") or {}).get("labels") or {}
