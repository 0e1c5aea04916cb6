"""koordlet's HTTP API, the NodeMetric report and koordctl's tables, on a cache filled by hand."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import koordctl as ctl
from koordapi import keys
from koordapi.duration import format_go_duration
from koordlet.executor import Executor
from koordlet.metriccache import MetricCache, Sample
from koordlet.metrics import KoordletMetrics
from koordlet.nodemetric import build_status
from koordlet.qosmanager.audit import Action, AuditTrail
from koordlet.server import StatusServer, is_loopback
from koordlet.states.pods import PodStore
from koordlet.states.topology import Topology
from koordlet.statusapi import KoordletViews
from nri_plugin import api
from runtimehooks.rules import KernelFeatures

NOW = 1_800_000_000.0


def store() -> PodStore:
    pods = PodStore()
    for uid, qos in (("u-web", "LS"), ("u-job", "BE")):
        pod = api.PodSandbox(id=uid, name=uid[2:], uid=uid, namespace="default")
        pod.labels[keys.LABEL_QOS_CLASS] = qos
        pod.linux.cgroup_parent = f"/kubepods/pod{uid}"
        pods.put_pod(pod)
    return pods


def cache() -> MetricCache:
    c = MetricCache()
    samples = []
    for i in range(300):  # five minutes, one sample a second
        ts = NOW - 299 + i
        samples += [
            Sample("node_cpu_usage", {}, ts, 1.0 + (i % 10) / 10),  # 1.0 .. 1.9
            Sample("node_memory_usage", {}, ts, 4 << 30),
            Sample("sys_cpu_usage", {}, ts, 0.25),
            Sample("sys_memory_usage", {}, ts, 1 << 30),
            Sample("pod_cpu_usage", {"pod_uid": "u-web"}, ts, 0.5),
            Sample("pod_memory_usage", {"pod_uid": "u-web"}, ts, 256 << 20),
            Sample("pod_cpu_usage", {"pod_uid": "u-job"}, ts, 0.75),
            Sample("pod_memory_usage", {"pod_uid": "u-job"}, ts, 512 << 20),
        ]
    c.append(samples)
    return c


def test_node_metric_report_has_koordinators_shape_and_values() -> None:
    status = build_status(cache(), store(), NOW, durations=(300,))

    assert status["updateTime"] == "2027-01-15T08:00:00Z"
    node = status["nodeMetric"]
    assert node["nodeUsage"] == {"resources": {"cpu": "1450m", "memory": str(4 << 30)}}
    assert node["systemUsage"]["resources"]["cpu"] == "250m"
    (five_minutes,) = node["aggregatedNodeUsages"]
    assert five_minutes["duration"] == "5m0s"
    # 30 samples of each of 1.0 .. 1.9; index int(300 * 0.95) - 1 = 284 falls in the 1.9s
    assert five_minutes["usage"]["p95"]["resources"]["cpu"] == "1900m"
    by_name = {p["name"]: p for p in status["podsMetric"]}
    assert by_name["job"]["qos"] == "BE" and by_name["job"]["priority"] == "koord-batch"
    assert by_name["web"]["podUsage"]["resources"] == {"cpu": "500m", "memory": str(256 << 20)}


def test_format_go_duration_is_gos() -> None:
    assert [format_go_duration(s) for s in (300, 600, 1800, 3900)] == [
        "5m0s",
        "10m0s",
        "30m0s",
        "1h5m0s",
    ]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[StatusServer]:
    (tmp_path / "cpu" / "kubepods" / "podu-web").mkdir(parents=True)
    (tmp_path / "cpu" / "kubepods" / "podu-web" / "cpu.shares").write_text("512\n")
    c = cache()
    views = KoordletViews(
        node_name="node-1",
        pods=store(),
        cache=c,
        executor=Executor(tmp_path),
        topology=Topology(frozenset({0, 1}), {0: frozenset({0, 1})}, {0: 0}, 8 << 30),
        kernel=KernelFeatures(cpu_idle=True),
        health=lambda: {"node": {"errors": 0}},
        clock=lambda: NOW + 1,
    )
    srv = StatusServer("127.0.0.1", 0, KoordletMetrics("node-1").registry, views)
    srv.start()
    yield srv
    srv.stop()


def get(srv: StatusServer, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{path}", timeout=5) as response:
        return json.loads(response.read())


def test_api_serves_node_pods_query_and_metrics(server: StatusServer) -> None:
    node = get(server, "/api/v1/node")
    assert (node["name"], node["cpus"], node["kernel"]["group_identity"]) == (
        "node-1",
        2,
        "cpu.idle",
    )
    assert node["usage"]["memory"] == 4 << 30

    pods = {p["name"]: p for p in get(server, "/api/v1/pods")}
    assert pods["web"]["qos"] == "LS"
    assert pods["web"]["applied"]["cpu.shares"] == 512
    assert pods["job"]["usage"]["cpu"] == 0.75

    result = get(server, "/api/v1/query?metric=pod_cpu_usage&window=5m&agg=p95&label.pod_uid=u-job")
    assert result == [
        {"metric": "pod_cpu_usage", "labels": {"pod_uid": "u-job"}, "p95": 0.75, "count": 300}
    ]

    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
        assert b"koordlet_start_time" in response.read()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/api/v1/query?window=5m", "metric is required", id="no-metric"),
        pytest.param("/api/v1/query?metric=x&window=5y", "not a duration", id="bad-window"),
        pytest.param("/api/v1/query?metric=x&agg=median", "agg 'median'", id="bad-agg"),
    ],
)
def test_bad_queries_get_a_400_with_the_reason(
    server: StatusServer, path: str, message: str
) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        get(server, path)
    assert err.value.code == 400
    assert message in json.loads(err.value.read())["error"]


def test_koordctl_top_and_pods_render_from_the_api(
    server: StatusServer, capsys: pytest.CaptureFixture[str]
) -> None:
    addr = f"127.0.0.1:{server.port}"

    assert ctl.main(["top", "--once", "--addr", addr]) == 0
    top = capsys.readouterr().out
    assert "NODE node-1  CPU " in top
    lines = top.splitlines()
    ls_row = next(line for line in lines if line.startswith("LS ") and "default/web" in line)
    assert "0.50" in ls_row and "256Mi" in ls_row
    assert any(line.strip().startswith("= BE total") and "0.75" in line for line in lines)
    assert lines.index(ls_row) < next(i for i, line in enumerate(lines) if line.startswith("BE "))

    assert ctl.main(["pods", "--addr", addr]) == 0
    pods_table = capsys.readouterr().out
    assert any("default/web" in line and "512" in line for line in pods_table.splitlines())


def test_koordctl_says_clearly_when_koordlet_is_not_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ctl.main(["top", "--once", "--addr", "127.0.0.1:1"]) == 1
    assert "cannot reach koordlet at 127.0.0.1:1" in capsys.readouterr().err


# -- explain ----------------------------------------------------------------------------------


def explained_audit() -> AuditTrail:
    """An evicted BE pod, a BE-wide cpuset, an LS-wide schemata, an action on web itself."""
    audit = AuditTrail()
    audit.record(
        Action(
            NOW - 5,
            "CPUSuppress",
            "cpuset",
            "kubepods/besteffort",
            "0-3",
            "suppress: capacity 2 x 65% - LS usage 0.50 = 0.80 cores",
            scope="BE",
        )
    )
    audit.record(
        Action(
            NOW - 4,
            "ResctrlReconcile",
            "schemata",
            "resctrl/LS",
            "L3:0=fff",
            "LS class cat 0-100%",
            scope="LS",
        )
    )
    audit.record(
        Action(
            NOW - 3,
            "MemoryEvict",
            "evict",
            "default/job",
            "BEMemoryEvict",
            "node memory 80% >= threshold 70%: release 80% - 68% of 8.0 GiB = 983 MiB",
            pod_uid="u-job",
        )
    )
    audit.record(
        Action(
            NOW - 2,
            "CgroupReconcile",
            "memory.min",
            "kubepods/podu-web",
            "0",
            "memoryQOS off",
            pod_uid="u-web",
        )
    )
    audit.status("MemoryEvict", "node memory 80% >= threshold 70%", NOW - 3)
    audit.status("CPUSuppress", "BE gets 0-3", NOW - 5)
    return audit


def explain_views(tmp_path: Path, audit: AuditTrail) -> KoordletViews:
    pods = store()
    other = api.PodSandbox(id="u-web2", name="web", uid="u-web2", namespace="shop")
    other.linux.cgroup_parent = "/kubepods/besteffort/podu-web2"
    pods.put_pod(other)
    return KoordletViews(
        node_name="node-1",
        pods=pods,
        cache=cache(),
        executor=Executor(tmp_path),
        topology=Topology(frozenset({0, 1}), {0: frozenset({0, 1})}, {0: 0}, 8 << 30),
        kernel=KernelFeatures(),
        health=dict,
        audit=audit,
        clock=lambda: NOW + 1,
    )


def test_explain_finds_a_pod_by_uid_namespace_name_or_name(tmp_path: Path) -> None:
    views = explain_views(tmp_path, explained_audit())

    for key in ("u-job", "default/job", "job"):
        found = views.explain(key)
        assert found is not None, key
        assert (found["uid"], found["name"], found["qos"]) == ("u-job", "job", "BE")
    shop = views.explain("shop/web")
    assert shop is not None and shop["uid"] == "u-web2"
    default = views.explain("default/web")
    assert default is not None and default["uid"] == "u-web"
    assert views.explain("nope") is None
    assert views.explain("shop/job") is None


def test_explain_lists_the_pods_actions_and_those_of_its_class_only(tmp_path: Path) -> None:
    views = explain_views(tmp_path, explained_audit())

    job = views.explain("job")
    assert job is not None
    assert [(a["strategy"], a["kind"]) for a in job["actions"]] == [
        ("CPUSuppress", "cpuset"),
        ("MemoryEvict", "evict"),
    ]
    evict = job["actions"][1]
    assert evict["pod_uid"] == "u-job" and "983 MiB" in evict["reason"]
    assert job["strategies"] == {
        "CPUSuppress": {"ts": NOW - 5, "text": "BE gets 0-3"},
        "MemoryEvict": {"ts": NOW - 3, "text": "node memory 80% >= threshold 70%"},
    }

    # shop/web has no class label but is Kubernetes BestEffort: the BE cpuset is about it too
    shop = views.explain("shop/web")
    assert shop is not None and shop["qos"] == "none"
    assert [a["kind"] for a in shop["actions"]] == ["cpuset"]

    web = views.explain("default/web")
    assert web is not None
    assert [(a["strategy"], a["target"]) for a in web["actions"]] == [
        ("ResctrlReconcile", "resctrl/LS"),
        ("CgroupReconcile", "kubepods/podu-web"),
    ]


@pytest.fixture
def explain_server(tmp_path: Path) -> Iterator[StatusServer]:
    views = explain_views(tmp_path, explained_audit())
    srv = StatusServer("127.0.0.1", 0, KoordletMetrics("node-1").registry, views)
    srv.start()
    yield srv
    srv.stop()


def test_explain_api(explain_server: StatusServer) -> None:
    found = get(explain_server, "/api/v1/explain?pod=default%2Fjob")
    assert found["uid"] == "u-job"
    assert [a["kind"] for a in found["actions"]] == ["cpuset", "evict"]

    with pytest.raises(urllib.error.HTTPError) as err:
        get(explain_server, "/api/v1/explain?pod=nope")
    assert err.value.code == 404
    assert json.loads(err.value.read()) == {"error": "no pod 'nope' on this node"}

    for path in ("/api/v1/explain", "/api/v1/explain?pod="):
        with pytest.raises(urllib.error.HTTPError) as err:
            get(explain_server, path)
        assert err.value.code == 400
        assert "pod is required" in json.loads(err.value.read())["error"]


def test_koordctl_explain_renders_the_reasons(
    explain_server: StatusServer, capsys: pytest.CaptureFixture[str]
) -> None:
    addr = f"127.0.0.1:{explain_server.port}"

    assert ctl.main(["explain", "default/job", "--addr", addr]) == 0
    out = capsys.readouterr().out
    assert "pod default/job (uid u-job)" in out
    assert "because node memory 80% >= threshold 70%: release 80% - 68% of 8.0 GiB" in out
    assert "MemoryEvict: node memory 80% >= threshold 70%" in out
    assert "resctrl/LS" not in out

    assert ctl.main(["explain", "u-job", "--addr", addr, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "job"

    assert ctl.main(["explain", "nope", "--addr", addr]) == 1
    assert "no pod 'nope' on this node" in capsys.readouterr().err


def test_idle_and_excess_connections_cannot_wear_the_server_down(tmp_path: Path) -> None:
    refused: list[int] = []
    srv = StatusServer(
        "127.0.0.1",
        0,
        KoordletMetrics("node-1").registry,
        explain_views(tmp_path, explained_audit()),
        max_connections=4,
        idle_seconds=0.5,
        on_refused=lambda: refused.append(1),
    )
    srv.start()
    try:
        # A slowloris: connections that never send a byte. Four take the slots ...
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(4)]
        # ... (the server accepts in the order of connection) and each further one takes the
        # place of the one that waited longest, which is closed unserved and counted; the last
        # four are let go after idle_seconds (recv sees the end, not a 10 s wait).
        flood = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(40)]
        assert [s.recv(1) for s in idle] == [b""] * 4
        assert [s.recv(1) for s in flood] == [b""] * 40
        assert len(refused) == 40
        # A real client is served.
        url = f"http://127.0.0.1:{srv.port}/healthz"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.read() == b"ok\n"
    finally:
        for s in [*idle, *flood]:
            s.close()
        srv.stop()


def test_idle_and_trickling_connections_in_every_slot_do_not_keep_a_client_out(
    tmp_path: Path,
) -> None:
    refused: list[int] = []
    srv = StatusServer(
        "127.0.0.1",
        0,
        KoordletMetrics("node-1").registry,
        explain_views(tmp_path, explained_audit()),
        max_connections=4,
        idle_seconds=30,  # far longer than the test: the slots would stay taken
        on_refused=lambda: refused.append(1),
    )
    srv.start()
    held: list[socket.socket] = []

    def connect(request_start: bytes = b"") -> None:
        # connections are accepted in the order they are made (the listen queue is FIFO)
        held.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        held[-1].sendall(request_start)

    url = f"http://127.0.0.1:{srv.port}/healthz"

    def probe() -> None:
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.read() == b"ok\n"

    try:
        for start in (b"GET /metrics HTTP/1.1\r\nHost: x", b"GET /met", b"", b""):
            connect(start)  # the start of a request and no more, or nothing at all
        for _ in range(3):
            probe()  # served at once though every slot was held
            connect()  # and the slots are full again
        # Served, so every connection made before it has been accepted and placed. A probe's
        # slot may still be in use when the next connection comes (that one then makes room
        # itself), so three or more were closed; always the ones that waited longest.
        probe()
        closed = len(refused)
        assert 3 <= closed < len(held)
        assert [s.recv(1) for s in held[:closed]] == [b""] * closed
        for s in held[closed:]:  # the others still hold their slots: nothing to read, no EOF
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
    finally:
        for s in held:
            s.close()
        srv.stop()


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.7", False),
        ("::ffff:10.0.0.7", False),
        ("fe80::1%eth0", False),
        ("", False),
    ],
)
def test_loopback_clients_are_told_apart(host: str, local: bool) -> None:
    assert is_loopback(host) is local


@pytest.mark.parametrize("remote_allowed", [False, True])
def test_the_json_api_answers_remote_clients_only_when_allowed(
    tmp_path: Path, remote_allowed: bool
) -> None:
    srv = StatusServer(
        "127.0.0.1",
        0,
        KoordletMetrics("node-1").registry,
        explain_views(tmp_path, explained_audit()),
        api_remote=remote_allowed,
        is_local=lambda host: False,  # every client counts as remote
    )
    srv.start()
    try:
        for path in ("/metrics", "/healthz"):  # Prometheus and the probes, from anywhere
            url = f"http://127.0.0.1:{srv.port}{path}"
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.status == 200
        if remote_allowed:
            assert get(srv, "/api/v1/explain?pod=default%2Fjob")["uid"] == "u-job"
        else:
            with pytest.raises(urllib.error.HTTPError) as err:
                get(srv, "/api/v1/explain?pod=default%2Fjob")
            assert err.value.code == 403
            assert "--status-api-remote" in json.loads(err.value.read())["error"]
    finally:
        srv.stop()
