"""koordapi.reservation.reservepod: the real Pod kube-scheduler places for a Reservation,
shaped after Koordinator v1.8's TestReservePod (pkg/util/reservation/reservation_test.go:
name and namespace, labels and annotations with the Reservation's over the template's, the
reserve-pod annotations, the requests) plus what makes it safe to exist as a real Pod here (no
volumes, no token, never preempting, owned by the Reservation, nodeName as a required node
affinity)."""

from __future__ import annotations

import copy
from typing import Any

from koordapi.quota.usage import pod_request
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVE_POD,
    is_reserve_pod,
    reserve_pod_reservation,
)
from koordapi.reservation.reservepod import (
    DEFAULT_SCHEDULER,
    PLACEHOLDER_IMAGE,
    reserve_pod,
    reserve_pod_name,
)

MI = 1 << 20


def reservation(**template_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "shop/web:4.2",
                "command": ["/bin/web", "--port=8080"],
                "env": [{"name": "TOKEN", "value": "s3cret"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "ports": [{"containerPort": 8080, "hostPort": 31337}],
                "resources": {
                    "requests": {"cpu": "1700m", "memory": "3.5Gi"},
                    "limits": {"cpu": "2", "memory": "3.5Gi"},
                },
            },
            {
                "name": "sidecar",
                "image": "shop/proxy:1.9",
                "resources": {"requests": {"cpu": "300m", "memory": "512Mi"}},
            },
        ],
        "initContainers": [
            {
                "name": "warm",
                "image": "shop/warm:1",
                "resources": {"requests": {"cpu": "2700m", "memory": "1Gi"}},
            }
        ],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}],
        "serviceAccountName": "web",
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web"}],
        "priorityClassName": "shop-high",
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "restartPolicy": "Always",
    }
    spec.update(template_spec)
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "name": "rsv-web",
            "uid": "9c1e-42",
            "labels": {"team": "shop", "tier": "gold"},
            "annotations": {"note": "from-reservation"},
        },
        "spec": {
            "template": {
                "metadata": {
                    "namespace": "shop",
                    "labels": {"tier": "silver", "app": "web"},
                    "annotations": {"note": "from-template", "owner": "ops"},
                },
                "spec": spec,
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            "ttl": "1h",
        },
    }


def test_name_and_namespace() -> None:
    r = reservation()
    assert reserve_pod_name(r) == ("shop", "9c1e-42")  # GetReservePodNamespacedName
    pod = reserve_pod(r)
    assert (pod["metadata"]["namespace"], pod["metadata"]["name"]) == ("shop", "9c1e-42")
    del r["spec"]["template"]["metadata"]["namespace"]
    assert reserve_pod_name(r) == ("default", "9c1e-42")
    assert reserve_pod(r)["metadata"]["namespace"] == "default"


def test_the_reservations_labels_and_annotations_win_over_the_templates() -> None:
    meta = reserve_pod(reservation())["metadata"]
    assert meta["labels"] == {"tier": "gold", "app": "web", "team": "shop"}
    assert meta["annotations"] == {
        "note": "from-reservation",
        "owner": "ops",
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: "rsv-web",
    }


def test_it_reads_back_as_the_reservations_reserve_pod() -> None:
    pod = reserve_pod(reservation())
    assert is_reserve_pod(pod)
    assert reserve_pod_reservation(pod) == "rsv-web"


def test_a_reservation_cannot_forge_the_reserve_pod_annotations_away() -> None:
    r = reservation()
    r["metadata"]["annotations"][ANNOTATION_RESERVE_POD] = "false"
    r["spec"]["template"]["metadata"]["annotations"][ANNOTATION_RESERVATION_NAME] = "other"
    annotations = reserve_pod(r)["metadata"]["annotations"]
    assert annotations[ANNOTATION_RESERVE_POD] == "true"
    assert annotations[ANNOTATION_RESERVATION_NAME] == "rsv-web"


def test_owned_by_the_reservation_as_controller() -> None:
    assert reserve_pod(reservation())["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "name": "rsv-web",
            "uid": "9c1e-42",
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ]


def test_it_requests_what_the_template_requests() -> None:
    pod = reserve_pod(reservation(overhead={"cpu": "70m", "memory": "64Mi"}))
    # containers 1700m + 300m = 2000m, the init container's 2700m is larger; + 70m overhead.
    # memory 3.5Gi + 512Mi = 4Gi over the init container's 1Gi; + 64Mi
    assert pod_request(pod) == {"cpu": 2770, "memory": 4096 * MI + 64 * MI}
    assert pod["spec"]["overhead"] == {"cpu": "70m", "memory": "64Mi"}


def test_containers_keep_only_name_image_resources_and_ports() -> None:
    spec = reserve_pod(reservation())["spec"]
    app, sidecar = spec["containers"]
    assert app == {
        "name": "app",
        "image": "shop/web:4.2",
        "resources": {
            "requests": {"cpu": "1700m", "memory": "3.5Gi"},
            "limits": {"cpu": "2", "memory": "3.5Gi"},
        },
        "ports": [{"containerPort": 8080, "hostPort": 31337}],  # host ports are reserved too
    }
    assert sidecar["name"] == "sidecar"
    assert spec["initContainers"] == [
        {
            "name": "warm",
            "image": "shop/warm:1",
            "resources": {"requests": {"cpu": "2700m", "memory": "1Gi"}},
        }
    ]


def test_no_volumes_no_token_no_service_account_and_the_classes_preemption() -> None:
    spec = reserve_pod(reservation())["spec"]
    assert "volumes" not in spec
    assert "serviceAccountName" not in spec
    assert spec["automountServiceAccountToken"] is False
    # the Priority admission plugin refuses a pod that sets its own preemption policy
    assert "preemptionPolicy" not in spec
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 0


def test_scheduling_fields_are_kept() -> None:
    spec = reserve_pod(reservation())["spec"]
    assert spec["nodeSelector"] == {"disk": "ssd"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "web"}]
    assert spec["priorityClassName"] == "shop-high"
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "zone"
    assert "priority" not in spec  # the API server fills it from the class


def test_scheduler_name_defaults_like_get_reservation_scheduler_name() -> None:
    assert reserve_pod(reservation())["spec"]["schedulerName"] == DEFAULT_SCHEDULER
    assert DEFAULT_SCHEDULER == "default-scheduler"
    custom = reserve_pod(reservation(schedulerName="koord-scheduler"))
    assert custom["spec"]["schedulerName"] == "koord-scheduler"


PIN = {"key": "metadata.name", "operator": "In", "values": ["node-7"]}


def test_node_name_becomes_a_required_node_affinity() -> None:
    spec = reserve_pod(reservation(nodeName="node-7"))["spec"]
    assert "nodeName" not in spec  # else the kubelet would get it without kube-scheduler
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == {"nodeSelectorTerms": [{"matchFields": [PIN]}]}


def test_node_name_is_added_to_every_existing_term_and_keeps_the_rest() -> None:
    zone_a = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    zone_b = {
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-9"]}],
    }
    preferred = [{"weight": 3, "preference": zone_a}]
    pod_anti: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": []}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [zone_a, zone_b]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": preferred,
        },
        "podAntiAffinity": pod_anti,
    }
    r = reservation(nodeName="node-7", affinity=affinity)
    before = copy.deepcopy(r)
    got = reserve_pod(r)["spec"]["affinity"]
    terms = got["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    # terms are ORed: each must also ask for the node, or the pod could land elsewhere
    assert terms == [
        {**zone_a, "matchFields": [PIN]},
        {**zone_b, "matchFields": [*zone_b["matchFields"], PIN]},
    ]
    assert got["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert got["podAntiAffinity"] == pod_anti
    assert r == before  # the Reservation is not changed


def test_without_node_name_the_affinity_is_the_templates() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}
    }
    assert reserve_pod(reservation(affinity=affinity))["spec"]["affinity"] == affinity
    assert "affinity" not in reserve_pod(reservation())["spec"]


def test_a_template_without_containers_gets_a_placeholder() -> None:
    r = reservation()
    r["spec"]["template"] = {}
    pod = reserve_pod(r)
    assert pod["spec"]["containers"] == [{"name": "reserve", "image": PLACEHOLDER_IMAGE}]
    assert "initContainers" not in pod["spec"]
    assert pod["metadata"]["namespace"] == "default"
    assert pod_request(pod) == {}


def test_unnamed_containers_without_image_are_named_and_given_the_placeholder() -> None:
    pod = reserve_pod(
        reservation(
            containers=[
                {"resources": {"requests": {"cpu": "900m"}}},
                {"resources": {"requests": {"cpu": "800m"}}},
            ],
            initContainers=[],
        )
    )
    assert pod["spec"]["containers"] == [
        {
            "name": "reserve-0",
            "image": PLACEHOLDER_IMAGE,
            "resources": {"requests": {"cpu": "900m"}},
        },
        {
            "name": "reserve-1",
            "image": PLACEHOLDER_IMAGE,
            "resources": {"requests": {"cpu": "800m"}},
        },
    ]
    assert pod_request(pod) == {"cpu": 1700}
