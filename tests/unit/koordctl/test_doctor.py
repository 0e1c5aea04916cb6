"""koordctl doctor: each check on a fake node tree, real sockets and a fake status server, and
once against this machine."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

import koordctl as ctl
from koordapi.features import NOT_IMPLEMENTED, FeatureGates
from koordctl import doctor
from koordctl.doctor import Check, DoctorConfig, Status
from koordlet.cli import build_parser
from koordlet.collectors import gpu
from koordlet.collectors.base import CollectorUnavailable
from koordlet.executor import coresched
from koordlet.metrics import KoordletMetrics
from tests.unit.koordlet.collectors import fake_nvml
from tests.unit.koordlet.collectors.fake_nvml import FakeGPU, FakeNVML
from tests.unit.koordlet.collectors.test_rdma import PF0, FakeSysfs

REAL_CONTAINERD = Path(__file__).resolve().parents[3] / ".cache/containerd/usr/bin/containerd"
CHECK_NAMES = [name for name, _, _ in doctor.CHECKS]
ENABLED = """\
version = 2
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "{socket}"
  plugin_path = "{plugins}"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def fake_containerd(folder: Path, version: str = "1.7.24~ds1") -> str:
    """An executable that answers --version like Debian's containerd."""
    script = write(
        folder / "containerd",
        f"#!/bin/sh\necho 'containerd github.com/containerd/containerd {version} {version}-6'\n",
    )
    script.chmod(0o755)
    return str(script)


def no_nvml() -> gpu.NVML:
    raise CollectorUnavailable(gpu.INSTALL_HINT)


def no_counters(config: int, pid: int, cpu: int, flags: int) -> int:
    raise OSError(errno.ENOENT, "No such file or directory")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder with a short path: a Unix socket path has at most 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def config(tmp_path: Path, short_dir: Path) -> DoctorConfig:
    """A node tree with nothing in it, containerd 1.7.24, no koordlet, no GPU, no counters."""
    for folder in ("proc", "sys", "cgroup", "modules"):
        (tmp_path / folder).mkdir()
    return DoctorConfig(
        proc_root=tmp_path / "proc",
        sys_root=tmp_path / "sys",
        cgroup_root=tmp_path / "cgroup",
        containerd_config=tmp_path / "etc/containerd/config.toml",
        containerd_bin=fake_containerd(tmp_path / "bin"),
        addr=f"127.0.0.1:{closed_port()}",
        modules_root=tmp_path / "modules",
        timeout=1.0,
        perf_open=no_counters,
        load_nvml=no_nvml,
        import_bcc=lambda: None,
        euid=lambda: 0,
    )


def enable_nri(config: DoctorConfig, socket_path: Path, extra: str = "") -> Path:
    plugins = config.containerd_config.parent / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    write(
        config.containerd_config,
        ENABLED.format(socket=socket_path, plugins=plugins) + extra,
    )
    return plugins


# -- containerd -----------------------------------------------------------------------------


def test_containerd_without_an_nri_section_fails_with_the_section_to_add(
    config: DoctorConfig,
) -> None:
    write(config.containerd_config, "version = 2\n")

    check = doctor.check_containerd(config)

    assert check.status is Status.FAIL
    assert "NRI disabled" in check.finding and "1.7.24" in check.finding
    assert '[plugins."io.containerd.nri.v1.nri"]' in check.fix
    assert "disable = false" in check.fix
    assert "koordctl install --systemd" in check.fix


def test_containerd_without_a_config_file_fails_like_containerds_defaults(
    config: DoctorConfig,
) -> None:
    check = doctor.check_containerd(config)

    assert check.status is Status.FAIL
    assert "defaults to off" in check.finding
    assert f"{config.containerd_config} (missing)" in check.fix


def test_containerd_with_nri_disabled_explicitly_names_the_setting(config: DoctorConfig) -> None:
    write(
        config.containerd_config,
        'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n',
    )

    check = doctor.check_containerd(config)

    assert check.status is Status.FAIL
    assert "disable = true" in check.finding
    assert "disable = false" in check.fix


def test_disabled_connections_fail_because_they_keep_koordlet_out(
    config: DoctorConfig, short_dir: Path
) -> None:
    plugins = enable_nri(config, short_dir / "nri.sock", "  disable_connections = true\n")

    check = doctor.check_containerd(config)

    assert check.status is Status.FAIL
    assert "disable_connections = true" in check.finding and "#1993" in check.finding
    assert "disable_connections = false" in check.fix
    assert str(plugins) in check.fix


def test_disabled_connections_only_warn_when_koordlet_is_a_preinstalled_plugin(
    config: DoctorConfig, short_dir: Path
) -> None:
    plugins = enable_nri(config, short_dir / "nri.sock", "  disable_connections = true\n")
    write(plugins / "00-koordlet", "#!/bin/sh\n").chmod(0o755)

    check = doctor.check_containerd(config)

    assert check.status is Status.WARN
    assert "00-koordlet" in check.finding
    assert "disable_connections = false" in check.fix


def test_another_preinstalled_plugin_does_not_excuse_disabled_connections(
    config: DoctorConfig, short_dir: Path
) -> None:
    plugins = enable_nri(config, short_dir / "nri.sock", "  disable_connections = true\n")
    write(plugins / "10-ulimit-adjuster", "#!/bin/sh\n")

    assert doctor.check_containerd(config).status is Status.FAIL


def test_an_invalid_config_fails_with_the_parsers_reason(config: DoctorConfig) -> None:
    write(config.containerd_config, "version = 2\n[plugins\n")

    check = doctor.check_containerd(config)

    assert check.status is Status.FAIL
    assert "not valid TOML" in check.finding
    assert str(config.containerd_config) in check.fix


def test_an_unreadable_config_fails_with_the_os_error(config: DoctorConfig) -> None:
    config.containerd_config.mkdir(parents=True)  # read() of a folder: EISDIR, even as root

    check = doctor.check_containerd(config)

    assert check.status is Status.FAIL
    assert "cannot read" in check.finding and "Is a directory" in check.finding


def test_containerd_before_1_7_has_no_nri(config: DoctorConfig, tmp_path: Path) -> None:
    old = replace(config, containerd_bin=fake_containerd(tmp_path / "old", "1.6.20~ds1"))

    check = doctor.check_containerd(old)

    assert check.status is Status.FAIL
    assert "1.6.20 has no NRI" in check.finding
    assert "1.7" in check.fix


def test_containerd_that_cannot_run_fails(config: DoctorConfig, tmp_path: Path) -> None:
    check = doctor.check_containerd(replace(config, containerd_bin=str(tmp_path / "none")))

    assert check.status is Status.FAIL
    assert "cannot run" in check.finding
    assert "--containerd-bin" in check.fix


def test_containerd_with_nri_and_connections_is_ok(config: DoctorConfig, short_dir: Path) -> None:
    enable_nri(config, short_dir / "nri.sock")

    check = doctor.check_containerd(config)

    assert check == Check(
        "containerd",
        Status.OK,
        f"1.7.24, NRI enabled, connections allowed (socket {short_dir / 'nri.sock'})",
    )


# -- the NRI socket -------------------------------------------------------------------------


def test_a_missing_socket_fails_and_points_at_containerd(
    config: DoctorConfig, short_dir: Path
) -> None:
    enable_nri(config, short_dir / "nri.sock")

    check = doctor.check_nri_socket(config)

    assert check.status is Status.FAIL
    assert check.finding == f"no socket at {short_dir / 'nri.sock'}"
    assert "restart containerd" in check.fix


def test_a_socket_nobody_listens_on_fails(config: DoctorConfig, short_dir: Path) -> None:
    path = short_dir / "nri.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))  # the file stays; nobody accepts

    check = doctor.check_nri_socket(replace(config, nri_socket=path))

    assert check.status is Status.FAIL
    assert "nobody listens" in check.finding
    assert "start containerd" in check.fix


def test_a_file_that_is_not_a_socket_fails(config: DoctorConfig, short_dir: Path) -> None:
    path = write(short_dir / "nri.sock", "")

    check = doctor.check_nri_socket(replace(config, nri_socket=path))

    assert check.status is Status.FAIL
    assert "not a socket" in check.finding
    assert f"remove {path}" in check.fix


def test_a_listening_socket_from_containerds_config_is_ok_and_hears_nothing(
    config: DoctorConfig, short_dir: Path
) -> None:
    path = short_dir / "nri.sock"
    enable_nri(config, path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)

        check = doctor.check_nri_socket(config)

        conn, _ = server.accept()
        with conn:
            conn.settimeout(2)
            assert conn.recv(1) == b""  # the doctor closed without sending a byte
    assert check == Check("nri-socket", Status.OK, f"{path} accepts connections")


# -- koordlet -------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""


@pytest.fixture
def status_server() -> Iterator[tuple[str, Reply]]:
    """A stand-in for koordlet's status server: GET answers with ``reply``."""
    reply = Reply()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", reply
    server.shutdown()
    server.server_close()
    thread.join()


def scrape(connected: float | None) -> bytes:
    """koordlet's real /metrics text, with koordlet_nri_connected set (or never set)."""
    metrics = KoordletMetrics("node-1")
    if connected is not None:
        metrics.nri_connected.labels("node-1").set(connected)
    return generate_latest(metrics.registry)


def test_an_unreachable_koordlet_only_warns(config: DoctorConfig) -> None:
    check = doctor.check_koordlet(config)

    assert check.status is Status.WARN
    assert f"not reachable at {config.addr}" in check.finding
    assert "start koordlet" in check.fix and "--addr" in check.fix


def test_a_registered_koordlet_is_ok(
    config: DoctorConfig, status_server: tuple[str, Reply]
) -> None:
    addr, reply = status_server
    reply.body = scrape(1)

    check = doctor.check_koordlet(replace(config, addr=addr))

    assert check == Check("koordlet", Status.OK, f"running at {addr}, registered over NRI")


def test_a_koordlet_with_gates_turned_on_that_do_nothing_warns_and_names_them(
    config: DoctorConfig, status_server: tuple[str, Reply]
) -> None:
    addr, reply = status_server
    metrics = KoordletMetrics("node-1")
    metrics.nri_connected.labels("node-1").set(1)
    for gate in ("ResctrlCollector", "BlkIOReconcile"):
        metrics.unimplemented_gates.labels("node-1", gate).set(1)
    reply.body = generate_latest(metrics.registry)

    check = doctor.check_koordlet(replace(config, addr=addr))

    assert check.status is Status.WARN
    assert check.finding.endswith("change nothing: BlkIOReconcile, ResctrlCollector")
    assert "--feature-gates" in check.fix


def test_a_koordlet_given_flags_that_do_nothing_warns_and_names_them(
    config: DoctorConfig, status_server: tuple[str, Reply]
) -> None:
    addr, reply = status_server
    metrics = KoordletMetrics("node-1")
    metrics.nri_connected.labels("node-1").set(1)
    for flag in ("pprof-addr", "kube-api-burst"):
        metrics.unimplemented_flags.labels("node-1", flag).set(1)
    reply.body = generate_latest(metrics.registry)

    check = doctor.check_koordlet(replace(config, addr=addr))

    assert check.status is Status.WARN
    assert check.finding.endswith("change nothing here: --kube-api-burst, --pprof-addr")
    assert "koordlet --help" in check.fix


def test_koordlet_says_which_gates_do_nothing_in_help() -> None:
    text = build_parser().format_help()
    assert all(gate in text for gate in NOT_IMPLEMENTED)
    gates = FeatureGates.parse("BlkIOReconcile=true,NodeTopologyReport=false,PSICollector=true")
    assert list(gates.unimplemented()) == ["BlkIOReconcile"]
    assert "NodeTopologyReport" in FeatureGates().unimplemented()  # on by default


@pytest.mark.parametrize(
    ("connected", "said"),
    [
        pytest.param(0, "its NRI connection closed", id="disconnected"),
        pytest.param(None, "never registered", id="never-registered"),
    ],
)
def test_a_running_koordlet_that_is_not_registered_fails(
    config: DoctorConfig, status_server: tuple[str, Reply], connected: float | None, said: str
) -> None:
    addr, reply = status_server
    reply.body = scrape(connected)

    check = doctor.check_koordlet(replace(config, addr=addr))

    assert check.status is Status.FAIL
    assert said in check.finding
    assert "containerd" in check.fix and "nri-socket" in check.fix


def test_no_nri_conflicts_is_ok(config: DoctorConfig, status_server: tuple[str, Reply]) -> None:
    addr, reply = status_server
    reply.body = scrape(1)  # the counter's series are there, all 0

    check = doctor.check_nri_conflicts(replace(config, addr=addr))

    assert check.status is Status.OK
    assert "no container's cgroup differed" in check.finding


def test_nri_conflicts_warn_with_their_resources_and_a_fix(
    config: DoctorConfig, status_server: tuple[str, Reply]
) -> None:
    addr, reply = status_server
    metrics = KoordletMetrics("node-1")
    metrics.nri_conflicts.labels("node-1", "memory_limit").inc(2)
    metrics.nri_conflicts.labels("node-1", "cpuset").inc()
    reply.body = generate_latest(metrics.registry)

    check = doctor.check_nri_conflicts(replace(config, addr=addr))
    text = doctor.render([check])

    assert check.status is Status.WARN
    assert "3 values koordlet asked over NRI" in check.finding
    assert "cpuset 1, memory_limit 2" in check.finding
    assert "koordctl explain POD" in check.fix and "one NRI plugin" in check.fix
    assert text.splitlines()[1].startswith("      fix: koordlet's log names each container")


def test_nri_conflicts_are_not_checked_without_a_koordlet(config: DoctorConfig) -> None:
    check = doctor.check_nri_conflicts(config)  # nothing listens at config.addr

    assert check.status is Status.OK
    assert check.finding.startswith("not checked")


def test_a_status_server_error_fails(
    config: DoctorConfig, status_server: tuple[str, Reply]
) -> None:
    addr, reply = status_server
    reply.status, reply.body = 500, b'{"error": "boom"}'

    check = doctor.check_koordlet(replace(config, addr=addr))

    assert check.status is Status.FAIL
    assert "HTTP 500" in check.finding


# -- cgroups --------------------------------------------------------------------------------


def v2_tree(root: Path) -> None:
    write(root / "cgroup.controllers", "cpuset cpu io memory pids\n")


def v1_tree(root: Path) -> None:
    for controller in ("cpu", "cpuacct", "cpuset", "memory"):
        (root / controller).mkdir(parents=True)


def hybrid_tree(root: Path) -> None:
    v1_tree(root)
    write(root / "unified" / "cgroup.controllers", "")


@pytest.mark.parametrize(
    ("build", "said"),
    [
        pytest.param(v2_tree, "v2 (unified at", id="v2"),
        pytest.param(v1_tree, "v1 (no v2 tree)", id="v1"),
        pytest.param(hybrid_tree, "hybrid (v1 controllers, v2 tree at", id="hybrid"),
    ],
)
def test_the_cgroup_layout_is_named(config: DoctorConfig, build: Any, said: str) -> None:
    build(config.cgroup_root)

    check = doctor.check_cgroup(config)

    assert check.status is Status.OK
    assert check.finding.startswith(said)
    assert "no kubepods yet" in check.finding
    assert "containerd runc: cgroupfs (SystemdCgroup = false)" in check.finding


def test_an_empty_cgroup_root_fails(config: DoctorConfig) -> None:
    check = doctor.check_cgroup(config)

    assert check.status is Status.FAIL
    assert "no cgroup hierarchy" in check.finding
    assert "--cgroup-root-dir" in check.fix


def test_kubepods_for_systemd_and_containerd_on_cgroupfs_fail(config: DoctorConfig) -> None:
    v2_tree(config.cgroup_root)
    (config.cgroup_root / "kubepods.slice").mkdir()

    check = doctor.check_cgroup(config)

    assert check.status is Status.FAIL
    assert "kubepods.slice (systemd driver)" in check.finding
    assert "disagree" in check.finding
    assert "SystemdCgroup = true" in check.fix


def test_kubepods_for_cgroupfs_and_containerd_on_systemd_fail(config: DoctorConfig) -> None:
    hybrid_tree(config.cgroup_root)
    (config.cgroup_root / "cpu" / "kubepods").mkdir()
    write(
        config.containerd_config,
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        "  SystemdCgroup = true\n",
    )

    check = doctor.check_cgroup(config)

    assert check.status is Status.FAIL
    assert "SystemdCgroup = false" in check.fix


def test_an_imported_systemd_cgroup_setting_matching_kubepods_is_ok(config: DoctorConfig) -> None:
    v2_tree(config.cgroup_root)
    (config.cgroup_root / "kubepods.slice").mkdir()
    conf_d = config.containerd_config.parent / "conf.d"
    write(config.containerd_config, 'version = 2\nimports = ["conf.d/*.toml"]\n')
    write(
        conf_d / "10-cgroup.toml",
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        "  SystemdCgroup = true\n",
    )

    check = doctor.check_cgroup(config)

    assert check.status is Status.OK
    assert "kubepods.slice (systemd driver)" in check.finding
    assert "containerd runc: systemd" in check.finding


def test_both_kubepods_layouts_warn(config: DoctorConfig) -> None:
    v2_tree(config.cgroup_root)
    (config.cgroup_root / "kubepods.slice").mkdir()
    (config.cgroup_root / "kubepods").mkdir()

    assert doctor.check_cgroup(config).status is Status.WARN


def test_kubepods_below_the_cgroup_kube_dir_is_the_cgroupfs_driver(config: DoctorConfig) -> None:
    hybrid_tree(config.cgroup_root)
    (config.cgroup_root / "cpu" / "koordk8s" / "kubepods").mkdir(parents=True)
    moved = replace(config, cgroup_kube_dir="/koordk8s/kubepods/")

    assert "no kubepods yet" in doctor.check_cgroup(config).finding  # not where it looks
    check = doctor.check_cgroup(moved)
    assert check.status is Status.OK
    assert "koordk8s/kubepods/ (cgroupfs driver)" in check.finding
    (config.cgroup_root / "cpu" / "kubepods.slice").mkdir()
    both = doctor.check_cgroup(moved)
    assert both.status is Status.WARN
    assert "both kubepods.slice and koordk8s/kubepods/" in both.finding


def test_koordctl_doctor_takes_koordlets_cgroup_kube_dir(
    config: DoctorConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    v2_tree(config.cgroup_root)
    (config.cgroup_root / "koordk8s" / "kubepods").mkdir(parents=True)

    ctl.main([*ctl_args(config), "--cgroup-kube-dir=koordk8s/kubepods/", "--json"])

    report = json.loads(capsys.readouterr().out)
    (cgroup,) = [c for c in report["checks"] if c["name"] == "cgroup"]
    assert "koordk8s/kubepods/ (cgroupfs driver)" in cgroup["finding"]
    with pytest.raises(SystemExit) as exit_:
        ctl.main([*ctl_args(config), "--cgroup-kube-dir=.."])
    assert exit_.value.code == 2
    assert "not a cgroup directory below the hierarchy root" in capsys.readouterr().err


# -- kernel features ------------------------------------------------------------------------


def test_no_group_identity_mechanism_warns_with_its_cost(config: DoctorConfig) -> None:
    v1_tree(config.cgroup_root)

    check = doctor.check_group_identity(config)

    assert check.status is Status.WARN
    assert "GroupIdentity has no effect" in check.finding
    assert "5.15" in check.fix


@pytest.mark.parametrize(
    ("file", "said"),
    [
        pytest.param("cpu.idle", "cpu.idle", id="cpu-idle"),
        pytest.param("cpu.bvt_warp_ns", "cpu.bvt_warp_ns", id="bvt"),
    ],
)
def test_group_identity_mechanisms_are_ok(config: DoctorConfig, file: str, said: str) -> None:
    v1_tree(config.cgroup_root)
    write(config.cgroup_root / "cpu" / "kubepods" / file, "0\n")

    check = doctor.check_group_identity(config)

    assert check.status is Status.OK
    assert check.finding.startswith(said)


def test_cfs_burst_is_found_per_cgroup_version(config: DoctorConfig) -> None:
    v2_tree(config.cgroup_root)
    write(config.cgroup_root / "system.slice" / "cpu.max.burst", "0\n")

    assert doctor.check_cfs_burst(config) == Check("cfs-burst", Status.OK, "cpu.max.burst")


def test_no_cfs_burst_warns(config: DoctorConfig) -> None:
    v1_tree(config.cgroup_root)

    check = doctor.check_cfs_burst(config)

    assert check.status is Status.WARN
    assert "no cpu.cfs_burst_us" in check.finding and "CPUBurst" in check.finding


@pytest.mark.parametrize("supported", [True, False])
def test_core_scheduling_follows_the_prctl_probe(
    config: DoctorConfig, monkeypatch: pytest.MonkeyPatch, supported: bool
) -> None:
    monkeypatch.setattr(coresched, "supported", lambda: supported)

    check = doctor.check_core_sched(config)

    if supported:
        assert check.status is Status.OK
    else:
        assert check.status is Status.WARN
        assert "CoreSched gate has no effect" in check.finding
        assert "CONFIG_SCHED_CORE" in check.fix


def cpuinfo(config: DoctorConfig, flags: str) -> None:
    write(config.proc_root / "cpuinfo", f"processor\t: 0\nflags\t\t: fpu sse2 {flags}\n\n")


def test_resctrl_mounted_is_ok(config: DoctorConfig) -> None:
    cpuinfo(config, "rdt_a cat_l3 mba")
    write(config.sys_root / "fs" / "resctrl" / "schemata", "L3:0=fff\n")

    check = doctor.check_resctrl(config)

    assert check.status is Status.OK
    assert "cat_l3 mba rdt_a" in check.finding


def test_resctrl_unmounted_on_rdt_hardware_says_how_to_mount(config: DoctorConfig) -> None:
    cpuinfo(config, "rdt_a cat_l3")
    write(config.proc_root / "filesystems", "nodev\tcgroup\nnodev\tresctrl\n")

    check = doctor.check_resctrl(config)

    assert check.status is Status.WARN
    assert check.fix.startswith("mount -t resctrl resctrl")


def test_resctrl_missing_from_the_kernel_names_the_config_option(config: DoctorConfig) -> None:
    cpuinfo(config, "cat_l3")
    write(config.proc_root / "filesystems", "nodev\tcgroup\n")

    check = doctor.check_resctrl(config)

    assert check.status is Status.WARN
    assert "CONFIG_X86_CPU_RESCTRL" in check.fix


def test_no_rdt_in_the_cpu_warns_with_its_cost(config: DoctorConfig) -> None:
    cpuinfo(config, "")

    check = doctor.check_resctrl(config)

    assert check.status is Status.WARN
    assert "no RDT" in check.finding and "Resctrl gate" in check.finding


def test_no_psi_warns_and_names_the_boot_option(config: DoctorConfig) -> None:
    check = doctor.check_psi(config)

    assert check.status is Status.WARN
    assert "PSI is off" in check.finding
    assert "psi=1" in check.fix


def test_psi_readable_is_ok(config: DoctorConfig) -> None:
    write(config.proc_root / "pressure" / "cpu", "some avg10=0.00 avg60=0.00 total=0\n")

    assert doctor.check_psi(config).status is Status.OK


def test_no_btf_warns(config: DoctorConfig) -> None:
    check = doctor.check_btf(config)

    assert check.status is Status.WARN
    assert "CONFIG_DEBUG_INFO_BTF" in check.fix


def test_btf_present_is_ok(config: DoctorConfig) -> None:
    write(config.sys_root / "kernel" / "btf" / "vmlinux", "")

    assert doctor.check_btf(config).status is Status.OK


def test_bcc_missing_warns_with_the_loaders_advice(config: DoctorConfig) -> None:
    check = doctor.check_bcc(
        replace(config, import_bcc=lambda: "ModuleNotFoundError: No module named 'bcc'")
    )

    assert check.status is Status.WARN
    assert "No module named 'bcc'" in check.finding and "SchedLatencyCollector" in check.finding
    assert "apt install python3-bpfcc" in check.fix


def test_bcc_without_root_or_headers_says_what_is_missing(config: DoctorConfig) -> None:
    (config.sys_root / "kernel" / "tracing" / "events" / "sched" / "sched_switch").mkdir(
        parents=True
    )

    not_root = doctor.check_bcc(replace(config, euid=lambda: 1000))
    no_headers = doctor.check_bcc(config)

    assert not_root.status is Status.WARN and "not root" in not_root.fix
    assert no_headers.status is Status.WARN and "no kernel headers" in no_headers.fix


def test_bcc_with_everything_the_loader_needs_is_ok(config: DoctorConfig) -> None:
    (config.sys_root / "kernel" / "tracing" / "events" / "sched" / "sched_switch").mkdir(
        parents=True
    )
    (config.modules_root / os.uname().release / "build").mkdir(parents=True)

    assert doctor.check_bcc(config).status is Status.OK


def test_bcc_import_error_reports_the_childs_last_line() -> None:
    error = doctor.bcc_import_error()

    assert error is None or "bcc" in error


def test_tracefs_unmounted_warns_with_the_mount_command(config: DoctorConfig) -> None:
    check = doctor.check_tracefs(config)

    assert check.status is Status.WARN
    assert check.fix == "mount -t tracefs tracefs /sys/kernel/tracing"


def test_tracefs_under_debugfs_is_ok(config: DoctorConfig) -> None:
    (config.sys_root / "kernel" / "debug" / "tracing" / "events" / "sched").mkdir(parents=True)

    assert doctor.check_tracefs(config).status is Status.OK


def paranoid(config: DoctorConfig, value: int) -> None:
    write(config.proc_root / "sys" / "kernel" / "perf_event_paranoid", f"{value}\n")


def test_no_hardware_counters_warn_with_the_collectors_reason(config: DoctorConfig) -> None:
    paranoid(config, 2)

    check = doctor.check_perf(config)

    assert check.status is Status.WARN
    assert "perf_event_paranoid=2" in check.finding
    assert "hardware perf counters are not available: ENOENT" in check.finding
    assert "CPICollector" in check.finding


def test_counters_not_permitted_name_the_paranoid_setting(config: DoctorConfig) -> None:
    paranoid(config, 3)

    def denied(config_: int, pid: int, cpu: int, flags: int) -> int:
        raise OSError(errno.EACCES, "Permission denied")

    check = doctor.check_perf(replace(config, perf_open=denied))

    assert check.status is Status.WARN
    assert "not permitted" in check.finding
    assert "kernel.perf_event_paranoid" in check.fix


def test_a_cycles_counter_that_opens_is_ok_and_closed(config: DoctorConfig) -> None:
    paranoid(config, 1)
    opened: list[int] = []

    def fake_open(config_: int, pid: int, cpu: int, flags: int) -> int:
        opened.append(os.open("/dev/null", os.O_RDONLY))
        return opened[-1]

    check = doctor.check_perf(replace(config, perf_open=fake_open))

    assert check.status is Status.OK
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(opened[0])


def test_no_perf_events_in_the_kernel_warns(config: DoctorConfig) -> None:
    check = doctor.check_perf(config)

    assert check.status is Status.WARN
    assert "CONFIG_PERF_EVENTS" in check.fix


# -- devices --------------------------------------------------------------------------------


def test_no_gpu_and_no_driver_is_ok(config: DoctorConfig) -> None:
    check = doctor.check_gpu(config)

    assert check.status is Status.OK
    assert check.finding.startswith("no GPUs")


def test_an_nvidia_driver_without_pynvml_warns_how_to_install(config: DoctorConfig) -> None:
    (config.sys_root / "module" / "nvidia").mkdir(parents=True)

    check = doctor.check_gpu(config)

    assert check.status is Status.WARN
    assert check.fix == "pip install 'koordinator-py[gpu]'"


def test_gpus_are_counted_through_nvml(config: DoctorConfig) -> None:
    nvml = FakeNVML([FakeGPU(0, "GPU-0"), FakeGPU(1, "GPU-1")])

    check = doctor.check_gpu(replace(config, load_nvml=lambda: nvml))

    assert check == Check("gpu", Status.OK, "2 GPU(s): 0: NVIDIA H200, 1: NVIDIA H200")


def test_nvml_without_its_library_is_a_cpu_node(config: DoctorConfig) -> None:
    nvml = FakeNVML([], init_error=fake_nvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    check = doctor.check_gpu(replace(config, load_nvml=lambda: nvml))

    assert check.status is Status.OK
    assert "NVML Shared Library Not Found" in check.finding


def test_no_rdma_device_is_ok(config: DoctorConfig) -> None:
    assert doctor.check_rdma(config) == Check("rdma", Status.OK, "no RDMA devices")


def test_rdma_devices_are_listed_and_one_without_verbs_warns(tmp_path: Path) -> None:
    node = FakeSysfs(tmp_path / "node")
    node.function(PF0)
    node.ibdev(PF0, "mlx5_0", "ec0d:9a03:0078:1234")
    config = DoctorConfig(sys_root=node.sys)

    without_verbs = doctor.check_rdma(config)
    node.uverbs(PF0, 0, "mlx5_0", 192)
    with_verbs = doctor.check_rdma(config)

    assert without_verbs.status is Status.WARN and without_verbs.fix == "modprobe ib_uverbs"
    assert with_verbs == Check("rdma", Status.OK, "mlx5_0 (ACTIVE)")


# -- the report -----------------------------------------------------------------------------


def test_a_check_that_raises_becomes_its_own_line(config: DoctorConfig) -> None:
    def broken(config: DoctorConfig) -> Check:
        raise PermissionError(errno.EACCES, "Permission denied", "/proc/x")

    def fine(config: DoctorConfig) -> Check:
        return Check("fine", Status.OK, "yes")

    checks = doctor.run_checks(
        config, (("broken", broken, Status.WARN), ("fine", fine, Status.FAIL))
    )

    assert checks[0].name == "broken" and checks[0].status is Status.WARN
    assert "PermissionError" in checks[0].finding and "/proc/x" in checks[0].finding
    assert checks[0].fix == "rerun as root"
    assert checks[1] == Check("fine", Status.OK, "yes")


def test_the_report_aligns_lines_and_puts_fixes_under_problems() -> None:
    checks = [
        Check("containerd", Status.OK, "1.7.24, NRI enabled, connections allowed"),
        Check("psi", Status.WARN, "PSI is off", "boot with psi=1"),
        Check("nri-socket", Status.FAIL, "no socket", "restart containerd"),
    ]

    assert doctor.render(checks).splitlines() == [
        "OK    containerd        1.7.24, NRI enabled, connections allowed",
        "WARN  psi               PSI is off",
        "      fix: boot with psi=1",
        "FAIL  nri-socket        no socket",
        "      fix: restart containerd",
        "1 failed, 1 warnings, 1 ok",
    ]
    assert doctor.exit_status(checks) == 1
    assert doctor.exit_status(checks[:2]) == 0
    assert doctor.to_json(checks)["checks"][1] == {
        "name": "psi",
        "status": "WARN",
        "finding": "PSI is off",
        "fix": "boot with psi=1",
    }


def ctl_args(config: DoctorConfig) -> list[str]:
    return [
        "doctor",
        "--proc-root-dir",
        str(config.proc_root),
        "--sys-root-dir",
        str(config.sys_root),
        "--cgroup-root-dir",
        str(config.cgroup_root),
        "--containerd-config",
        str(config.containerd_config),
        "--containerd-bin",
        config.containerd_bin,
        "--addr",
        config.addr,
    ]


def test_koordctl_doctor_exits_1_on_a_failure(
    config: DoctorConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    v2_tree(config.cgroup_root)  # containerd has no NRI section: FAIL

    assert ctl.main(ctl_args(config)) == 1

    out = capsys.readouterr().out
    assert out.startswith("FAIL  containerd")
    assert "      fix: add to" in out


def test_koordctl_doctor_exits_0_with_warnings_only(
    config: DoctorConfig, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v2_tree(config.cgroup_root)
    path = short_dir / "nri.sock"
    enable_nri(config, path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)

        status = ctl.main([*ctl_args(config), "--json"])

    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["ok"] is True
    assert [c["name"] for c in report["checks"]] == CHECK_NAMES
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["containerd"] == statuses["nri-socket"] == statuses["cgroup"] == "OK"
    assert statuses["koordlet"] == "WARN"  # nothing answers on --addr


# -- this machine ---------------------------------------------------------------------------


def mounted_cgroup_layout(root: str = "/sys/fs/cgroup") -> str | None:
    """v1, v2 or hybrid from /proc/self/mountinfo: the mounts at and under ``root``."""
    types: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        mount_point, fstype = fields[4], fields[fields.index("-") + 1]
        if mount_point == root or mount_point.startswith(root + "/"):
            types[mount_point] = fstype
    if types.get(root) == "cgroup2":
        return "v2"
    v1 = "cgroup" in types.values()
    if v1:
        return "hybrid" if "cgroup2" in types.values() else "v1"
    return None


def test_doctor_on_this_machine_answers_every_check() -> None:
    binary = str(REAL_CONTAINERD) if REAL_CONTAINERD.exists() else "containerd"
    config = DoctorConfig(containerd_bin=binary, addr=f"127.0.0.1:{closed_port()}")

    checks = doctor.run_checks(config)

    assert [c.name for c in checks] == CHECK_NAMES
    by_name = {c.name: c for c in checks}
    for check in checks:
        assert "could not check" not in check.finding, check
        assert check.status is Status.OK or check.fix, check
    layout = mounted_cgroup_layout()
    assert layout is not None
    assert by_name["cgroup"].finding.startswith(layout + " ")
    psi = os.access("/proc/pressure/cpu", os.R_OK)
    assert (by_name["psi"].status is Status.OK) == psi
    assert (by_name["btf"].status is Status.OK) == Path("/sys/kernel/btf/vmlinux").exists()
    assert (by_name["core-sched"].status is Status.OK) == coresched.supported()
    assert by_name["koordlet"].status is Status.WARN
    if REAL_CONTAINERD.exists():
        assert by_name["containerd"].finding.startswith("1.7.24")
