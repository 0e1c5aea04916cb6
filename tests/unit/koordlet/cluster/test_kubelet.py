"""The kubelet's pod list reconciled with the pods NRI reported, against a fake kubelet."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from koordapi.qos import KubeQoS, QoSClass
from koordlet.cli import build_parser, config_from_args
from koordlet.cluster.kubelet import (
    KEY_PREFIX,
    KubeletClient,
    KubeletEndpoint,
    KubeletError,
    KubeletPodSync,
    resolve_endpoint,
    spec_facts,
)
from koordlet.metrics import KoordletMetrics
from koordlet.states.pods import PodStore
from nri_plugin import api

UID_BE = "11111111-aaaa-bbbb-cccc-000000000001"
UID_LS = "11111111-aaaa-bbbb-cccc-000000000002"
UID_NRI = "11111111-aaaa-bbbb-cccc-000000000003"


def pod(
    uid: str,
    name: str,
    qos: str,
    containers: dict[str, str],
    *,
    labels: dict[str, str] | None = None,
    resources: dict[str, Any] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "name": name,
            "namespace": "default",
            "labels": labels or {},
            "annotations": {"a": "b"},
        },
        "spec": {
            "priority": 5500,
            "containers": [{"name": n, "resources": resources or {}} for n in containers],
        },
        "status": {
            "phase": phase,
            "qosClass": qos,
            "containerStatuses": [
                {"name": n, "containerID": f"containerd://{cid}", "state": {"running": {}}}
                for n, cid in containers.items()
            ],
        },
    }


BE_POD = pod(
    UID_BE,
    "batch",
    "BestEffort",
    {"job": "c-be"},
    labels={"koordinator.sh/qosClass": "BE"},
)
LS_POD = pod(
    UID_LS,
    "web",
    "Burstable",
    {"app": "c-ls"},
    resources={"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "memory": "1Gi"}},
)
NRI_POD = pod(UID_NRI, "known", "Burstable", {"app": "c-n1", "sidecar": "c-n2"})


class FakeKubelet:
    """Serves ``self.reply`` at /pods/; records the requests' headers."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.reply: Any = {"kind": "PodList", "items": []}
        self.status = 200
        self.delay = 0.0
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.headers.append(dict(self.headers))
                if fake.delay:
                    time.sleep(fake.delay)
                body = fake.reply if isinstance(fake.reply, bytes) else json.dumps(fake.reply)
                data = body if isinstance(body, bytes) else body.encode()
                self.send_response(fake.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    server = FakeKubelet()
    yield server
    server.close()


def node(port: int, *, https_port: int = 10250) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1"},
        "status": {
            "addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "127.0.0.1"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": https_port}},
        },
    }


def http_sync(store: PodStore, server: FakeKubelet, *, timeout: float = 2.0) -> KubeletPodSync:
    client = KubeletClient(
        lambda: resolve_endpoint(node(server.port), insecure_tls=True, read_only_port=server.port),
        timeout=timeout,
        token_file=None,
    )
    return KubeletPodSync(store, client.get_pods)


def nri_pod(store: PodStore) -> None:
    sandbox = api.PodSandbox(
        id="sandbox-3",
        uid=UID_NRI,
        name="known",
        namespace="default",
        linux=api.LinuxPodSandbox(cgroup_parent=f"/kubepods/burstable/pod{UID_NRI}"),
    )
    container = api.Container(
        id="c-n1",
        pod_sandbox_id="sandbox-3",
        name="app",
        linux=api.LinuxContainer(cgroups_path=f"/kubepods/burstable/pod{UID_NRI}/c-n1"),
    )
    store.put_container(sandbox, container)


def test_unknown_pods_are_added_with_cgroup_dirs_and_qos(kubelet: FakeKubelet) -> None:
    kubelet.reply = {"items": [BE_POD, LS_POD]}
    store = PodStore()
    sync = http_sync(store, kubelet)
    result = asyncio.run(sync.sync_once())
    assert result is not None and (result.added, result.enriched, result.removed) == (2, 0, 0)
    be = store.pod(KEY_PREFIX + UID_BE)
    ls = store.pod(KEY_PREFIX + UID_LS)
    assert be is not None and ls is not None
    assert be.request.cgroup_dir == f"kubepods/besteffort/pod{UID_BE}"
    assert be.request.qos is QoSClass.BE and be.request.kube_qos is KubeQoS.BESTEFFORT
    assert be.containers["c-be"].cgroup_dir == f"kubepods/besteffort/pod{UID_BE}/c-be"
    assert ls.request.kube_qos is KubeQoS.BURSTABLE and ls.request.annotations == {"a": "b"}
    res = ls.containers["c-ls"].resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit) == (512, 200_000, 1 << 30)
    # the same list again changes nothing
    again = asyncio.run(sync.sync_once())
    assert again is not None and (again.added, again.removed) == (0, 0)
    assert len(store) == 2


def test_systemd_layout() -> None:
    store = PodStore(cgroup_driver="systemd")
    sync = KubeletPodSync(store, lambda: [LS_POD, BE_POD])
    sync.reconcile([LS_POD, BE_POD])
    ls = store.pod(KEY_PREFIX + UID_LS)
    assert ls is not None
    slice_ = f"kubepods-burstable-pod{UID_LS.replace('-', '_')}.slice"
    assert ls.request.cgroup_dir == f"kubepods.slice/kubepods-burstable.slice/{slice_}"
    assert ls.containers["c-ls"].cgroup_dir.endswith(f"{slice_}/cri-containerd-c-ls.scope")
    assert ls.request.kube_qos is KubeQoS.BURSTABLE


UID_G = "11111111-aaaa-bbbb-cccc-000000000004"
G_POD = pod(
    UID_G,
    "db",
    "Guaranteed",
    {"db": "c-g"},
    resources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
)


def store_from_flags(*argv: str) -> PodStore:
    """The PodStore koordlet's daemon builds from its command line."""
    config = config_from_args(build_parser().parse_args(list(argv)))
    return PodStore(config.cgroup_driver, config.cgroup_root, config.cgroup_kube_dir)


def test_pods_are_mapped_below_the_cgroup_kube_dir(tmp_path: Path) -> None:
    """A kubelet with cgroupfs and cgroupRoot /koordk8s: its pods are under koordk8s/kubepods."""
    (tmp_path / "cpu" / "koordk8s" / "kubepods").mkdir(parents=True)
    store = store_from_flags(
        f"--cgroup-root-dir={tmp_path}", "--cgroup-kube-dir=koordk8s/kubepods/"
    )
    store.put_container(
        api.PodSandbox(
            id="sandbox-3",
            uid=UID_NRI,
            linux=api.LinuxPodSandbox(cgroup_parent=f"/koordk8s/kubepods/burstable/pod{UID_NRI}"),
        ),
        api.Container(
            id="c-n1",
            pod_sandbox_id="sandbox-3",
            name="app",
            linux=api.LinuxContainer(
                cgroups_path=f"/koordk8s/kubepods/burstable/pod{UID_NRI}/c-n1"
            ),
        ),
    )
    result = KubeletPodSync(store, list).reconcile([BE_POD, LS_POD, G_POD, NRI_POD])
    assert (result.added, result.enriched) == (3, 1)
    dirs = {
        k.request.uid: (k.request.cgroup_dir, sorted(c.cgroup_dir for c in k.containers.values()))
        for k in store
    }
    assert dirs == {
        UID_BE: (
            f"koordk8s/kubepods/besteffort/pod{UID_BE}",
            [f"koordk8s/kubepods/besteffort/pod{UID_BE}/c-be"],
        ),
        UID_LS: (
            f"koordk8s/kubepods/burstable/pod{UID_LS}",
            [f"koordk8s/kubepods/burstable/pod{UID_LS}/c-ls"],
        ),
        UID_G: (f"koordk8s/kubepods/pod{UID_G}", [f"koordk8s/kubepods/pod{UID_G}/c-g"]),
        UID_NRI: (
            f"koordk8s/kubepods/burstable/pod{UID_NRI}",
            [
                f"koordk8s/kubepods/burstable/pod{UID_NRI}/c-n1",
                f"koordk8s/kubepods/burstable/pod{UID_NRI}/c-n2",
            ],
        ),
    }
    # what the reconciler and the QoS manager write: the same kubelet's QoS dirs
    assert store.kube_qos_dirs() == {
        KubeQoS.GUARANTEED: "koordk8s/kubepods",
        KubeQoS.BURSTABLE: "koordk8s/kubepods/burstable",
        KubeQoS.BESTEFFORT: "koordk8s/kubepods/besteffort",
    }


def test_without_the_flag_pods_stay_under_kubepods(tmp_path: Path) -> None:
    store = store_from_flags(f"--cgroup-root-dir={tmp_path}")
    KubeletPodSync(store, list).reconcile([BE_POD, G_POD])
    be, g = store.pod(KEY_PREFIX + UID_BE), store.pod(KEY_PREFIX + UID_G)
    assert be is not None and g is not None
    assert be.request.cgroup_dir == f"kubepods/besteffort/pod{UID_BE}"
    assert g.containers["c-g"].cgroup_dir == f"kubepods/pod{UID_G}/c-g"


def test_the_systemd_layout_ignores_the_cgroup_kube_dir() -> None:
    """As Koordinator's systemd formatter: kubepods.slice/ whatever the kube dir."""
    store = store_from_flags("--cgroup-driver=systemd", "--cgroup-kube-dir=koordk8s/kubepods/")
    KubeletPodSync(store, list).reconcile([G_POD])
    g = store.pod(KEY_PREFIX + UID_G)
    assert g is not None
    assert g.request.cgroup_dir == f"kubepods.slice/kubepods-pod{UID_G.replace('-', '_')}.slice"


@pytest.mark.parametrize(
    ("resources", "init", "directory"),
    [
        pytest.param(
            {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1000m", "memory": "1Gi"},
            },
            [],
            "kubepods",
            id="1-equals-1000m-guaranteed",
        ),
        pytest.param(
            {"limits": {"cpu": "1", "memory": "1Gi"}},
            [{"name": "init", "resources": {"requests": {"cpu": "2"}}}],
            "kubepods/burstable",
            id="unlimited-init-container-burstable",
        ),
        pytest.param(
            {"requests": {"ephemeral-storage": "1Gi"}}, [], "kubepods/besteffort", id="no-cpu"
        ),
    ],
)
def test_pods_without_a_status_qos_class_get_kubernetes_qos_from_their_quantities(
    resources: dict[str, Any], init: list[dict[str, Any]], directory: str
) -> None:
    listed = pod(UID_LS, "web", "", {"app": "c-ls"}, resources=resources)
    listed["spec"]["initContainers"] = init
    store = PodStore()
    KubeletPodSync(store, list).reconcile([listed])
    known = store.pod(KEY_PREFIX + UID_LS)
    assert known is not None
    assert known.request.cgroup_dir == f"{directory}/pod{UID_LS}"


def test_a_pod_whose_qos_cannot_be_worked_out_is_left_to_nri() -> None:
    listed = pod(UID_LS, "web", "", {"app": "c-ls"}, resources={"limits": {"cpu": "lots"}})
    store = PodStore()
    KubeletPodSync(store, list).reconcile([listed])
    assert store.pod(KEY_PREFIX + UID_LS) is None


def test_known_pod_is_enriched_not_duplicated(kubelet: FakeKubelet) -> None:
    store = PodStore()
    nri_pod(store)
    kubelet.reply = {"items": [NRI_POD]}
    sync = http_sync(store, kubelet)
    result = asyncio.run(sync.sync_once())
    assert result is not None and (result.added, result.enriched) == (0, 1)
    assert len(store) == 1
    known = store.pod("sandbox-3")
    assert known is not None and set(known.containers) == {"c-n1", "c-n2"}
    assert known.containers["c-n2"].cgroup_dir == f"kubepods/burstable/pod{UID_NRI}/c-n2"
    # NRI's own container keeps NRI's data
    assert known.containers["c-n1"].resources.cpu_shares is None
    again = asyncio.run(sync.sync_once())
    assert again is not None and again.enriched == 0


def test_pod_reported_by_nri_later_replaces_the_kubelet_entry() -> None:
    store = PodStore()
    sync = KubeletPodSync(store, list)
    sync.reconcile([NRI_POD])
    assert store.pod(KEY_PREFIX + UID_NRI) is not None
    nri_pod(store)
    result = sync.reconcile([NRI_POD])
    assert store.pod(KEY_PREFIX + UID_NRI) is None and len(store) == 1
    assert result.removed == 0 and result.enriched == 1


def test_disappearing_pod_removed_only_when_kubelet_only(kubelet: FakeKubelet) -> None:
    store = PodStore()
    nri_pod(store)
    kubelet.reply = {"items": [NRI_POD, BE_POD, LS_POD]}
    sync = http_sync(store, kubelet)
    asyncio.run(sync.sync_once())
    assert len(store) == 3
    kubelet.reply = {"items": [LS_POD]}  # BE and the NRI pod are gone from the kubelet
    result = asyncio.run(sync.sync_once())
    assert result is not None and result.removed == 1
    assert store.pod(KEY_PREFIX + UID_BE) is None
    known = store.pod("sandbox-3")
    assert known is not None  # NRI decides about its pods
    assert set(known.containers) == {"c-n1"}  # the container only the kubelet reported left
    finished = dict(LS_POD, status=dict(LS_POD["status"], phase="Succeeded"))
    kubelet.reply = {"items": [finished]}
    result = asyncio.run(sync.sync_once())
    assert result is not None and result.removed == 1
    assert sync.totals.removed == 2 and sync.totals.added == 2


@pytest.mark.parametrize("failure", ["500", "garbage", "timeout", "empty"])
def test_failure_keeps_the_last_good_list_and_logs_once(
    kubelet: FakeKubelet, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet.reply = {"items": [BE_POD]}
    store = PodStore()
    sync = http_sync(store, kubelet, timeout=0.3)
    asyncio.run(sync.sync_once())
    if failure == "500":
        kubelet.status = 500
    elif failure == "garbage":
        kubelet.reply = b"{not json"
    elif failure == "timeout":
        kubelet.delay = 0.6
    else:
        kubelet.reply = {"items": []}
    with caplog.at_level(logging.WARNING, logger="koordlet.cluster.kubelet"):
        assert asyncio.run(sync.sync_once()) is None
        assert asyncio.run(sync.sync_once()) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert sync.failures == 2 and sync.last_pods == [BE_POD]
    assert store.pod(KEY_PREFIX + UID_BE) is not None  # nothing removed
    kubelet.status, kubelet.delay, kubelet.reply = 200, 0.0, {"items": [BE_POD]}
    assert asyncio.run(sync.sync_once()) is not None and sync.last_error is None


def test_a_node_not_known_yet_is_waited_for_quietly_then_a_missing_address_warns(
    kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture
) -> None:
    """On a real cluster koordlet's first list runs before the Node informer's first answer:
    that is logged at INFO; a known Node without the address is a warning."""
    kubelet.reply = {"items": [BE_POD]}
    node: dict[str, object] = {}
    client = KubeletClient(lambda: resolve_endpoint(node), timeout=2.0)
    sync = KubeletPodSync(PodStore(), client.get_pods)
    with caplog.at_level(logging.INFO, logger="koordlet.cluster.kubelet"):
        assert asyncio.run(sync.sync_once()) is None
        assert asyncio.run(sync.sync_once()) is None
        node.update({"status": {"addresses": [{"type": "Hostname", "address": "n7"}]}})
        assert asyncio.run(sync.sync_once()) is None
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in levels] == [logging.INFO, logging.WARNING], levels
    assert "not known yet" in levels[0][1] and "no InternalIP address" in levels[1][1]
    assert sync.failures == 3 and sync.last_pods is None


def test_read_only_port_zero_uses_the_authenticated_port_with_the_token(
    tmp_path: Path,
) -> None:
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    kubelet = FakeKubelet(tls=server_tls)
    try:
        kubelet.reply = {"items": [BE_POD]}
        token = tmp_path / "token"
        token.write_text("sa-token\n")
        endpoint = resolve_endpoint(
            node(0, https_port=kubelet.port), insecure_tls=True, read_only_port=0
        )
        assert endpoint == KubeletEndpoint("https", "127.0.0.1", kubelet.port)
        # Koordinator's default: the serving certificate is not verified (self-signed here)
        pods = KubeletClient(lambda: endpoint, token_file=token).get_pods()
        assert [p["metadata"]["uid"] for p in pods] == [UID_BE]
        assert kubelet.headers[-1]["Authorization"] == "Bearer sa-token"
        ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        verified = KubeletClient(lambda: endpoint, token_file=token, ca_file=ca_file)
        assert len(verified.get_pods()) == 1
    finally:
        kubelet.close()


def kubeconfig_of(path: Path, user: dict[str, Any]) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://10.9.8.7:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))  # fmt: skip
    return path


def test_with_a_kubeconfig_the_kubelet_is_asked_with_its_users_certificate_or_token(
    tmp_path: Path,
) -> None:
    """Koordinator gives the kubelet stub its REST config: out of a pod (--kubeconfig), the
    kubelet sees that file's user, not a service account this process does not have."""
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    server_tls.verify_mode = ssl.CERT_REQUIRED  # the kubelet's x509 authentication
    ca.configure_trust(server_tls)
    kubelet = FakeKubelet(tls=server_tls)
    try:
        kubelet.reply = {"items": [BE_POD]}
        endpoint = KubeletEndpoint("https", "127.0.0.1", kubelet.port)
        with pytest.raises(KubeletError):  # no client certificate: the handshake is refused
            KubeletClient(lambda: endpoint, token_file=None).get_pods()
        leaf = ca.issue_cert("admin-7c1f")
        with_cert = kubeconfig_of(tmp_path / "cert.kubeconfig", {
            "client-certificate-data": base64.b64encode(leaf.cert_chain_pems[0].bytes()).decode(),
            "client-key-data": base64.b64encode(leaf.private_key_pem.bytes()).decode(),
        })  # fmt: skip
        pods = KubeletClient.for_kubeconfig(lambda: endpoint, with_cert).get_pods()
        assert [p["metadata"]["uid"] for p in pods] == [UID_BE]
        assert "Authorization" not in kubelet.headers[-1]

        (tmp_path / "token").write_text("file-token-31\n")
        leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "leaf.crt"))
        leaf.private_key_pem.write_to_path(str(tmp_path / "leaf.key"))
        files = {"client-certificate": "leaf.crt", "client-key": "leaf.key"}  # relative paths
        for user, sent in (({"token": "inline-token-17"}, "inline-token-17"),
                           ({"tokenFile": "token"}, "file-token-31")):  # fmt: skip
            config = kubeconfig_of(tmp_path / "t.kubeconfig", {**files, **user})
            assert len(KubeletClient.for_kubeconfig(lambda: endpoint, config).get_pods()) == 1
            assert kubelet.headers[-1]["Authorization"] == f"Bearer {sent}"
    finally:
        kubelet.close()


def test_endpoint_choice() -> None:
    n = node(0, https_port=10250)
    assert resolve_endpoint(n).pods_url == "https://127.0.0.1:10250/pods/"
    assert resolve_endpoint(n, insecure_tls=True).pods_url == "http://127.0.0.1:10255/pods/"
    assert resolve_endpoint(n, preferred_address_type="Hostname").host == "n1"
    with pytest.raises(KubeletError):
        resolve_endpoint(n, preferred_address_type="ExternalIP")


def test_flags_and_defaults() -> None:
    config = config_from_args(build_parser().parse_args([]))
    assert config.kubelet_sync_interval == 10.0 and config.kubelet_sync_timeout == 3.0
    assert config.kubelet_read_only_port == 10255 and not config.kubelet_insecure_tls
    assert config.kubelet_preferred_address_type == "InternalIP"
    assert config.kubelet_ca_file is None
    args = [
        "--kubelet-insecure-tls=true",
        "--kubelet-read-only-port=0",
        "--kubelet-sync-interval=0",
    ]
    config = config_from_args(build_parser().parse_args(args))
    assert config.kubelet_insecure_tls and config.kubelet_read_only_port == 0
    assert config.kubelet_sync_interval == 0


# -- what only the spec says: priority and memory requests ------------------------------------


def test_spec_facts_priority_and_memory_requests() -> None:
    listed = pod(UID_LS, "web", "Burstable", {"app": "c-ls", "side": "c-s"})
    listed["spec"] = {
        "priority": 7321,
        "containers": [
            {"name": "app", "resources": {"requests": {"memory": "1500Mi"}}},
            # no request: the API server would have defaulted it from the limit
            {"name": "side", "resources": {"limits": {"memory": "0.5Gi"}}},
        ],
        # an init step larger than the app containers together: the pod's request is its size
        "initContainers": [{"name": "warm", "resources": {"requests": {"memory": "3Gi"}}}],
    }

    facts = spec_facts(listed)

    assert facts.priority == 7321
    assert facts.container_memory_requests == {
        "app": 1500 << 20,
        "side": 1 << 29,
        "warm": 3 << 30,
    }
    assert facts.memory_request == 3 << 30


def test_spec_facts_with_pod_level_resources_and_bad_values() -> None:
    listed = pod(UID_LS, "web", "Burstable", {"app": "c-ls"})
    listed["spec"] = {
        "priority": "high",  # not an integer: unknown
        "resources": {"requests": {"memory": "777Mi"}},
        "containers": [{"name": "app", "resources": {"requests": {"memory": "lots"}}}],
    }

    facts = spec_facts(listed)

    assert facts.priority is None
    assert facts.container_memory_requests == {"app": 0}
    assert facts.memory_request == 0  # the spec does not parse: nothing is protected


def test_nri_pods_get_the_kubelets_spec_facts_and_keep_them_for_later_events() -> None:
    store = PodStore()
    nri_pod(store)
    changes: list[int] = []
    sync = KubeletPodSync(store, list, on_change=lambda: changes.append(1))
    listed = pod(
        UID_NRI,
        "known",
        "Burstable",
        {"app": "c-n1"},
        resources={"requests": {"memory": "300Mi"}},
    )

    sync.reconcile([listed])

    known = store.pod("sandbox-3")
    assert known is not None and known.request.spec is not None
    assert known.request.spec.priority == 5500 and known.request.priority == 5500
    assert known.request.spec.memory_request == 300 << 20
    assert known.containers["c-n1"].pod.spec == known.request.spec  # containers see it too
    assert changes  # the reconciler is woken to apply memory QoS from the real request
    # NRI reports the pod again (an update): the facts stay with it
    nri_pod(store)
    again = store.pod("sandbox-3")
    assert again is not None and again.request.spec == known.request.spec
    # the same list again changes nothing
    changes.clear()
    sync.reconcile([listed])
    assert changes == []


# -- koordlet_kubelet_request_duration_seconds -----------------------------------------------


def kubelet_sample(metrics: KoordletMetrics, suffix: str, code: str, **extra: str) -> float | None:
    labels = {"node": "n1", "verb": "get", "path": "/pods/", "code": code, **extra}
    return metrics.registry.get_sample_value(
        f"koordlet_kubelet_request_duration_seconds{suffix}", labels
    )


def metered_client(metrics: KoordletMetrics, port: int, **kwargs: Any) -> KubeletClient:
    endpoint = KubeletEndpoint("http", "127.0.0.1", port)
    return KubeletClient(
        lambda: endpoint, token_file=None, observe=metrics.observe_kubelet, **kwargs
    )


def test_kubelet_requests_are_counted_by_status_with_their_duration(
    kubelet: FakeKubelet,
) -> None:
    metrics = KoordletMetrics("n1")
    ticks = iter([10.0, 10.02, 20.0, 23.0])  # 20 ms, then 3 s
    client = metered_client(metrics, kubelet.port, clock=lambda: next(ticks))
    kubelet.reply = {"items": [BE_POD]}
    assert len(client.get_pods()) == 1
    kubelet.status = 500
    with pytest.raises(KubeletError, match="HTTP 500"):
        client.get_pods()

    assert kubelet_sample(metrics, "_count", "200") == 1
    assert kubelet_sample(metrics, "_bucket", "200", le="0.016") == 0
    assert kubelet_sample(metrics, "_bucket", "200", le="0.064") == 1
    assert kubelet_sample(metrics, "_count", "500") == 1
    assert kubelet_sample(metrics, "_sum", "500") == pytest.approx(3.0)
    assert kubelet_sample(metrics, "_bucket", "500", le="1.024") == 0
    assert kubelet_sample(metrics, "_bucket", "500", le="4.096") == 1


def test_a_kubelet_that_does_not_answer_is_counted_as_error() -> None:
    metrics = KoordletMetrics("n1")
    with socket.socket() as closed:  # bound, not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        client = metered_client(metrics, closed.getsockname()[1], timeout=1.0)
        with pytest.raises(KubeletError) as err:
            client.get_pods()
    assert err.value.kind == "unreachable"
    assert kubelet_sample(metrics, "_count", "error") == 1
    assert kubelet_sample(metrics, "_count", "200") is None
